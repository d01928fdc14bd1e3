"""Checks for lesson 13 (self-attention on images, against a CNN: one head of a convolution written as attention, the
patch count of rectangular images and overlapping patches, the heads of a dilated convolution).

Each answer is a function, tried on several inputs: images of several heights and widths (rectangular, one row,
one column) and offsets of each sign, on which wrapping around an edge, flipping the offset, swapping rows and
columns or clamping to the border each give other weights; image and patch sizes on which forgetting the stride,
the + 1, the overlap or the rectangle each give another count; kernels and dilations on which forgetting the
dilation, the centre or the order of the taps each give other offsets.
"""

from __future__ import annotations

import torch

from ...i18n import msg
from ._calls import recording_calls
from ._core import as_tensor, call_learner, call_prediction, correct, fallback_hint, guard_errors, hint, learner_name
from ._function_answers import check_formula, expect_function

__all__ = ["dilated_offsets", "head_weights", "n_patches"]  # the checks; the rest is their machinery

# ---- exercise 1: one head of a 3 x 3 convolution, as attention weights ----

# (height, width, dy, dx): the exercise's example first. Offsets of each sign along each axis, rectangles both ways,
# one row and one column, so that each wrong rule below gives other weights than the right one on some input.
_HEAD_CASES = ((3, 4, 1, -1), (4, 3, -1, 1), (2, 5, 0, 2), (5, 2, 2, 0), (3, 3, -1, -1), (1, 4, 0, 1), (4, 1, 1, 0))


def _head(height: int, width: int, dy: int, dx: int, *, rule: str = "right") -> torch.Tensor:
    """The right weights and the common wrong ones (each rule is one mistake). Shape: -> (i, j), i = j = H * W."""
    n = height * width
    pixel = torch.arange(n)
    row, col = pixel // width, pixel % width
    if rule == "flat":  # the given code: key = query + dy * W + dx on the flat index, kept if inside 0..n-1
        key = pixel + dy * width + dx
        return ((pixel[None, :] == key[:, None]) & (key[:, None] >= 0) & (key[:, None] < n)).double()
    if rule == "flipped":
        dy, dx = -dy, -dx
    if rule == "swapped":
        dy, dx = dx, dy
    key_row, key_col = row + dy, col + dx
    inside = (key_row >= 0) & (key_row < height) & (key_col >= 0) & (key_col < width)
    if rule == "torus":
        key_row, key_col, inside = key_row % height, key_col % width, torch.ones(n, dtype=torch.bool)
    if rule == "clamped":
        key_row, key_col = key_row.clamp(0, height - 1), key_col.clamp(0, width - 1)
        inside = torch.ones(n, dtype=torch.bool)
    key = key_row * width + key_col
    return ((pixel[None, :] == key[:, None]) & inside[:, None]).double()  # (i, j)


_HEAD_MISTAKES = (
    ("flat", msg("a key whose column c + dx falls outside 0 .. width - 1 must give nothing, but on the flat index "
                 "it lands in the row above or below (the given bug is still there): test the row r + dy and the "
                 "column c + dx separately")),
    ("torus", msg("zero padding gives a query whose key lies outside the image nothing at all; wrapping around to "
                  "the opposite edge (a modulo) is circular padding")),
    ("clamped", msg("zero padding gives a query whose key lies outside the image nothing at all; taking the nearest "
                    "pixel on the edge instead is replicate padding")),
    ("flipped", msg("query (r, c) reads key (r + dy, c + dx), the offset as given; yours reads (r - dy, c - dx) (or "
                    "is the transposed matrix): that flipped kernel is the textbook convolution, nn.Conv2d "
                    "does not flip")),
    ("swapped", msg("dy moves along the rows (up and down) and dx along the columns; yours swaps them")),
)


@guard_errors
def head_weights(fn: object) -> None:
    """Exercise 1: ``fn(height, width, dy, dx)``, the attention weights (i, j) of the head with offset (dy, dx) of a
    convolution with zero padding: query pixel (r, c) puts weight 1 on key (r + dy, c + dx) if it is in the image,
    and nothing if not; pixels numbered row by row."""
    fn = expect_function(fn, "head_weights(height, width, dy, dx)")
    name = learner_name(fn)
    got = []
    with recording_calls() as calls:
        for case in _HEAD_CASES:
            got.append(as_tensor(call_learner(fn, *case), msg("what {name} returns", name=name)))
    if "offset_weights" in calls.library:
        hint(msg("{name} calls offset_weights: that is the library's answer; fix the given code instead",
                 name=name))
    for answer, (height, width, _, _) in zip(got, _HEAD_CASES):
        n = height * width
        if tuple(answer.shape) != (n, n):
            hint(msg("for a {height} x {width} image the weights have one row per query pixel and one column per "
                     "key pixel: shape ({n}, {n}), got {shape}", height=height, width=width, n=n,
                     shape=tuple(answer.shape)))
    got = [answer.double() for answer in got]
    if all(torch.equal(g, _head(*case)) for g, case in zip(got, _HEAD_CASES)):
        height, width, dy, dx = _HEAD_CASES[0]
        empty = int((_head(*_HEAD_CASES[0]).sum(-1) == 0).sum())
        correct(msg("each query reads the one pixel its offset points to, and a query whose key lies outside gets "
                    "nothing: on the example ({height} x {width}, offset ({dy}, {dx})) {empty} of {n} queries get "
                    "nothing", height=height, width=width, dy=dy, dx=dx, empty=empty, n=height * width))
        return
    for rule, message in _HEAD_MISTAKES:
        wrong = [_head(*case, rule=rule) for case in _HEAD_CASES]
        if all(torch.equal(g, w) for g, w in zip(got, wrong)):
            hint(message)
    if any(not torch.equal(g, g.round()) or g.sum(-1).max() > 1 for g in got):
        hint(msg("each row holds a single 1 (the one key the query reads) or nothing; yours has other values or "
                 "more than one 1 in a row"))
    miss = next(case for g, case in zip(got, _HEAD_CASES) if not torch.equal(g, _head(*case)))
    fallback_hint(msg("for query pixel (r, c), with r = i // width and c = i % width, the key is (r + dy, c + dx) if "
                      "0 <= r + dy < height and 0 <= c + dx < width; compare your weights with that for height={h}, "
                      "width={w}, dy={dy}, dx={dx}", h=miss[0], w=miss[1], dy=miss[2], dx=miss[3]))


# ---- exercise 2: how many patches a rectangular image gives with overlapping patches ----

# (height, width, patch, stride): the example first. Rectangles both ways, strides that do and do not divide, a
# stride equal to the patch (no overlap) and a patch of one pixel, so that each wrong count differs somewhere.
_PATCH_CASES = ((32, 24, 8, 4), (10, 7, 3, 2), (9, 12, 3, 3), (11, 6, 4, 3), (8, 5, 2, 1), (7, 16, 1, 2))


def _patches(height: int, width: int, patch: int, stride: int) -> int:
    return ((height - patch) // stride + 1) * ((width - patch) // stride + 1)


_PATCH_MISTAKES = (
    (lambda h, w, p, s: (h // p) * (w // p),
     msg("that counts patches side by side without overlap; with a stride smaller than the patch a new patch "
         "starts every stride pixels")),
    (lambda h, w, p, s: (h // s) * (w // s),
     msg("a patch starts every stride pixels, but the last one must still fit inside the image: count the starts "
         "0, stride, 2 * stride, ... up to height - patch")),
    (lambda h, w, p, s: ((h - p) // s) * ((w - p) // s),
     msg("the starts 0, stride, ..., up to height - patch are (height - patch) // stride + 1 positions: the first "
         "one, at 0, counts too")),
    (lambda h, w, p, s: ((h - p) // s + 1) ** 2,
     msg("the image is not square: count the rows of patches from the height and the columns from the width")),
    (lambda h, w, p, s: ((w - p) // s + 1) ** 2,
     msg("the image is not square: count the rows of patches from the height and the columns from the width")),
    (lambda h, w, p, s: (-(-(h - p) // s) + 1) * (-(-(w - p) // s) + 1),
     msg("round down: a last patch that would stick out of the image is not taken (no padding here)")),
)


@guard_errors
def n_patches(fn: object) -> None:
    """Exercise 2: ``fn(height, width, patch, stride)``, the number of ``patch`` x ``patch`` squares that start every
    ``stride`` pixels along each axis and lie wholly inside a ``height`` x ``width`` image."""
    check_formula(fn, signature="n_patches(height, width, patch, stride)", inputs=_PATCH_CASES, rule=_patches,
                  mistakes=_PATCH_MISTAKES, call=call_prediction,
                  describe=lambda h, w, p, s: msg("a {h} x {w} image, patch {p}, stride {s}", h=h, w=w, p=p, s=s),
                  last_hint=msg("along the height the patches start at 0, stride, 2 * stride, ... as long as start + "
                                "patch <= height; likewise along the width; the count is the product"),
                  success=msg("(height - patch) // stride + 1 rows of patches times (width - patch) // stride + 1 "
                              "columns: {n} tokens for the example's 32 x 24 image", n=_patches(*_PATCH_CASES[0])))


# ---- exercise 3: the heads of a dilated convolution ----

# (kernel, dilation): the example first; every kernel and dilation takes two values or more.
_DILATED_CASES = ((3, 2), (3, 1), (5, 2), (1, 3), (3, 3), (5, 1))


def _offsets(kernel: int, dilation: int, *, rule: str = "right") -> list[tuple[int, int]]:
    centre = kernel // 2
    taps = [(ky, kx) for ky in range(kernel) for kx in range(kernel)]  # the kernel's taps, row by row
    if rule == "columns_first":
        taps = [(ky, kx) for kx in range(kernel) for ky in range(kernel)]
    if rule == "no_dilation":
        return [(ky - centre, kx - centre) for ky, kx in taps]
    if rule == "not_centred":
        return [(dilation * ky, dilation * kx) for ky, kx in taps]
    if rule == "added":
        return [(ky - centre + (dilation - 1) * (1 if ky > centre else -1 if ky < centre else 0),
                 kx - centre + (dilation - 1) * (1 if kx > centre else -1 if kx < centre else 0)) for ky, kx in taps]
    sign = -1 if rule == "flipped" else 1
    return [(sign * dilation * (ky - centre), sign * dilation * (kx - centre)) for ky, kx in taps]


_DILATED_MISTAKES = (
    ("no_dilation", msg("with dilation d the taps of the kernel are d pixels apart: multiply each offset by d")),
    ("not_centred", msg("the centre tap is offset (0, 0): subtract kernel // 2 from the tap's row and column before "
                        "multiplying by the dilation")),
    ("flipped", msg("tap (ky, kx) reads the pixel at (r + d(ky - k // 2), c + d(kx - k // 2)): yours has the "
                    "opposite sign (a flipped kernel; listing the taps from the last one does the same)")),
    ("columns_first", msg("list the taps row by row, as weight[:, :, ky, kx] is laid out: (0, 0), (0, 1), ... "
                          "before (1, 0)")),
    ("added", msg("dilation multiplies the spacing of the taps, it does not add to it: the offset is "
                  "d * (ky - kernel // 2)")),
)


def _as_offsets(answer: object, what: object) -> list[tuple[int, int]]:
    """The learner's offsets as a list of (dy, dx) pairs of ints: a list of pairs, a tensor or array (k*k, 2)."""
    table = as_tensor(answer, what)
    if table.numel() == 0:
        return []
    if table.dim() != 2 or table.shape[-1] != 2:
        hint(msg("{what} should be a list of (dy, dx) pairs, one per tap of the kernel, got shape {shape}",
                 what=what, shape=tuple(table.shape)))
    if table.is_floating_point() and not torch.equal(table, table.round()):
        hint(msg("offsets are whole numbers of pixels; {what} has fractions", what=what))
    return [(int(dy), int(dx)) for dy, dx in table.tolist()]


@guard_errors
def dilated_offsets(fn: object) -> None:
    """Exercise 3: ``fn(kernel, dilation)``, the offsets (dy, dx) of the kernel·kernel attention heads that reproduce
    ``nn.Conv2d(..., kernel, dilation=dilation, padding=dilation * (kernel // 2))``, one per tap, row by row."""
    fn = expect_function(fn, "dilated_offsets(kernel, dilation)")
    name = learner_name(fn)
    got = [_as_offsets(call_learner(fn, *case), msg("what {name} returns", name=name)) for case in _DILATED_CASES]
    for offsets, (kernel, dilation) in zip(got, _DILATED_CASES):
        if len(offsets) != kernel * kernel:
            hint(msg("a {k} x {k} kernel has {taps} taps, so {taps} heads; {name} gives {n} offsets for kernel={k}, "
                     "dilation={d}", k=kernel, taps=kernel * kernel, name=name, n=len(offsets), d=dilation))
    if all(g == _offsets(*case) for g, case in zip(got, _DILATED_CASES)):
        kernel, dilation = _DILATED_CASES[0]
        correct(msg("heads at these offsets, each with its tap's weights as the value projection, equal "
                    "F.conv2d(..., dilation={d}); a {k} x {k} kernel with dilation {d} sees {span} x {span} pixels",
                    d=dilation, k=kernel, span=dilation * (kernel - 1) + 1))
        return
    for rule, message in _DILATED_MISTAKES:
        if all(g == _offsets(*case, rule=rule) for g, case in zip(got, _DILATED_CASES)):
            hint(message)
    if all(sorted(g) == sorted(_offsets(*case)) for g, case in zip(got, _DILATED_CASES)):
        hint(msg("the right offsets in another order: head k takes tap k's weights, so list the taps row by row, "
                 "as weight[:, :, ky, kx] is laid out"))
    fallback_hint(msg("tap (ky, kx) of the kernel multiplies the pixel d * (ky - kernel // 2) rows and "
                      "d * (kx - kernel // 2) columns away; list these (dy, dx) for the taps row by row"))
