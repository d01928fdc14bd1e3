"""Fairness of exercise checks (issue 8): wrong answers that used to pass now fail, correct ones still pass,
and hints name the concept without spelling out the solution code."""

import pytest
import torch
from _check_helpers import accepts

import attention_lab as al
from attention_lab.teaching.checks import lesson00, lesson03, lesson04, lesson07


def hint_of(check, *args, **kwargs) -> str:
    with pytest.raises(AssertionError, match="^Not yet. Hint: ") as error:
        check(*args, **kwargs)
    return str(error.value)


# --- int() truncation let non-integers pass ----------------------------------------------------------

def test_window_for_kernel_refuses_a_fraction_that_truncates_to_the_answer(capsys):
    assert "whole number" in hint_of(lesson03.window_for_kernel, 4.7, kernel=7)
    assert "whole number" in hint_of(lesson03.window_for_kernel, torch.tensor(4.5), kernel=7)
    accepts(capsys, lesson03.window_for_kernel, 4.0, kernel=7)
    accepts(capsys, lesson03.window_for_kernel, "4", kernel=7)


def test_weights_shape_refuses_fractions_and_strings_with_a_hint(capsys):
    assert "whole numbers" in hint_of(lesson00.weights_shape, (7.5, 7), n_tokens=7)
    assert "tuple of integers" in hint_of(lesson00.weights_shape, "7x7", n_tokens=7)  # was a ValueError
    assert "tuple of integers" in hint_of(lesson00.weights_shape, "77", n_tokens=7)  # was read as (7, 7)
    accepts(capsys, lesson00.weights_shape, (7.0, 7.0), n_tokens=7)
    accepts(capsys, lesson00.weights_shape, torch.tensor([7, 7]), n_tokens=7)


def test_graph_mask_names_the_additive_convention_and_keeps_its_recipe_to_itself():
    edges = [(0, 1), (1, 2), (3, 4)]
    good = torch.eye(5, dtype=torch.bool)
    for a, b in edges:
        good[a, b] = good[b, a] = True
    additive = torch.zeros(5, 5).masked_fill(~good, float("-inf"))
    assert "additive float mask" in hint_of(lesson03.graph_mask, additive, edges, 5)
    scrambled = good.roll(1, dims=0)
    message = hint_of(lesson03.graph_mask, scrambled, edges, 5)
    assert "torch.eye" not in message and "[a, b]" not in message


# --- lesson 04: mistakes with their own hint, fallbacks that do not hand out the code ------------------

LENGTHS, N = [5, 3], 5


def _decoder_masks():
    causal = al.causal_mask(N)  # (i, j)
    keys = al.as_key_mask(al.padding_mask(LENGTHS, N))  # (b, 1, 1, j)
    return causal, keys


def test_causal_and_padding_names_the_inverted_padding_part():
    causal, keys = _decoder_masks()
    assert "padding part is inverted" in hint_of(lesson04.causal_and_padding, causal & ~keys, LENGTHS, N)


def test_causal_and_padding_explains_why_padded_queries_are_not_masked():
    causal, keys = _decoder_masks()
    queries = al.padding_mask(LENGTHS, N)[:, None, :, None]  # (b, 1, i, 1)
    message = hint_of(lesson04.causal_and_padding, causal & keys & queries, LENGTHS, N)
    assert "padding removes keys, not queries" in message


def test_causal_and_padding_fallback_does_not_spell_out_the_solution(capsys):
    causal, keys = _decoder_masks()
    wrong = causal & keys.transpose(-2, -1)  # padding applied along the wrong axis only
    message = hint_of(lesson04.causal_and_padding, wrong, LENGTHS, N)
    for code in ("causal_mask(", "padding_mask(", "as_key_mask(", "&"):
        assert code not in message
    accepts(capsys, lesson04.causal_and_padding, causal & keys, LENGTHS, N)


def test_causal_by_hand_and_padding_fallbacks_do_not_spell_out_the_solution():
    causal_hint = hint_of(lesson04.causal_by_hand, torch.ones(6, 6, dtype=torch.bool), 6)
    assert "triu(diagonal=1)" not in causal_hint and "torch.ones" not in causal_hint
    wrong = torch.tensor([[True, False, True, False, False]] * 3)
    padding_hint = hint_of(lesson04.padding_from_lengths, wrong, [4, 2, 0], 5)
    assert "arange" not in padding_hint and "[:, None]" not in padding_hint
    assert "p < lengths[b]" in padding_hint


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
