"""Checks for lesson 07 (blockwise and block-sparse attention: merging blocks, dilated layouts, sparsity)."""

from __future__ import annotations

import numbers
from collections.abc import Callable

import torch

from ...efficient.layouts import BlockLayout
from ._core import close, correct, hint


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
    try:
        got = merge(m_a.clone(), l_a.clone(), o_a.clone(), m_b.clone(), l_b.clone(), o_b.clone())
    except Exception as error:  # the learner's code: report, do not crash the check
        hint(f"your merge raised {type(error).__name__}: {error}")
    if not isinstance(got, torch.Tensor) or got.shape != expected.shape:
        hint(f"merge should return a tensor of shape {tuple(expected.shape)} (one output row per query)")
    # float32 tolerances: a correct merge computed in float32 (or via logsumexp) must pass too
    if close(got, expected, atol=1e-5, rtol=1e-5):
        big = merge(m_a + 1e4, l_a, o_a, m_b + 1e4, l_b, o_b)  # scores shifted by 1e4 give the same weights
        if not (isinstance(big, torch.Tensor) and torch.isfinite(big).all() and close(big, expected)):
            hint("right for small scores, but with scores near 1e4 exp() overflows: only ever exponentiate the "
                 "difference between a block's maximum and the larger maximum (a number <= 0)")
        correct("rescale each block's sum and output by exp(m_block - m_new), add, divide by the total: exactly "
                "the softmax over both blocks")
        return
    if close(got, (o_a + o_b) / 2):
        hint("the two blocks do not count equally: a block whose scores are larger holds more of the weight")
    if close(got, (l_a * o_a + l_b * o_b) / (l_a + l_b)):
        hint("l_a and l_b were computed with different shifts m_a and m_b, so they cannot be added as they are: "
             "bring both to the common maximum m = max(m_a, m_b) first")
    hint("the output over both blocks is a weighted sum of o_a and o_b: each block's weight is its share of the "
         "softmax denominator over all keys, once both sums are written with the same shift")


def dilated_layout(answer: object, *, block_size: int = 16, stride: int = 4) -> None:
    """Exercise 2: a dilated layout where each query block sees every ``stride``-th key block, itself included."""
    if answer is None or answer is Ellipsis:
        hint("your layout is still empty: build it with a BlockLayout constructor")
    if not isinstance(answer, BlockLayout):
        hint(f"the answer should be an attention_lab.BlockLayout, got {type(answer).__name__}; a bool matrix works "
             f"for one length only, a layout for every length")
    expected = BlockLayout.strided(block_size, stride)
    lengths = (1, 7 * block_size + 3, 13 * block_size)

    def same(a: BlockLayout, b: BlockLayout) -> bool:
        return a.block_size == b.block_size and all(torch.equal(a.to_dense(n), b.to_dense(n)) for n in lengths)

    if same(answer, expected):
        correct(f"query block r sees key blocks r, r +- {stride}, r +- {2 * stride}, ...: sparsity "
                f"{answer.sparsity(13 * block_size):.4f} at n = {13 * block_size}")
        return
    if answer.block_size != block_size:
        hint(f"the blocks should hold {block_size} positions each, yours hold {answer.block_size}")
    for off_by_one in (stride - 1, stride + 1):
        if off_by_one >= 1 and same(answer, BlockLayout.strided(block_size, off_by_one)):
            hint(f"that skips the wrong number of blocks: 'every {stride}th block' means r - c is a multiple of "
                 f"{stride}")
    n = lengths[-1]
    if torch.equal(answer.to_dense(n), (expected & BlockLayout.causal(block_size)).to_dense(n)):
        hint("the exercise asks for both directions: earlier and later key blocks")
    if torch.equal(answer.to_dense(n), BlockLayout.sliding_window(block_size, stride).to_dense(n)):
        hint("a sliding window sees every block up to the distance; a dilated layout sees only every "
             f"{stride}th one, with gaps in between")
    if not answer.to_dense(n).diagonal().all():
        hint("each query block should also see its own key block (distance 0 is a multiple of the stride)")
    hint(f"query block r should see key block c exactly when (r - c) is a multiple of {stride}")


def predicted_sparsity(answer: object, layout: BlockLayout, n: int) -> None:
    """Exercise 3: the sparsity (share of the n x n (query, key) pairs skipped) of ``layout`` at length ``n``."""
    if answer is None or answer is Ellipsis:
        hint("your prediction is still empty: replace the placeholder with a number between 0 and 1")
    if isinstance(answer, torch.Tensor) and answer.numel() == 1:
        answer = answer.item()
    if isinstance(answer, bool) or not isinstance(answer, numbers.Real):
        hint(f"the sparsity is one number between 0 and 1, got {type(answer).__name__}")
    got = float(answer)
    expected = layout.sparsity(n)
    if abs(got - expected) <= 5e-4:
        correct(f"sparsity {expected:.4f}: {1 - expected:.2%} of the (query, key) pairs are computed")
        return
    if abs(got - (1 - expected)) <= 5e-4:
        hint("that is the share of pairs computed; sparsity is the share skipped")
    if got > 1 or got < 0:
        hint("a share of pairs lies between 0 and 1 (multiply by 100 for a percentage only when you print it)")
    blocks = layout.block_mask(n)
    block_share = 1 - blocks.double().mean().item()
    if abs(got - block_share) <= 5e-4:
        hint("that counts block pairs; count (query, key) pairs instead: the last block may be shorter, and a "
             "causal diagonal block keeps only its lower triangle")
    hint("count, for each query block, the key positions it keeps; add them up and divide by n * n; sparsity is "
         "1 minus that")
