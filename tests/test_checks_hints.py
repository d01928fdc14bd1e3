"""Hints name only the mistake they can prove from the answer, else stay general (issue 34, part 3), and one rule
for ready-made routes: where the exercise asks for the arithmetic a measured count is refused with one hint, and
where it asks for a bool mask a 0/1 mask is refused. Each wrong answer class below, with the hint it gets."""

import math

import pytest
import torch
from _check_helpers import accepts, inputs_tried, rejects
from answers import lesson05 as corpus05
from answers import lesson08 as corpus08
from answers import lesson09 as corpus09
from torch.utils.flop_counter import FlopCounterMode

import attention_lab as al
from attention_lab.teaching.checks import NotYet, lesson03, lesson05, lesson06, lesson08, lesson09, lesson10, lesson11


def hint_of(check, *args, **kwargs) -> str:
    with pytest.raises(NotYet) as error:
        check(*args, **kwargs)
    return str(error.value)


# ---- "gives the same number when X doubles": from the example only when the answer proves it (06/2, 10/2, 11/1) ----

def peak(batch, heads, n, head_dim, chunk, item_bytes):  # 06/2's right formula
    c = min(chunk, n)
    return batch * heads * item_bytes * (n * head_dim + 2 * c * n + c * head_dim)


def state(layers, heads, features, value_dim, size):  # 10/2's
    return layers * heads * features * (value_dim + 1) * size


def cache(layers, kv_heads, head_dim, tokens, batch, per_value, window):  # 11/1's
    return 2 * layers * kv_heads * head_dim * (tokens if window is None else min(tokens, window)) * batch * per_value


WRONG_ARGUMENT = [  # an argument used in another's place: it is ignored, but no number of the example is in it
    (lesson06.chunked_peak, lambda b, h, n, d, c, s: peak(h, h, n, d, c, s), "batch"),
    (lesson10.recurrent_state_bytes, lambda layers, heads, m, dv, size: state(heads, heads, m, dv, size), "layers"),
    (lesson11.cache_bytes, lambda layers, kv, d, t, b, s, w: cache(kv, kv, d, t, b, s, w), "num_layers"),
]
WRITTEN_IN = [  # the example's value of one argument, written in: the answer is right for it on every size
    (lesson06.chunked_peak, lambda b, h, n, d, c, s: peak(3, h, n, d, c, s), "batch=3"),
    (lesson10.recurrent_state_bytes, lambda layers, heads, m, dv, size: state(24, heads, m, dv, size), "layers=24"),
    (lesson11.cache_bytes, lambda layers, kv, d, t, b, s, w: cache(28, kv, d, t, b, s, w), "num_layers=28"),
]


@pytest.mark.parametrize(("check", "answer", "argument"), WRONG_ARGUMENT)
def test_an_argument_in_the_wrong_place_is_not_called_the_examples_number(check, answer, argument):
    text = hint_of(check, answer)
    assert f"same number when {argument} doubles" in text and f"changes with {argument}" in text, text
    assert "example" not in text, text


@pytest.mark.parametrize(("check", "answer", "shown"), WRITTEN_IN)
def test_an_argument_written_in_from_the_example_is_named_with_its_value(check, answer, shown):
    text = hint_of(check, answer)
    assert f"right answer for {shown}, the example's, on every size" in text, text


def test_the_examples_whole_answer_typed_in_is_named_as_the_example():
    text = hint_of(lesson06.score_count, lambda n_queries, n_keys, num_heads: 448 * 1500 * 6)
    assert "right answer for n_queries=448, n_keys=1500, num_heads=6, the example's" in text, text


# ---- 06/3: the rounding, not "check each factor" ---------------------------------------------------------------------

def per_sequence(n, num_heads, head_dim):
    return num_heads * 4 * (2 * n * n + n * head_dim)


@pytest.mark.parametrize("rounding", [round, lambda x: math.floor(x + 0.5)])
def test_a_batch_rounded_to_nearest_gets_the_rounding_hint(rounding):
    text = hint_of(lesson06.largest_batch,
                   lambda budget, n, heads, d, layers: rounding(budget / per_sequence(n, heads, d)))
    assert "rounded up on some" in text and "check each factor" not in text, text


# ---- 09/1: a written-in vocabulary is not "p + 1" -----------------------------------------------------------------

def test_the_examples_vocabulary_written_in_is_named_not_p_plus_one():
    def share(attention, tokens, n_symbols):
        pointed = tokens[:, -1] - 10  # the lesson's 10 symbols
        return attention[:, torch.arange(tokens.shape[0]), :, -1, pointed].mean(dim=0)  # (b, l, h) -> (l, h)

    text = hint_of(lesson09.pointer_attention, share)
    assert "vocabulary of 10 symbols" in text and "p + 1" not in text, text


# ---- 09/2: polarity only as one reading; a transposed mask ----------------------------------------------------------

KW = {"threshold": corpus09.THRESHOLD, "n_sequences": corpus09.N_SEQUENCES}


def _mask(bits):
    return torch.tensor(bits).view(2, 2)


@pytest.mark.parametrize("bits", corpus09.SMALLEST)
def test_a_set_whose_complement_is_right_gets_both_readings(bits):
    meant = _mask(bits).logical_not()  # a set the learner may have meant to keep, or the switched-off heads
    text = hint_of(lesson09.smallest_head_set, meant, corpus09.MODEL, corpus09.TASK, **KW)
    assert "the accuracy is" in text and "if your mask marks the heads you switch off" in text, text


def test_a_transposed_mask_is_named_as_transposed():
    right = next(_mask(b) for b in corpus09.SMALLEST if tuple(_mask(b).T.flatten().tolist()) not in corpus09.GOOD)
    text = hint_of(lesson09.smallest_head_set, right.T, corpus09.MODEL, corpus09.TASK, **KW)
    assert "transpose would be right" in text and "switch off" not in text, text


# ---- 05/3: a head size written in; 08/4: the first set's total norm written in -------------------------------------

def test_a_head_size_written_in_is_refused():
    def four(w, c, x, num_heads, head):  # the lesson's d = 4, e taken from the input
        e = x.shape[-1]
        rows = slice(head * 4, head * 4 + 4)
        q = x @ w[:e][rows].T + c[:e][rows]
        k = x @ w[e:2 * e][rows].T + c[e:2 * e][rows]
        return torch.softmax(q @ k.transpose(-2, -1) / 2, dim=-1)

    assert four(*inputs_tried(lesson05.head_weights_from_packed, corpus05.head_right)[0]).shape == (1, 5, 5)
    assert hint_of(lesson05.head_weights_from_packed, four).startswith("Not yet")


def test_clipping_with_the_first_sets_total_norm_written_in_is_refused():
    grads, _ = inputs_tried(lesson08.clip_by_total_norm, corpus08.clip_right)[0]
    total = float(torch.linalg.vector_norm(torch.cat([g.flatten() for g in grads])))
    assert hint_of(lesson08.clip_by_total_norm, lambda gs, max_norm: [g * min(1.0, max_norm / total) for g in gs])


# ---- one rule for ready-made routes ---------------------------------------------------------------------------------

def test_a_measured_count_gets_the_one_hint_in_every_exercise_that_asks_for_the_arithmetic():
    def measured_flops(n_queries, n_keys, num_heads, head_dim):  # 06/1b by FlopCounterMode
        q = torch.zeros(1, num_heads, n_queries, head_dim)
        k = torch.zeros(1, num_heads, n_keys, head_dim)
        with FlopCounterMode(display=False) as counter:
            torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ k
        return counter.get_total_flops()

    def measured_layer(n, e):  # 03/4
        with FlopCounterMode(display=False) as counter, torch.no_grad():
            al.SelfAttention(e)(torch.zeros(1, n, e))
        return counter.get_total_flops() // 2

    for check, answer in ((lesson06.flop_count, measured_flops), (lesson03.layer_mult_adds, measured_layer),
                          (lesson05.cross_attention_flops, corpus05.flops_measured)):
        assert "multiplies matrices: the exercise asks you to predict" in hint_of(check, answer)


def grid(height, width):
    rows, cols = torch.arange(height * width) // width, torch.arange(height * width) % width
    return ((rows[:, None] - rows[None, :]).abs() + (cols[:, None] - cols[None, :]).abs()) <= 1


def test_a_grid_mask_of_zeros_and_ones_is_refused_as_lesson_04_refuses_it(capsys):
    accepts(capsys, lesson03.grid_mask, grid)
    rejects(lesson03.grid_mask, lambda h, w: grid(h, w).long(), match="right entries, as a 0/1 mask")
    rejects(lesson03.grid_mask, lambda h, w: grid(h, w).float(), match="right entries, but as floats")
