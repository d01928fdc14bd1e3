"""Lesson 07, exercise 2: the lesson's blockwise loop with its per-block step passed in, the lazy step with its bug,
the common wrong fixes, and the inputs the check runs them on. The checks in :mod:`.lesson07` tell a learner's step
apart from each of these."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from ...i18n import msg
from ._core import NONE_HINT, call_learner, hint

LAZY_MARGIN = 4.0  # the lesson's lazy step moves its shift only when a block's maximum beats it by more than this


def blockwise_loop(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block_size: int,
                    update: Callable[..., object], shifts: list[torch.Tensor] | None = None) -> torch.Tensor:
    """The lesson's loop: one key block at a time, ``m, l, acc = update(m, l, acc, s, v_block)``, then acc / l.
    ``shifts``, when given, collects the m that each step returns.

    Shape: q ``(..., i, d)``, k ``(..., j, d)``, v ``(..., j, dv)`` -> ``(..., i, dv)``.
    """
    m = torch.full(q.shape[:-1] + (1,), -math.inf, dtype=q.dtype)  # (..., i, 1)
    l = torch.zeros_like(m)  # noqa: E741 (l as in the lesson)
    acc = torch.zeros(q.shape[:-1] + (v.shape[-1],), dtype=q.dtype)  # (..., i, dv)
    given = (tuple(m.shape), tuple(acc.shape))
    for start in range(0, k.shape[-2], block_size):
        s = q @ k[..., start:start + block_size, :].transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., i, jb)
        result = call_learner(update, m, l, acc, s, v[..., start:start + block_size, :])
        if result is None:
            hint(NONE_HINT)
        if not (isinstance(result, tuple) and len(result) == 3
                and all(isinstance(t, torch.Tensor) for t in result)):
            hint(msg("the update should return three tensors, the new m, l and acc, in that order"))
        m, l, acc = result  # noqa: E741
        if (tuple(m.shape), tuple(l.shape), tuple(acc.shape)) != (given[0], given[0], given[1]):
            hint(msg("the update should return m, l and acc in the shapes it was given: m and l {m_l}, acc {acc}; "
                     "yours returned m {m}, l {l}, acc {got_acc}", m_l=given[0], acc=given[1],
                     m=tuple(m.shape), l=tuple(l.shape), got_acc=tuple(acc.shape)))
        if shifts is not None:
            shifts.append(m)
    return acc / l


def lazy_shifts(q: torch.Tensor, k: torch.Tensor, block_size: int) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """The shift after each block under the lesson's lazy rule, and the running maximum (an eager step's shift).

    Shape: each shift ``(..., i, 1)``.
    """
    lazy, eager = [], []
    m_lazy = m_eager = torch.full(q.shape[:-1] + (1,), -math.inf, dtype=q.dtype)  # (..., i, 1)
    for start in range(0, k.shape[-2], block_size):
        s = q @ k[..., start:start + block_size, :].transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., i, jb)
        block_max = s.amax(dim=-1, keepdim=True)  # (..., i, 1)
        m_lazy = torch.where(block_max > m_lazy + LAZY_MARGIN, block_max, m_lazy)
        m_eager = torch.maximum(m_eager, block_max)
        lazy.append(m_lazy)
        eager.append(m_eager)
    return lazy, eager


def lazy_update(m, l, acc, s, v_block):  # noqa: E741
    """The lesson's buggy step: the shift moves only for a big jump, and acc is not brought to the new shift.

    Shape: m, l ``(..., i, 1)``, acc ``(..., i, dv)``, s ``(..., i, jb)``, v_block ``(..., jb, dv)`` -> m, l, acc.
    """
    block_max = s.amax(dim=-1, keepdim=True)  # (..., i, 1)
    m_new = torch.where(block_max > m + LAZY_MARGIN, block_max, m)
    p = torch.exp(s - m_new)
    return m_new, l * torch.exp(m - m_new) + p.sum(dim=-1, keepdim=True), acc + p @ v_block


def shift_moves(q: torch.Tensor, k: torch.Tensor, block_size: int) -> bool:
    """Whether, in some row, a later key block beats the lazy shift by more than the margin.

    Shape: q ``(..., i, d)``, k ``(..., j, d)`` -> a bool.
    """
    lazy, _ = lazy_shifts(q, k, block_size)
    return any(bool((later != first).any()) for first, later in zip(lazy, lazy[1:]))


def _no_rescale(m, l, acc, s, v_block):  # noqa: E741
    block_max = s.amax(dim=-1, keepdim=True)
    m_new = torch.where(block_max > m + LAZY_MARGIN, block_max, m)
    p = torch.exp(s - m_new)
    return m_new, l + p.sum(dim=-1, keepdim=True), acc + p @ v_block


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


def _old_shift_returned(m, l, acc, s, v_block):  # noqa: E741
    block_max = s.amax(dim=-1, keepdim=True)
    m_new = torch.where(block_max > m + LAZY_MARGIN, block_max, m)
    p = torch.exp(s - m_new)
    factor = torch.exp(m - m_new)
    return m, l * factor + p.sum(dim=-1, keepdim=True), acc * factor + p @ v_block


def _values_left_out(m, l, acc, s, v_block):  # noqa: E741
    block_max = s.amax(dim=-1, keepdim=True)
    m_new = torch.where(block_max > m + LAZY_MARGIN, block_max, m)
    p = torch.exp(s - m_new)
    factor = torch.exp(m - m_new)
    return m_new, l * factor + p.sum(dim=-1, keepdim=True), acc * factor


UPDATE_MISTAKES = (
    (lazy_update, msg("that still gives the given step's result: when the shift moves, everything summed under the "
                       "old shift has to be brought to the new one")),
    (_inverse_factor, msg("the factor that brings sums from an old shift to a larger new one is at most 1: measured "
                          "against a larger shift, the old terms shrink")),
    (_only_acc, msg("l was summed under the old shift too: it needs the same factor as acc")),
    (_no_rescale, msg("neither l nor acc follows the shift when it moves: both were summed under the old shift")),
    (_old_shift_returned, msg("your step returns the old m, not the shift it used for this block: the next block "
                              "then subtracts a different shift from the one its sums were written with")),
    (_values_left_out, msg("acc should gain this block's weighted values, not only keep the old ones: add the "
                           "block's weights times its values")),
)


def update_cases() -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]]:
    """2-D, batched and one-block inputs whose keys score higher block after block, then scores near 1e4.

    Shape: each case q ``(..., i, d)``, k ``(..., j, d)``, v ``(..., j, dv)`` and a block size.
    """
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
    return cases
