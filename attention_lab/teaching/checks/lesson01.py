"""Checks for lesson 01 (dot-product similarity), in Lee's notation: alpha_{i,j}, alpha'_{i,j}, b^i."""

from __future__ import annotations

import torch

from ._core import check_tensor_answer


def scores_for_query(answer: object, q: torch.Tensor, k: torch.Tensor, i: int) -> None:
    """Exercise 1: alpha_{i,j} = q^i . k^j for every key j (plain dot product, no scale yet)."""
    expected = k @ q[i]  # (j,)
    check_tensor_answer(
        answer,
        expected,
        what=f"the scores of query index {i}",
        mistakes=[
            (q @ q[i], "you compared the query with other queries; alpha_{i,j} pairs query q^i with key k^j"),
            (q @ k[i], f"that is column {i} (every query against key {i}): keep the query q[{i}] fixed and vary "
                       "the key"),
            (expected / q.shape[-1] ** 0.5, "lesson 01 uses the plain dot product; the 1/sqrt(d) scale comes in "
                                            "lesson 02"),
        ],
        shape_hint="one score per key: a vector with as many entries as there are tokens",
        success=f"one score q^{i + 1} . k^j per key j (query index {i} is Lee's token {i + 1})",
    )


def softmax_weights(answer: object, q: torch.Tensor, k: torch.Tensor, i: int) -> None:
    """Exercise 2: alpha'_{i,j} = softmax over j of alpha_{i,j}."""
    scores = k @ q[i]
    check_tensor_answer(
        answer,
        torch.softmax(scores, dim=-1),
        what=f"the weights of query index {i}",
        mistakes=[
            (scores, "these are the raw scores alpha; pass them through softmax so they become positive and "
                     "sum to 1"),
            (scores.exp(), "exponentiating is half of softmax: divide by the sum of the exponentials"),
            (scores / scores.sum(), "dividing by the sum of scores is not softmax (scores can be negative): "
                                    "exponentiate first"),
        ],
        success=f"the weights alpha'_{i + 1},j are positive and sum to 1",
    )


def output_for_query(answer: object, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, i: int) -> None:
    """Exercise 3: b^i = sum_j alpha'_{i,j} v^j."""
    scores = k @ q[i]
    weights = torch.softmax(scores, dim=-1)
    check_tensor_answer(
        answer,
        weights @ v,
        what=f"the output of query index {i}",
        mistakes=[
            (weights @ k, "you mixed the keys; the output is a weighted sum of the value vectors v^j"),
            (scores @ v, "use the normalised weights alpha' (after softmax), not the raw scores"),
            (v.mean(dim=0), "a plain average gives every token the same weight; weigh v^j by alpha'_{i,j}"),
        ],
        shape_hint="b^i is one vector with the size of a value vector v^j",
        success=f"b^{i + 1} is the attention-weighted sum of the values",
    )


def cosine_similarity_matrix(answer: object, x: torch.Tensor) -> None:
    """Exercise 4: the matrix of cosine similarities between every pair of token vectors."""
    unit = x / x.norm(dim=-1, keepdim=True)
    check_tensor_answer(
        answer,
        unit @ unit.T,
        what="your cosine matrix",
        mistakes=[
            (x @ x.T, "that is the dot product; cosine divides it by the lengths of both vectors"),
            (x @ x.T / x.norm(dim=-1, keepdim=True), "divide by the length of both vectors, not only one"),
            (x @ x.T / x.norm(dim=-1), "divide by the length of both vectors, not only one"),
        ],
        shape_hint="one similarity per pair of tokens: an (n, n) matrix",
        success="cosine similarity ignores length: the diagonal is exactly 1",
    )
