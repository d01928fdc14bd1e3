"""Lesson 14 checks accept every right answer and reject common mistakes with their own hint (exercise 2, helper
B's part: the cache of a stack of local and global layers)."""

from __future__ import annotations

import pytest
from _check_helpers import accepts, inputs_tried, only_on, rejects
from answers.lesson14 import RIGHT_STACK, WRONG_STACK, stack_counted, stack_variant

from attention_lab.teaching.checks import NotYet
from attention_lab.teaching.checks import lesson14 as check

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
