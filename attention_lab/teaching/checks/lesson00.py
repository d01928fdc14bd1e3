"""Checks for lesson 00 (start here): reading an attention matrix by rows (queries) and columns (keys)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ...i18n import msg
from ._core import as_tensor, check_tensor_answer, close, correct, fallback_hint, guard_errors, hint, whole_number


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
    if shape in ((n_queries,), (n_keys,), (n_queries * n_keys,), (n_queries + n_keys,)):
        hint(msg("the weights form a matrix: one row per query token, one column per key token"))
    if n_queries != n_keys and shape == (n_keys, n_queries):
        hint(msg("rows and columns are swapped: a row belongs to a query, and it holds one weight per key"))
    if n_queries != n_keys and len(shape) == 2 and shape[0] == shape[1]:
        hint(msg("a square matrix would mean as many queries as keys; here the queries and the keys are "
                 "different tokens, and there are not as many of one as of the other"))
    if shape == (n_queries - 1, n_keys - 1):
        hint(msg("a shape counts the rows and the columns; it is not the index of the last row and column "
                 "(indices count from 0)"))
    if len(shape) > 2 and tuple(size for size in shape if size != 1) == (n_queries, n_keys):
        hint(msg("the weights of one sentence have two axes, rows and columns; an extra axis of size 1 is not "
                 "part of their shape"))
    fallback_hint(msg("each query token gets one row, and each row holds one weight for every key token"))


def _token_index(answer: object, tokens: Sequence[str], weights: torch.Tensor) -> set[int]:
    """The positions an answer names: a token (every position holding it) or an index (a whole number)."""
    if isinstance(answer, (list, tuple, set, dict)):
        hint(msg("answer with one token (or its index), not a collection of them"))
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
    a column.

    Shape: weights ``(i, j)``, one row per query, one column per key; ``tokens`` names the rows (and columns).
    """
    weights = as_tensor(weights, msg("the weights"))
    column = weights[:, key]  # (i,): what every query gives the key
    best, by_row = int(column.argmax()), int(weights[key].argmax())
    others = column.clone()
    others[key] = -float("inf")
    best_other = int(others.argmax())  # the brightest cell of the column once the key's own is left out
    named = _token_index(answer, tokens, weights)
    if best in named:
        correct(msg("column {key} ({token!r}) is brightest in row {best}: {best_token!r} gives {token!r} a "
                    "weight of {weight:.2f}", key=key, token=tokens[key], best=best, best_token=tokens[best],
                    weight=float(weights[best, key])))
        return
    if key in named:  # the token itself; its own row may point at it too, but that is a coincidence
        hint(msg("that is {token!r} itself; down its column another query gives it a larger weight",
                 token=tokens[key]))
    if best == key and by_row == best_other and by_row in named:
        hint(msg("that is what {token!r} itself attends to (its row), and the brightest cell of its column apart "
                 "from {token!r}'s own; the question is which token attends to {token!r}: read its whole column, "
                 "{token!r}'s own cell included", token=tokens[key]))
    if by_row in named:  # only reached when the row's answer differs from the column's
        hint(msg("that is what {token!r} itself attends to (its row); the question is which token attends to "
                 "{token!r}, so read the column of that key", token=tokens[key]))
    if best == key and best_other in named:
        hint(msg("that is the brightest cell of the column of {token!r} apart from {token!r}'s own; a token may "
                 "attend to itself, so read its whole column, its own cell included", token=tokens[key]))
    if not isinstance(answer, str) and best + 1 in named:
        hint(msg("index {index} is {named!r}: Python counts tokens from 0, so the first token, {first!r}, is "
                 "index 0", index=best + 1, named=tokens[best + 1], first=tokens[0]))
    fallback_hint(msg("the weights that the queries give {token!r} all lie in one column: find the brightest cell "
                      "there", token=tokens[key]))


@guard_errors
def attention_received(answer: object, weights: torch.Tensor) -> None:
    """Exercise 3: how much attention each key receives in total, from all the queries (one number per key).

    Shape: weights ``(i, j)`` -> answer ``(j,)``.
    """
    weights = as_tensor(weights, msg("the weights"))
    received = weights.sum(dim=-2)  # (j,)
    largest = weights.amax(dim=-2)  # (j,)
    mistakes = [
        (weights.sum(dim=-1), msg("those are the totals each query hands out (every row sums to 1); the question "
                                  "is what each key receives from all the queries together")),
        (weights.mean(dim=-2), msg("that is an average over the queries; the question asks for the total")),
        (weights.sum(), msg("that is one number for the whole matrix; keep one total per key")),
        (torch.bincount(weights.argmax(dim=-1), minlength=weights.shape[-1]).to(weights.dtype),
         msg("that counts the queries whose largest weight falls on each key; add up the weights instead: every "
             "weight counts, not only the largest of a row")),
    ]
    diagonal = weights.diagonal(dim1=-2, dim2=-1) if weights.shape[-1] == weights.shape[-2] else None
    if diagonal is not None and close(diagonal, largest):  # here each column peaks on the diagonal
        mistakes.append((largest, msg("those are the weights on the diagonal, what each token gives itself, and "
                                      "here also the largest weight of each column; the question asks for the "
                                      "total each key receives from all the queries")))
    else:
        mistakes.append((largest, msg("those are the largest weights each key gets from a single query; the "
                                      "question asks for the total it receives from all the queries")))
        if diagonal is not None:
            mistakes.append((diagonal, msg("those are the weights each token gives itself (the diagonal); the "
                                           "question asks for the total each key receives from all the queries")))
    if not torch.equal(received.sort().values, received):
        mistakes.append((received.sort().values, msg("those are the right totals in another order: keep one entry "
                                                     "per key, in the order of the columns")))
    check_tensor_answer(
        answer,
        received,
        what=msg("your totals"),
        mistakes=mistakes,
        shape_hint=msg("one total per key token: a vector with one entry per column"),
        unit_axes_ok=True,
        success=(msg("each query hands out exactly 1, but the keys receive from {low:.2f} to {high:.2f}: "
                     "attention is shared out unevenly", low=float(received.min()), high=float(received.max()))
                 if float(received.max() - received.min()) > 0.01 else
                 msg("each query hands out exactly 1, and here every key happens to receive 1 as well")),
    )
