"""Lesson 05's checks: what the corpus (tests/answers/lesson05.py) cannot show by one answer at a time. What each check
expects is what the library and PyTorch compute (the fused split feeds the library's heads, the FLOP rule is
FlopCounterMode's count, the head weights are nn.MultiheadAttention's); the example numbers keep the mistakes apart
(no two FLOP formulas agree on the prompt's example, and 1/d differs from 1/sqrt(e) on the first head case); the
checks leave the lesson's random numbers alone and try several sizes."""

import math
import re
from pathlib import Path

import nbformat
import pytest
import torch
from _check_helpers import accepts, rejects
from einops import rearrange
from torch.utils.flop_counter import FlopCounterMode

import attention_lab as al
from attention_lab.teaching.checks import lesson05


def test_the_fused_split_gives_the_heads_of_the_library_layer():
    e, h = 12, 3
    mha = al.MultiHeadAttention(e, h)
    x = torch.randn(2, 5, e)
    fused = torch.cat([mha.q_proj(x), mha.k_proj(x), mha.v_proj(x)], dim=-1)  # (b, n, 3e): q, k, v blocks
    q, k, v = rearrange(fused, "b n (three h d) -> three b h n d", three=3, h=h)  # what the check expects
    heads = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(e // h), dim=-1) @ v  # (b, h, n, d)
    torch.testing.assert_close(mha.out_proj(rearrange(heads, "b h n d -> b n (h d)")), mha(x)[0])


@pytest.mark.parametrize("sizes", lesson05._CROSS_SIZES)
def test_the_flop_rule_is_what_flopcountermode_counts(sizes):
    i, j, e, h = sizes
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        al.MultiHeadAttention(e, h)(torch.zeros(1, i, e), torch.zeros(1, j, e), need_weights=True)
    assert counter.get_total_flops() == 4 * i * e * e + 4 * j * e * e + 4 * i * j * e


def test_no_two_flop_mistakes_agree_on_the_prompts_example():
    example = lesson05._CROSS_SIZES[0]
    assert example == (10, 50, 64, 8)  # the numbers exercise 2's prompt gives
    values = [formula(*example) for formula, _ in lesson05._FLOP_MISTAKES]
    right = 4 * 10 * 64 * 64 + 4 * 50 * 64 * 64 + 4 * 10 * 50 * 64
    assert right not in values and len(set(values)) == len(values)
    every = [tuple(formula(*sizes) for sizes in lesson05._CROSS_SIZES) for formula, _ in lesson05._FLOP_MISTAKES]
    assert len(set(every)) == len(every)


def test_the_first_head_case_keeps_the_scales_apart():
    e, h = lesson05._HEAD_CASES[0][:2]
    d = e // h
    assert len({1 / d, 1 / math.sqrt(e), 1 / math.sqrt(d), 1.0}) == 4


@pytest.mark.parametrize("case", lesson05._HEAD_CASES)
def test_the_expected_head_weights_are_nn_multiheadattentions(case):
    e, h, head, b, n, dtype = case
    module, x = lesson05._packed_module(e, h, b, n, seed=1)
    module, x = module.to(dtype), x.to(dtype)
    w, c = module.in_proj_weight.detach(), module.in_proj_bias.detach()
    with torch.no_grad():
        torch.testing.assert_close(lesson05._head_weights(w, c, x, h, head),
                                   module(x, x, x, need_weights=True, average_attn_weights=False)[1][:, head])


def test_the_packed_head_weights_are_checked_in_both_dtypes(capsys):
    seen = []

    def head_weights(w, c, x, num_heads, head):
        seen.append(x.dtype)
        return lesson05._head_weights(w, c, x, num_heads, head)

    accepts(capsys, lesson05.head_weights_from_packed, head_weights)
    assert {torch.float32, torch.float64} <= set(seen) and len(seen) >= 3


def test_a_measured_flop_count_is_refused():
    def measured(n_queries, n_keys, embed_dim, num_heads):
        with FlopCounterMode(display=False) as counter, torch.no_grad():
            al.MultiHeadAttention(embed_dim, num_heads)(torch.zeros(1, n_queries, embed_dim),
                                                        torch.zeros(1, n_keys, embed_dim), need_weights=True)
        return counter.get_total_flops()

    rejects(lesson05.cross_attention_flops, measured, hint="multiplies matrices: the exercise asks you to predict")


def test_checks_leave_the_lessons_random_numbers_alone():
    state = torch.random.get_rng_state()
    with pytest.raises(AssertionError):
        lesson05.head_weights_from_packed(lambda w, c, x, num_heads, head: x)
    assert torch.equal(torch.random.get_rng_state(), state)


def test_hints_name_the_learners_own_function_and_each_stub_gets_a_hint():
    def my_split(qkv, num_heads):
        return None

    rejects(lesson05.fused_qkv_heads, my_split, hint="your my_split returned None")

    def stub(*args):
        raise NotImplementedError("replace this line with your answer, then run the check cell below")

    for check in (lesson05.fused_qkv_heads, lesson05.cross_attention_flops, lesson05.head_weights_from_packed):
        rejects(check, stub, hint="your stub still raises NotImplementedError")


def test_the_lessons_example_for_exercise_3_is_the_checks_first_case():
    lesson = Path(__file__).resolve().parents[1] / "notebooks" / "05_multi_head_attention.ipynb"
    code = "\n".join(cell.source for cell in nbformat.read(lesson, as_version=4).cells if cell.cell_type == "code")
    e, h = map(int, re.search(r"\btorch_mha = nn\.MultiheadAttention\((\d+), (\d+)", code).groups())
    assert (e, h) == lesson05._HEAD_CASES[0][:2]  # so the example, like the check, keeps 1/d and 1/sqrt(e) apart
