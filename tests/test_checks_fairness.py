"""Fairness of exercise checks: wrong answers that used to pass now fail, correct ones still pass, hints name the
concept without spelling out the solution code, and an error in the learner's code becomes a hint."""

import pytest
import torch
from _check_helpers import accepts

from attention_lab.teaching.checks import lesson00, lesson01, lesson02, lesson07


def hint_of(check, *args, **kwargs) -> str:
    with pytest.raises(AssertionError, match="^Not yet: ") as error:
        check(*args, **kwargs)
    return str(error.value)


# --- int() truncation let non-integers pass ----------------------------------------------------------

def test_weights_shape_refuses_fractions_and_strings_with_a_hint(capsys):
    assert "whole number" in hint_of(lesson00.weights_shape, (7.5, 7), n_tokens=7)
    assert "tuple of integers" in hint_of(lesson00.weights_shape, "7x7", n_tokens=7)  # was a ValueError
    assert "tuple of integers" in hint_of(lesson00.weights_shape, "77", n_tokens=7)  # was read as (7, 7)
    accepts(capsys, lesson00.weights_shape, (7.0, 7.0), n_tokens=7)
    accepts(capsys, lesson00.weights_shape, torch.tensor([7, 7]), n_tokens=7)


def test_a_token_index_that_int_would_truncate_is_refused(capsys):
    weights = torch.softmax(torch.randn(5, 5, generator=torch.Generator().manual_seed(0)) * 3, dim=-1)
    tokens = list("abcde")
    best = int(weights[:, 2].argmax())
    assert "whole number" in hint_of(lesson00.attends_most_to, best + 0.6, weights, key=2, tokens=tokens)
    accepts(capsys, lesson00.attends_most_to, float(best), weights, key=2, tokens=tokens)


# --- a guarded check turns an error into a hint (tests/test_checks_guarded.py: every check is guarded) ---------

def test_a_guarded_check_turns_an_error_in_the_answer_into_a_hint():
    weights = torch.softmax(torch.randn(4, 4), dim=-1)
    message = hint_of(lesson00.attention_received, object(), weights)  # not a tensor at all
    assert "should be a tensor" in message


def test_an_error_raised_inside_the_learners_function_becomes_a_hint():
    def broken(q, k, v):
        return q @ k  # (i, d) @ (j, d): fails unless d == j

    message = hint_of(lesson01.fixed_attend, broken)
    assert "your broken raised RuntimeError" in message  # named by its own name
    message = hint_of(lesson02.stable_softmax, lambda x: x - x.max(-1))  # .max(dim) without .values
    assert "comes back as a pair" in message
    message = hint_of(lesson02.stable_softmax, lambda x: x - x.max(-1).values)  # no keepdim
    assert "lost its axis" in message


def test_the_stub_of_a_function_exercise_gets_a_hint_not_a_traceback():
    def stub(*args):
        raise NotImplementedError("replace this line with your answer, then run the check cell below")

    for check in (lesson01.fixed_attend, lesson02.stable_softmax, lesson02.fixed_attention):  # 03-05: their own tests
        assert "still raises NotImplementedError" in hint_of(check, stub)


# --- lesson 07: float32 answers are right answers --------------------------------------------------------

def _merge_in_float32(m_a, l_a, o_a, m_b, l_b, o_b):
    m_a, l_a, o_a, m_b, l_b, o_b = (t.float() for t in (m_a, l_a, o_a, m_b, l_b, o_b))
    m = torch.maximum(m_a, m_b)
    w_a, w_b = l_a * torch.exp(m_a - m), l_b * torch.exp(m_b - m)
    return (w_a * o_a + w_b * o_b) / (w_a + w_b)


def test_merge_blocks_accepts_a_correct_float32_merge(capsys):
    accepts(capsys, lesson07.merge_blocks, _merge_in_float32)  # was rejected: atol 1e-9 is float64-only


def test_merge_blocks_fallback_does_not_spell_out_the_formula():
    message = hint_of(lesson07.merge_blocks, lambda m_a, l_a, o_a, m_b, l_b, o_b: o_a)
    assert "weighted sum" in message and "exp(m_a - m)" not in message and "l_a exp" not in message
