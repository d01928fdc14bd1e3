"""Checks for lesson 03 (the self-attention layer): cross-attention with the weights of the fused projection, an
image's neighbourhood as a mask, the window of a stack of convolutions, and the multiply-adds of one layer.

Every check tries the learner's function on several inputs, and names a common mistake only when the answer matches
that mistake on every input (a wrong formula can agree with the right one on one example: kernel 5 with 2 layers)."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import torch

from ...core.layers import SelfAttention
from ...i18n import Message, msg
from ._core import (
    as_tensor,
    call_learner,
    call_prediction,
    compare_tensor_answer,
    correct,
    fallback_hint,
    guard_errors,
    hint,
    learner_name,
    right_for_some_inputs,
)
from ._function_answers import check_formula, expect_function
from ._mask_answers import as_bool_mask, only_bool

# ---- exercise 1: cross-attention with the fused weights ----

_CROSS_CASES = ((2, 3, 5, 4), (1, 4, 2, 6), (3, 3, 3, 3))  # (b, i, j, e): i != j first; then b == i == j == e


def _layer_and_inputs(b: int, i: int, j: int, e: int, seed: int) -> tuple[SelfAttention, torch.Tensor, torch.Tensor]:
    """A layer with random weights and biases (none zero), and decoder and encoder tokens, from the check's own
    generator: the lesson's random numbers stay as they were."""
    gen = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng(devices=[]):
        layer = SelfAttention(e)
    with torch.no_grad():
        layer.qkv.weight.copy_(torch.randn(3 * e, e, generator=gen) / math.sqrt(e))
        layer.qkv.bias.copy_(torch.randn(3 * e, generator=gen))
    return layer, torch.randn(b, i, e, generator=gen), torch.randn(b, j, e, generator=gen)


def _shapes(b: int, i: int, j: int, e: int) -> Message:
    return msg("x_dec of shape {dec} and x_enc of shape {enc}", dec=(b, i, e), enc=(b, j, e))


def _project(blocks: list[tuple[torch.Tensor, torch.Tensor]], x: torch.Tensor, s: int, *, bias: bool = True,
             transpose: bool = True) -> torch.Tensor:
    """x projected by block s of the fused weight (0: W^q, 1: W^k, 2: W^v), right or with one slip."""
    weight, shift = blocks[s]
    return x @ (weight.T if transpose else weight) + (shift if bias else 0)  # (b, n, e)


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, scale: float, dim: int = -1) -> torch.Tensor:
    return torch.softmax(q @ k.transpose(-2, -1) * scale, dim=dim) @ v  # (b, i, e)


@guard_errors
def cross_attention_from_fused(answer: object) -> None:
    """Exercise 1: ``cross_attend(layer, x_dec, x_enc)`` -> the queries of ``x_dec`` (b, i, e) attend to the keys
    and values of ``x_enc`` (b, j, e), with the weights and biases of ``layer.qkv``; (b, i, e) out."""
    fn = expect_function(answer, "cross_attend(layer, x_dec, x_enc)")
    for index, (b, i, j, e) in enumerate(_CROSS_CASES):
        layer, x_dec, x_enc = _layer_and_inputs(b, i, j, e, seed=30 + index)
        w, c = layer.qkv.weight.detach().double(), layer.qkv.bias.detach().double()
        blocks = [(w[s * e:(s + 1) * e], c[s * e:(s + 1) * e]) for s in range(3)]  # W^q, W^k, W^v and c^q, c^k, c^v
        dec, enc = x_dec.double(), x_enc.double()

        project = functools.partial(_project, blocks)
        q, k, v = project(dec, 0), project(enc, 1), project(enc, 2)
        scale = 1 / math.sqrt(e)
        expected = _attend(q, k, v, scale=scale)
        weights = torch.softmax(q @ k.transpose(-2, -1) * scale, dim=-1)  # (b, i, j)
        mistakes = [
            (_attend(q, project(dec, 1), project(dec, 2), scale=scale),
             msg("that is self-attention of x_dec: in cross-attention the keys and values come from the other "
                 "sequence, x_enc")),
            (_attend(project(enc, 0), project(dec, 1), project(dec, 2), scale=scale),
             msg("the roles are swapped: the queries come from x_dec (the tokens that ask), the keys and values "
                 "from x_enc (the tokens that are looked up); there is one output per token of x_dec")),
            (_attend(project(enc, 0), k, v, scale=scale),
             msg("that is self-attention of x_enc: the queries must come from x_dec, one output per token of "
                 "x_dec")),
            (weights, msg("those are the attention weights α'; the output mixes the values with them")),
            (weights @ enc, msg("the weights mix the raw tokens of x_enc; they should mix the values v^j = W^v a^j "
                                "+ c^v, the third block of the fused projection")),
            (_attend(project(dec, 1), project(enc, 0), v, scale=scale),
             msg("the query and key blocks are swapped: the rows of qkv.weight come as W^q, W^k, W^v, so the "
                 "queries use the first block of e rows and the keys the second")),
            (_attend(q, k, project(enc, 1), scale=scale),
             msg("the values use the key block: the rows of qkv.weight come as W^q, W^k, W^v, and the values "
                 "use the third block of e rows")),
            (_attend(project(dec, 0, bias=False), project(enc, 1, bias=False), project(enc, 2, bias=False),
                     scale=scale),
             msg("almost: nn.Linear also adds its bias; each projection adds its slice of qkv.bias (c^q, c^k, "
                 "c^v)")),
            (_attend(project(dec, 0, transpose=False), project(enc, 1, transpose=False),
                     project(enc, 2, transpose=False), scale=scale),
             msg("nn.Linear multiplies by the transpose of its weight (tokens are rows, W acts on columns): "
                 "transpose each weight block")),
            (_attend(q, k, v, scale=1.0), msg("the scores are missing the scale 1/√e")),
            (_attend(q, k, v, scale=1 / e), msg("scale the scores by 1/√e, the square root of the size of a "
                                                "query, not by 1/e")),
            (_attend(q, k, v, scale=1 / math.sqrt(j)), msg("scale the scores by 1/√e, the size of a query, not "
                                                           "by the number of keys")),
            (_attend(q, k, v, scale=scale, dim=-2), msg("softmax over the keys (the last axis): each query's "
                                                        "weights must sum to 1")),
        ]
        shapes = _shapes(b, i, j, e)
        with torch.no_grad():
            got = as_tensor(call_learner(fn, layer, x_dec, x_enc), msg("what {name} returns", name=learner_name(fn)))
        try:
            compare_tensor_answer(got, expected, what=msg("your outputs"), mistakes=mistakes, atol=1e-5, rtol=1e-5,
                                  shape_hint=msg("for {shapes} there is one output of e numbers per query token "
                                                 "of x_dec: shape {shape}, yours has {got}", shapes=shapes,
                                                 shape=(b, i, e), got=tuple(got.shape)))
        except AssertionError as failed:
            if index and getattr(failed, "generic", False):
                hint(right_for_some_inputs(learner_name(fn), _shapes(*_CROSS_CASES[0]), shapes))
            raise
    correct(msg("each query of x_dec mixes the values of x_enc, with the same three blocks of qkv that "
                "SelfAttention uses on one sequence"))


# ---- exercise 2: an image's 4-neighbourhood as a mask ----

def _grid(height: int, width: int, *, diagonals: bool = False, column_major: bool = False, wrap: bool = False,
          torus: bool = False, rows_only: bool = False, self_loops: bool = True) -> torch.Tensor:
    """Which pixel may attend to which, pixels numbered row by row (or column by column), or a mistake."""
    n = height * width
    rows, cols = torch.arange(n) // width, torch.arange(n) % width  # row-major numbering
    if column_major:
        rows, cols = torch.arange(n) % height, torch.arange(n) // height
    dr, dc = (rows[:, None] - rows[None, :]).abs(), (cols[:, None] - cols[None, :]).abs()
    if torus:  # the image wraps around: the first and last row (column) are neighbours
        dr, dc = torch.minimum(dr, height - dr), torch.minimum(dc, width - dc)
    near = (dr + dc == 1) | (diagonals & (dr == 1) & (dc == 1))
    if rows_only:
        near = (dr == 0) & (dc == 1)
    if wrap:  # a 1-D neighbourhood on the flattened sequence: crosses the end of each image row
        flat = (torch.arange(n)[:, None] - torch.arange(n)[None, :]).abs()
        near = (flat == 1) | (flat == width)
    return near | (torch.eye(n, dtype=torch.bool) if self_loops else torch.zeros(n, n, dtype=torch.bool))


_GRID_SIZES = ((3, 4), (2, 5), (4, 4), (1, 3), (5, 2))


@guard_errors
def grid_mask(answer: object) -> None:
    """Exercise 2: ``grid_mask(height, width)`` -> the (n, n) bool mask, n = height * width, in which each pixel
    (numbered row by row) may attend to itself and to its 4 neighbours (up, down, left, right)."""
    fn = expect_function(answer, "grid_mask(height, width)")
    for index, (height, width) in enumerate(_GRID_SIZES):
        n = height * width
        size = msg("a {height} x {width} image", height=height, width=width)
        got = as_tensor(call_learner(fn, height, width), msg("your mask"))
        if got.shape != (n, n):
            hint(msg("for {size} the mask has one row and one column per pixel: shape ({n}, {n}), yours has "
                     "{shape}", size=size, n=n, shape=tuple(got.shape)))
        mask = as_bool_mask(got, msg("your mask"))
        expected = _grid(height, width)
        if torch.equal(mask, expected):
            only_bool(got)  # the exercise asks for a bool mask, the one convention lesson 04 keeps
            continue
        got = mask
        mistakes = [
            (~expected, msg("the polarity is flipped: True means 'may attend', so the neighbours and the pixel "
                            "itself are True")),
            (_grid(height, width, self_loops=False), msg("each pixel should also see itself (the diagonal of the "
                                                         "mask)")),
            (_grid(height, width, diagonals=True), msg("that is the 8-neighbourhood: the exercise wants the 4 "
                                                       "neighbours that share an edge, not the diagonal ones")),
            (_grid(height, width, wrap=True), msg("pixels at the end of one image row and the start of the next are "
                                                  "next to each other in the flattened sequence, but not in the "
                                                  "image: left and right neighbours must lie in the same row")),
            (_grid(height, width, column_major=True), msg("your pixels are numbered column by column (or height "
                                                          "and width are swapped); the exercise numbers them row "
                                                          "by row, like the lesson's flattened image: an image of "
                                                          "height h and width w has h rows of w pixels")),
            (_grid(height, width, torus=True), msg("the image does not wrap around: a pixel of the first row (or "
                                                   "column) is not a neighbour of one in the last")),
            (_grid(height, width, rows_only=True), msg("those are the left and right neighbours only; the pixels "
                                                       "above and below share an edge too")),
        ]
        for wrong, message in mistakes:
            if torch.equal(got, wrong):
                hint(message)
        if index:
            hint(right_for_some_inputs(learner_name(fn), msg("a {height} x {width} image",
                                                                      height=_GRID_SIZES[0][0],
                                                                      width=_GRID_SIZES[0][1]), size))
        fallback_hint(msg("for {size} some entries are wrong: pixel p sits in row p // width and column p % width; "
                          "compare a few rows of your mask with a drawing of the image", size=size))
    correct(msg("each pixel mixes itself and the four pixels that share an edge with it, for every image size"))


# ---- exercise 3: the receptive field of stacked convolutions ----

_STACKS = ((5, 6), (7, 4), (3, 5), (9, 1), (5, 2))  # (kernel, layers); on (5, 6) the mistakes below all differ
_STACK_MISTAKES: tuple[tuple[Callable[[int, int], int], Message], ...] = (
    (lambda k, layers: k // 2 + 1, msg("that is one layer's window; a second layer sees outputs of the first, "
                                       "each of which already depends on several inputs, so the field widens with "
                                       "every layer")),
    (lambda k, layers: 2 * layers * (k // 2) + 1, msg("that counts every input the last output depends on (2 * "
                                                      "window - 1 of them); the window counts one side, the "
                                                      "query included")),
    (lambda k, layers: layers * (k // 2), msg("off by one: |i - j| < window must also allow the farthest input the "
                                              "stack reaches")),
    (lambda k, layers: layers * (k // 2) + 2, msg("one too many: |i - j| < window must allow the farthest input "
                                                  "the stack reaches, and no input beyond it")),
    (lambda k, layers: k, msg("that is the kernel size: it counts the inputs of one layer on both sides, and "
                              "does not grow with the layers")),
    (lambda k, layers: layers * (k // 2 + 1), msg("that adds up one layer's whole window per layer, the query "
                                                  "included each time; only the reach (the positions beyond the "
                                                  "query) adds up, and the query counts once")),
    (lambda k, layers: layers * k // 2, msg("half of layers x kernel counts half an input per layer too many: a "
                                            "layer of odd kernel k reaches (k - 1) / 2 positions on each side")),
    (lambda k, layers: layers * k, msg("count how far one layer reaches on each side of a position, then how far "
                                       "the reaches of stacked layers add up to")),
    (lambda k, layers: k ** layers, msg("the reaches of stacked layers add up; they do not multiply")),
    (lambda k, layers: k + layers - 1, msg("each extra layer reaches as far again as the first one, not one "
                                           "position further")),
)


def _stack(kernel: int, layers: int) -> Message:
    return msg("kernel {kernel} and {layers} layer(s)", kernel=kernel, layers=layers)


@guard_errors
def window_for_stack(answer: object) -> None:
    """Exercise 3: ``window_for_stack(kernel, layers)`` -> the ``window`` for which ``sliding_window_mask(n, window)``
    equals the dependencies of ``layers`` stacked ``Conv1d`` layers of odd size ``kernel`` (padding kernel // 2)."""
    check_formula(answer, signature="window_for_stack(kernel, layers)", inputs=_STACKS,
                  rule=lambda k, layers: layers * (k // 2) + 1,  # each layer reaches kernel // 2 further on each side
                  mistakes=_STACK_MISTAKES, describe=_stack,
                  last_hint=msg("follow one output back through the layers: how far on each side does each layer "
                                "reach?"),
                  success=msg("each layer reaches kernel // 2 positions further on each side, so a stack's "
                              "receptive field grows linearly with depth"))


# ---- exercise 4: one layer's multiply-adds, projections included ----

_LAYER_SIZES = ((5, 4), (9, 5), (7, 16), (32, 6), (1, 7))  # (n, e): every mistake below differs on each
_COUNT_MISTAKES: tuple[tuple[Callable[[int, int], int], Message], ...] = (
    (lambda n, e: 2 * n * n * e, msg("that counts the attention products only; the fused projection also "
                                     "multiplies every token by a weight matrix")),
    (lambda n, e: 3 * n * e * e, msg("that counts the projection only; the scores and the weighted sum of the "
                                     "values are two more products")),
    (lambda n, e: 3 * n * e * e + n * n * e, msg("one of the two n x n products is missing (the scores, and the "
                                                 "weights times the values)")),
    (lambda n, e: 2 * (3 * n * e * e + 2 * n * n * e), msg("that counts floating-point operations (2 per "
                                                           "multiply-add); count multiply-adds")),
    (lambda n, e: n * e * e + 2 * n * n * e, msg("the fused projection maps each of n tokens from e to 3e numbers: "
                                                 "q, k and v each cost a product, not only one of them")),
    (lambda n, e: 3 * n * e + 2 * n * n * e, msg("the projection multiplies each token's e numbers by an e x 3e "
                                                 "matrix: e x 3e multiply-adds per token")),
    (lambda n, e: 9 * n * e * e + 2 * n * n * e, msg("the fused weight is e x 3e, not 3e x 3e: each token's e "
                                                     "numbers become 3e")),
    (lambda n, e: 4 * n * e * e + 2 * n * n * e, msg("SelfAttention has no output projection (that comes with "
                                                     "several heads, lesson 05): count the fused projection and "
                                                     "the two attention products")),
    (lambda n, e: 3 * n * e * e + 2 * n * n * e + n * n, msg("softmax and the scale are not matrix products; "
                                                             "FlopCounterMode counts only the products")),
    (lambda n, e: 3 * n * e * e + 2 * n * n * e + 3 * n * e, msg("adding the bias is not a multiply-add; "
                                                                 "FlopCounterMode counts only the products")),
    (lambda n, e: 3 * n * n * e + 2 * n * e * e, msg("n and e are swapped somewhere: an (m, p) @ (p, q) product "
                                                     "costs m * p * q, and the projection is (n, e) @ (e, 3e)")),
)


@guard_errors
def layer_mult_adds(answer: object) -> None:
    """Exercise 4: ``layer_mult_adds(n, e)`` -> the multiply-adds of one ``SelfAttention(e)`` forward pass on n
    tokens (batch 1), projections included, predicted from n and e (FlopCounterMode counts 2 FLOPs for each)."""
    check_formula(answer, signature="layer_mult_adds(n, e)", inputs=_LAYER_SIZES,
                  rule=lambda n, e: 3 * n * e * e + 2 * n * n * e,  # tests/test_checks_lesson03.py: FlopCounterMode
                  mistakes=_COUNT_MISTAKES, describe=lambda n, e: msg("n = {n}, e = {e}", n=n, e=e),
                  last_hint=msg("count the multiply-adds of each matrix product (an (m, p) @ (p, q) product costs "
                                "m * p * q), then add them up"),
                  success=msg("the fused projection costs 3 n e^2 and attention 2 n^2 e multiply-adds: the "
                              "projection is the larger term while 2n < 3e, attention once 2n > 3e"),
                  call=call_prediction)
