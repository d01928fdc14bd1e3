"""Lesson 07 checks accept the right answers (in equivalent forms) and reject common mistakes with their hint."""

from __future__ import annotations

import pytest
import torch
from _check_helpers import rejects

from attention_lab import BlockLayout
from attention_lab.teaching.checks import lesson07 as check


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
    (merge_overflows, "overflows"),
    (lambda m_a, l_a, o_a, m_b, l_b, o_b: o_a, "weighted sum"),
    (lambda m_a, l_a, o_a, m_b, l_b, o_b: torch.cat([o_a, o_b]), "shape"),
    (lambda *args: 1 / 0, "ZeroDivisionError"),
    (..., "define a function"),
    (None, "define a function"),
])
def test_merge_rejects(answer, match):
    rejects(check.merge_blocks, answer, match=match)


# ---- dilated_layout ----


def test_dilated_accepts(capsys):
    check.dilated_layout(BlockLayout.strided(16, 4))
    assert accepted(capsys)
    check.dilated_layout(BlockLayout.strided(8, 3), block_size=8, stride=3)
    assert accepted(capsys)


def test_dilated_accepts_an_equivalent_union(capsys):
    # the diagonal is already in strided(16, 4): adding it again changes nothing
    check.dilated_layout(BlockLayout.strided(16, 4) | BlockLayout.local(16))
    assert accepted(capsys)


@pytest.mark.parametrize(("answer", "match"), [
    (BlockLayout.strided(16, 3), "wrong number of blocks"),
    (BlockLayout.strided(16, 5), "wrong number of blocks"),
    (BlockLayout.strided(8, 4), "16 positions"),
    (BlockLayout.strided(16, 4) & BlockLayout.causal(16), "both directions"),
    (BlockLayout.sliding_window(16, 4), "with gaps"),
    (BlockLayout.global_blocks(16, [0]), "its own key block"),
    (BlockLayout.strided(16, 4).to_dense(64), "a bool matrix works"),
    (None, "still empty"),
])
def test_dilated_rejects(answer, match):
    rejects(check.dilated_layout, answer, match=match)


# ---- predicted_sparsity ----


def test_sparsity_accepts(capsys):
    layout = BlockLayout.strided(16, 4)
    check.predicted_sparsity(0.75, layout, 256)
    assert accepted(capsys)
    check.predicted_sparsity(torch.tensor(0.75), layout, 256)
    assert accepted(capsys)
    causal = BlockLayout.sliding_window(16, 1, causal=True)
    check.predicted_sparsity(causal.sparsity(200), causal, 200)
    assert accepted(capsys)


@pytest.mark.parametrize(("answer", "match"), [
    (0.25, "share of pairs computed"),
    (75, "between 0 and 1"),
    (0.5, "divide by n \\* n"),
    ("0.75", "one number"),
    (None, "still empty"),
])
def test_sparsity_rejects(answer, match):
    rejects(check.predicted_sparsity, answer, BlockLayout.strided(16, 4), 256, match=match)


def test_sparsity_rejects_counting_blocks():
    layout = BlockLayout.sliding_window(16, 1, causal=True)
    block_share = 1 - layout.block_mask(200).double().mean().item()
    rejects(check.predicted_sparsity, block_share, layout, 200, match="counts block pairs")
