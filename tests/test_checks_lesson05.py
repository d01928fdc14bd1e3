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
from _check_helpers import accepts, inputs_tried, only_on, rejects
from answers import lesson05 as corpus
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


CROSS_SIZES = inputs_tried(lesson05.cross_attention_flops, corpus.RIGHT_FLOPS)  # (i, j, e, h) per case
HEAD_CASES = inputs_tried(lesson05.head_weights_from_packed, corpus.head_right)  # (w, c, x, num_heads, head)


@pytest.mark.parametrize("sizes", CROSS_SIZES)
def test_the_flop_rule_is_what_flopcountermode_counts(sizes):
    i, j, e, h = sizes
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        al.MultiHeadAttention(e, h)(torch.zeros(1, i, e), torch.zeros(1, j, e), need_weights=True)
    assert counter.get_total_flops() == 4 * i * e * e + 4 * j * e * e + 4 * i * j * e


def test_every_flop_mistake_is_wrong_on_the_prompts_example():
    """Each wrong formula of the corpus, given on the prompt's example only (right elsewhere), is refused. (That each
    mistake gets its own hint on the check's cases is the corpus's test, tests/answers/lesson05.py.)"""
    example = CROSS_SIZES[0]
    assert example == (10, 50, 64, 8)  # the numbers exercise 2's prompt gives

    def on_example(formula):
        try:
            return formula(*example)
        except Exception:  # the corpus's stubs and broken functions: not formulas
            return None

    wrong = [a.answer for a in corpus.ATTEMPTS if a.exercise == "05/2" and not a.right and callable(a.answer)
             and on_example(a.answer) not in (None, corpus.RIGHT_FLOPS(*example))]  # not typed in from the example
    assert len(wrong) >= 12
    for formula in wrong:
        rejects(lesson05.cross_attention_flops, only_on(example, formula, corpus.RIGHT_FLOPS), match="")


def test_the_first_head_case_keeps_the_scales_apart():
    _, _, x, h, _ = HEAD_CASES[0]
    e = x.shape[-1]
    d = e // h
    assert len({1 / d, 1 / math.sqrt(e), 1 / math.sqrt(d), 1.0}) == 4


def test_the_expected_head_weights_are_nn_multiheadattentions(capsys):
    """On every case the check tries, nn.MultiheadAttention built from the packed tensors gives what it expects."""
    accepts(capsys, lesson05.head_weights_from_packed, corpus.head_via_torch_module)


def test_the_packed_head_weights_are_checked_in_both_dtypes():
    seen = [x.dtype for _, _, x, _, _ in HEAD_CASES]
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
    # so the example, like the check, keeps 1/d and 1/sqrt(e) apart
    assert (e, h) == (HEAD_CASES[0][2].shape[-1], HEAD_CASES[0][3])
