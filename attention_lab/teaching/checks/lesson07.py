"""Checks for lesson 07 (blockwise and block-sparse attention): merging two blocks' summaries, the bug in a lazy
blockwise step (an input that exposes it, then the fix), and a layout that connects every pair within a budget.
``dilated_layout`` and ``predicted_sparsity`` serve copies of the lesson handed out before its exercises changed.

The checks live one exercise per module: exercise 2 in ``_lesson07_lazy_step``, the layout exercises in
``_lesson07_layouts``; import every check from here.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ._core import call_learner, close, correct, guard_errors, hint
from ._lesson07_layouts import connected_layout, dilated_layout, layers_to_connect, predicted_sparsity
from ._lesson07_lazy_step import (  # noqa: F401 (_inverse_factor, _only_acc: the common wrong steps, read by the tests)
    LAZY_MARGIN,
    _inverse_factor,
    _only_acc,
    blockwise_loop,
    exposing_input,
    fixed_update,
    lazy_update,
)

__all__ = [
    "LAZY_MARGIN",
    "blockwise_loop",
    "connected_layout",
    "dilated_layout",
    "exposing_input",
    "fixed_update",
    "layers_to_connect",
    "lazy_update",
    "merge_blocks",
    "predicted_sparsity",
]


@guard_errors
def merge_blocks(answer: object) -> None:
    """Exercise 1: ``merge(m_a, l_a, o_a, m_b, l_b, o_b)`` -> the output of attention over both key blocks.

    Each block's summary: ``m`` its row maximum of scores, ``l`` the sum of exp(score - m), ``o`` its own softmax
    output (normalised within the block). Shapes: m, l ``(i, 1)``, o ``(i, dv)``.
    """
    if answer is None or answer is Ellipsis or not callable(answer):
        hint("define a function merge(m_a, l_a, o_a, m_b, l_b, o_b) and pass the function itself")
    merge: Callable[..., object] = answer  # type: ignore[assignment]
    generator = torch.Generator().manual_seed(7)
    n_rows, n_a, n_b, dv = 6, 5, 4, 3
    scores_a = torch.randn(n_rows, n_a, generator=generator, dtype=torch.float64) * 3
    scores_b = torch.randn(n_rows, n_b, generator=generator, dtype=torch.float64) * 3 + 2  # a different scale
    v_a = torch.randn(n_a, dv, generator=generator, dtype=torch.float64)
    v_b = torch.randn(n_b, dv, generator=generator, dtype=torch.float64)

    def summary(scores: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        m = scores.amax(dim=-1, keepdim=True)  # (i, 1)
        e = torch.exp(scores - m)  # (i, j)
        return m, e.sum(dim=-1, keepdim=True), (e @ v) / e.sum(dim=-1, keepdim=True)

    (m_a, l_a, o_a), (m_b, l_b, o_b) = summary(scores_a, v_a), summary(scores_b, v_b)
    expected = torch.softmax(torch.cat([scores_a, scores_b], dim=-1), dim=-1) @ torch.cat([v_a, v_b])  # (i, dv)
    got = call_learner(merge, m_a.clone(), l_a.clone(), o_a.clone(), m_b.clone(), l_b.clone(), o_b.clone(),
                       what="your merge")
    if not isinstance(got, torch.Tensor) or got.shape != expected.shape:
        hint(f"merge should return a tensor of shape {tuple(expected.shape)} (one output row per query)")
    # float32 tolerances: a correct merge computed in float32 (or via logsumexp) must pass too
    if close(got, expected, atol=1e-5, rtol=1e-5):
        big = call_learner(merge, m_a + 1e4, l_a, o_a, m_b + 1e4, l_b, o_b, what="your merge")  # same weights
        if not (isinstance(big, torch.Tensor) and torch.isfinite(big).all() and close(big, expected)):
            hint("right for small scores, but with scores near 1e4 exp() overflows: only ever exponentiate the "
                 "difference between a block's maximum and the larger maximum (a number <= 0)")
        correct("both blocks now share one shift, and the merge equals the softmax over all keys of both blocks")
        return
    if close(got, (o_a + o_b) / 2):
        hint("the two blocks do not count equally: a block whose scores are larger holds more of the weight")
    if close(got, (l_a * o_a + l_b * o_b) / (l_a + l_b)):
        hint("l_a and l_b were computed with different shifts m_a and m_b, so they cannot be added as they are: "
             "bring both to the common maximum m = max(m_a, m_b) first")
    hint("the output over both blocks is a weighted sum of o_a and o_b: each block's weight is its share of the "
         "softmax denominator over all keys, once both sums are written with the same shift")
