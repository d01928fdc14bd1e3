"""Every exercise check of lesson 03 accepts right answers, rejects the common mistakes with their own hints, turns an
error in the learner's code into a hint, and keeps the answers to itself."""

import numpy as np
import pytest
import torch
from _check_helpers import accepts, rejects
from torch import nn

import attention_lab as al
from attention_lab.teaching.checks import lesson03


@pytest.fixture
def layer_and_x():
    layer = al.SelfAttention(4)
    return layer, torch.randn(2, 5, 4)


def test_keys_from_fused(capsys, layer_and_x):
    layer, x = layer_and_x
    w, b = layer.qkv.weight.detach(), layer.qkv.bias.detach()
    accepts(capsys, lesson03.keys_from_fused, x @ w[4:8].T + b[4:8], layer, x)
    accepts(capsys, lesson03.keys_from_fused, layer.project(x)[1].detach(), layer, x)
    accepts(capsys, lesson03.keys_from_fused, layer.qkv(x).chunk(3, dim=-1)[1].tolist(), layer, x)
    rejects(lesson03.keys_from_fused, x @ w[:4].T + b[:4], layer, x, hint="those are the queries")
    rejects(lesson03.keys_from_fused, x @ w[8:].T + b[8:], layer, x, hint="those are the values")
    rejects(lesson03.keys_from_fused, x @ w[4:8].T, layer, x, hint="adds its bias")
    rejects(lesson03.keys_from_fused, x @ w[4:8] + b[4:8], layer, x, hint="transpose the weight")
    rejects(lesson03.keys_from_fused, layer.qkv(x).detach(), layer, x, hint="middle third")
    rejects(lesson03.keys_from_fused, x, layer, x, hint="right shape but not the right values")
    rejects(lesson03.keys_from_fused, ..., layer, x, hint="still empty")


def test_keys_from_fused_uses_c_for_the_bias(capsys, layer_and_x):
    layer, x = layer_and_x
    lesson03.keys_from_fused(layer.project(x)[1].detach(), layer, x)
    out = capsys.readouterr().out
    assert "c^k" in out and "b^k" not in out


# ---- grid_mask: an image's 4-neighbourhood as a mask ----


def grid_right(height, width):
    n = height * width
    row, col = torch.arange(n) // width, torch.arange(n) % width
    return ((row[:, None] - row[None, :]).abs() + (col[:, None] - col[None, :]).abs()) <= 1


def grid_loops(height, width):
    mask = [[False] * (height * width) for _ in range(height * width)]
    for r in range(height):
        for c in range(width):
            for dr, dc in [(0, 0), (1, 0), (-1, 0), (0, 1), (0, -1)]:
                if 0 <= r + dr < height and 0 <= c + dc < width:
                    mask[r * width + c][(r + dr) * width + c + dc] = True
    return mask


def grid_numpy_float(height, width):
    return grid_right(height, width).numpy().astype(np.float64)


@pytest.mark.parametrize("answer", [grid_right, grid_loops, grid_numpy_float])
def test_grid_mask_accepts_every_form(capsys, answer):
    accepts(capsys, lesson03.grid_mask, answer)


def grid_1d(height, width):  # neighbours in the flattened sequence: wraps around row ends
    n = height * width
    d = (torch.arange(n)[:, None] - torch.arange(n)[None, :]).abs()
    return (d == 0) | (d == 1) | (d == width)


def grid_column_major(height, width):
    n = height * width
    row, col = torch.arange(n) % height, torch.arange(n) // height
    return ((row[:, None] - row[None, :]).abs() + (col[:, None] - col[None, :]).abs()) <= 1


def grid_eight(height, width):
    n = height * width
    row, col = torch.arange(n) // width, torch.arange(n) % width
    return torch.maximum((row[:, None] - row[None, :]).abs(), (col[:, None] - col[None, :]).abs()) <= 1


@pytest.mark.parametrize(("answer", "match"), [
    (lambda h, w: ~grid_right(h, w), "polarity is flipped"),
    (lambda h, w: grid_right(h, w) & ~torch.eye(h * w, dtype=torch.bool), "also see itself"),
    (grid_eight, "8-neighbourhood"),
    (grid_1d, "same row"),
    (grid_column_major, "column by column"),
    (lambda h, w: grid_right(w, h), "height and width are swapped"),  # the same mask as column by column
    (lambda h, w: grid_right(3, 4), "shape"),  # hard-coded for the first image size
    (lambda h, w: torch.zeros(h * w, h * w).masked_fill(~grid_right(h, w), float("-inf")), "additive float mask"),
    (lambda h, w: grid_right(h, w).float() * 3, "dtype=torch.bool"),
    (lambda h, w: torch.eye(h * w, dtype=torch.bool), "some entries are wrong"),
    (lambda h, w: 1 / 0, "ZeroDivisionError"),
    (lambda h: None, "TypeError"),
    (None, "define a function"),
])
def test_grid_mask_rejects_with_the_hint_for_the_mistake(answer, match):
    rejects(lesson03.grid_mask, answer, match=match)


def test_grid_mask_hints_do_not_contain_code():
    for wrong in (grid_1d, grid_eight, lambda h, w: torch.eye(h * w, dtype=torch.bool)):
        with pytest.raises(AssertionError) as error:
            lesson03.grid_mask(wrong)
        assert "torch." not in str(error.value) and "abs()" not in str(error.value)


# ---- window_for_stack: the receptive field of stacked convolutions ----


def measured_window(kernel, layers, n=24, e=2):
    """The window of the mask that equals a real conv stack's dependencies (via the Jacobian)."""
    stack = nn.Sequential(*[nn.Conv1d(e, e, kernel, padding=kernel // 2) for _ in range(layers)])
    with torch.no_grad():
        for conv in stack:
            conv.weight.uniform_(0.1, 1.0)  # positive weights: no accidental cancellation
    jac = torch.autograd.functional.jacobian(lambda t: stack(t.T[None])[0].T, torch.randn(n, e))  # (n, e, n, e)
    field = jac.abs().sum(dim=(1, 3)) > 0
    return next(w for w in range(1, n + 1) if torch.equal(al.sliding_window_mask(n, w), field))


def test_window_for_stack_rule_matches_real_convolutions():
    for kernel, layers in [(5, 2), (3, 4), (7, 1)]:
        assert measured_window(kernel, layers) == layers * (kernel // 2) + 1


@pytest.mark.parametrize("answer", [
    lambda kernel, layers: layers * (kernel // 2) + 1,
    lambda kernel, layers: torch.tensor(layers * (kernel - 1) / 2 + 1),
    lambda kernel, layers: float(layers * (kernel // 2) + 1),
])
def test_window_for_stack_accepts(capsys, answer):
    accepts(capsys, lesson03.window_for_stack, answer)


@pytest.mark.parametrize(("answer", "match"), [
    (lambda kernel, layers: kernel // 2 + 1, "one layer's window"),
    (lambda kernel, layers: 2 * layers * (kernel // 2) + 1, "one side, the query included"),
    (lambda kernel, layers: layers * (kernel // 2), "off by one"),
    (lambda kernel, layers: layers * kernel, "how far one layer reaches"),
    (lambda kernel, layers: 5, "for kernel 3 and 3 layer"),  # hard-coded from the first case
    (lambda kernel, layers: layers * (kernel // 2) + 1.5, "one whole number"),
    (lambda kernel, layers: "five", "one whole number"),
    (lambda kernel: 1, "TypeError"),
    (None, "define a function"),
])
def test_window_for_stack_rejects_with_the_hint_for_the_mistake(answer, match):
    rejects(lesson03.window_for_stack, answer, match=match)


# ---- layer_mult_adds: one layer's multiply-adds, projections included ----


@pytest.mark.parametrize("answer", [
    lambda n, e: 3 * n * e * e + 2 * n * n * e,
    lambda n, e: n * e * (3 * e) + n * n * e + n * n * e,
    lambda n, e: np.int64(3 * n * e**2 + 2 * n**2 * e),
    lambda n, e: torch.tensor(3.0 * n * e * e + 2.0 * n * n * e),
])
def test_layer_mult_adds_accepts(capsys, answer):
    accepts(capsys, lesson03.layer_mult_adds, answer)


@pytest.mark.parametrize(("answer", "match"), [
    (lambda n, e: 2 * n * n * e, "attention products only"),
    (lambda n, e: 3 * n * e * e, "projection only"),
    (lambda n, e: 3 * n * e * e + n * n * e, "one of the two n x n products"),
    (lambda n, e: 2 * (3 * n * e * e + 2 * n * n * e), "2 per multiply-add"),
    (lambda n, e: n * e * e + 2 * n * n * e, "from e to 3e"),
    (lambda n, e: 500, "count the multiply-adds of each"),
    (lambda n, e: None, "one whole number"),
    (lambda n, e: [][0], "IndexError"),
    (..., "still empty"),
])
def test_layer_mult_adds_rejects_with_the_hint_for_the_mistake(answer, match):
    rejects(lesson03.layer_mult_adds, answer, match=match)


def test_success_lines_state_no_other_exercise_answer(capsys):
    lesson03.grid_mask(grid_right)
    lesson03.window_for_stack(lambda kernel, layers: layers * (kernel // 2) + 1)
    lesson03.layer_mult_adds(lambda n, e: 3 * n * e * e + 2 * n * n * e)
    grid_line, window_line, count_line = capsys.readouterr().out.splitlines()
    assert "kernel" not in grid_line and "n e^2" not in grid_line
    assert "neighbour" not in window_line and "n e^2" not in window_line
    assert "kernel" not in count_line and "neighbour" not in count_line
