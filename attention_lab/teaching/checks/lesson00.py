"""Checks for lesson 00 (start here): reading an attention matrix."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ._core import as_tensor, check_tensor_answer, correct, hint


def weights_shape(answer: object, n_tokens: int) -> None:
    """Exercise 1: the shape of the weight matrix of an ``n_tokens`` sentence."""
    try:
        if isinstance(answer, str):
            raise TypeError("a string is not a shape")
        shape = tuple(int(x) for x in answer)  # tuple, list or torch.Size
        whole = all(float(x) == v for x, v in zip(answer, shape))  # int() truncates: 7.5 must not pass as 7
    except (TypeError, ValueError):
        hint("write the shape as a tuple of integers, like (rows, columns)")
    if not whole:
        hint("a shape counts rows and columns: write it with whole numbers")
    if shape == (n_tokens, n_tokens):
        correct(f"one weight for every (query, key) pair: {n_tokens} x {n_tokens} = {n_tokens**2} weights")
        return
    if shape in ((n_tokens,), (n_tokens**2,)):
        hint("the weights form a matrix: one row per query token, one column per key token")
    hint("every token is a query (one row each) and every token is also a key (one column each)")


def most_attended(answer: object, weights: torch.Tensor, query: int, tokens: Sequence[str]) -> None:
    """Exercise 2: the token that query ``query`` gives the largest weight (a token string or its index)."""
    best = int(weights[query].argmax())
    by_column = int(weights[:, query].argmax())
    if isinstance(answer, str):
        if answer not in tokens:
            hint(f"{answer!r} is not one of the tokens {list(tokens)}")
        index = list(tokens).index(answer)
        matches = [i for i, t in enumerate(tokens) if t == answer]
        ok = best in matches
    else:
        index = int(as_tensor(answer, "your answer").item())
        ok = index == best
    if ok:
        correct(f"row {query} ({tokens[query]!r}) puts its largest weight, {float(weights[query, best]):.2f}, "
                f"on {tokens[best]!r}")
        return
    if index == by_column:
        hint(f"row i lists what query i attends to; you read column {query}, which shows who attends to "
             f"{tokens[query]!r}")
    hint(f"look along row {query} of the matrix and find its brightest cell")


def row_sums(answer: object, weights: torch.Tensor) -> None:
    """Exercise 3: the sum of each row of the weight matrix."""
    got = as_tensor(answer, "your row sums")
    if got.shape == (weights.shape[0], 1):  # keepdim=True is just as right
        got = got.squeeze(-1)
    check_tensor_answer(
        got,
        weights.sum(dim=-1),
        what="your row sums",
        mistakes=[(weights.sum(dim=-2), "you summed each column (over queries); sum each row, over the keys "
                                        "(dim=-1)"),
                  (weights.sum(), "that is one number for the whole matrix; keep one sum per row")],
        success="every row sums to 1: each query spreads exactly one unit of attention over the keys",
    )
