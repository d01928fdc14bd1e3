"""Lesson 07, exercise 2: the bug in a lazy blockwise step. The lesson's loop and its buggy step, then the checks of
an input that exposes the bug (2a) and of a fixed step (2b)."""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable

import torch

from ...reference import attention as plain_attention
from ._core import as_tensor, call_learner, close, correct, guard_errors, hint

__all__ = ["LAZY_MARGIN", "blockwise_loop", "exposing_input", "fixed_update", "lazy_update"]

LAZY_MARGIN = 4.0  # the lesson's lazy step moves its shift only when a block's maximum beats it by more than this


def blockwise_loop(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block_size: int,
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


def lazy_update(m, l, acc, s, v_block):  # noqa: E741
    """The lesson's buggy step: the shift moves only for a big jump, and acc is not brought to the new shift."""
    block_max = s.amax(dim=-1, keepdim=True)  # (..., i, 1)
    m_new = torch.where(block_max > m + LAZY_MARGIN, block_max, m)
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
        if bool((block_max > m + LAZY_MARGIN).any()):
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
    got = blockwise_loop(q, k, v, int(block_size), lazy_update)
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
             f"{LAZY_MARGIN:g}, so the lazy step never moves its shift and the output is right: give some query "
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
        got = blockwise_loop(q, k, v, block, answer)
        if close(got, expected, atol=1e-7, rtol=1e-7):
            continue
        if not bool(torch.isfinite(got).all()):
            first = "on the first block m is -inf, so a factor must go to 0 there, not to inf; " if index < 3 else ""
            hint(f"{first}some rows came out inf or NaN: only ever exponentiate a difference that is <= 0 (a score "
                 f"minus the current shift, or an old shift minus the new one)")
        if close(got, blockwise_loop(q, k, v, block, lazy_update), atol=1e-7, rtol=1e-7):
            hint("that still gives the given step's result: when the shift moves, everything summed under the old "
                 "shift has to be brought to the new one")
        if close(got, blockwise_loop(q, k, v, block, _inverse_factor), atol=1e-7, rtol=1e-7):
            hint("the factor that brings sums from an old shift to a larger new one is at most 1: measured against "
                 "a larger shift, the old terms shrink")
        if close(got, blockwise_loop(q, k, v, block, _only_acc), atol=1e-7, rtol=1e-7):
            hint("l was summed under the old shift too: it needs the same factor as acc")
        hint("compare your step with the merge of two blocks: after it, m, l and acc must all describe the keys "
             "seen so far with one common shift")
    correct("every running sum now follows the shift when it moves; the loop equals plain attention, also when "
            "scores jump between blocks")


def _inverse_factor(m, l, acc, s, v_block):  # noqa: E741
    block_max = s.amax(dim=-1, keepdim=True)
    m_new = torch.where(block_max > m + LAZY_MARGIN, block_max, m)
    p = torch.exp(s - m_new)
    grow = torch.where(torch.isfinite(m), torch.exp(m_new - m), torch.zeros_like(m))
    return m_new, l * grow + p.sum(dim=-1, keepdim=True), acc * grow + p @ v_block


def _only_acc(m, l, acc, s, v_block):  # noqa: E741
    block_max = s.amax(dim=-1, keepdim=True)
    m_new = torch.where(block_max > m + LAZY_MARGIN, block_max, m)
    p = torch.exp(s - m_new)
    return m_new, l + p.sum(dim=-1, keepdim=True), acc * torch.exp(m - m_new) + p @ v_block
