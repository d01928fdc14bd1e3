"""Checks for lesson 01 (dot-product similarity), in Lee's notation: alpha_{i,j}, alpha'_{i,j}, b^i.

Lee numbers tokens from 1 (a^1, a^2, ...), Python rows from 0: Lee's token a^3 is row 2.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ...i18n import msg
from ._calls import recording_calls
from ._core import (
    as_tensor,
    call_learner,
    check_tensor_answer,
    close,
    correct,
    fallback_hint,
    guard_errors,
    hint,
    learner_name,
)

_PARALLEL = 1 - 5e-4  # a cosine this close to 1 prints as 1.000: cosine cannot tell the key from a^1 itself


def _cosine(x: torch.Tensor, y: torch.Tensor) -> float:
    return float(x @ y / (x.norm() * y.norm()).clamp_min(1e-300))


@guard_errors
def long_key(answer: object, a: torch.Tensor) -> None:
    """Exercise 1: a key vector that the dot product ranks first for the query a^1, above a^1 itself, while
    cosine similarity ranks it below a^1: it wins by its length, not by its direction.

    Shape: a ``(n, d_model)`` (row 0 is a^1, the query; every row a key) -> answer ``(d_model,)``.
    """
    a = as_tensor(a, "a").double()
    key = as_tensor(answer, msg("your key")).double()
    width = a.shape[-1]
    if key.dim() == 2 and 1 in key.shape and key.numel() == width:
        key = key.reshape(width)  # a^1-shaped row or column
    if key.shape != (width,):
        hint(msg("one key vector of {width} numbers, like a^1; yours has shape {shape}", width=width,
                 shape=tuple(key.shape)))
    if not bool(torch.isfinite(key).all()):
        hint(msg("your key has inf or NaN entries: a key that wins must still be a vector of ordinary numbers"))
    query, dots = a[0], a @ a[0]  # (d_model,), (n,)
    score, best, cosine = float(key @ query), float(dots.max()), _cosine(key, query)
    leader = int(dots.argmax()) + 1  # Lee's number of the key that scores highest (a^1 itself in the lesson)
    if score > best and cosine < _PARALLEL:
        correct(msg("your key scores {score:.2f} against a^1, above every a^j (the best, a^{leader}, scores "
                    "{best:.2f}), yet its cosine with a^1 is only {cosine:.3f}, below a^1's 1: the dot product "
                    "rewards length, cosine only direction", score=score, leader=leader, best=best, cosine=cosine))
        return
    if cosine >= _PARALLEL:
        hint(msg("your key points the way a^1 points: its cosine with a^1 is 1, a tie with a^1 itself, whatever its "
                 "length; give it another direction as well"))
    wins_for_a2 = a.shape[0] > 1 and float(key @ a[1]) > float((a @ a[1]).max()) and _cosine(key, a[1]) < _PARALLEL
    if abs(cosine) <= 1e-5:
        hint(msg("your key is at right angles to a^1: its dot product with a^1 is 0 however long it is; lean it "
                 "towards a^1"))
    if score < 0 and wins_for_a2:
        hint(msg("your key points away from a^1 (its dot product with a^1 is {score:.2f}, below 0), though it "
                 "would win for the query a^2 (Python row 1); Lee's a^1, the query here, is row 0 of a",
                 score=score))
    if score < 0:
        hint(msg("your key points away from a^1 (its dot product with a^1 is {score:.2f}, below 0); the longer "
                 "such a key, the lower it scores", score=score))
    if wins_for_a2:
        hint(msg("your key scores {score:.2f} against a^1, not above a^{leader}'s {best:.2f}, though it wins for "
                 "the query a^2 (Python row 1); Lee's a^1, the query here, is row 0 of a", score=score,
                 leader=leader, best=best))
    hint(msg("your key scores {score:.2f} against a^1, not above a^{leader}'s {best:.2f}: q · k = |q| |k| cos, so "
             "a key pointing this way must be longer to win", score=score, leader=leader, best=best))


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ v  # (i, dv): b^i for every query, scale 1


def _attend_mistake(got: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    """Name the mistake behind a wrong output of attend, if it is a known one."""
    scores = q @ k.T  # (i, j)
    exp = scores.exp()
    d = q.shape[-1]
    if close(got, exp / exp.sum() @ v):
        hint(msg("this still computes what the classmate's function computes: add up the weights of one query "
                 "and see what they sum to"))
    if close(got, exp / exp.sum(dim=0) @ v) or close(got, torch.softmax(scores, dim=0) @ v):
        hint(msg("your weights sum to 1 down each column (over the queries); each query's row must sum to 1"))
    if scores.shape[0] == scores.shape[1] and close(got, exp / exp.sum(dim=-1) @ v):
        hint(msg("the row sums have lost their axis, so they line up with the columns when you divide; keep the "
                 "summed axis so that each row is divided by its own sum"))
    if scores.shape[0] == scores.shape[1] and close(got, torch.softmax(scores, dim=-1).T @ v):
        hint(msg("you mixed the values with the transpose of the weights: row i of the weights belongs to query i"))
    if got.shape == (q.shape[0], k.shape[-1]) and close(got, _attend(q, k, k)):
        hint(msg("you mixed the keys; the output is a weighted sum of the value vectors v^j"))
    if close(got, scores @ v):
        hint(msg("mix the values with the weights alpha' (after the softmax), not with the raw scores"))
    if close(got, (scores / scores.sum(dim=-1, keepdim=True)) @ v):
        hint(msg("you divided the raw scores by their sum; softmax first takes exp of each score, so that every "
                 "weight is positive, then divides by the sum of the exps"))
    if close(got, torch.softmax(scores / d**0.5, dim=-1) @ v):
        hint(msg("lesson 01 uses the plain dot product; the 1/sqrt(d) scale comes in lesson 02"))
    if close(got, torch.softmax(scores, dim=-1)):
        hint(msg("those are the weights alpha'; the output mixes the value vectors with them"))


@guard_errors
def fixed_attend(fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]) -> None:
    """Exercise 2: ``fn(q, k, v)`` returns b^i = sum_j alpha'_{i,j} v^j for every query (plain dot product), by
    hand, tried on several shapes, with fewer and more keys than queries and a single key.

    Shape: q ``(i, d)``, k ``(j, d)``, v ``(j, dv)`` -> ``(i, dv)``.
    """
    if not callable(fn):
        call_learner(fn)  # names what was passed instead of a function
    what = learner_name(fn)
    gen = torch.Generator().manual_seed(1)  # a private generator: the lesson's random numbers stay as they were
    for i, j, d, dv in ((4, 4, 3, 3), (2, 6, 3, 5), (5, 3, 4, 2), (3, 1, 2, 4)):
        q, k, v = (torch.randn(m, w, generator=gen, dtype=torch.float64) for m, w in ((i, d), (j, d), (j, dv)))
        with recording_calls() as calls:
            result = call_learner(fn, q.clone(), k.clone(), v.clone())
        ready_made = sorted({name for name in calls.torch | calls.library if "attention" in name})
        if ready_made:
            hint(msg("{what} calls {names}, a ready-made attention; the exercise is to fix the classmate's steps by "
                     "hand: scores, softmax, weighted sum", what=what, names=", ".join(ready_made)))
        if result is None:
            hint(msg("{what} returned None: end it with a return statement that gives back the outputs", what=what))
        got = as_tensor(result, msg("the result of {what}", what=what))
        expected = _attend(q, k, v)
        if close(got, expected):
            continue
        _attend_mistake(got.double(), q, k, v)
        if got.shape != expected.shape:
            hint(msg("for {i} queries, {j} keys and values of size {dv} the output has shape ({i}, {dv}), one b^i "
                     "per query; yours has {shape}", i=i, j=j, dv=dv, shape=tuple(got.shape)))
        fallback_hint(msg("with {i} queries and {j} keys your output is not b^i = sum_j alpha'_(i,j) v^j; compare "
                          "your code with the three steps for b^1 above", i=i, j=j))
    correct(msg("each query's weights now sum to 1 on their own, for any number of queries and keys"))


@guard_errors
def cosine_similarity_matrix(answer: object, x: torch.Tensor) -> None:
    """Exercise 3: the matrix of cosine similarities between every pair of token vectors.

    Shape: x ``(n, d_model)`` -> answer ``(n, n)``.
    """
    x = as_tensor(x, "x").double()
    unit = x / x.norm(dim=-1, keepdim=True)  # (n, d_model)
    columns = x / x.norm(dim=0, keepdim=True)  # each feature normalised: the wrong axis
    lengths = x.norm(dim=-1)  # (n,)
    dots = x @ x.T  # (n, n)
    one_length = msg("divide by the length of both vectors, not only one")
    check_tensor_answer(
        answer,
        unit @ unit.T,
        what=msg("your cosine matrix"),
        mistakes=[
            (dots, msg("that is the dot product; cosine divides it by the lengths of both vectors")),
            (dots / lengths[:, None], one_length),
            (dots / lengths, one_length),
            (dots / x.norm() ** 2, msg("divide each pair by the lengths of its own two vectors, not by the length "
                                       "of the whole matrix")),
            (dots / lengths / lengths, msg("dividing by a vector of lengths divides every column by the same "
                                           "length; one length must divide the rows and the other the columns")),
            (dots / lengths[:, None] ** 2, msg("each row is divided by its own length twice; one length must "
                                               "divide the rows and the other the columns")),
            (columns @ columns.T, msg("you normalised over the wrong axis: each token vector (a row) must be "
                                      "divided by its own length")),
            (unit.T @ unit, msg("that compares features with features; rows are tokens, so pair every row with "
                                "every row")),
            (torch.ones(x.shape[0], dtype=torch.float64), msg("that compares each vector with itself only (the "
                                                              "diagonal); the matrix holds every pair of "
                                                              "vectors")),
            (unit[0] @ unit.T, msg("that is one row of the matrix, a^1 against every vector; the matrix holds "
                                   "every pair, one row per vector")),
        ],
        shape_hint=msg("one similarity per pair of tokens: an ({n}, {n}) matrix", n=x.shape[0]),
        success=msg("cosine similarity ignores length: the diagonal is exactly 1"),
    )
