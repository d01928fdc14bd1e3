"""Answers to lesson 05's exercises (multi-head attention): the heads of a fused projection, the FLOPs of
cross-attention, one head's weights from nn.MultiheadAttention's packed matrices."""

import math

import numpy as np
import torch
from einops import rearrange
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

import attention_lab as al
from attention_lab.teaching.checks import lesson05

from . import GENERIC, Attempt

# ---- 05/1: the heads of a fused projection ----


def fused_einops(qkv, num_heads):
    q, k, v = rearrange(qkv, "b n (three h d) -> three b h n d", three=3, h=num_heads)
    return q, k, v


def fused_view_permute(qkv, num_heads):
    b, n, three_e = qkv.shape
    return qkv.view(b, n, 3, num_heads, three_e // (3 * num_heads)).permute(2, 0, 3, 1, 4)  # (3, b, h, n, d)


def fused_chunks(qkv, num_heads):
    return [t.unflatten(-1, (num_heads, -1)).transpose(1, 2) for t in qkv.chunk(3, dim=-1)]


def fused_float64_numpy(qkv, num_heads):
    return tuple(t.double().numpy() for t in fused_einops(qkv, num_heads))


def fused_per_head_interleaved(qkv, num_heads):  # (h three d): q, k, v side by side inside each head
    q, k, v = rearrange(qkv, "b n (h three d) -> three b h n d", three=3, h=num_heads)
    return q, k, v


def fused_d_h(qkv, num_heads):
    return tuple(rearrange(qkv, "b n (three d h) -> three b h n d", three=3, h=num_heads))


def fused_no_transpose(qkv, num_heads):
    b, n, _ = qkv.shape
    return tuple(t.reshape(b, num_heads, n, -1) for t in qkv.chunk(3, dim=-1))


def fused_head_axis_third(qkv, num_heads):
    return tuple(t.unflatten(-1, (num_heads, -1)) for t in qkv.chunk(3, dim=-1))


def fused_order_kqv(qkv, num_heads):
    q, k, v = fused_einops(qkv, num_heads)
    return k, q, v


def fused_all_at_once(qkv, num_heads):  # 3e cut into heads as if it were e
    return rearrange(qkv, "b n (h d) -> b h n d", h=num_heads)


def fused_q_only(qkv, num_heads):
    return fused_einops(qkv, num_heads)[0]


def fused_two(qkv, num_heads):
    return fused_einops(qkv, num_heads)[:2]


def fused_view_after_transpose(qkv, num_heads):
    b, n, _ = qkv.shape
    return tuple(t.transpose(1, 2).view(b, num_heads, n, -1) for t in qkv.chunk(3, dim=-1))


def fused_hard_coded_heads(qkv, num_heads):  # 3 heads, whatever it is given
    return fused_einops(qkv, 3)


def fused_flipped_tokens(qkv, num_heads):
    return tuple(t.flip(2) for t in fused_einops(qkv, num_heads))


def fused_stub(qkv, num_heads):
    raise NotImplementedError("replace this line with your answer, then run the check cell below")


FUSED = lesson05.fused_qkv_heads

# ---- 05/2: FLOPs of cross-attention ----


def flops_by_products(n_queries, n_keys, embed_dim, num_heads):
    d = embed_dim // num_heads
    projections = [(n_queries, embed_dim, embed_dim)] * 2 + [(n_keys, embed_dim, embed_dim)] * 2
    attention = [(n_queries, d, n_keys), (n_queries, n_keys, d)] * num_heads
    return sum(2 * m * p * q for m, p, q in projections + attention)


def flops_measured(n_queries, n_keys, embed_dim, num_heads):
    module = al.MultiHeadAttention(embed_dim, num_heads)
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        module(torch.zeros(1, n_queries, embed_dim), torch.zeros(1, n_keys, embed_dim), need_weights=True)
    return counter.get_total_flops()


def flops_stub(n_queries, n_keys, embed_dim, num_heads):
    raise NotImplementedError("replace this line with your answer, then run the check cell below")


def _flops(formula):
    return lambda n_queries, n_keys, embed_dim, num_heads: formula(n_queries, n_keys, embed_dim, num_heads)


FLOPS = lesson05.cross_attention_flops

# ---- 05/3: one head's weights from the packed matrices ----


def _head(w, c, x, h, m, *, bias=True, scale=None, order=(0, 1), transpose=True, dim=-1):
    e = x.shape[-1]
    d = e // h
    parts = []
    for part in order:
        W = w[part * e:(part + 1) * e]
        full = x @ (W.T if transpose else W) + (c[part * e:(part + 1) * e] if bias else 0)
        parts.append(full[..., m * d:(m + 1) * d])
    scale = 1 / math.sqrt(d) if scale is None else scale
    return torch.softmax(parts[0] @ parts[1].transpose(-2, -1) * scale, dim=dim)


def head_right(w, c, x, num_heads, head):
    return _head(w, c, x, num_heads, head)


def head_einsum(w, c, x, num_heads, head):
    e = x.shape[-1]
    W_q, W_k, _ = w.chunk(3)
    c_q, c_k, _ = c.chunk(3)
    q = rearrange(x @ W_q.T + c_q, "b n (h d) -> b h n d", h=num_heads)[:, head]
    k = rearrange(x @ W_k.T + c_k, "b n (h d) -> b h n d", h=num_heads)[:, head]
    return torch.einsum("bid,bjd->bij", q, k).div(math.sqrt(e // num_heads)).softmax(-1)


def head_via_torch_module(w, c, x, num_heads, head):  # builds a module from the packed tensors: still right
    module = nn.MultiheadAttention(x.shape[-1], num_heads, batch_first=True).to(x.dtype)
    with torch.no_grad():
        module.in_proj_weight.copy_(w)
        module.in_proj_bias.copy_(c)
    return module(x, x, x, need_weights=True, average_attn_weights=False)[1][:, head]


def head_via_library(w, c, x, num_heads, head):
    e = x.shape[-1]
    module = al.MultiHeadAttention(e, num_heads).to(x.dtype)
    with torch.no_grad():
        for proj, part in zip((module.q_proj, module.k_proj), range(2)):
            proj.weight.copy_(w[part * e:(part + 1) * e])
            proj.bias.copy_(c[part * e:(part + 1) * e])
    return module(x, need_weights=True)[1][:, head]


def head_in_float32(w, c, x, num_heads, head):
    return _head(w.float(), c.float(), x.float(), num_heads, head)


def head_x_in_float32_only(w, c, x, num_heads, head):  # fine in float32; mixes dtypes when the check passes float64
    return _head(w, c, x.float(), num_heads, head)


def head_keepdim(w, c, x, num_heads, head):
    return _head(w, c, x, num_heads, head)[:, None]  # (b, 1, i, j)


def head_numpy(w, c, x, num_heads, head):
    return _head(w, c, x, num_heads, head).numpy()


def head_fixed_size(w, c, x, num_heads, head):  # the lesson's e = 12 and d = 4 written in
    rows = slice(head * 4, (head + 1) * 4)
    q = x @ w[:12][rows].T + c[:12][rows]
    k = x @ w[12:24][rows].T + c[12:24][rows]
    return torch.softmax(q @ k.transpose(-2, -1) / 2, dim=-1)


def head_first_sentence(w, c, x, num_heads, head):
    return _head(w, c, x, num_heads, head)[0]


def head_stub(w, c, x, num_heads, head):
    raise NotImplementedError("replace this line with your answer, then run the check cell below")


HEAD = lesson05.head_weights_from_packed


def _head_variant(**slip):
    return lambda w, c, x, num_heads, head: _head(w, c, x, num_heads, head, **slip)


def _scale_by(which):
    def head_weights(w, c, x, num_heads, head):
        e = x.shape[-1]
        return _head(w, c, x, num_heads, head, scale={"e": 1 / math.sqrt(e), "d": num_heads / e}[which])
    return head_weights


RIGHT_FLOPS = lambda i, j, e, h: 4 * i * e * e + 4 * j * e * e + 4 * i * j * e

ATTEMPTS = [
    # 05/1
    Attempt("05/1", "einops with three, h, d", FUSED, fused_einops, right=True),
    Attempt("05/1", "view and permute, one tensor", FUSED, fused_view_permute, right=True),
    Attempt("05/1", "chunk, unflatten, transpose, a list", FUSED, fused_chunks, right=True),
    Attempt("05/1", "float64 numpy arrays", FUSED, fused_float64_numpy, right=True),
    Attempt("05/1", "q, k, v side by side inside each head", FUSED, fused_per_head_interleaved,
            hint="all of q's e features first"),
    Attempt("05/1", "(d h) instead of (h d)", FUSED, fused_d_h, hint=r"\(h d\), not \(d h\)"),
    Attempt("05/1", "reshape without the transpose", FUSED, fused_no_transpose, hint=r"straight to \(b, h, n, d\)"),
    Attempt("05/1", "the head axis third", FUSED, fused_head_axis_third, hint="head axis is third"),
    Attempt("05/1", "k, q, v", FUSED, fused_order_kqv, hint="in another order"),
    Attempt("05/1", "3e cut into heads at once", FUSED, fused_all_at_once, hint="all 3e features into heads at once"),
    Attempt("05/1", "q only", FUSED, fused_q_only, hint="return three tensors"),
    Attempt("05/1", "q and k only", FUSED, fused_two, hint="yours returns 2"),
    Attempt("05/1", "view after a transpose", FUSED, fused_view_after_transpose, hint="no longer in that order"),
    Attempt("05/1", "3 heads written in", FUSED, fused_hard_coded_heads, hint="raised EinopsError"),
    Attempt("05/1", "tokens in reverse", FUSED, fused_flipped_tokens, hint=GENERIC),
    Attempt("05/1", "no return", FUSED, lambda qkv, num_heads: None, hint="returned None"),
    Attempt("05/1", "untouched stub", FUSED, fused_stub, hint="still raises NotImplementedError"),
    Attempt("05/1", "the tensors, not the function", FUSED, torch.zeros(3, 2, 3, 5, 4), hint="define a function"),
    # 05/2
    Attempt("05/2", "the formula", FLOPS, RIGHT_FLOPS, right=True),
    Attempt("05/2", "product by product, head by head", FLOPS, flops_by_products, right=True),
    Attempt("05/2", "a numpy integer", FLOPS, lambda i, j, e, h: np.int64(RIGHT_FLOPS(i, j, e, h)), right=True),
    Attempt("05/2", "a float", FLOPS, lambda i, j, e, h: float(RIGHT_FLOPS(i, j, e, h)), right=True),
    Attempt("05/2", "a tensor from the formula", FLOPS, lambda i, j, e, h: torch.tensor(RIGHT_FLOPS(i, j, e, h)),
            right=True),
    Attempt("05/2", "self-attention of the queries", FLOPS, lambda i, j, e, h: 8 * i * e * e + 4 * i * i * e,
            hint="self-attention of the queries alone"),
    Attempt("05/2", "self-attention of the memory", FLOPS, lambda i, j, e, h: 8 * j * e * e + 4 * j * j * e,
            hint="self-attention of the memory alone"),
    Attempt("05/2", "every projection on the queries", FLOPS, lambda i, j, e, h: 8 * i * e * e + 4 * i * j * e,
            hint="key and value projections run on the memory"),
    Attempt("05/2", "every projection on both sequences", FLOPS,
            lambda i, j, e, h: 8 * i * e * e + 8 * j * e * e + 4 * i * j * e,
            hint="each projection reads one sequence"),
    Attempt("05/2", "multiply-adds", FLOPS, lambda i, j, e, h: RIGHT_FLOPS(i, j, e, h) // 2,
            hint="multiply-add counts as two FLOPs, as"),
    Attempt("05/2", "multiply-adds in the projections only", FLOPS,
            lambda i, j, e, h: 2 * i * e * e + 2 * j * e * e + 4 * i * j * e, hint="in the projections too"),
    Attempt("05/2", "no attention products", FLOPS, lambda i, j, e, h: 4 * i * e * e + 4 * j * e * e,
            hint="add the two attention products"),
    Attempt("05/2", "one attention product", FLOPS,
            lambda i, j, e, h: 4 * i * e * e + 4 * j * e * e + 2 * i * j * e, hint="there are two attention products"),
    Attempt("05/2", "no output projection", FLOPS, lambda i, j, e, h: 2 * i * e * e + 4 * j * e * e + 4 * i * j * e,
            hint="include the output projection"),
    Attempt("05/2", "the output projection on the memory", FLOPS,
            lambda i, j, e, h: 2 * i * e * e + 6 * j * e * e + 4 * i * j * e, hint="not on the memory"),
    Attempt("05/2", "attention divided by the heads", FLOPS,
            lambda i, j, e, h: 4 * i * e * e + 4 * j * e * e + 4 * i * j * e // h, hint=r"h \* d = e"),
    Attempt("05/2", "attention times the heads", FLOPS,
            lambda i, j, e, h: 4 * i * e * e + 4 * j * e * e + 4 * i * j * e * h, hint="each head works on d = e / h"),
    Attempt("05/2", "measured with FlopCounterMode", FLOPS, flops_measured, hint="multiplies matrices"),
    Attempt("05/2", "the example's count written in", FLOPS, lambda i, j, e, h: 1_111_040, hint="fixed number where"),
    Attempt("05/2", "a made-up count", FLOPS, lambda i, j, e, h: 12345, hint=GENERIC),
    Attempt("05/2", "text", FLOPS, lambda i, j, e, h: "1111040", hint="should be a whole number, got '1111040'"),
    Attempt("05/2", "a fraction", FLOPS, lambda i, j, e, h: RIGHT_FLOPS(i, j, e, h) + 0.5, hint="whole number"),
    Attempt("05/2", "no return", FLOPS, lambda i, j, e, h: None, hint="None"),
    Attempt("05/2", "three arguments", FLOPS, lambda i, j, e: 0, hint="raised TypeError"),
    Attempt("05/2", "untouched stub", FLOPS, flops_stub, hint="still raises NotImplementedError"),
    Attempt("05/2", "the number, not a function", FLOPS, 1_111_040, hint="define a function"),
    # 05/3
    Attempt("05/3", "head rows by hand", HEAD, head_right, right=True),
    Attempt("05/3", "einops and einsum", HEAD, head_einsum, right=True),
    Attempt("05/3", "an nn.MultiheadAttention built from the tensors", HEAD, head_via_torch_module, right=True),
    Attempt("05/3", "the library's module with the weights copied", HEAD, head_via_library, right=True),
    Attempt("05/3", "computed in float32", HEAD, head_in_float32, right=True),
    Attempt("05/3", "a head axis of 1 kept", HEAD, head_keepdim, right=True),
    Attempt("05/3", "x turned to float32, the weights not", HEAD, head_x_in_float32_only,
            hint="some of them are float64: does your function mix in a float32 tensor"),
    Attempt("05/3", "numpy", HEAD, head_numpy, right=True),
    Attempt("05/3", "the head before", HEAD, lambda w, c, x, h, m: _head(w, c, x, h, m - 1 if m else m + 1),
            hint="heads are counted from 0"),
    Attempt("05/3", "the head after", HEAD, lambda w, c, x, h, m: _head(w, c, x, h, m + 1 if m + 1 < h else m - 1),
            hint="heads are counted from 0"),
    Attempt("05/3", "no biases", HEAD, _head_variant(bias=False), hint=r"biases c\^q and c\^k"),
    Attempt("05/3", "scale 1/sqrt(e)", HEAD, _scale_by("e"), hint=r"not by 1/sqrt\(e\)"),
    Attempt("05/3", "scale 1/d", HEAD, _scale_by("d"), hint=r"not by 1/d"),
    Attempt("05/3", "no scale", HEAD, _head_variant(scale=1.0), hint=r"missing the 1/sqrt\(d\)"),
    Attempt("05/3", "queries and keys swapped", HEAD, _head_variant(order=(1, 0)), hint="swapped the queries"),
    Attempt("05/3", "softmax over the queries", HEAD, _head_variant(dim=-2), hint="each query's weights must sum"),
    Attempt("05/3", "no transpose", HEAD, _head_variant(transpose=False), hint="multiplied by the transpose"),
    Attempt("05/3", "the mean over the heads", HEAD,
            lambda w, c, x, h, m: sum(_head(w, c, x, h, k) for k in range(h)) / h, hint="average over all heads"),
    Attempt("05/3", "sizes of the lesson's module written in", HEAD, head_fixed_size, hint="fixed number where"),
    Attempt("05/3", "the first sentence only", HEAD, head_first_sentence, hint=r"\(b, i, j\) = \(2, 4, 4\)"),
    Attempt("05/3", "uniform weights", HEAD, lambda w, c, x, h, m: torch.full((x.shape[0], x.shape[1], x.shape[1]),
                                                                             1 / x.shape[1]), hint=GENERIC),
    Attempt("05/3", "no return", HEAD, lambda w, c, x, h, m: None, hint="None"),
    Attempt("05/3", "untouched stub", HEAD, head_stub, hint="still raises NotImplementedError"),
    Attempt("05/3", "the weights, not the function", HEAD, torch.zeros(1, 5, 5), hint="define a function"),
]
