"""Lesson 13 checks accept every right answer and reject common mistakes with their own hint."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from _check_helpers import accepts, inputs_tried, only_on, rejects
from answers.lesson13 import (
    RIGHT_HEAD,
    RIGHT_OFFSETS,
    RIGHT_PATCHES,
    WRONG_HEAD,
    WRONG_OFFSETS,
    WRONG_PATCHES,
    head_rows_and_columns,
    head_variant,
    offsets_loops,
    offsets_variant,
    patches_floor,
)

from attention_lab.models.conv_attention import conv_as_attention, offset_weights
from attention_lab.teaching.checks import lesson13 as check

# ---- exercise 1: one head's weights, the flat-index bug fixed ----


def test_head_weights_by_hand_on_the_example(capsys):
    """3 x 4 image, offset (1, -1): pixel (r, c) reads (r + 1, c - 1). The last row (4 pixels) and the first column
    (3 pixels, one of them in the last row) read outside: 6 of 12 queries get nothing."""
    weights = head_rows_and_columns(3, 4, 1, -1)
    assert weights[1, 4] == 1 and weights[6, 9] == 1  # (0, 1) reads (1, 0); (1, 2) reads (2, 1)
    assert int((weights.sum(-1) == 0).sum()) == 6
    check.head_weights(head_rows_and_columns)
    assert "6 of 12 queries get nothing" in capsys.readouterr().out


@pytest.mark.parametrize("label, answer", RIGHT_HEAD, ids=[label for label, _ in RIGHT_HEAD])
def test_head_weights_accepts_every_form(label, answer, capsys):
    accepts(capsys, check.head_weights, answer)


@pytest.mark.parametrize("label, wrong, hint", [w for w in WRONG_HEAD if callable(w[1])],
                         ids=[w[0] for w in WRONG_HEAD if callable(w[1])])
def test_head_weights_names_each_mistake(label, wrong, hint):
    rejects(check.head_weights, wrong, match=hint if hint != "<the check's general hint>" else "for query pixel")


def test_head_weights_example_alone_shows_the_given_bug_and_the_flip():
    """On the example, the given flat-index code and the flipped offset already give other weights than the right
    ones (so the learner who prints the example sees the difference)."""
    example = inputs_tried(check.head_weights, head_rows_and_columns)[0]
    right = head_rows_and_columns(*example)
    for wrong in (head_variant(flat=True), head_variant(flip=True), head_variant(swap=True), head_variant(wrap=True),
                  head_variant(clamp=True)):
        assert not torch.equal(wrong(*example), right)
    rejects(check.head_weights, only_on(example, head_variant(flat=True), head_rows_and_columns),
            match="for query pixel")


def test_head_weights_tries_rectangles_both_ways_and_offsets_of_each_sign():
    tried = inputs_tried(check.head_weights, head_rows_and_columns)
    assert any(h > w for h, w, _, _ in tried) and any(h < w for h, w, _, _ in tried)
    assert {dy for _, _, dy, _ in tried} >= {-1, 0, 1} and {dx for _, _, _, dx in tried} >= {-1, 0, 1}


def test_the_right_head_weights_are_the_library_s_and_sum_to_the_convolution():
    conv = torch.nn.Conv2d(2, 3, 3, padding=1).double()
    x = torch.randn(1, 2, 4, 5, dtype=torch.float64)
    tokens = x.flatten(2).transpose(1, 2)  # (1, n, c)
    out = sum(torch.as_tensor(head_rows_and_columns(4, 5, ky - 1, kx - 1)).double() @ tokens
              @ conv.weight[:, :, ky, kx].T for ky in range(3) for kx in range(3)) + conv.bias
    torch.testing.assert_close(out.transpose(1, 2).reshape(1, 3, 4, 5), conv(x))
    assert torch.equal(head_rows_and_columns(4, 5, -1, 1), offset_weights(4, 5, -1, 1))
    torch.testing.assert_close(conv_as_attention(x, conv.weight, conv.bias), conv(x))


# ---- exercise 2: the patch count ----


def test_n_patches_by_hand_on_the_example(capsys):
    """32 x 24, patch 8, stride 4: rows start at 0, 4, ..., 24 (7), columns at 0, 4, ..., 16 (5): 35."""
    assert len(range(0, 32 - 8 + 1, 4)) * len(range(0, 24 - 8 + 1, 4)) == 35
    check.n_patches(patches_floor)
    assert "35 tokens" in capsys.readouterr().out


@pytest.mark.parametrize("label, answer", RIGHT_PATCHES, ids=[label for label, _ in RIGHT_PATCHES])
def test_n_patches_accepts_every_form(label, answer, capsys):
    accepts(capsys, check.n_patches, answer)


@pytest.mark.parametrize("label, wrong, hint", [w for w in WRONG_PATCHES if callable(w[1])],
                         ids=[w[0] for w in WRONG_PATCHES if callable(w[1])])
def test_n_patches_names_each_mistake(label, wrong, hint):
    rejects(check.n_patches, wrong, match=hint)


def test_n_patches_wrong_formulas_differ_on_the_example_itself():
    example = inputs_tried(check.n_patches, patches_floor)[0]
    right = patches_floor(*example)
    wrongs = [w for label, w, _ in WRONG_PATCHES if callable(w) and label not in ("the stub", "a string")]
    values = [w(*example) for w in wrongs[:4]]  # rounding up or down agree where the stride divides
    assert right not in values and len(set(values)) == len(values), values


def test_n_patches_refuses_a_measured_count():
    rejects(check.n_patches, lambda h, w, p, s: F.conv2d(torch.zeros(1, 1, h, w), torch.zeros(1, 1, p, p),
                                                           stride=s).numel(), match="multiplies matrices")


# ---- exercise 3: the heads of a dilated convolution ----


def test_dilated_offsets_by_hand_on_the_example(capsys):
    """Kernel 3, dilation 2: the taps sit two pixels apart, from (-2, -2) to (2, 2), and see a 5 x 5 square."""
    assert offsets_loops(3, 2)[:4] == [(-2, -2), (-2, 0), (-2, 2), (0, -2)]
    check.dilated_offsets(offsets_loops)
    assert "sees 5 x 5 pixels" in capsys.readouterr().out


@pytest.mark.parametrize("kernel, dilation", [(3, 2), (5, 3), (1, 2)])
def test_the_right_offsets_reproduce_a_dilated_conv2d(kernel, dilation):
    x = torch.randn(1, 2, 9, 8, dtype=torch.float64)
    weight = torch.randn(3, 2, kernel, kernel, dtype=torch.float64)
    reach = dilation * (kernel // 2)
    padded = F.pad(x, (reach,) * 4)
    taps = [(ky, kx) for ky in range(kernel) for kx in range(kernel)]
    out = sum(torch.einsum("oc,bchw->bohw", weight[:, :, ky, kx], padded[:, :, reach + dy:reach + dy + 9,
                                                                         reach + dx:reach + dx + 8])
              for (dy, dx), (ky, kx) in zip(offsets_loops(kernel, dilation), taps))
    torch.testing.assert_close(out, F.conv2d(x, weight, padding=reach, dilation=dilation))


@pytest.mark.parametrize("label, answer", RIGHT_OFFSETS, ids=[label for label, _ in RIGHT_OFFSETS])
def test_dilated_offsets_accepts_every_form(label, answer, capsys):
    accepts(capsys, check.dilated_offsets, answer)


@pytest.mark.parametrize("label, wrong, hint", WRONG_OFFSETS, ids=[w[0] for w in WRONG_OFFSETS])
def test_dilated_offsets_names_each_mistake(label, wrong, hint):
    rejects(check.dilated_offsets, wrong, match=hint if hint != "<the check's general hint>" else "tap \\(ky, kx\\)")


def test_dilated_offsets_names_a_mistake_only_when_every_input_shows_it():
    """Dilation 1 makes 'no dilation' right; an answer that forgets the dilation on the example only is not that
    mistake (it is right elsewhere): the check must fall back on its general hint."""
    example = inputs_tried(check.dilated_offsets, offsets_loops)[0]
    with pytest.raises(AssertionError) as failed:
        check.dilated_offsets(only_on(example, offsets_variant(dilate=False), offsets_loops))
    assert "multiply each offset" not in str(failed.value) and "tap (ky, kx)" in str(failed.value)


def test_dilated_offsets_turns_errors_and_wrong_types_into_hints():
    rejects(check.dilated_offsets, lambda k, d: torch.zeros(k, k) @ torch.zeros(2, 2), match="RuntimeError")
    rejects(check.dilated_offsets, lambda k, d: "(-2, -2)", match="should be a tensor")
    rejects(check.dilated_offsets, [(-2, -2)], match="define a function dilated_offsets")
    rejects(check.dilated_offsets, ..., match="still empty")
