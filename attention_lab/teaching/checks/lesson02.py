"""Checks for lesson 02 (scaled dot-product attention)."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from ._core import as_tensor, check_tensor_answer, close, correct, hint


def scaled_scores(answer: object, q: torch.Tensor, k: torch.Tensor) -> None:
    """Exercise 1: A = Q K^T / sqrt(d) for q ``(i, d)`` and k ``(j, d)``."""
    d = q.shape[-1]
    raw = q @ k.transpose(-2, -1)
    check_tensor_answer(
        answer,
        raw / math.sqrt(d),
        what="your score matrix",
        mistakes=[
            (raw, "the scores are not scaled: divide by sqrt(d) to keep their variance near 1"),
            (raw / d, "divide by sqrt(d), not by d: the variance of q . k grows like d, its spread like sqrt(d)"),
            ((k @ q.transpose(-2, -1)) / math.sqrt(d), "rows must be queries and columns keys: that is K Q^T, "
                                                        "the transpose"),
        ],
        shape_hint="one score per (query, key) pair: (number of queries, number of keys)",
        success="S = Q K^T / sqrt(d): one scaled score per (query, key) pair",
    )


def stable_softmax(fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
    """Exercise 2: a softmax over the last axis that survives scores like 1000."""
    if not callable(fn):
        hint("pass your function itself, e.g. stable_softmax(my_softmax), not its result")
    # a private generator: checking an answer must not move the lesson's own random numbers
    small = torch.randn(4, 6, generator=torch.Generator().manual_seed(0))
    huge = torch.tensor([[1000.0, 999.0, 0.0], [-1000.0, -1001.0, -1002.0]])
    got_small = as_tensor(fn(small.clone()), "your softmax's result")
    if got_small.shape != small.shape:
        hint("softmax returns one weight per score: the output has the input's shape")
    if close(got_small, torch.softmax(small, dim=0)):
        hint("your weights sum to 1 down each column; normalise over the last axis (dim=-1), the keys")
    if not close(got_small, torch.softmax(small, dim=-1)):
        hint("on ordinary scores your result differs from softmax: exp of each score, divided by the row's "
             "sum of exps")
    got_huge = as_tensor(fn(huge.clone()), "your softmax's result")
    finite_rows = torch.isfinite(got_huge).all(dim=-1)
    if finite_rows[0] and not finite_rows[1]:
        hint("a row whose scores all lie far below the largest score of the tensor underflows to 0/0: subtract "
             "each row's own maximum, not the maximum of the whole tensor")
    if not finite_rows.all():
        hint("exp(1000) overflows to inf and inf/inf is NaN; softmax does not change if you subtract the same "
             "number from a whole row")
    if not close(got_huge, torch.softmax(huge.double(), dim=-1).float()):
        hint("on large scores your result is finite but wrong; subtract each row's own maximum")
    correct("your softmax matches torch.softmax and stays finite at scores of 1000")


def attention_output(answer: object, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    """Exercise 3: O = softmax(Q K^T / sqrt(d)) V."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    check_tensor_answer(
        answer,
        torch.softmax(scores, dim=-1) @ v,
        what="your output",
        mistakes=[
            (torch.softmax(scores, dim=-2) @ v, "softmax over dim=-2 normalises over queries; each query's "
                                                  "weights over the keys (dim=-1) must sum to 1"),
            (torch.softmax(scores * math.sqrt(q.shape[-1]), dim=-1) @ v, "the scores are missing the 1/sqrt(d) "
                                                                          "scale"),
            (torch.softmax(scores, dim=-1), "those are the weights A'; multiply them by V to mix the values"),
            (torch.softmax(scores * math.sqrt(q.shape[-1]) / q.shape[-1], dim=-1) @ v,
             "divide the scores by sqrt(d), not by d"),
            (scores @ v, "apply softmax to the scores before mixing the values"),
        ],
        shape_hint="one output vector per query: (number of queries, value size)",
        success="softmax(Q K^T / sqrt(d)) V agrees with the library",
    )


def predicted_variance(answer: object, d: int) -> None:
    """Exercise 4: the variance of q . k when q and k have d independent entries of mean 0, variance 1."""
    try:
        value = float(answer)
    except (TypeError, ValueError):
        hint("give a number (or an expression in d, such as d * 2)")
    if math.isclose(value, d, rel_tol=1e-6):
        correct(f"Var(q . k) = d = {d}: a sum of d products, each of variance 1")
        return
    if math.isclose(value, math.sqrt(d), rel_tol=1e-6):
        hint("sqrt(d) is the standard deviation; the question asks for the variance")
    if math.isclose(value, 1.0):
        hint("1 is the variance after dividing by sqrt(d); before scaling, add up the variances of the d "
             "products")
    hint("q . k is a sum of d independent products q_t k_t; each product has variance 1, and variances add")
