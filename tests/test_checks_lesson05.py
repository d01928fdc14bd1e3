"""Lesson 05's exercise checks accept every right answer and reject common mistakes with their own hint; an error in
the learner's function becomes a hint."""

import math

import numpy as np
import pytest
import torch
from _check_helpers import accepts, rejects
from einops import rearrange
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

import attention_lab as al
from attention_lab.teaching.checks import lesson05 as check

# ---- exercise 1: split_heads ----


@pytest.mark.parametrize("split", [
    lambda x, h: rearrange(x, "b n (h d) -> b h n d", h=h),
    lambda x, h: x.view(x.shape[0], x.shape[1], h, -1).transpose(1, 2),
    lambda x, h: x.reshape(x.shape[0], x.shape[1], h, x.shape[2] // h).permute(0, 2, 1, 3).contiguous(),
    lambda x, h: torch.stack(x.chunk(h, dim=-1), dim=1),
    lambda x, h: x.double().unflatten(-1, (h, -1)).transpose(1, 2).numpy(),
])
def test_split_heads_accepts(capsys, split):
    accepts(capsys, check.split_heads, split)


@pytest.mark.parametrize("split,message", [
    (lambda x, h: x.reshape(x.shape[0], h, x.shape[1], -1), r"reshaping \(b, n, e\) straight to \(b, h, n, d\)"),
    (lambda x, h: rearrange(x, "b n (d h) -> b h n d", h=h), r"contiguous block of d features: group the last "
                                                             r"axis as \(h d\)"),
    (lambda x, h: x.view(x.shape[0], x.shape[1], h, -1), r"the head axis is third"),
    (lambda x, h: x, r"the result should be \(b, h, n, d\)"),
    (lambda x, h: rearrange(x, "b n (h d) -> b h n d", h=h).flip(2), r"shape is right but the values"),
    (lambda x, h: rearrange(x, "b n (h d) -> b h n d", h=3), r"raised EinopsError .* inputs of shape "
                                                             r"\[\(1, 4, 8\)\] and the argument 4"),  # hard-coded h
    (torch.zeros(2, 3, 5, 4), r"pass your function itself"),
])
def test_split_heads_rejects(split, message):
    rejects(check.split_heads, split, hint=message)


def test_split_heads_stub():
    def stub(x, h):
        raise NotImplementedError("replace this line with your answer, then run the check cell below")

    rejects(check.split_heads, stub, hint="still raises NotImplementedError")


# ---- exercise 2: merge_heads ----

@pytest.mark.parametrize("merge", [
    lambda o: rearrange(o, "b h n d -> b n (h d)"),
    lambda o: o.transpose(1, 2).reshape(o.shape[0], o.shape[2], -1),
    lambda o: o.transpose(1, 2).contiguous().view(o.shape[0], o.shape[2], -1),
    lambda o: torch.cat(o.unbind(1), dim=-1),
    lambda o: o.permute(0, 2, 1, 3).flatten(2).double(),
])
def test_merge_heads_accepts(capsys, merge):
    accepts(capsys, check.merge_heads, merge)


@pytest.mark.parametrize("merge,message", [
    (lambda o: o.reshape(o.shape[0], o.shape[2], -1), r"reshaping \(b, h, n, d\) straight to \(b, n, e\)"),
    (lambda o: rearrange(o, "b h n d -> b n (d h)"), r"merge as \(h d\)"),
    (lambda o: o.transpose(1, 2), r"the result should be \(b, n, h\*d\)"),
    (lambda o: rearrange(o, "b h n d -> b n (h d)").flip(1), r"undo split_heads exactly"),
    # transpose, then view: the view refuses; the hint says why instead of asking about fixed numbers
    (lambda o: o.transpose(1, 2).view(o.shape[0], o.shape[2], -1), r"no longer in that order"),
    (lambda o: o.transpose(1, 2).reshape(2, 5, 12), r"raised RuntimeError"),  # fits the first shape only
])
def test_merge_heads_rejects(merge, message):
    rejects(check.merge_heads, merge, hint=message)


def test_merge_heads_view_hint_does_not_blame_fixed_numbers():
    with pytest.raises(AssertionError) as error:
        check.merge_heads(lambda o: o.transpose(1, 2).view(o.shape[0], o.shape[2], -1))
    assert "fixed numbers" not in str(error.value)


# ---- exercise 3: FLOPs of cross-attention ----

NQ, NK, E, H = 10, 50, 64, 8
RIGHT = 4 * NQ * E * E + 4 * NK * E * E + 4 * NQ * NK * E


def test_cross_attention_flops_counts_what_flopcountermode_counts():
    module = al.MultiHeadAttention(E, H)
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        module(torch.randn(1, NQ, E), torch.randn(1, NK, E), need_weights=True)
    assert counter.get_total_flops() == RIGHT


@pytest.mark.parametrize("answer", [RIGHT, float(RIGHT), torch.tensor(RIGHT), np.int64(RIGHT),
                                    2 * (2 * NQ * E * E + 2 * NK * E * E + H * 2 * NQ * NK * (E // H))])
def test_cross_attention_flops_accepts(capsys, answer):
    accepts(capsys, check.cross_attention_flops, answer, n_queries=NQ, n_keys=NK, embed_dim=E, num_heads=H)


@pytest.mark.parametrize("answer,message", [
    (8 * NQ * E * E + 4 * NQ * NQ * E, "self-attention of the queries alone"),
    (8 * NK * E * E + 4 * NK * NK * E, "self-attention of the memory alone"),
    (8 * NQ * E * E + 4 * NQ * NK * E, "key and value projections run on the memory"),
    (RIGHT // 2, "multiply-add counts as two FLOPs"),
    (RIGHT - 4 * NQ * NK * E, "add the two attention products"),
    (RIGHT - 2 * NQ * NK * E, "there are two attention products"),
    (RIGHT - 2 * NQ * E * E, "output projection"),
    (4 * NQ * E * E + 4 * NK * E * E + 4 * NQ * NK * E // H, "h \\* d = e"),
    (4 * NQ * E * E + 4 * NK * E * E + 4 * NQ * NK * E * H, "each head works on d = e / h"),
    (12345, "count each matrix product"),
    (RIGHT + 0.5, "whole number"),
    (str(RIGHT), "not text"),
    (None, "is None"),
])
def test_cross_attention_flops_rejects(answer, message):
    rejects(check.cross_attention_flops, answer, n_queries=NQ, n_keys=NK, embed_dim=E, num_heads=H, hint=message)


# ---- exercise 4: one head's weights from nn.MultiheadAttention's packed matrices ----

@pytest.fixture
def setup():
    gen = torch.Generator().manual_seed(6)
    torch_mha = nn.MultiheadAttention(16, 4, batch_first=True).eval()
    with torch.no_grad():
        torch_mha.in_proj_bias.copy_(torch.randn(48, generator=gen))  # nonzero biases, so leaving them out shows
    return torch_mha, torch.randn(2, 5, 16, generator=gen)


def _head(torch_mha, x, m, *, bias=True, scale=None, order=(0, 1), transpose=True, dim=-1):
    e, h = torch_mha.embed_dim, torch_mha.num_heads
    d = e // h
    W, c = (t.detach().to(x.dtype) for t in (torch_mha.in_proj_weight, torch_mha.in_proj_bias))
    parts = []
    for part in order:
        Wp = W[part * e:(part + 1) * e]
        full = x @ (Wp.T if transpose else Wp) + (c[part * e:(part + 1) * e] if bias else 0)
        parts.append(full[..., m * d:(m + 1) * d])
    scale = 1 / math.sqrt(d) if scale is None else scale
    return torch.softmax(parts[0] @ parts[1].transpose(-2, -1) * scale, dim=dim)


def test_head_weights_from_torch_accepts(capsys, setup):
    torch_mha, x = setup
    W_q, W_k = torch_mha.in_proj_weight.detach().chunk(3)[:2]
    c_q, c_k = torch_mha.in_proj_bias.detach().chunk(3)[:2]
    rows = slice(8, 12)  # head 2 of d = 4
    einsum_form = torch.softmax(torch.einsum("bid,bjd->bij", x @ W_q[rows].T + c_q[rows], x @ W_k[rows].T + c_k[rows])
                                / 2, dim=-1)
    library = al.MultiHeadAttention.from_torch(torch_mha)(x, need_weights=True)[1][:, 2]
    torch_form = torch_mha(x, x, x, need_weights=True, average_attn_weights=False)[1][:, 2]
    for answer in [_head(torch_mha, x, 2), einsum_form, library, torch_form, _head(torch_mha, x.double(), 2),
                   _head(torch_mha, x, 2).detach().numpy()]:
        accepts(capsys, check.head_weights_from_torch, answer, torch_mha, x, head=2)


def test_head_weights_from_torch_rejects(setup):
    torch_mha, x = setup
    cases = [
        (_head(torch_mha, x, 1), "head 1's pattern; heads are counted from 0"),
        (_head(torch_mha, x, 3), "head 3's pattern"),
        (_head(torch_mha, x, 2, bias=False), "biases c\\^q and c\\^k"),
        (_head(torch_mha, x, 2, scale=1 / 4), "not by 1/sqrt\\(e\\)"),
        (_head(torch_mha, x, 2, scale=1.0), "missing the 1/sqrt\\(d\\)"),
        (_head(torch_mha, x, 2, order=(1, 0)), "swapped the queries and the keys"),
        (_head(torch_mha, x, 2, dim=-2), "each query's weights must sum to 1"),
        (_head(torch_mha, x, 2, transpose=False), "multiplied by the transpose"),
        (sum(_head(torch_mha, x, m) for m in range(4)) / 4, "average over all heads"),
        (_head(torch_mha, x, 2)[0], "\\(b, i, j\\)"),
        (None, "is None"),
    ]
    for answer, message in cases:
        rejects(check.head_weights_from_torch, answer, torch_mha, x, head=2, hint=message)


# ---- slips found by trying answers a learner would write ----

def test_functions_without_return_get_the_return_hint():
    rejects(check.split_heads, lambda x, h: None, hint="split_heads returned None")
    rejects(check.merge_heads, lambda o: None, hint="merge_heads returned None")


def test_cross_attention_flops_every_projection_on_both_sequences_gets_its_own_hint():
    rejects(check.cross_attention_flops, 8 * NQ * E * E + 8 * NK * E * E + 4 * NQ * NK * E, n_queries=NQ,
            n_keys=NK, embed_dim=E, num_heads=H, hint="each projection reads one sequence only")
