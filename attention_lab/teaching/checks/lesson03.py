"""Checks for lesson 03 (the self-attention layer): the keys inside the fused projection, an image's neighbourhood
as a mask, the window of a stack of convolutions, and the multiply-adds of one layer."""

from __future__ import annotations

import numbers
from collections.abc import Callable

import torch
from torch.utils.flop_counter import FlopCounterMode

from ...core.layers import SelfAttention
from ._core import as_tensor, call_learner, check_tensor_answer, correct, guard_errors, hint


@guard_errors
def keys_from_fused(answer: object, layer: torch.nn.Module, x: torch.Tensor) -> None:
    """Exercise 1: the keys k^j = W^k a^j + c^k of every token, read out of the fused ``layer.qkv``."""
    e = layer.embed_dim
    w, b = layer.qkv.weight.detach(), layer.qkv.bias
    bias = b.detach() if b is not None else torch.zeros(3 * e, dtype=w.dtype)
    blocks = [w[s * e:(s + 1) * e] for s in range(3)]  # W^q, W^k, W^v, each (e, e)
    biases = [bias[s * e:(s + 1) * e] for s in range(3)]
    x = x.detach()
    expected = x @ blocks[1].T + biases[1]  # (b, n, e)
    check_tensor_answer(
        answer,
        expected,
        what="your keys",
        mistakes=[
            (x @ blocks[0].T + biases[0], "those are the queries: the rows of qkv.weight come in the order "
                                          "W^q, W^k, W^v, so the keys use the second block of e rows"),
            (x @ blocks[2].T + biases[2], "those are the values: the keys use the second block of e rows"),
            (x @ blocks[1].T, "almost: nn.Linear also adds its bias, the matching slice of qkv.bias"),
            (x @ blocks[1] + biases[1], "nn.Linear multiplies by the transpose of its weight (tokens are "
                                        "rows, W^k acts on columns): transpose the weight block"),
            (layer.qkv(x).detach(), "that is the whole fused output (q, k and v side by side): keep the middle "
                                    "third of the features"),
        ],
        shape_hint=f"one key per token: the same shape as x, {tuple(x.shape)}",
        atol=1e-5,
        rtol=1e-5,
        success="k^j = W^k a^j + c^k: the middle block of rows of the fused projection",
    )


def _as_bool_mask(got: torch.Tensor, what: str) -> torch.Tensor:
    if got.dtype != torch.bool:
        if got.is_floating_point() and bool(torch.isinf(got).any()):
            hint(f"{what} is an additive float mask (0 / -inf); this exercise wants a bool mask, True = may attend")
        if not bool(((got == 0) | (got == 1)).all()):
            hint(f"{what} should hold True (may attend) and False (may not): build it with dtype=torch.bool")
        got = got != 0
    return got


def _grid(height: int, width: int, *, diagonals: bool = False, column_major: bool = False,
          wrap: bool = False, self_loops: bool = True) -> torch.Tensor:
    """Which pixel may attend to which, pixels numbered row by row (or column by column)."""
    n = height * width
    rows, cols = torch.arange(n) // width, torch.arange(n) % width  # row-major numbering
    if column_major:
        rows, cols = torch.arange(n) % height, torch.arange(n) // height
    dr, dc = (rows[:, None] - rows[None, :]).abs(), (cols[:, None] - cols[None, :]).abs()
    near = (dr + dc == 1) | (diagonals & (dr == 1) & (dc == 1))
    if wrap:  # a 1-D neighbourhood on the flattened sequence: crosses the end of each image row
        flat = (torch.arange(n)[:, None] - torch.arange(n)[None, :]).abs()
        near = (flat == 1) | (flat == width)
    return near | (torch.eye(n, dtype=torch.bool) if self_loops else torch.zeros(n, n, dtype=torch.bool))


@guard_errors
def grid_mask(answer: object) -> None:
    """Exercise 2: ``grid_mask(height, width)`` -> the (n, n) bool mask, n = height * width, in which each pixel
    (numbered row by row) may attend to itself and to its 4 neighbours (up, down, left, right)."""
    if answer is None or answer is Ellipsis or not callable(answer):
        hint("define a function grid_mask(height, width) and pass the function itself")
    fn: Callable[..., object] = answer  # type: ignore[assignment]
    for height, width in [(3, 4), (2, 5), (4, 4), (1, 3)]:
        n = height * width
        got = as_tensor(call_learner(fn, height, width, what="your grid_mask"), "your mask")
        if got.shape != (n, n):
            hint(f"for a {height} x {width} image the mask has one row and one column per pixel: shape ({n}, {n}), "
                 f"yours has {tuple(got.shape)}")
        got = _as_bool_mask(got, "your mask")
        expected = _grid(height, width)
        if torch.equal(got, expected):
            continue
        if torch.equal(got, ~expected):
            hint("the polarity is flipped: True means 'may attend', so neighbours and the pixel itself are True")
        if torch.equal(got, _grid(height, width, self_loops=False)):
            hint("each pixel should also see itself (the diagonal of the mask)")
        if torch.equal(got, _grid(height, width, diagonals=True)):
            hint("that is the 8-neighbourhood: the exercise wants the 4 neighbours that share an edge, not the "
                 "diagonal ones")
        if torch.equal(got, _grid(height, width, wrap=True)):
            hint("pixels at the end of one image row and the start of the next are next to each other in the "
                 "flattened sequence, but not in the image: left and right neighbours must lie in the same row")
        if torch.equal(got, _grid(height, width, column_major=True)):
            hint("your pixels are numbered column by column (or height and width are swapped); the exercise numbers "
                 "them row by row, like the lesson's flattened image: an image of height h and width w has h rows "
                 "of w pixels")
        hint(f"for a {height} x {width} image some entries are wrong: pixel p sits in row p // width and column "
             f"p % width; compare a few rows of your mask with a drawing of the image")
    correct("each pixel mixes itself and the four pixels that share an edge with it, for every image size")


@guard_errors
def window_for_stack(answer: object) -> None:
    """Exercise 3: ``window_for_stack(kernel, layers)`` -> the ``window`` for which ``sliding_window_mask(n, window)``
    equals the dependencies of ``layers`` stacked ``Conv1d`` layers of odd size ``kernel`` (padding kernel // 2)."""
    if answer is None or answer is Ellipsis or not callable(answer):
        hint("define a function window_for_stack(kernel, layers) and pass the function itself")
    fn: Callable[..., object] = answer  # type: ignore[assignment]
    for kernel, layers in [(5, 2), (3, 3), (7, 1), (5, 3), (3, 1)]:
        got = call_learner(fn, kernel, layers, what="your window_for_stack")
        if isinstance(got, torch.Tensor) and got.numel() == 1:
            got = got.item()
        if isinstance(got, bool) or not isinstance(got, numbers.Real) or float(got) != int(got):
            hint(f"window_for_stack({kernel}, {layers}) should return one whole number, got {got!r}")
        window, reach = int(got), layers * (kernel // 2)  # each layer adds kernel // 2 positions on each side
        if window == reach + 1:
            continue
        where = f"for kernel {kernel} and {layers} layer(s)"
        if layers > 1 and window == kernel // 2 + 1:
            hint(f"{where}: that is one layer's window; a second layer sees outputs of the first, each of which "
                 f"already depends on several inputs, so the field widens with every layer")
        if window == 2 * reach + 1:
            hint(f"{where}: that counts every input the last output depends on (2 * window - 1 of them); the window "
                 f"counts one side, the query included")
        if window == reach:
            hint(f"{where}: off by one: |i - j| < window must allow the farthest input at distance {reach}")
        if window in (layers * kernel, layers * (kernel + 1) // 2, kernel ** layers):
            hint(f"{where}: count how far one layer reaches on each side of a position, then how far the "
                 f"reaches of stacked layers add up to")
        hint(f"{where}: follow one output back through the layers: how far on each side does each layer reach?")
    correct("each layer reaches kernel // 2 positions further on each side, so a stack's receptive field grows "
            "linearly with depth")


def _layer_mult_adds(n: int, e: int) -> int:
    layer = SelfAttention(e)
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        layer(torch.zeros(1, n, e))
    return counter.get_total_flops() // 2  # FlopCounterMode counts 2 FLOPs per multiply-add


@guard_errors
def layer_mult_adds(answer: object) -> None:
    """Exercise 4: ``mult_adds(n, e)`` -> the multiply-adds of one ``SelfAttention(e)`` forward pass on n tokens
    (batch 1), projections included; checked against PyTorch's FlopCounterMode."""
    if answer is None or answer is Ellipsis or not callable(answer):
        hint("define a function mult_adds(n, e) and pass the function itself")
    fn: Callable[..., object] = answer  # type: ignore[assignment]
    for n, e in [(5, 4), (12, 8), (7, 16), (32, 6)]:
        got = call_learner(fn, n, e, what="your mult_adds")
        if isinstance(got, torch.Tensor) and got.numel() == 1:
            got = got.item()
        if isinstance(got, bool) or not isinstance(got, numbers.Real) or float(got) != int(got):
            hint(f"mult_adds({n}, {e}) should return one whole number, got {got!r}")
        got, expected = int(got), _layer_mult_adds(n, e)
        if got == expected:
            continue
        where = f"for n = {n}, e = {e}"
        projections, attention = 3 * n * e * e, 2 * n * n * e
        if got == attention:
            hint(f"{where}: that counts the attention products only; the fused projection also multiplies every "
                 f"token by a weight matrix")
        if got == projections:
            hint(f"{where}: that counts the projection only; the scores and the weighted sum of the values are two "
                 f"more products")
        if got == projections + attention // 2:
            hint(f"{where}: one of the two n x n products is missing (the scores, and the weights times the values)")
        if got == 2 * expected:
            hint(f"{where}: that counts floating-point operations (2 per multiply-add); count multiply-adds")
        if got in (n * e * e + attention, 3 * n * e + attention, 9 * n * e * e + attention):
            hint(f"{where}: the fused projection maps each of n tokens from e to 3e numbers: count its "
                 f"multiply-adds per token first")
        hint(f"{where}: count the multiply-adds of each matrix product (an (m, p) @ (p, q) product costs "
             f"m * p * q), then add them up")
    correct("the fused projection costs 3 n e^2 and attention 2 n^2 e multiply-adds: the projection is the larger "
            "term while 2n < 3e, attention once 2n > 3e")
