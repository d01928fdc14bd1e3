"""Checks for lesson 01 (dot-product similarity), in Lee's notation: alpha_{i,j}, alpha'_{i,j}, b^i.

Lee numbers tokens from 1 (a^1, a^2, ...), Python rows from 0: Lee's token a^3 is row 2.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ._core import as_tensor, call_learner, check_tensor_answer, close, correct, guard_errors, hint


@guard_errors
def scores_for_query(answer: object, q: torch.Tensor, k: torch.Tensor, i: int) -> None:
    """Exercise 1: alpha_{i,j} = q^i . k^j for every key j (plain dot product, no scale yet); ``i`` is the
    Python row of the query (Lee's token i + 1)."""
    q, k = as_tensor(q, "q"), as_tensor(k, "k")
    expected = k @ q[i]  # (j,)
    mistakes = [(q @ q[i], "you compared the query with other queries; alpha_{i,j} pairs query q^i with key k^j")]
    for other in (i - 1, i + 1):  # Lee counts tokens from 1, Python from 0
        if 0 <= other < q.shape[0]:
            mistakes.append((k @ q[other], f"off by one: Lee numbers tokens from 1, Python rows from 0, so Lee's "
                                           f"token a^{i + 1} is not row {other}"))
    mistakes += [
        (q @ k[i], f"that is column {i} (every query against one key): keep the query fixed and vary the key"),
        (expected / q.shape[-1] ** 0.5, "lesson 01 uses the plain dot product; the 1/sqrt(d) scale comes in "
                                        "lesson 02"),
        (torch.softmax(expected, dim=-1), "those are the weights alpha' after the softmax; the exercise asks for "
                                          "the raw scores alpha, before any softmax"),
    ]
    check_tensor_answer(
        answer,
        expected,
        what=f"the scores of Lee's token {i + 1}",
        mistakes=mistakes,
        shape_hint="one score per key: a vector with as many entries as there are keys",
        unit_axes_ok=True,
        success=f"one score q^{i + 1} . k^j per key j (Lee's token {i + 1} is Python row {i})",
    )


@guard_errors
def weight_matrix(answer: object, q: torch.Tensor, k: torch.Tensor) -> None:
    """Exercise 2: the weights alpha'_{i,j} of every query at once: softmax over the keys of q^i . k^j."""
    q, k = as_tensor(q, "q"), as_tensor(k, "k")
    scores = q @ k.T  # (i, j)
    check_tensor_answer(
        answer,
        torch.softmax(scores, dim=-1),
        what="your weight matrix",
        mistakes=[
            (torch.softmax(scores, dim=0), "your softmax runs over the wrong axis: each column sums to 1, but "
                                           "each query's weights (a row: one per key) must sum to 1"),
            (torch.softmax(scores, dim=0).T, "rows must be queries and columns keys: your matrix is the "
                                             "transpose"),
            (torch.softmax(scores, dim=-1).T, "rows must be queries and columns keys: your matrix is the "
                                              "transpose"),
            (scores, "these are the raw scores alpha; pass them through a softmax so that each row is positive "
                     "and sums to 1"),
            (scores.exp(), "exponentiating is half of softmax: divide by the sum of the exponentials"),
            (scores.exp() / scores.exp().sum(), "you divided by the sum over the whole matrix, so the weights of "
                                                "all queries together sum to 1; each query's row must sum to 1 "
                                                "on its own"),
            (torch.softmax(scores / q.shape[-1] ** 0.5, dim=-1), "lesson 01 uses the plain dot product; the "
                                                                 "1/sqrt(d) scale comes in lesson 02"),
            (scores.exp() / scores.exp().sum(dim=-1), "the row sums have lost their axis, so they line up with the "
                                                      "columns when you divide; keep the summed axis so that each "
                                                      "row is divided by its own sum"),
        ],
        shape_hint="one weight per (query, key) pair: a matrix with a row per query and a column per key",
        success="every row of alpha' is positive and sums to 1: one distribution over the keys per query",
    )


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ v  # (i, dv): b^i for every query, scale 1


@guard_errors
def fixed_attend(fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]) -> None:
    """Exercise 3: ``fn(q, k, v)`` returns b^i = sum_j alpha'_{i,j} v^j for every query (plain dot product),
    tried on several shapes, with fewer and more keys than queries."""
    gen = torch.Generator().manual_seed(1)  # a private generator: the lesson's random numbers stay as they were
    for i, j, d, dv in ((4, 4, 3, 3), (2, 6, 3, 5), (5, 3, 4, 2)):
        q, k, v = (torch.randn(m, w, generator=gen, dtype=torch.float64) for m, w in ((i, d), (j, d), (j, dv)))
        result = call_learner(fn, q.clone(), k.clone(), v.clone(), what="your attend")
        if result is None:
            hint("your attend returned None: end it with a return statement that gives back the outputs")
        got = as_tensor(result, "your result")
        expected = _attend(q, k, v)
        if close(got, expected):
            continue
        exp = (q @ k.T).exp()  # (i, j)
        if close(got, exp / exp.sum() @ v):
            hint("this still computes what the classmate's function computes: add up the weights of one query "
                 "and see what they sum to")
        if close(got, exp / exp.sum(dim=0) @ v):
            hint("your weights sum to 1 down each column (over the queries); each query's row must sum to 1")
        if i == j and close(got, exp / exp.sum(dim=-1) @ v):
            hint("the row sums have lost their axis, so they line up with the columns when you divide; keep the "
                 "summed axis so that each row is divided by its own sum")
        if dv == d and close(got, _attend(q, k, k)):
            hint("you mixed the keys; the output is a weighted sum of the value vectors v^j")
        if close(got, (q @ k.T) @ v):
            hint("mix the values with the weights alpha' (after the softmax), not with the raw scores")
        if close(got, torch.softmax(q @ k.T / d**0.5, dim=-1) @ v):
            hint("lesson 01 uses the plain dot product; the 1/sqrt(d) scale comes in lesson 02")
        if got.shape != expected.shape:
            hint(f"for {i} queries, {j} keys and values of size {dv} the output has shape ({i}, {dv}), one b^i "
                 f"per query; yours has {tuple(got.shape)}")
        hint(f"with {i} queries and {j} keys your output is not b^i = sum_j alpha'_(i,j) v^j; compare your code "
             f"with the three steps for b^1 above")
    correct("each query's weights now sum to 1 on their own, for any number of queries and keys")


@guard_errors
def cosine_similarity_matrix(answer: object, x: torch.Tensor) -> None:
    """Exercise 4: the matrix of cosine similarities between every pair of token vectors."""
    x = as_tensor(x, "x").double()
    unit = x / x.norm(dim=-1, keepdim=True)
    check_tensor_answer(
        answer,
        unit @ unit.T,
        what="your cosine matrix",
        mistakes=[
            (x @ x.T, "that is the dot product; cosine divides it by the lengths of both vectors"),
            (x @ x.T / x.norm(dim=-1, keepdim=True), "divide by the length of both vectors, not only one"),
            (x @ x.T / x.norm(dim=-1), "divide by the length of both vectors, not only one"),
            (x @ x.T / x.norm() ** 2, "divide each pair by the lengths of its own two vectors, not by the length "
                                      "of the whole matrix"),
            (x @ x.T / x.norm(dim=-1) / x.norm(dim=-1), "dividing by a vector of lengths divides every column by "
                                                        "the same length; one length must divide the rows and the "
                                                        "other the columns"),
            ((x / x.norm(dim=0, keepdim=True)) @ (x / x.norm(dim=0, keepdim=True)).T,
             "you normalised over the wrong axis: each token vector (a row) must be divided by its own length"),
            (unit.T @ unit, "that compares features with features; rows are tokens, so pair every row with every "
                            "row"),
        ],
        shape_hint="one similarity per pair of tokens: an (n, n) matrix",
        success="cosine similarity ignores length: the diagonal is exactly 1",
    )
