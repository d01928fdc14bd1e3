"""Answers to lesson 00's exercises (reading an attention matrix), on the lesson's own matrix and on a second one."""

import numpy as np
import torch

import attention_lab as al
from attention_lab.teaching.checks import lesson00

from . import GENERIC, Attempt

# the lesson's five tokens and their hand-made vectors (no random numbers: these are the lesson's weights)
LESSON_TOKENS = ["the", "cat", "chased", "a", "mouse"]
_VECTORS = 3 * torch.tensor([[0.0, 0.0, 1.0, 0.0], [1.0, 0.0, 0.0, 0.3], [0.0, 1.0, 0.0, 0.0],
                             [0.0, 0.0, 1.0, 0.2], [1.0, 0.0, 0.0, 1.0]])
LESSON_WEIGHTS = al.scaled_dot_product_attention(_VECTORS, _VECTORS, _VECTORS)[1]
CAT = {"key": 1, "tokens": LESSON_TOKENS}

# a second matrix: the row of query 1 peaks at key 2, column 1 peaks at row 0: the two readings differ
WEIGHTS = torch.tensor([[0.2, 0.7, 0.1], [0.1, 0.3, 0.6], [0.5, 0.2, 0.3]])
TOKENS = ["a", "b", "c"]
SHAPE = {"n_queries": 7, "n_keys": 12}


def _shape(label, answer, *, right=False, hint=None):
    return Attempt("00/1", label, lesson00.weights_shape, answer, kwargs=SHAPE, right=right, hint=hint)


def _cat(label, answer, *, right=False, hint=None):
    return Attempt("00/2", label, lesson00.attends_most_to, answer, args=(LESSON_WEIGHTS,), kwargs=CAT, right=right,
                   hint=hint)


def _received(label, answer, weights=LESSON_WEIGHTS, *, right=False, hint=None):
    return Attempt("00/3", label, lesson00.attention_received, answer, args=(weights,), right=right, hint=hint)


W = LESSON_WEIGHTS
ATTEMPTS = [
    _shape("a tuple", (7, 12), right=True),
    _shape("a list", [7, 12], right=True),
    _shape("a torch.Size", torch.Size([7, 12]), right=True),
    _shape("a tensor", torch.tensor([7, 12]), right=True),
    _shape("floats", (7.0, 12.0), right=True),
    _shape("a numpy array", np.array([7, 12]), right=True),
    Attempt("00/1", "self-attention form", lesson00.weights_shape, (5, 5), kwargs={"n_tokens": 5}, right=True),
    _shape("rows and columns swapped", (12, 7), hint="swapped"),
    _shape("the number of weights", 84, hint="number of weights"),
    _shape("the number of weights as a shape", (84,), hint="form a matrix"),
    _shape("as many keys as queries", (7, 7), hint="not as many of one as of the other"),
    _shape("as many queries as keys", (12, 12), hint="not as many of one as of the other"),
    _shape("one axis", (7,), hint="form a matrix"),
    _shape("the counts added", (19,), hint="form a matrix"),
    _shape("last indices", (6, 11), hint="count|from 0"),
    _shape("a batch axis", (1, 7, 12), hint="two axes|one sentence"),
    _shape("text", "7x12", hint="tuple of integers"),
    _shape("text of a tuple", "(7, 12)", hint="tuple of integers"),
    _shape("one number", 12, hint="tuple of integers"),
    _shape("a fraction", (7.5, 12), hint="whole number"),
    _shape("the weights of the lesson", tuple(W.shape), hint="lesson's|5 tokens|here the queries"),
    _shape("untouched stub", ..., hint="still empty"),
    _shape("unrelated", (3, 4), hint=GENERIC),
    # 00/2 on the lesson's matrix: column 1 ("cat") is brightest in row 1 (cat itself); row 1 is brightest at "mouse"
    _cat("the token", "cat", right=True),
    _cat("the index", 1, right=True),
    _cat("a float index", 1.0, right=True),
    _cat("a tensor index", torch.tensor(1), right=True),
    _cat("an argmax tensor", W[:, 1].argmax(), right=True),
    _cat("a numpy index", np.int64(1), right=True),
    _cat("read along the row", "mouse", hint="its row"),
    _cat("read along the row, by index", 4, hint="its row"),
    _cat("the weakest query", "the", hint=GENERIC),
    _cat("the weight", float(W[:, 1].max()), hint="a weight from the matrix"),
    _cat("Lee's numbering", 2, hint="from 0|Python|counts tokens"),
    _cat("out of range", 9, hint="from 0 to 4"),
    _cat("not a token", "dog", hint="not one of the tokens"),
    _cat("a fraction", 1.6, hint="whole number"),
    _cat("a list of tokens", ["cat", "mouse"], hint="one token"),
    _cat("untouched stub", ..., hint="still empty"),
    Attempt("00/2", "the token (second matrix)", lesson00.attends_most_to, "a", args=(WEIGHTS,),
            kwargs={"key": 1, "tokens": TOKENS}, right=True),
    Attempt("00/2", "read along the row (second matrix)", lesson00.attends_most_to, "c", args=(WEIGHTS,),
            kwargs={"key": 1, "tokens": TOKENS}, hint="its row"),
    Attempt("00/2", "the key itself (second matrix)", lesson00.attends_most_to, "b", args=(WEIGHTS,),
            kwargs={"key": 1, "tokens": TOKENS}, hint="itself"),
    # 00/3
    _received("sum over the queries", W.sum(dim=0), right=True),
    _received("keepdim", W.sum(dim=0, keepdim=True), right=True),
    _received("a list", W.sum(dim=0).tolist(), right=True),
    _received("float64", W.double().sum(dim=0), right=True),
    _received("numpy", W.numpy().sum(axis=0), right=True),
    _received("einsum", torch.einsum("ij->j", W), right=True),
    _received("a sum of rows", sum(W[i] for i in range(5)), right=True),
    _received("the transpose's row sums", W.T.sum(dim=-1), right=True),
    _received("the second matrix", WEIGHTS.sum(dim=0), WEIGHTS, right=True),
    _received("row sums", W.sum(dim=1), hint="each query hands out"),
    _received("row sums, keepdim", W.sum(dim=1, keepdim=True), hint="each query hands out"),
    _received("a mean", W.mean(dim=0), hint="average"),
    _received("one total", W.sum(), hint="one number for the whole matrix"),
    _received("the largest weight per key", W.max(dim=0).values, hint="largest weight"),
    _received("the diagonal", W.diag(), hint="diagonal"),
    _received("the largest weight per key (second matrix)", WEIGHTS.max(dim=0).values, WEIGHTS, hint="largest weights"),
    _received("the diagonal (second matrix)", WEIGHTS.diag(), WEIGHTS, hint="gives itself"),
    _received("sorted totals", W.sum(dim=0).sort().values, hint="order"),
    _received("queries that attend most", torch.bincount(W.argmax(dim=1), minlength=5).float(), hint="count"),
    _received("three totals", W.sum(dim=0)[:3], hint="one entry per column"),
    _received("the matrix itself", W, hint="one entry per column|one total per key"),
    _received("a mean (second matrix)", WEIGHTS.mean(dim=0), WEIGHTS, hint="average"),
    _received("untouched stub", ..., hint="still empty"),
    _received("None", None, hint="without a `return`"),
    _received("off a little", W.sum(dim=0) + 0.1, hint=GENERIC),
]
