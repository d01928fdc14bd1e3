"""Answers to lesson 13's exercises (self-attention on images, against a CNN): one head of a convolution as attention
weights, the given flat-index bug fixed (13/1), the patch count of a rectangular image with overlapping patches
(13/2), and the heads' offsets of a dilated convolution (13/3)."""

import math

import numpy as np
import torch

from attention_lab.models.conv_attention import offset_weights
from attention_lab.teaching.checks import lesson13

from . import GENERIC, Attempt


def stub(*args):
    raise NotImplementedError("write the body of this function, then run the check cell below")


# ---- 13/1: head_weights(height, width, dy, dx) --------------------------------------------------------------------

def head_rows_and_columns(height, width, dy, dx):
    """The fix: the row and the column tested separately."""
    n = height * width
    pixel = torch.arange(n)
    row, col = pixel // width, pixel % width
    key = pixel + dy * width + dx
    inside = (row + dy >= 0) & (row + dy < height) & (col + dx >= 0) & (col + dx < width)
    weights = torch.zeros(n, n)
    weights[pixel[inside], key[inside]] = 1
    return weights


def head_loops(height, width, dy, dx):
    weights = [[0] * (height * width) for _ in range(height * width)]
    for r in range(height):
        for c in range(width):
            if 0 <= r + dy < height and 0 <= c + dx < width:
                weights[r * width + c][(r + dy) * width + c + dx] = 1
    return weights


def head_shifted_identity(height, width, dy, dx):
    """An identity over the image's grid, shifted: numpy, bool."""
    eye_rows = np.eye(height, k=dy, dtype=bool)  # row r reads row r + dy
    eye_cols = np.eye(width, k=dx, dtype=bool)
    return np.kron(eye_rows, eye_cols)


def head_variant(*, flat=False, flip=False, swap=False, wrap=False, clamp=False):
    def answer(height, width, dy, dx):
        if flip:
            dy, dx = -dy, -dx
        if swap:
            dy, dx = dx, dy
        n = height * width
        pixel = torch.arange(n)
        row, col = pixel // width, pixel % width
        if flat:
            key = pixel + dy * width + dx
            inside = (key >= 0) & (key < n)
        else:
            key_row, key_col = row + dy, col + dx
            inside = (key_row >= 0) & (key_row < height) & (key_col >= 0) & (key_col < width)
            if wrap:
                key_row, key_col, inside = key_row % height, key_col % width, torch.ones(n, dtype=torch.bool)
            if clamp:
                key_row, key_col = key_row.clamp(0, height - 1), key_col.clamp(0, width - 1)
                inside = torch.ones(n, dtype=torch.bool)
            key = key_row * width + key_col
        weights = torch.zeros(n, n)
        weights[pixel[inside], key[inside].clamp(0, n - 1)] = 1
        return weights
    return answer


RIGHT_HEAD = [
    ("row and column tested separately", head_rows_and_columns),
    ("loops, a list of lists", head_loops),
    ("numpy kron of shifted identities, bool", head_shifted_identity),
    ("the library's fast path's twin, float64", lambda h, w, dy, dx: head_rows_and_columns(h, w, dy, dx).double()),
]

WRONG_HEAD = [
    ("the given code, unchanged", head_variant(flat=True), "given bug is still there"),
    ("wrapped around (modulo)", head_variant(wrap=True), "circular padding"),
    ("clamped to the edge", head_variant(clamp=True), "replicate padding"),
    ("the offset flipped", head_variant(flip=True), "flipped kernel"),
    ("transposed", lambda *a: head_rows_and_columns(*a).T, "flipped kernel"),
    ("rows and columns swapped", head_variant(swap=True), "swaps them"),
    ("the library", lambda *a: offset_weights(*a), "library's answer"),
    ("every key inside the 3 x 3 window", lambda h, w, dy, dx: (sum(head_rows_and_columns(h, w, y, x)
                                                                     for y in (-1, 0, 1) for x in (-1, 0, 1))),
     "single 1"),
    ("one row per key pixel only", lambda h, w, dy, dx: head_rows_and_columns(h, w, dy, dx)[:, :1], "shape"),
    ("the example's offset written in", lambda h, w, dy, dx: head_rows_and_columns(h, w, 1, -1), GENERIC),
    ("a division by zero", lambda *a: 1 / 0, "ZeroDivisionError"),
    ("the stub", stub, "NotImplementedError"),
    ("no return", lambda *a: None, "None"),
    ("the weights, not a function", torch.zeros(12, 12), "define a function"),
]

# ---- 13/2: n_patches(height, width, patch, stride) ----------------------------------------------------------------


def patches_floor(height, width, patch, stride):
    return ((height - patch) // stride + 1) * ((width - patch) // stride + 1)


def patches_math(height, width, patch, stride):
    return (math.floor((height - patch) / stride) + 1) * (math.floor((width - patch) / stride) + 1)


def patches_unfold(height, width, patch, stride):
    """Counted by cutting a blank image with unfold, as a library would."""
    return torch.zeros(height, width).unfold(0, patch, stride).unfold(1, patch, stride).shape[:2].numel()


def patches_range(height, width, patch, stride):
    return len(range(0, height - patch + 1, stride)) * len(range(0, width - patch + 1, stride))


RIGHT_PATCHES = [
    ("floor division", patches_floor),
    ("math.floor", patches_math),
    ("unfold a blank image", patches_unfold),
    ("len of the starts", patches_range),
    ("as a float", lambda *a: float(patches_floor(*a))),
]

WRONG_PATCHES = [
    ("patches side by side", lambda h, w, p, s: (h // p) * (w // p), "without overlap"),
    ("a start every stride, to the edge", lambda h, w, p, s: (h // s) * (w // s), "must still fit"),
    ("no + 1", lambda h, w, p, s: ((h - p) // s) * ((w - p) // s), "counts too"),
    ("square: the height twice", lambda h, w, p, s: ((h - p) // s + 1) ** 2, "not square"),
    ("rounded up", lambda h, w, p, s: (math.ceil((h - p) / s) + 1) * (math.ceil((w - p) / s) + 1), "round down"),
    ("true division", lambda h, w, p, s: ((h - p) / s + 1) * ((w - p) / s + 1), "whole number"),
    ("the example's count", lambda *a: 35, "right for a 32 x 24 image"),
    ("the example's stride written in", lambda h, w, p, s: patches_floor(h, w, p, 4), "right for a 32 x 24 image"),
    ("a string", lambda *a: "35", "whole number"),
    ("the stub", stub, "NotImplementedError"),
    ("the number, not a function", 35, "define a function"),
]

# ---- 13/3: dilated_offsets(kernel, dilation) ----------------------------------------------------------------------


def offsets_loops(kernel, dilation):
    centre = kernel // 2
    return [(dilation * (ky - centre), dilation * (kx - centre)) for ky in range(kernel) for kx in range(kernel)]


def offsets_meshgrid(kernel, dilation):
    steps = (torch.arange(kernel) - kernel // 2) * dilation
    dy, dx = torch.meshgrid(steps, steps, indexing="ij")
    return torch.stack([dy.flatten(), dx.flatten()], dim=1)  # (k*k, 2)


def offsets_numpy(kernel, dilation):
    steps = (np.arange(kernel) - kernel // 2) * dilation
    return np.array([[dy, dx] for dy in steps for dx in steps], dtype=float)


def offsets_variant(*, dilate=True, centre=True, sign=1, columns_first=False):
    def answer(kernel, dilation):
        c = kernel // 2 if centre else 0
        d = dilation if dilate else 1
        taps = [(ky, kx) for ky in range(kernel) for kx in range(kernel)]
        if columns_first:
            taps = [(ky, kx) for kx in range(kernel) for ky in range(kernel)]
        return [(sign * d * (ky - c), sign * d * (kx - c)) for ky, kx in taps]
    return answer


RIGHT_OFFSETS = [
    ("loops", offsets_loops),
    ("meshgrid, a tensor", offsets_meshgrid),
    ("numpy floats", offsets_numpy),
    ("a list of lists", lambda k, d: [list(pair) for pair in offsets_loops(k, d)]),
]

WRONG_OFFSETS = [
    ("no dilation", offsets_variant(dilate=False), "multiply each offset by d"),
    ("not centred", offsets_variant(centre=False), "centre tap"),
    ("flipped", offsets_variant(sign=-1), "opposite sign"),
    ("columns first", offsets_variant(columns_first=True), "row by row"),
    ("dilation added", lambda k, d: [(dy + (d - 1) * np.sign(dy), dx + (d - 1) * np.sign(dx))
                                     for dy, dx in offsets_loops(k, 1)], "does not add"),
    ("reversed order", lambda k, d: offsets_loops(k, d)[::-1], "opposite sign"),
    ("the centre tap left out", lambda k, d: [o for o in offsets_loops(k, d) if o != (0, 0)], "taps"),
    ("dy only", lambda k, d: [dy for dy, _ in offsets_loops(k, d)], "pairs"),
    ("the example's dilation written in", lambda k, d: offsets_loops(k, 2), GENERIC),
    ("a division by zero", lambda *a: 1 / 0, "ZeroDivisionError"),
    ("the stub", stub, "NotImplementedError"),
    ("no return", lambda *a: None, "None"),
]

ATTEMPTS = [
    *(Attempt("13/1", label, lesson13.head_weights, fn, right=True) for label, fn in RIGHT_HEAD),
    *(Attempt("13/1", label, lesson13.head_weights, fn, hint=hint) for label, fn, hint in WRONG_HEAD),
    *(Attempt("13/2", label, lesson13.n_patches, fn, right=True) for label, fn in RIGHT_PATCHES),
    *(Attempt("13/2", label, lesson13.n_patches, fn, hint=hint) for label, fn, hint in WRONG_PATCHES),
    *(Attempt("13/3", label, lesson13.dilated_offsets, fn, right=True) for label, fn in RIGHT_OFFSETS),
    *(Attempt("13/3", label, lesson13.dilated_offsets, fn, hint=hint) for label, fn, hint in WRONG_OFFSETS),
]
