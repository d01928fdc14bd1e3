"""Answers to lesson 03's exercises (the self-attention layer): cross-attention with the fused weights, an image's
4-neighbourhood as a mask, the window of stacked convolutions, one layer's multiply-adds."""

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

import attention_lab as al
from attention_lab.teaching.checks import lesson03

from . import GENERIC, Attempt

# ---- 03/1: cross-attention with the fused weights ----


def _blocks(layer, *, transpose=True, bias=True):
    e = layer.embed_dim
    w, c = layer.qkv.weight, layer.qkv.bias
    return [((w[s * e:(s + 1) * e].T if transpose else w[s * e:(s + 1) * e]), (c[s * e:(s + 1) * e] if bias else 0))
            for s in range(3)]


def _cross(q_from="dec", kv_from="enc", *, order=(0, 1, 2), transpose=True, bias=True, scale="e", dim=-1,
           values=True, weights_only=False):
    """A learner's cross_attend, right with the defaults, or with one slip."""

    def cross_attend(layer, x_dec, x_enc):
        e = layer.embed_dim
        blocks = _blocks(layer, transpose=transpose, bias=bias)
        sources = {"dec": x_dec, "enc": x_enc}
        q = sources[q_from] @ blocks[order[0]][0] + blocks[order[0]][1]
        k = sources[kv_from] @ blocks[order[1]][0] + blocks[order[1]][1]
        v = sources[kv_from] @ blocks[order[2]][0] + blocks[order[2]][1] if values else sources[kv_from]
        factor = {"e": 1 / math.sqrt(e), "none": 1.0, "e1": 1 / e, "j": 1 / math.sqrt(k.shape[-2])}[scale]
        weights = torch.softmax(q @ k.transpose(-2, -1) * factor, dim=dim)
        return weights if weights_only else weights @ v

    return cross_attend


def cross_with_project(layer, x_dec, x_enc):
    q, _, _ = layer.project(x_dec)
    _, k, v = layer.project(x_enc)
    return al.scaled_dot_product_attention(q, k, v)[0]


def cross_with_sdpa_chunks(layer, x_dec, x_enc):
    q = layer.qkv(x_dec).chunk(3, dim=-1)[0]
    _, k, v = layer.qkv(x_enc).chunk(3, dim=-1)
    return F.scaled_dot_product_attention(q, k, v)


def cross_with_einsum_float64(layer, x_dec, x_enc):
    e = layer.embed_dim
    w, c = layer.qkv.weight.double(), layer.qkv.bias.double()
    q = torch.einsum("bie,fe->bif", x_dec.double(), w[:e]) + c[:e]
    k = torch.einsum("bje,fe->bjf", x_enc.double(), w[e:2 * e]) + c[e:2 * e]
    v = torch.einsum("bje,fe->bjf", x_enc.double(), w[2 * e:]) + c[2 * e:]
    weights = torch.softmax(torch.einsum("bif,bjf->bij", q, k) / e ** 0.5, dim=-1)
    return torch.einsum("bij,bjf->bif", weights, v)


def cross_with_linear(layer, x_dec, x_enc):
    w_q, w_k, w_v = layer.qkv.weight.chunk(3)
    c_q, c_k, c_v = layer.qkv.bias.chunk(3)
    q, k, v = F.linear(x_dec, w_q, c_q), F.linear(x_enc, w_k, c_k), F.linear(x_enc, w_v, c_v)
    return torch.softmax(q @ k.mT / math.sqrt(q.shape[-1]), dim=-1) @ v


def cross_with_torch_module(layer, x_dec, x_enc):  # lesson 03's trick: PyTorch's module with our weights
    e = layer.embed_dim
    mha = nn.MultiheadAttention(e, num_heads=1, batch_first=True)
    with torch.no_grad():
        mha.in_proj_weight.copy_(layer.qkv.weight)
        mha.in_proj_bias.copy_(layer.qkv.bias)
        mha.out_proj.weight.copy_(torch.eye(e))
        mha.out_proj.bias.zero_()
    return mha(x_dec, x_enc, x_enc)[0]


def cross_numpy(layer, x_dec, x_enc):
    return _cross()(layer, x_dec, x_enc).detach().numpy()


def cross_hard_coded_e(layer, x_dec, x_enc):  # right for e = 4 only
    w, c = layer.qkv.weight, layer.qkv.bias
    q, k, v = x_dec @ w[:4].T + c[:4], x_enc @ w[4:8].T + c[4:8], x_enc @ w[8:12].T + c[8:12]
    return torch.softmax(q @ k.transpose(-2, -1) / 2, dim=-1) @ v


def cross_values_from_dec(layer, x_dec, x_enc):  # a (b, i, j) @ (b, i, e) product: fails when i != j
    blocks = _blocks(layer)
    q, k, v = x_dec @ blocks[0][0] + blocks[0][1], x_enc @ blocks[1][0] + blocks[1][1], x_dec @ blocks[2][0]
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(layer.embed_dim), dim=-1) @ v


def cross_unpacks_batch(layer, x_dec, x_enc):  # chunk(3) splits the first axis, the batch of 2: two pieces
    q, _, _ = layer.qkv(x_dec).chunk(3)
    _, k, v = layer.qkv(x_enc).chunk(3)
    return torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ v


def cross_first_sentence(layer, x_dec, x_enc):
    return _cross()(layer, x_dec, x_enc)[0]


def cross_stub(layer, x_dec, x_enc):
    raise NotImplementedError("replace this line with your answer, then run the check cell below")


CROSS = lesson03.cross_attention_from_fused

# ---- 03/2: grid mask ----


def grid_arithmetic(height, width):
    pixel = torch.arange(height * width)
    row, col = pixel // width, pixel % width
    return (row[:, None] - row[None, :]).abs() + (col[:, None] - col[None, :]).abs() <= 1


def grid_loops(height, width):
    mask = [[False] * (height * width) for _ in range(height * width)]
    for r in range(height):
        for c in range(width):
            for dr, dc in [(0, 0), (1, 0), (-1, 0), (0, 1), (0, -1)]:
                if 0 <= r + dr < height and 0 <= c + dc < width:
                    mask[r * width + c][(r + dr) * width + c + dc] = True
    return mask


def grid_cdist(height, width):
    rows, cols = torch.meshgrid(torch.arange(height), torch.arange(width), indexing="ij")
    where = torch.stack([rows.flatten(), cols.flatten()], dim=-1).float()  # (n, 2), row by row
    return torch.cdist(where, where, p=1) <= 1


def grid_kron(height, width):
    def path(m):
        return (torch.ones(m, m).triu(1) - torch.ones(m, m).triu(2)) + (torch.ones(m, m).tril(-1)
                                                                         - torch.ones(m, m).tril(-2))
    edges = torch.kron(path(height), torch.eye(width)) + torch.kron(torch.eye(height), path(width))
    return (edges + torch.eye(height * width)) > 0


def grid_numpy_float(height, width):
    return grid_arithmetic(height, width).numpy().astype(np.float64)


def grid_int(height, width):
    return grid_arithmetic(height, width).int()


def _grid_variant(height, width, *, column_major=False, eight=False, wrap=False, torus=False, rows_only=False):
    n = height * width
    row, col = torch.arange(n) // width, torch.arange(n) % width
    if column_major:
        row, col = torch.arange(n) % height, torch.arange(n) // height
    dr, dc = (row[:, None] - row[None, :]).abs(), (col[:, None] - col[None, :]).abs()
    if torus:
        dr, dc = torch.minimum(dr, height - dr), torch.minimum(dc, width - dc)
    if wrap:
        flat = (torch.arange(n)[:, None] - torch.arange(n)[None, :]).abs()
        return flat.eq(0) | flat.eq(1) | flat.eq(width)
    if eight:
        return torch.maximum(dr, dc) <= 1
    if rows_only:
        return (dr == 0) & (dc <= 1)
    return dr + dc <= 1


def grid_width_four(height, width):  # the first image's width written in
    pixel = torch.arange(height * width)
    row, col = pixel // 4, pixel % 4
    return (row[:, None] - row[None, :]).abs() + (col[:, None] - col[None, :]).abs() <= 1


def grid_stub(height, width):
    raise NotImplementedError("replace this line with your answer, then run the check cell below")


GRID = lesson03.grid_mask

# ---- 03/3: window of a stack of convolutions ----


def window_measured(kernel, layers):  # test the idea with the lesson's Jacobian, on a long enough sequence
    n, reach = 2 * layers * kernel + 1, 0
    stack = nn.Sequential(*[nn.Conv1d(1, 1, kernel, padding=kernel // 2, bias=False) for _ in range(layers)])
    with torch.no_grad():
        for conv in stack:
            conv.weight.fill_(1.0)
    jac = torch.autograd.functional.jacobian(lambda t: stack(t[None, None])[0, 0], torch.zeros(n))  # (n, n)
    middle = jac[n // 2]
    reach = int((middle != 0).nonzero().max()) - n // 2
    return reach + 1


WINDOW = lesson03.window_for_stack

# ---- 03/4: one layer's multiply-adds ----


def mult_adds_by_products(n, e):
    products = [(n, e, 3 * e), (n, e, n), (n, n, e)]  # (m, p, q) of each product: projection, scores, mix
    return sum(m * p * q for m, p, q in products)


def mult_adds_measured(n, e):
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        al.SelfAttention(e)(torch.zeros(1, n, e))
    return counter.get_total_flops() // 2


def mult_adds_stub(n, e):
    raise NotImplementedError("replace this line with your answer, then run the check cell below")


COUNT = lesson03.layer_mult_adds

ATTEMPTS = [
    # 03/1
    Attempt("03/1", "blocks by hand", CROSS, _cross(), right=True),
    Attempt("03/1", "layer.project and al.scaled_dot_product_attention", CROSS, cross_with_project, right=True),
    Attempt("03/1", "qkv chunks and F.scaled_dot_product_attention", CROSS, cross_with_sdpa_chunks, right=True),
    Attempt("03/1", "einsum in float64", CROSS, cross_with_einsum_float64, right=True),
    Attempt("03/1", "F.linear with the weight chunks", CROSS, cross_with_linear, right=True),
    Attempt("03/1", "nn.MultiheadAttention with the weights copied", CROSS, cross_with_torch_module, right=True),
    Attempt("03/1", "a numpy array", CROSS, cross_numpy, right=True),
    Attempt("03/1", "self-attention of x_dec", CROSS, lambda layer, x_dec, x_enc: layer(x_dec)[0],
            hint="self-attention of x_dec"),
    Attempt("03/1", "the layer's (output, weights) pair", CROSS, lambda layer, x_dec, x_enc: layer(x_dec),
            hint="should be a tensor"),
    Attempt("03/1", "keys and values from x_dec", CROSS, _cross(kv_from="dec"), hint="self-attention of x_dec"),
    Attempt("03/1", "roles swapped", CROSS, _cross(q_from="enc", kv_from="dec"), hint="roles are swapped"),
    Attempt("03/1", "queries from x_enc", CROSS, _cross(q_from="enc"), hint="self-attention of x_enc"),
    Attempt("03/1", "the weights, not the outputs", CROSS, _cross(weights_only=True), hint="attention weights"),
    Attempt("03/1", "raw tokens as values", CROSS, _cross(values=False), hint="raw tokens of x_enc"),
    Attempt("03/1", "query and key blocks swapped", CROSS, _cross(order=(1, 0, 2)), hint="key blocks are swapped"),
    Attempt("03/1", "values from the key block", CROSS, _cross(order=(0, 1, 1)), hint="values use the key block"),
    Attempt("03/1", "no biases", CROSS, _cross(bias=False), hint="adds its bias"),
    Attempt("03/1", "weights not transposed", CROSS, _cross(transpose=False), hint="transpose of its weight"),
    Attempt("03/1", "no scale", CROSS, _cross(scale="none"), hint="missing the scale"),
    Attempt("03/1", "scale 1/e", CROSS, _cross(scale="e1"), hint="not by 1/e"),
    Attempt("03/1", "scale by the number of keys", CROSS, _cross(scale="j"), hint="not by the number of keys"),
    Attempt("03/1", "softmax over the queries", CROSS, _cross(dim=-2), hint="softmax over the keys"),
    Attempt("03/1", "softmax over dim=1", CROSS, _cross(dim=1), hint="softmax over the keys"),
    Attempt("03/1", "block boundaries written for e = 4", CROSS, cross_hard_coded_e,
            hint=r"\(1, 4, 6\), yours has \(1, 4, 4\)"),
    Attempt("03/1", "values projected from x_dec", CROSS, cross_values_from_dec, hint="raised RuntimeError"),
    Attempt("03/1", "qkv chunked along the batch", CROSS,
            lambda layer, x_dec, x_enc: torch.softmax(layer.qkv(x_dec).chunk(3)[0], -1),
            hint=r"raised ValueError|shape \(2, 3, 4\)"),
    Attempt("03/1", "unpacking three chunks of the batch", CROSS, cross_unpacks_batch,
            hint=r"raised ValueError .* and the argument SelfAttention\(\.\.\.\);"),
    Attempt("03/1", "the first sentence only", CROSS, cross_first_sentence, hint=r"shape \(2, 3, 4\), yours"),
    Attempt("03/1", "no return", CROSS, lambda layer, x_dec, x_enc: None, hint="None"),
    Attempt("03/1", "untouched stub", CROSS, cross_stub, hint="still raises NotImplementedError"),
    Attempt("03/1", "the result, not the function", CROSS, torch.zeros(2, 3, 4), hint="define a function"),
    Attempt("03/1", "a function of two arguments", CROSS, lambda layer, x: x, hint="raised TypeError"),
    Attempt("03/1", "the decoder tokens themselves", CROSS, lambda layer, x_dec, x_enc: x_dec, hint=GENERIC),
    # 03/2
    Attempt("03/2", "row and column arithmetic", GRID, grid_arithmetic, right=True),
    Attempt("03/2", "loops over the pixels, a list", GRID, grid_loops, right=True),
    Attempt("03/2", "Manhattan distance with cdist", GRID, grid_cdist, right=True),
    Attempt("03/2", "Kronecker products of paths", GRID, grid_kron, right=True),
    Attempt("03/2", "a float numpy 0/1 mask", GRID, grid_numpy_float, hint="right entries, but as floats"),
    Attempt("03/2", "an int 0/1 mask", GRID, grid_int, hint="right entries, as a 0/1 mask"),
    Attempt("03/2", "polarity flipped", GRID, lambda h, w: ~grid_arithmetic(h, w), hint="polarity is flipped"),
    Attempt("03/2", "no self-loops", GRID, lambda h, w: grid_arithmetic(h, w) & ~torch.eye(h * w, dtype=torch.bool),
            hint="also see itself"),
    Attempt("03/2", "the 8-neighbourhood", GRID, lambda h, w: _grid_variant(h, w, eight=True), hint="8-neighbourhood"),
    Attempt("03/2", "neighbours in the flattened sequence", GRID, lambda h, w: _grid_variant(h, w, wrap=True),
            hint="same row"),
    Attempt("03/2", "numbered column by column", GRID, lambda h, w: _grid_variant(h, w, column_major=True),
            hint="column by column"),
    Attempt("03/2", "height and width swapped", GRID, lambda h, w: grid_arithmetic(w, h), hint="swapped"),
    Attempt("03/2", "the image wraps around", GRID, lambda h, w: _grid_variant(h, w, torus=True),
            hint="does not wrap around"),
    Attempt("03/2", "left and right only", GRID, lambda h, w: _grid_variant(h, w, rows_only=True),
            hint="left and right neighbours only"),
    Attempt("03/2", "an additive float mask", GRID,
            lambda h, w: torch.zeros(h * w, h * w).masked_fill(~grid_arithmetic(h, w), float("-inf")),
            hint="additive float mask"),
    Attempt("03/2", "values 0 and 3", GRID, lambda h, w: grid_arithmetic(h, w).float() * 3, hint="a bool tensor"),
    Attempt("03/2", "the first image's size written in", GRID, lambda h, w: grid_arithmetic(3, 4),
            hint=r"shape \(10, 10\)"),
    Attempt("03/2", "the first image's width written in", GRID, grid_width_four, hint="fixed number where"),
    Attempt("03/2", "the pixel itself only", GRID, lambda h, w: torch.eye(h * w, dtype=torch.bool), hint=GENERIC),
    Attempt("03/2", "an error inside", GRID, lambda h, w: 1 / 0, hint="ZeroDivisionError"),
    Attempt("03/2", "one argument", GRID, lambda h: None, hint="TypeError"),
    Attempt("03/2", "no return", GRID, lambda h, w: None, hint="None"),
    Attempt("03/2", "untouched stub", GRID, grid_stub, hint="still raises NotImplementedError"),
    Attempt("03/2", "not a function", GRID, None, hint="define a function"),
    # 03/3
    Attempt("03/3", "the reach plus one", WINDOW, lambda kernel, layers: layers * (kernel // 2) + 1, right=True),
    Attempt("03/3", "(kernel - 1) / 2 per layer, a float", WINDOW, lambda kernel, layers: (kernel - 1) / 2 * layers + 1,
            right=True),
    Attempt("03/3", "a tensor", WINDOW, lambda kernel, layers: torch.tensor(layers * (kernel - 1) // 2 + 1),
            right=True),
    Attempt("03/3", "a numpy integer", WINDOW, lambda kernel, layers: np.int64(kernel // 2 * layers + 1), right=True),
    Attempt("03/3", "measured with the Jacobian", WINDOW, window_measured, right=True),
    Attempt("03/3", "one layer's window", WINDOW, lambda kernel, layers: kernel // 2 + 1, hint="one layer's window"),
    Attempt("03/3", "the number of inputs", WINDOW, lambda kernel, layers: layers * (kernel - 1) + 1,
            hint="one side, the query included"),
    Attempt("03/3", "off by one", WINDOW, lambda kernel, layers: layers * (kernel // 2), hint="off by one"),
    Attempt("03/3", "one too many", WINDOW, lambda kernel, layers: layers * (kernel // 2) + 2, hint="one too many"),
    Attempt("03/3", "the kernel size", WINDOW, lambda kernel, layers: kernel, hint="kernel size"),
    Attempt("03/3", "one window per layer", WINDOW, lambda kernel, layers: layers * (kernel // 2 + 1),
            hint="the query counts once"),
    Attempt("03/3", "half of layers times kernel", WINDOW, lambda kernel, layers: layers * kernel // 2,
            hint="half an input per layer too many"),
    Attempt("03/3", "layers times kernel", WINDOW, lambda kernel, layers: layers * kernel, hint="how far one layer"),
    Attempt("03/3", "kernel to the power of layers", WINDOW, lambda kernel, layers: kernel ** layers,
            hint="do not multiply"),
    Attempt("03/3", "one position per extra layer", WINDOW, lambda kernel, layers: kernel + layers - 1,
            hint="not one position further"),
    Attempt("03/3", "the first answer written in", WINDOW, lambda kernel, layers: 13, hint="fixed number where"),
    Attempt("03/3", "reach of one layer plus layers", WINDOW, lambda kernel, layers: kernel // 2 + layers,
            hint="only happens to fit"),
    Attempt("03/3", "a fraction", WINDOW, lambda kernel, layers: layers * (kernel // 2) + 1.5, hint="whole number"),
    Attempt("03/3", "text", WINDOW, lambda kernel, layers: "five", hint="whole number"),
    Attempt("03/3", "no return", WINDOW, lambda kernel, layers: None, hint="None"),
    Attempt("03/3", "one argument", WINDOW, lambda kernel: 1, hint="TypeError"),
    Attempt("03/3", "not a function", WINDOW, 13, hint="define a function"),
    # 03/4
    Attempt("03/4", "3 n e^2 + 2 n^2 e", COUNT, lambda n, e: 3 * n * e * e + 2 * n * n * e, right=True),
    Attempt("03/4", "one product at a time", COUNT, mult_adds_by_products, right=True),
    Attempt("03/4", "a numpy integer", COUNT, lambda n, e: np.int64(3 * n * e**2 + 2 * n**2 * e), right=True),
    Attempt("03/4", "a tensor made from the formula", COUNT,
            lambda n, e: torch.tensor(3.0 * n * e * e + 2.0 * n * n * e),
            right=True),
    Attempt("03/4", "a float", COUNT, lambda n, e: float(n * e * (3 * e + 2 * n)), right=True),
    Attempt("03/4", "attention products only", COUNT, lambda n, e: 2 * n * n * e, hint="attention products only"),
    Attempt("03/4", "projection only", COUNT, lambda n, e: 3 * n * e * e, hint="projection only"),
    Attempt("03/4", "one n x n product", COUNT, lambda n, e: 3 * n * e * e + n * n * e, hint="one of the two n x n"),
    Attempt("03/4", "FLOPs", COUNT, lambda n, e: 2 * (3 * n * e * e + 2 * n * n * e), hint="2 per multiply-add"),
    Attempt("03/4", "one third of the projection", COUNT, lambda n, e: n * e * e + 2 * n * n * e,
            hint="not only one of them"),
    Attempt("03/4", "projection without e^2", COUNT, lambda n, e: 3 * n * e + 2 * n * n * e, hint="e x 3e multiply"),
    Attempt("03/4", "a 3e x 3e weight", COUNT, lambda n, e: 9 * n * e * e + 2 * n * n * e, hint="not 3e x 3e"),
    Attempt("03/4", "an output projection", COUNT, lambda n, e: 4 * n * e * e + 2 * n * n * e,
            hint="no output projection"),
    Attempt("03/4", "the softmax counted", COUNT, lambda n, e: 3 * n * e * e + 2 * n * n * e + n * n,
            hint="softmax and the scale are not"),
    Attempt("03/4", "the bias counted", COUNT, lambda n, e: 3 * n * e * e + 2 * n * n * e + 3 * n * e,
            hint="adding the bias is not"),
    Attempt("03/4", "n and e swapped", COUNT, lambda n, e: 3 * n * n * e + 2 * n * e * e, hint="swapped"),
    Attempt("03/4", "measured with FlopCounterMode", COUNT, mult_adds_measured, hint="multiplies matrices"),
    Attempt("03/4", "the first answer written in", COUNT, lambda n, e: 440, hint="fixed number where"),
    Attempt("03/4", "a made-up count", COUNT, lambda n, e: 500, hint=GENERIC),
    Attempt("03/4", "a fraction", COUNT, lambda n, e: 3 * n * e * e / 2 + 0.25, hint="whole number"),
    Attempt("03/4", "no return", COUNT, lambda n, e: None, hint="None"),
    Attempt("03/4", "an error inside", COUNT, lambda n, e: [][0], hint="IndexError"),
    Attempt("03/4", "untouched stub", COUNT, mult_adds_stub, hint="still raises NotImplementedError"),
    Attempt("03/4", "not a function", COUNT, ..., hint="still empty"),
]
