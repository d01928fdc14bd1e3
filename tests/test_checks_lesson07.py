"""Lesson 07 checks accept the right answers (in equivalent forms), reject common mistakes with their own hint, turn
errors in the learner's code into hints, try each answer on more than one input, and never print another exercise's
answer. tests/answers/lesson07.py puts every common mistake through the checks; this file proves what is behind it."""

from __future__ import annotations

import math
from pathlib import Path

import nbformat
import pytest
import torch
from _check_helpers import accepts, rejects

from attention_lab import BlockLayout, reference
from attention_lab.teaching.checks import lesson07 as check

ROOT = Path(__file__).resolve().parent.parent


def _lesson_cell(cell_id: str) -> dict:
    """Run one code cell of lesson 07 (its loop and lazy step) and return the names it defines."""
    cell = next(c for c in nbformat.read(ROOT / "notebooks" / "07_block_sparse_attention.ipynb", as_version=4).cells
                if c.get("id") == cell_id)
    names = {"math": math, "torch": torch, "reference": reference, "print": lambda *args: None}
    exec(compile(cell.source, f"lesson 07, cell {cell_id}", "exec"), names)
    return names


LESSON = _lesson_cell("07-050")  # def blockwise_loop, def lazy_update


def accepted(capsys) -> bool:
    return capsys.readouterr().out.startswith("Correct:")


# ---- merge_blocks ----


def merge_right(m_a, l_a, o_a, m_b, l_b, o_b):
    m = torch.maximum(m_a, m_b)
    w_a, w_b = l_a * torch.exp(m_a - m), l_b * torch.exp(m_b - m)
    return (w_a * o_a + w_b * o_b) / (w_a + w_b)


def merge_via_logsumexp(m_a, l_a, o_a, m_b, l_b, o_b):
    lse_a, lse_b = m_a + l_a.log(), m_b + l_b.log()
    lse = torch.logaddexp(lse_a, lse_b)
    return torch.exp(lse_a - lse) * o_a + torch.exp(lse_b - lse) * o_b


@pytest.mark.parametrize("answer", [merge_right, merge_via_logsumexp])
def test_merge_accepts(answer, capsys):
    check.merge_blocks(answer)
    assert accepted(capsys)


def merge_overflows(m_a, l_a, o_a, m_b, l_b, o_b):
    w_a, w_b = l_a * torch.exp(m_a), l_b * torch.exp(m_b)
    return (w_a * o_a + w_b * o_b) / (w_a + w_b)


@pytest.mark.parametrize(("answer", "match"), [
    (lambda m_a, l_a, o_a, m_b, l_b, o_b: (o_a + o_b) / 2, "do not count equally"),
    (lambda m_a, l_a, o_a, m_b, l_b, o_b: (l_a * o_a + l_b * o_b) / (l_a + l_b), "different shifts"),
    (lambda m_a, l_a, o_a, m_b, l_b, o_b: merge_right(m_a, l_a, o_a, m_b, l_b, o_b) if len(m_a) == 6 else
     torch.zeros(6, 3), r"shape \(1, 5\) for m of shape \(1, 1\)"),
    (merge_overflows, "overflows"),
    (lambda m_a, l_a, o_a, m_b, l_b, o_b: o_a, "weighted sum"),
    (lambda m_a, l_a, o_a, m_b, l_b, o_b: torch.cat([o_a, o_b]), "shape"),
    (lambda *args: 1 / 0, "ZeroDivisionError"),
    (..., "still empty"),
    (None, "define a function"),
])
def test_merge_rejects(answer, match):
    rejects(check.merge_blocks, answer, match=match)


# ---- exposing_input: inputs on which the lazy step goes wrong ----


def jumping_input(values=None):
    q = torch.ones(1, 4, dtype=torch.float64)
    k = torch.cat([torch.zeros(2, 4), torch.full((2, 4), 5.0)]).double()  # block 2 scores 10 above block 1
    v = torch.arange(4.0).double()[:, None] if values is None else values
    return q, k, v


def test_exposing_input_accepts_a_jump_between_blocks(capsys):
    accepts(capsys, check.exposing_input, *jumping_input(), 2)
    q, k, v = jumping_input()
    accepts(capsys, check.exposing_input, q.float().tolist(), k.float(), v.numpy(), 2)  # lists, float32, numpy
    batched = (torch.randn(2, 3, 5, 8), torch.randn(2, 3, 12, 8), torch.randn(2, 3, 12, 2))
    batched[1][..., 6:, :] *= 30  # later keys score far higher
    accepts(capsys, check.exposing_input, *batched, 6)


def test_exposing_input_names_why_an_input_does_not_expose_the_bug():
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(4, 8, generator=generator), torch.randn(40, 8, generator=generator),
               torch.randn(40, 3, generator=generator))
    rejects(check.exposing_input, q, k, v, 64, hint="all your keys fit in one block")
    rejects(check.exposing_input, q, k, v, 16, hint="never moves its shift")
    accepts_ones = jumping_input(torch.ones(4, 1))  # equal values expose it too: acc and l disagree
    check.exposing_input(*accepts_ones, 2)
    rejects(check.exposing_input, *jumping_input(), 2.5, hint="whole number of keys")
    rejects(check.exposing_input, *jumping_input(), 0, hint="whole number of keys")
    rejects(check.exposing_input, torch.ones(1, 3), torch.ones(4, 4), torch.ones(4, 1), 2, hint="same feature size")
    rejects(check.exposing_input, torch.ones(4), torch.ones(4, 4), torch.ones(4, 1), 2, hint="two dimensions")
    q, k, v = jumping_input()
    rejects(check.exposing_input, q, k * float("inf"), v, 2, hint="finite numbers")
    rejects(check.exposing_input, None, k, v, 2, hint="is None")
    rejects(check.exposing_input, "q", k, v, 2, hint="could not be checked|should be a tensor")


# ---- fixed_update: a correct per-block step ----


def lazy_and_right(m, l, acc, s, v_block):  # noqa: E741
    top = s.amax(dim=-1, keepdim=True)
    shift = torch.where(top > m + 4, top, m)
    rescale = torch.exp(m - shift)
    terms = torch.exp(s - shift)
    return shift, l * rescale + terms.sum(dim=-1, keepdim=True), acc * rescale + terms @ v_block


def eager(m, l, acc, s, v_block):  # noqa: E741
    shift = torch.maximum(m, s.amax(dim=-1, keepdim=True))
    terms = torch.exp(s - shift)
    rescale = torch.exp(m - shift)
    return shift, l * rescale + terms.sum(dim=-1, keepdim=True), acc * rescale + terms @ v_block


def eager_float32(m, l, acc, s, v_block):  # noqa: E741 (computes in float32: a loss of precision is a mistake here)
    return tuple(t.double() for t in eager(m.float(), l.float(), acc.float(), s.float(), v_block.float()))


def test_fixed_update_accepts_the_lazy_step_fixed(capsys):
    accepts(capsys, check.fixed_update, lazy_and_right)


def test_fixed_update_asks_for_the_lazy_rule_an_eager_step_or_the_printed_loop_drops():
    """The plain loop the lesson prints moves the shift at every block (eager): pasting its step gives right values
    but another rule, so the exercise (fix the given lazy step) cannot be answered by copying it. This also proves
    that the check's inputs tell the two rules apart (on inputs where the shift never moves, eager would pass)."""
    rejects(check.fixed_update, eager, match="moves the shift every time a block raises the maximum")


def test_a_shape_hint_names_the_shapes_the_step_was_given_not_the_learners():
    def squeezed_l(m, l, acc, s, v_block):  # noqa: E741
        m, l, acc = lazy_and_right(m, l, acc, s, v_block)  # noqa: E741
        return m, l[..., 0], acc

    rejects(check.fixed_update, squeezed_l, match=r"shapes it was given: m and l \(7, 1\), acc \(7, 3\); yours "
                                                   r"returned m \(7, 1\), l \(7,\)")


def test_fixed_update_success_line_states_no_other_answer(capsys):
    check.fixed_update(lazy_and_right)
    out = capsys.readouterr().out
    assert "local" not in out and "global" not in out and "exp(" not in out


def overflowing(m, l, acc, s, v_block):  # noqa: E741  exponentiates raw scores: inf for scores near 1e4
    p = torch.exp(s)
    return m, l + p.sum(dim=-1, keepdim=True), acc + p @ v_block


def first_block_nan(m, l, acc, s, v_block):  # noqa: E741  exp(m_new - m) is inf on the first block
    shift = torch.maximum(m, s.amax(dim=-1, keepdim=True))
    grow = torch.exp(shift - m)
    terms = torch.exp(s - shift)
    return shift, l * grow + terms.sum(dim=-1, keepdim=True), acc * grow + terms @ v_block


def no_rescale_at_all(m, l, acc, s, v_block):  # noqa: E741
    shift = torch.maximum(m, s.amax(dim=-1, keepdim=True))
    terms = torch.exp(s - shift)
    return shift, l + terms.sum(dim=-1, keepdim=True), acc + terms @ v_block


def inverse_factor(m, l, acc, s, v_block):  # noqa: E741  brings the old sums to the new shift with exp(m_new - m)
    block_max = s.amax(dim=-1, keepdim=True)
    shift = torch.where(block_max > m + 4, block_max, m)
    grow = torch.where(torch.isfinite(m), torch.exp(shift - m), torch.zeros_like(m))
    terms = torch.exp(s - shift)
    return shift, l * grow + terms.sum(dim=-1, keepdim=True), acc * grow + terms @ v_block


def only_acc(m, l, acc, s, v_block):  # noqa: E741  rescales acc but not l
    block_max = s.amax(dim=-1, keepdim=True)
    shift = torch.where(block_max > m + 4, block_max, m)
    terms = torch.exp(s - shift)
    return shift, l + terms.sum(dim=-1, keepdim=True), acc * torch.exp(m - shift) + terms @ v_block


@pytest.mark.parametrize(("update", "match"), [
    (LESSON["lazy_update"], "still gives the given step's result"),
    (inverse_factor, "at most 1"),
    (only_acc, "l was summed under the old shift too"),
    (first_block_nan, "on the first block m is -inf"),
    (overflowing, "inf or NaN"),
    (no_rescale_at_all, "one common shift"),
    (lambda m, l_, acc, s, v_block: (m, l_), "three tensors"),
    (lambda m, l_, acc, s, v_block: (m[..., 0], l_, acc), "in the shapes it was given"),
    (lambda *args: 1 / 0, "ZeroDivisionError"),
    (lambda m, l_, acc, s, v_block: s @ v_block.T, "raised RuntimeError|three tensors"),
    (None, "define a function"),
    (3, "define a function"),
])
def test_fixed_update_rejects_with_the_hint_for_the_mistake(update, match):
    rejects(check.fixed_update, update, match=match)


def test_the_checks_hold_the_lessons_own_loop_and_step():
    """exposing_input accepts exactly the inputs on which the lesson's loop with its lazy step (as the lesson's cell
    defines them) is wrong, and fixed_update holds a step to plain attention inside that same loop."""
    loop, lazy = LESSON["blockwise_loop"], LESSON["lazy_update"]
    generator = torch.Generator().manual_seed(1)
    calm = (torch.randn(4, 8, generator=generator).double(), torch.randn(40, 8, generator=generator).double(),
            torch.randn(40, 3, generator=generator).double())
    outcomes = []
    for (q, k, v), block in [(jumping_input(), 2), (calm, 16)]:
        outcomes.append(not torch.allclose(loop(q, k, v, block, lazy), reference.attention(q, k, v)[0]))
        if outcomes[-1]:
            check.exposing_input(q, k, v, block)
        else:
            rejects(check.exposing_input, q, k, v, block, match="never moves its shift")
    assert outcomes == [True, False]  # one input that exposes the lesson's bug, one that does not
    q, k, v = torch.randn(5, 4).double(), torch.randn(11, 4).double(), torch.randn(11, 2).double()
    torch.testing.assert_close(loop(q, k, v, 3, lazy_and_right), reference.attention(q, k, v)[0])


# ---- connected_layout: every pair within 3 layers, at most 5% of the pairs ----


@pytest.mark.parametrize("layout", [
    BlockLayout.local(64) | BlockLayout.global_blocks(64, [0]),
    BlockLayout.global_blocks(64, [0]),
    BlockLayout.global_blocks(64, [5]) | BlockLayout.local(64),
])
def test_connected_layout_accepts_every_design_within_the_budget(capsys, layout):
    accepts(capsys, check.connected_layout, layout)


@pytest.mark.parametrize(("layout", "match"), [
    (BlockLayout.sliding_window(64, neighbours=1) | BlockLayout.global_blocks(64, [0]),
     "at n = 4096 .* over the budget of 5%"),
    (BlockLayout.sliding_window(64, neighbours=1), "only after 63 layers"),
    (BlockLayout.local(64), "never hear from some others"),
    (BlockLayout.strided(64, stride=3), "never hear from some others"),
    (BlockLayout.sliding_window(64, neighbours=1, causal=True) | BlockLayout.global_blocks(64, [0]), "causal part"),
    (BlockLayout.local(32) | BlockLayout.global_blocks(32, [0]), "hold 64 positions"),
    ((BlockLayout.local(64) | BlockLayout.global_blocks(64, [0])).to_dense(4096), "a layout works for every length"),
    (None, "is None"),
])
def test_connected_layout_rejects_with_the_hint_for_the_mistake(layout, match):
    rejects(check.connected_layout, layout, match=match)


def test_connected_layout_tries_both_lengths():
    """A window and a global block stay within 5% at n = 8192 but not at 4096: one length alone would let it pass."""
    wide = BlockLayout.sliding_window(64, neighbours=1) | BlockLayout.global_blocks(64, [0])
    assert 1 - wide.sparsity(8192) <= 0.05 < 1 - wide.sparsity(4096)
    rejects(check.connected_layout, wide, match="at n = 4096")


def test_connected_layout_hints_do_not_name_the_constructors():
    for wrong in (BlockLayout.sliding_window(64, neighbours=1), BlockLayout.local(64),
                  BlockLayout.sliding_window(64, neighbours=1) | BlockLayout.global_blocks(64, [0])):
        with pytest.raises(AssertionError) as error:
            check.connected_layout(wrong)
        assert "global_blocks" not in str(error.value) and "local(" not in str(error.value)


def test_an_error_while_checking_becomes_a_hint():
    class Broken(BlockLayout):
        def sparsity(self, n):
            raise RuntimeError("boom")

    broken = Broken(64, BlockLayout.local(64)._rule, "broken")
    rejects(check.connected_layout, broken, match="could not be checked.*RuntimeError")
