"""Lesson 14 checks accept every right answer and reject common mistakes with their own hint: exercise 1, the
positions a StreamingLLM cache holds; exercise 2, the cache of a stack of local and global layers; exercise 3,
soft-capped weights with a mask."""

from __future__ import annotations

import pytest
import torch
from _check_helpers import accepts, inputs_tried, only_on, rejects
from answers.lesson14 import (
    RIGHT_CAPPED,
    RIGHT_KEPT,
    RIGHT_STACK,
    WRONG_CAPPED,
    WRONG_KEPT,
    WRONG_STACK,
    capped_colleague,
    capped_right,
    kept_filter,
    stack_counted,
    stack_variant,
)

import attention_lab as al
from attention_lab.teaching.checks import NotYet
from attention_lab.teaching.checks import lesson14 as check

# ---- exercise 1: what a StreamingLLM cache holds ----


def test_kept_positions_on_the_example(capsys):
    """t=20, sinks=4, window=8: positions 0-3 stay, and the last 8 of 0 ... 19 are 12 ... 19."""
    check.kept_positions(kept_filter)
    assert "[0, 1, 2, 3, 12, 13, 14, 15, 16, 17, 18, 19]" in capsys.readouterr().out


@pytest.mark.parametrize("label, fn", RIGHT_KEPT)
def test_kept_positions_accepts_every_form(capsys, label, fn):
    accepts(capsys, check.kept_positions, fn)


@pytest.mark.parametrize("label, fn, hint", [w for w in WRONG_KEPT if w[2] != "<the check's general hint>"])
def test_kept_positions_rejects_each_mistake_with_its_hint(label, fn, hint):
    rejects(check.kept_positions, fn, hint=hint)


def test_kept_positions_inputs_agree_with_the_cache_and_tell_every_mistake_apart():
    tried = inputs_tried(check.kept_positions, kept_filter)
    assert tried[0] == (20, 4, 8)
    for t, sinks, window in tried:  # the right lists are the cache's own
        cache = al.SinkKVCache(1, 1, sinks, window, 1)
        for _ in range(t):
            cache.append(torch.zeros(1, 1, 1, 1), torch.zeros(1, 1, 1, 1))
        assert sorted(cache.positions.tolist()) == kept_filter(t, sinks, window)
    wrong = [fn for _, fn, _ in WRONG_KEPT[:6]]
    for fn in wrong:  # each mistake differs from the right answer on the example, or (the two mistakes of a cache
        # not yet full) on an input where fewer than sinks + window positions were appended
        if fn.__name__ in ("kept_twice", "kept_early_sinks"):
            assert any(list(fn(*case)) != kept_filter(*case) for case in tried if case[0] < case[1] + case[2])
        else:
            assert list(fn(*tried[0])) != kept_filter(*tried[0])
    for a in wrong:  # and from every other mistake on some input
        for b in wrong:
            if a is not b:
                assert any(list(a(*case)) != list(b(*case)) for case in tried)


def test_kept_positions_fails_an_answer_right_on_the_example_only():
    for _, fn, _ in WRONG_KEPT[:6]:
        if fn(20, 4, 8) == kept_filter(20, 4, 8):
            continue  # a mistake of the cache not yet full: the same list on the example
        fake = only_on((20, 4, 8), kept_filter, fn)  # right on the example, wrong elsewhere
        rejects(check.kept_positions, fake, match="right for t=20, sinks=4, window=8 but not")


def test_kept_positions_turns_errors_and_stubs_into_hints():
    def broken(t, sinks, window):
        return list(range(t))[t + window]

    rejects(check.kept_positions, broken, match="IndexError")
    rejects(check.kept_positions, ..., match="still empty")

    def stub(t, sinks, window):
        raise NotImplementedError("write the body of this function")

    rejects(check.kept_positions, stub, match="NotImplementedError|write the body")


# ---- exercise 2: stack_cache_bytes ----


def test_stack_cache_bytes_by_hand_on_the_example(capsys):
    """Gemma 2 9B: 21 global layers keep 8,192 positions, 21 local ones 4,096; 2 x 8 x 256 x 2 bytes per position
    and layer: 8,192 bytes, so 8,192 x (21 x 8,192 + 21 x 4,096) = 2,113,929,216 bytes = 1.97 GiB (all global:
    8,192 x 42 x 8,192 bytes = 2.62 GiB)."""
    assert stack_counted(42, 1, 4096, 8192, 8, 256, 2) == 8192 * (21 * 8192 + 21 * 4096) == 2_113_929_216
    check.stack_cache_bytes(stack_counted)
    out = capsys.readouterr().out
    assert out.startswith("Correct") and "1.97 GiB" in out and "2.62 GiB" in out


@pytest.mark.parametrize("label, right", RIGHT_STACK)
def test_stack_cache_bytes_accepts_every_form(capsys, label, right):
    accepts(capsys, check.stack_cache_bytes, right)


@pytest.mark.parametrize("label, wrong, hint", WRONG_STACK)
def test_stack_cache_bytes_names_each_mistake(label, wrong, hint):
    if hint.startswith("<"):  # the general hint
        with pytest.raises(NotYet):
            check.stack_cache_bytes(wrong)
        return
    rejects(check.stack_cache_bytes, wrong, match=hint)


def test_the_wrong_formulas_differ_from_the_right_one_and_from_each_other():
    cases = inputs_tried(check.stack_cache_bytes, stack_counted)
    results = [tuple(stack_counted(*case) for case in cases)]
    for options in (dict(every="global"), dict(every="local"), dict(cap=False), dict(first_global=True),
                    dict(whole_groups=True), dict(pair=1), dict(bits=True)):
        results.append(tuple(stack_variant(**options)(*case) for case in cases))
    assert len(set(results)) == len(results)


def test_an_answer_right_on_the_example_only_is_told_so():
    example = inputs_tried(check.stack_cache_bytes, stack_counted)[0]
    right_on_example = only_on(example, stack_counted, stack_variant(first_global=True, whole_groups=True))
    rejects(check.stack_cache_bytes, right_on_example, match="right for the exercise's sizes")


def test_errors_become_hints():
    rejects(check.stack_cache_bytes, lambda *a: 1 / 0, match="ZeroDivisionError")
    rejects(check.stack_cache_bytes, ..., match="still empty")


# ---- exercise 3: soft-capping and a mask ----


@pytest.mark.parametrize("label, fn", RIGHT_CAPPED)
def test_capped_weights_accepts_every_form(capsys, label, fn):
    accepts(capsys, check.capped_weights, fn)


@pytest.mark.parametrize("label, fn, hint", [w for w in WRONG_CAPPED if w[2] != "<the check's general hint>"])
def test_capped_weights_rejects_each_mistake_with_its_hint(label, fn, hint):
    rejects(check.capped_weights, fn, hint=hint)


def test_capped_weights_tries_several_shapes_caps_and_dtypes_and_the_colleague_differs_on_the_example():
    tried = inputs_tried(check.capped_weights, capped_right)
    assert len({tuple(s.shape) for s, _, _ in tried}) >= 3 and len({c for _, _, c in tried}) >= 3
    assert {s.dtype for s, _, _ in tried} == {torch.float32, torch.float64}
    assert any(s.shape[-1] != s.shape[-2] for s, _, _ in tried)
    for _, mask, _ in tried:
        assert mask.any(-1).all() and not mask.all()  # every row keeps a key; some key is masked
    scores, mask, cap = tried[0]
    leaked = capped_colleague(scores, mask, cap)[~mask.expand_as(scores)]
    assert leaked.max() > 1e-3  # the bug shows on the example: masked keys get weight


def test_capped_weights_turns_errors_into_hints():
    rejects(check.capped_weights, lambda s, m, c: s @ s, match="could not be checked|raised")
    rejects(check.capped_weights, ..., match="still empty")
