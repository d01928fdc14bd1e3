"""Checks for lesson 07 (blockwise and block-sparse attention): merging two blocks' summaries (exercise 1), the bug in
a lazy blockwise step (exercise 2: an input that exposes it, then the fix), and a layout that connects every pair
within a budget (exercise 3).

For exercise 2 the checks keep their own copy of the lesson's loop and of its buggy step, and of the common wrong
fixes, to tell the learner's step apart from each.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable

import torch

from ...efficient.block_sparse import BlockLayout
from ...reference import attention as plain_attention
from ._core import as_tensor, call_learner, close, correct, guard_errors, hint


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


# --- exercise 2: the lazy blockwise step -------------------------------------------------------------------------

_LAZY_MARGIN = 4.0  # the lesson's lazy step moves its shift only when a block's maximum beats it by more than this


def _blockwise_loop(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block_size: int,
                    update: Callable[..., object]) -> torch.Tensor:
    """The lesson's loop: one key block at a time, ``m, l, acc = update(m, l, acc, s, v_block)``, then acc / l.

    Shape: q ``(..., i, d)``, k ``(..., j, d)``, v ``(..., j, dv)`` -> ``(..., i, dv)``.
    """
    m = torch.full(q.shape[:-1] + (1,), -math.inf, dtype=q.dtype)  # (..., i, 1)
    l = torch.zeros_like(m)  # noqa: E741 (l as in the lesson)
    acc = torch.zeros(q.shape[:-1] + (v.shape[-1],), dtype=q.dtype)  # (..., i, dv)
    for start in range(0, k.shape[-2], block_size):
        s = q @ k[..., start:start + block_size, :].transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., i, jb)
        result = call_learner(update, m, l, acc, s, v[..., start:start + block_size, :], what="your update")
        if not (isinstance(result, tuple) and len(result) == 3
                and all(isinstance(t, torch.Tensor) for t in result)):
            hint("the update should return three tensors, the new m, l and acc, in that order")
        m, l, acc = result  # noqa: E741
        if m.shape != l.shape or acc.shape[:-1] != m.shape[:-1]:
            hint(f"the update should keep the shapes it was given: m and l {tuple(l.shape)}, acc "
                 f"{tuple(acc.shape)}; got m {tuple(m.shape)}, l {tuple(l.shape)}, acc {tuple(acc.shape)}")
    return acc / l


def _lazy_update(m, l, acc, s, v_block):  # noqa: E741
    """The lesson's buggy step: the shift moves only for a big jump, and acc is not brought to the new shift."""
    block_max = s.amax(dim=-1, keepdim=True)  # (..., i, 1)
    m_new = torch.where(block_max > m + _LAZY_MARGIN, block_max, m)
    p = torch.exp(s - m_new)
    return m_new, l * torch.exp(m - m_new) + p.sum(dim=-1, keepdim=True), acc + p @ v_block


def _shift_moves(q: torch.Tensor, k: torch.Tensor, block_size: int) -> bool:
    """Whether, in some row, a later key block beats the lazy shift by more than the margin."""
    m = None
    for start in range(0, k.shape[-2], block_size):
        block_max = (q @ k[..., start:start + block_size, :].transpose(-2, -1)).amax(-1) / math.sqrt(q.shape[-1])
        if m is None:
            m = block_max
            continue
        if bool((block_max > m + _LAZY_MARGIN).any()):
            return True
    return False


@guard_errors
def exposing_input(q: object, k: object, v: object, block_size: object) -> None:
    """Exercise 2a: inputs on which the lesson's ``blockwise_loop(q, k, v, block_size, lazy_update)`` is wrong.

    Shape: q ``(..., i, d)``, k ``(..., j, d)``, v ``(..., j, dv)``; ``block_size`` a whole number >= 1.
    """
    q, k, v = (as_tensor(x, name).double() for x, name in ((q, "your q"), (k, "your k"), (v, "your v")))
    if isinstance(block_size, bool) or not isinstance(block_size, numbers.Integral) or block_size < 1:
        hint(f"block_size should be a whole number of keys, at least 1; got {block_size!r}")
    if q.dim() < 2 or k.dim() < 2 or v.dim() < 2:
        hint("q, k and v hold one vector per row: at least two dimensions each, (tokens, features)")
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        hint(f"q and k need the same feature size, k and v the same number of keys; got q {tuple(q.shape)}, "
             f"k {tuple(k.shape)}, v {tuple(v.shape)}")
    if not all(bool(torch.isfinite(x).all()) for x in (q, k, v)):
        hint("use finite numbers: inf or NaN break every attention, the right one too")
    expected = plain_attention(q, k, v)[0]
    got = _blockwise_loop(q, k, v, int(block_size), _lazy_update)
    if not bool(torch.isfinite(expected).all()):
        hint("the scores are so large that even plain attention overflows here: the bug hides behind that")
    gap = (got - expected).abs().max().item() if bool(torch.isfinite(got).all()) else math.inf
    if gap > 1e-6:
        correct(f"on these inputs the lazy loop is off by up to {gap:.3g}: the bug shows when a later block's "
                f"scores jump far above the first block's")
        return
    if k.shape[-2] <= int(block_size):
        hint("all your keys fit in one block, so the loop runs its step once, and one step cannot go wrong")
    if not _shift_moves(q, k, int(block_size)):
        hint(f"in every row, no later key block beats the first block's maximum score by more than "
             f"{_LAZY_MARGIN:g}, so the lazy step never moves its shift and the output is right: give some query "
             f"much higher scores in a later key block")
    hint("make the shift move: a later key block should score far higher than the first for some query")


@guard_errors
def fixed_update(answer: object) -> None:
    """Exercise 2b: a correct per-block step ``update(m, l, acc, s, v_block) -> (m, l, acc)`` for the loop.

    Tried on 2-D and batched inputs, lengths that are not a multiple of the block, scores that jump between blocks
    and scores near 1e4, all in float64 against plain attention.
    """
    if answer is None or answer is Ellipsis or not callable(answer):
        hint("define a function update(m, l, acc, s, v_block) and pass the function itself")
    generator = torch.Generator().manual_seed(3)

    def rising(*shape: int) -> torch.Tensor:  # keys whose scores grow block after block
        growth = torch.linspace(0.1, 12.0, shape[-2], dtype=torch.float64)[:, None]  # (j, 1)
        return torch.randn(*shape, generator=generator, dtype=torch.float64) * growth

    cases = []
    for q_shape, k_shape, dv, block in [((7, 4), (23, 4), 3, 5), ((2, 3, 9, 8), (2, 3, 40, 8), 5, 16),
                                        ((6, 4), (6, 4), 2, 4)]:
        q = torch.randn(*q_shape, generator=generator, dtype=torch.float64)
        cases.append((q, rising(*k_shape), torch.randn(*k_shape[:-1], dv, generator=generator,
                                                       dtype=torch.float64), block))
    q, k = cases[0][0] * 300, cases[0][1]  # scores near 1e4: exp of a raw score overflows
    cases.append((q, k, cases[0][2], cases[0][3]))
    for index, (q, k, v, block) in enumerate(cases):
        expected = plain_attention(q, k, v)[0]
        got = _blockwise_loop(q, k, v, block, answer)
        if close(got, expected, atol=1e-7, rtol=1e-7):
            continue
        if not bool(torch.isfinite(got).all()):
            first = "on the first block m is -inf, so a factor must go to 0 there, not to inf; " if index < 3 else ""
            hint(f"{first}some rows came out inf or NaN: only ever exponentiate a difference that is <= 0 (a score "
                 f"minus the current shift, or an old shift minus the new one)")
        if close(got, _blockwise_loop(q, k, v, block, _lazy_update), atol=1e-7, rtol=1e-7):
            hint("that still gives the given step's result: when the shift moves, everything summed under the old "
                 "shift has to be brought to the new one")
        if close(got, _blockwise_loop(q, k, v, block, _inverse_factor), atol=1e-7, rtol=1e-7):
            hint("the factor that brings sums from an old shift to a larger new one is at most 1: measured against "
                 "a larger shift, the old terms shrink")
        if close(got, _blockwise_loop(q, k, v, block, _only_acc), atol=1e-7, rtol=1e-7):
            hint("l was summed under the old shift too: it needs the same factor as acc")
        hint("compare your step with the merge of two blocks: after it, m, l and acc must all describe the keys "
             "seen so far with one common shift")
    correct("every running sum now follows the shift when it moves; the loop equals plain attention, also when "
            "scores jump between blocks")


def _inverse_factor(m, l, acc, s, v_block):  # noqa: E741
    block_max = s.amax(dim=-1, keepdim=True)
    m_new = torch.where(block_max > m + _LAZY_MARGIN, block_max, m)
    p = torch.exp(s - m_new)
    grow = torch.where(torch.isfinite(m), torch.exp(m_new - m), torch.zeros_like(m))
    return m_new, l * grow + p.sum(dim=-1, keepdim=True), acc * grow + p @ v_block


def _only_acc(m, l, acc, s, v_block):  # noqa: E741
    block_max = s.amax(dim=-1, keepdim=True)
    m_new = torch.where(block_max > m + _LAZY_MARGIN, block_max, m)
    p = torch.exp(s - m_new)
    return m_new, l + p.sum(dim=-1, keepdim=True), acc * torch.exp(m - m_new) + p @ v_block


# --- exercise 3: a layout that connects every pair --------------------------------------------------------------

def _layers_to_connect(block_mask: torch.Tensor) -> int | None:
    """Smallest p such that every block hears from every block in p layers (None: some pair never does).

    Shape: ``block_mask`` bool ``(query blocks, key blocks)``, square.
    """
    step = block_mask.to(torch.float64)
    reach = step.clone()
    for p in range(1, block_mask.shape[0] + 1):
        if bool((reach > 0).all()):
            return p
        grown = ((reach @ step) > 0).to(torch.float64)
        if torch.equal(grown, reach):
            return None
        reach = grown
    return None


@guard_errors
def connected_layout(answer: object, *, n: int = 4096, block_size: int = 64, max_layers: int = 3,
                     max_share: float = 0.05) -> None:
    """Exercise 3: a layout with blocks of ``block_size`` that, at length ``n``, connects every pair of positions
    within ``max_layers`` layers and computes at most ``max_share`` of the (query, key) pairs."""
    if answer is None or answer is Ellipsis:
        hint("your layout is still empty: build it from BlockLayout constructors, combined with | or &")
    if not isinstance(answer, BlockLayout):
        hint(f"the answer should be an attention_lab.BlockLayout, got {type(answer).__name__}; a layout works for "
             f"every length, a mask for one")
    if answer.block_size != block_size:
        hint(f"the blocks should hold {block_size} positions each, yours hold {answer.block_size}")
    share = 1 - answer.sparsity(n)
    blocks = answer.block_mask(n)
    dense = answer.to_dense(n)
    if not bool(torch.equal(dense, blocks.repeat_interleave(block_size, 0).repeat_interleave(block_size, 1)[:n, :n])):
        hint("a causal part keeps only the lower triangle of each diagonal block, so a query there does not see "
             "every key of its block; this exercise wants both directions: leave the causal part out")
    layers = _layers_to_connect(blocks)
    if layers is None:
        hint("some blocks never hear from some others, in any number of layers: your layout splits the sequence "
             "into groups that no kept block joins")
    if layers > max_layers:
        hint(f"every pair is connected only after {layers} layers, more than {max_layers}: a window grows each "
             f"position's reach by a block or so per layer; what gives every block a path of two hops?")
    if share > max_share:
        hint(f"every pair is connected after {layers} layers, but your layout computes {share:.2%} of the "
             f"(query, key) pairs, over the budget of {max_share:.0%}: find the part of it that keeps the most "
             f"blocks, and ask whether the short paths need it")
    correct(f"{share:.2%} of the (query, key) pairs computed, and every pair connected after {layers} layers")
