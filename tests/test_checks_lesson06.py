"""Lesson 06 checks accept the right answers (in every equivalent form), reject common mistakes with their own hint,
turn an error while checking into a hint, and keep other exercises' answers to themselves."""

from __future__ import annotations

import pytest
import torch
from _check_helpers import rejects

from attention_lab.measure.cost import attention_memory_bytes
from attention_lab.teaching.checks import lesson06 as check

# ---- score_count ----


@pytest.mark.parametrize("answer", [8 * 1024 * 1024, 8 * 1024**2 * 1.0, torch.tensor(8 * 1024 * 1024)])
def test_score_count_accepts(answer, capsys):
    check.score_count(answer, n=1024, num_heads=8)
    assert capsys.readouterr().out.startswith("Correct:")


def test_score_count_the_seed_number(capsys):
    check.score_count(262_144, n=512)
    assert "262,144" in capsys.readouterr().out


@pytest.mark.parametrize(("answer", "match"), [
    (1024 * 1024, "one head's count"),
    (8 * 1024 * 1023 // 2, "ordered pairs"),
    (8 * 1024 * 1023, "ordered pairs"),
    (8 * 1024, "linearly"),
    (12345, "entries of the"),
    (None, "still empty"),
    ("many", "single number"),
    (10.5, "whole number"),
])
def test_score_count_rejects(answer, match):
    rejects(check.score_count, answer, n=1024, num_heads=8, match=match)


# ---- flop_count ----


def test_flop_count_accepts(capsys):
    check.flop_count(4 * 512 * 512 * 64 * 8, n=512, head_dim=64, num_heads=8)
    assert capsys.readouterr().out.startswith("Correct:")


@pytest.mark.parametrize(("answer", "match"), [
    (2 * 512 * 512 * 64 * 8, "one of them is missing"),
    (512 * 512 * 64 * 8, "two FLOPs per multiply-add"),
    (4 * 512 * 512 * 64, "number of heads"),
    (7, "dot product of length d"),
])
def test_flop_count_rejects(answer, match):
    rejects(check.flop_count, answer, n=512, head_dim=64, num_heads=8, match=match)


# ---- predicted_peak ----


def test_predicted_peak_accepts_and_measures(capsys):
    n, d, h = 384, 32, 2
    answer = 2 * h * n * n * 4 + h * n * d * 4
    check.predicted_peak(answer, n=n, head_dim=d, num_heads=h)
    out = capsys.readouterr().out
    assert out.startswith("Correct:")
    assert out.count("2.34 MiB") == 2  # predicted and measured agree


@pytest.mark.parametrize(("wrong", "match"), [
    (lambda m: m.scores + m.output, "two n x n matrices at once"),
    (lambda m: m.scores, "two n x n matrices at once"),
    (lambda m: m.naive_peak // 4, "4 bytes"),
    (lambda m: m.scores + m.weights, "the output b"),
    (lambda m: m.total, "existed before the call"),
    (lambda m: 1, "list the tensors alive"),
])
def test_predicted_peak_rejects(wrong, match):
    m = attention_memory_bytes(384, head_dim=32, num_heads=2)
    rejects(check.predicted_peak, wrong(m), n=384, head_dim=32, num_heads=2, match=match)


def test_flop_count_accepts_the_exact_count_and_names_the_convention(capsys):
    from attention_lab.teaching.checks import lesson06

    lesson06.flop_count(2 * 8 * 1024 * 1024 * (2 * 64 - 1), n=1024, head_dim=64, num_heads=8)
    assert "2 FLOPs per multiply-add" in capsys.readouterr().out


# ---- cross-attention counts: i != j ----


def test_cross_attention_counts_accept_every_form(capsys):
    check.score_count(8 * 256 * 1024, n=256, n_keys=1024, num_heads=8)
    check.score_count(torch.tensor(8.0 * 256 * 1024), n=256, n_keys=1024, num_heads=8)
    check.flop_count(8 * 2 * (2 * 256 * 1024 * 64), n=256, n_keys=1024, head_dim=64, num_heads=8)
    out = capsys.readouterr().out.splitlines()
    assert all(line.startswith("Correct:") for line in out) and len(out) == 3
    assert "itself included" not in out[0]  # a query of the decoder is not one of the encoder's keys


@pytest.mark.parametrize(("answer", "match"), [
    (8 * 256 * 256, "different sequences"),
    (8 * 1024 * 1024, "different sequences"),
    (256 * 1024, "one head's count"),
    (8 * (256 + 1024), "linearly"),
    (3, "entries of the"),
])
def test_cross_attention_scores_reject(answer, match):
    rejects(check.score_count, answer, n=256, n_keys=1024, num_heads=8, match=match)


@pytest.mark.parametrize(("answer", "match"), [
    (4 * 1024 * 1024 * 64 * 8, "different sequences"),
    (2 * 256 * 1024 * 64 * 8, "one of them is missing"),
    (4 * 256 * 1024 * 64, "number of heads"),
])
def test_cross_attention_flops_reject(answer, match):
    rejects(check.flop_count, answer, n=256, n_keys=1024, head_dim=64, num_heads=8, match=match)


# ---- predicted_peak for a batch in float64 ----


def test_predicted_peak_for_a_float64_batch_is_measured(capsys):
    m = attention_memory_bytes(96, head_dim=8, num_heads=2, batch=3, dtype=torch.float64)
    check.predicted_peak(m.scores + m.weights + m.output, n=96, head_dim=8, num_heads=2, batch=3,
                         dtype=torch.float64)
    out = capsys.readouterr().out
    assert out.startswith("Correct:") and out.count("900.00 KiB") == 2  # predicted and measured agree


@pytest.mark.parametrize(("wrong", "match"), [
    (lambda m: m.naive_peak // 3, "one sequence's peak"),
    (lambda m: m.naive_peak // 2, "4 bytes a number; torch.float64 takes 8 bytes"),
    (lambda m: m.naive_peak // 8, "a torch.float64 value takes 8 bytes"),
    (lambda m: m.scores + m.weights, "the output b"),
])
def test_predicted_peak_for_a_float64_batch_rejects(wrong, match):
    m = attention_memory_bytes(96, head_dim=8, num_heads=2, batch=3, dtype=torch.float64)
    rejects(check.predicted_peak, wrong(m), n=96, head_dim=8, num_heads=2, batch=3, dtype=torch.float64,
            match=match)


def test_predicted_peak_turns_a_bad_dtype_into_a_hint():
    rejects(check.predicted_peak, 10, n=8, head_dim=4, dtype="float64", match="could not be checked")


# ---- largest_batch ----

BATCH = {"n": 1024, "budget_bytes": 4 * 2**30, "head_dim": 128, "num_heads": 16, "layers": 12}


def test_largest_batch_accepts_the_exact_boundary(capsys):
    m = attention_memory_bytes(1024, head_dim=128, num_heads=16)
    per_sequence = m.scores + m.weights + m.output
    assert 30 * per_sequence <= 4 * 2**30 < 31 * per_sequence
    check.largest_batch(30, **BATCH)
    check.largest_batch(30.0, **BATCH)
    check.largest_batch(torch.tensor(30), **BATCH)
    out = capsys.readouterr().out.splitlines()
    assert all(line.startswith("Correct:") for line in out) and f"{30 * per_sequence:,} bytes" in out[0]


@pytest.mark.parametrize(("answer", "match"), [
    (31, "round down"),
    (32, "leaves out the output"),
    (56, "one n x n matrix per head"),
    (2, "one after another"),
    (481, "every head has its own"),
    (120, "4 bytes"),
    (40, "more than the budget"),
    (20, "a larger one fits too"),
    (0, "at least one sequence"),
    (30.5, "whole number"),
    ("30", "single number"),
])
def test_largest_batch_rejects_with_the_hint_for_the_mistake(answer, match):
    rejects(check.largest_batch, answer, **BATCH, match=match)


def test_largest_batch_success_line_states_no_other_exercise_answer(capsys):
    check.largest_batch(30, **BATCH)
    out = capsys.readouterr().out
    assert "MiB" not in out and "FLOP" not in out


def test_predicted_peak_leaves_the_global_random_numbers_alone():
    m = attention_memory_bytes(64, head_dim=8)
    torch.manual_seed(5)
    before = torch.rand(3)
    torch.manual_seed(5)
    check.predicted_peak(m.scores + m.weights + m.output, n=64, head_dim=8)
    assert torch.equal(torch.rand(3), before)
