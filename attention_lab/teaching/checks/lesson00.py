"""Checks for lesson 00 (start here): reading an attention matrix by rows (queries) and columns (keys)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ...i18n import msg
from ._core import as_tensor, check_tensor_answer, correct, guard_errors, hint, whole_number


@guard_errors
def weights_shape(answer: object, n_queries: int | None = None, n_keys: int | None = None, *,
                  n_tokens: int | None = None) -> None:
    """Exercise 1: the shape of the weight matrix when ``n_queries`` tokens attend to ``n_keys`` tokens
    (``n_tokens``: both, the self-attention case)."""
    n_queries = n_tokens if n_queries is None else n_queries
    n_keys = n_queries if n_keys is None else n_keys
    if isinstance(answer, (int, float)) and not isinstance(answer, bool) and answer == n_queries * n_keys:
        hint(msg("that is the number of weights; the shape says how they are laid out: rows and columns"))
    if isinstance(answer, (str, bytes)) or not hasattr(answer, "__len__"):
        hint(msg("write the shape as a tuple of integers, like (rows, columns)"))
    shape = tuple(whole_number(x, msg("each entry of the shape")) for x in answer)  # 7.5 must not pass as 7
    if shape == (n_queries, n_keys):
        correct(msg("one row per query and one column per key: {n_queries} x {n_keys} = {n_weights} weights",
                    n_queries=n_queries, n_keys=n_keys, n_weights=n_queries * n_keys))
        return
    if shape in ((n_queries,), (n_keys,), (n_queries * n_keys,)):
        hint(msg("the weights form a matrix: one row per query token, one column per key token"))
    if n_queries != n_keys and shape == (n_keys, n_queries):
        hint(msg("rows and columns are swapped: a row belongs to a query, and it holds one weight per key"))
    if n_queries != n_keys and shape in ((n_queries, n_queries), (n_keys, n_keys)):
        hint(msg("here the queries and the keys are different tokens, and there are not as many of one as of "
                 "the other"))
    hint(msg("each query token gets one row, and each row holds one weight for every key token"))


def _token_index(answer: object, tokens: Sequence[str], weights: torch.Tensor) -> set[int]:
    """The positions an answer names: a token (every position holding it) or an index (a whole number)."""
    if isinstance(answer, str):
        if answer not in tokens:
            hint(msg("{answer!r} is not one of the tokens {tokens}", answer=answer, tokens=list(tokens)))
        return {i for i, t in enumerate(tokens) if t == answer}
    if isinstance(answer, float) or (isinstance(answer, torch.Tensor) and answer.is_floating_point()
                                     and answer.numel() == 1):
        if bool(((weights - float(answer)).abs() < 5e-3).any()) and float(answer) != int(float(answer)):
            hint(msg("that is a weight from the matrix; the question asks which token, so answer with the token "
                     "or its index"))
    index = whole_number(answer, msg("your answer (a token or its index)"))
    if not 0 <= index < len(tokens):
        hint(msg("an index counts tokens from 0 to {last}, got {index}", last=len(tokens) - 1, index=index))
    return {index}


@guard_errors
def attends_most_to(answer: object, weights: torch.Tensor, key: int, tokens: Sequence[str]) -> None:
    """Exercise 2: the query that gives key ``key`` its largest weight (a token string or its index): read down
    a column."""
    weights = as_tensor(weights, msg("the weights"))
    best, by_row = int(weights[:, key].argmax()), int(weights[key].argmax())
    named = _token_index(answer, tokens, weights)
    if best in named:
        correct(msg("column {key} ({token!r}) is brightest in row {best}: {best_token!r} gives {token!r} a "
                    "weight of {weight:.2f}", key=key, token=tokens[key], best=best, best_token=tokens[best],
                    weight=float(weights[best, key])))
        return
    if key in named:  # the token itself; its own row may point at it too, but that is a coincidence
        hint(msg("that is {token!r} itself; down its column another query gives it a larger weight",
                 token=tokens[key]))
    if by_row in named:  # only reached when the row's answer differs from the column's
        hint(msg("that is what {token!r} itself attends to (its row); the question is which token attends to "
                 "{token!r}, so read the column of that key", token=tokens[key]))
    hint(msg("the weights that the queries give {token!r} all lie in one column: find the brightest cell there",
             token=tokens[key]))


@guard_errors
def attention_received(answer: object, weights: torch.Tensor) -> None:
    """Exercise 3: how much attention each key receives in total, from all the queries (one number per key)."""
    weights = as_tensor(weights, msg("the weights"))
    received = weights.sum(dim=-2)  # (j,)
    check_tensor_answer(
        answer,
        received,
        what=msg("your totals"),
        mistakes=[(weights.sum(dim=-1), msg("those are the totals each query hands out (every row sums to 1); "
                                            "the question is what each key receives from all the queries "
                                            "together")),
                  (weights.mean(dim=-2), msg("that is an average over the queries; the question asks for the "
                                             "total")),
                  (weights.sum(), msg("that is one number for the whole matrix; keep one total per key"))],
        shape_hint=msg("one total per key token: a vector with one entry per column"),
        unit_axes_ok=True,
        success=(msg("each query hands out exactly 1, but the keys receive from {low:.2f} to {high:.2f}: "
                     "attention is shared out unevenly", low=float(received.min()), high=float(received.max()))
                 if float(received.max() - received.min()) > 0.01 else
                 msg("each query hands out exactly 1, and here every key happens to receive 1 as well")),
    )
