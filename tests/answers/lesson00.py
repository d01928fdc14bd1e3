"""Answers to lesson 00's exercises (reading an attention matrix)."""

import torch

from attention_lab.teaching.checks import lesson00

from . import GENERIC, Attempt

# rows: queries; the row of query 1 peaks at key 2, column 1 peaks at row 0: the two readings differ
WEIGHTS = torch.tensor([[0.2, 0.7, 0.1], [0.1, 0.3, 0.6], [0.5, 0.2, 0.3]])
TOKENS = ["a", "b", "c"]
SHAPE = {"n_queries": 7, "n_keys": 12}

ATTEMPTS = [
    Attempt("00/1", "a tuple", lesson00.weights_shape, (7, 12), kwargs=SHAPE, right=True),
    Attempt("00/1", "a list", lesson00.weights_shape, [7, 12], kwargs=SHAPE, right=True),
    Attempt("00/1", "a torch.Size", lesson00.weights_shape, torch.Size([7, 12]), kwargs=SHAPE, right=True),
    Attempt("00/1", "rows and columns swapped", lesson00.weights_shape, (12, 7), kwargs=SHAPE, hint="swapped"),
    Attempt("00/1", "the number of weights", lesson00.weights_shape, 84, kwargs=SHAPE, hint="number of weights"),
    Attempt("00/1", "as many keys as queries", lesson00.weights_shape, (7, 7), kwargs=SHAPE,
            hint="not as many of one as of the other"),
    Attempt("00/1", "text", lesson00.weights_shape, "7x12", kwargs=SHAPE, hint="tuple of integers"),
    Attempt("00/1", "a fraction", lesson00.weights_shape, (7.5, 12), kwargs=SHAPE, hint="whole number"),
    Attempt("00/1", "untouched stub", lesson00.weights_shape, ..., kwargs=SHAPE, hint="still empty"),
    Attempt("00/2", "the token", lesson00.attends_most_to, "a", args=(WEIGHTS,), kwargs={"key": 1, "tokens": TOKENS},
            right=True),
    Attempt("00/2", "the index", lesson00.attends_most_to, 0, args=(WEIGHTS,), kwargs={"key": 1, "tokens": TOKENS},
            right=True),
    Attempt("00/2", "read along the row", lesson00.attends_most_to, "c", args=(WEIGHTS,),
            kwargs={"key": 1, "tokens": TOKENS}, hint="its row"),
    Attempt("00/2", "the key itself", lesson00.attends_most_to, "b", args=(WEIGHTS,),
            kwargs={"key": 1, "tokens": TOKENS}, hint="itself"),
    Attempt("00/3", "sum over the queries", lesson00.attention_received, WEIGHTS.sum(dim=0), args=(WEIGHTS,),
            right=True),
    Attempt("00/3", "keepdim", lesson00.attention_received, WEIGHTS.sum(dim=0, keepdim=True), args=(WEIGHTS,),
            right=True),
    Attempt("00/3", "a list", lesson00.attention_received, WEIGHTS.sum(dim=0).tolist(), args=(WEIGHTS,),
            right=True),
    Attempt("00/3", "row sums", lesson00.attention_received, WEIGHTS.sum(dim=1), args=(WEIGHTS,),
            hint="each query hands out"),
    Attempt("00/3", "a mean", lesson00.attention_received, WEIGHTS.mean(dim=0), args=(WEIGHTS,), hint="average"),
    Attempt("00/3", "one total", lesson00.attention_received, WEIGHTS.sum(), args=(WEIGHTS,),
            hint="one number for the whole matrix"),
    Attempt("00/3", "a max", lesson00.attention_received, WEIGHTS.max(dim=0).values, args=(WEIGHTS,), hint=GENERIC),
]
