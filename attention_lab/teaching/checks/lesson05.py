"""Checks for lesson 05 (multi-head attention): the heads of a fused q, k, v projection, the FLOPs of cross-attention,
and one head's weights from nn.MultiheadAttention's packed matrices. Heads are counted from 0: head m owns features
m*d ... m*d + d - 1. Every check tries the learner's function on several sizes, one of them with b == n == h."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
from einops import rearrange
from torch import nn

from ...i18n import Message, msg
from ._core import (
    as_tensor,
    call_learner,
    call_prediction,
    close,
    compare_tensor_answer,
    correct,
    fallback_hint,
    guard_errors,
    hint,
    learner_name,
    right_for_some_inputs,
)
from ._function_answers import check_formula, expect_function


def _numbered(*shape: int) -> torch.Tensor:
    """A float tensor whose entries are all different, so that any misplaced entry shows."""
    return torch.arange(torch.Size(shape).numel(), dtype=torch.float32).reshape(shape)


def _call(fn: Callable[..., object], *args: object) -> object:
    """call_learner, with its own hint for the view that cannot follow a transpose."""
    try:
        return fn(*args)
    except RuntimeError as error:
        if "view size is not compatible" in str(error):
            hint(msg("a view only re-reads the numbers in their memory order, and after moving an axis they are no "
                     "longer in that order; use the reshaping that copies when it has to, or make the tensor "
                     "contiguous first"))
        return call_learner(fn, *args)
    except Exception:  # any other error (a stub, a fixed size that fits one shape only): named by call_learner
        return call_learner(fn, *args)


# ---- exercise 1: the heads of a fused projection ----

_FUSED_CASES = ((2, 5, 12, 3), (1, 4, 8, 4), (3, 3, 6, 3), (2, 6, 8, 1))  # (b, n, e, h); the third: b == n == h


def _three(result: object, fn: Callable[..., object]) -> torch.Tensor:
    """q, k and v stacked on a new first axis, from a tuple or list of three, or one tensor with a first axis of 3."""
    if result is None:
        hint(msg("{name} returned None: end it with a return statement that gives back q, k and v",
                 name=learner_name(fn)))
    if isinstance(result, (tuple, list)):
        if len(result) != 3:
            hint(msg("return three tensors, q, k and v, in that order; yours returns {count}", count=len(result)))
        parts = [as_tensor(part, msg("each of q, k and v")) for part in result]
        if len({p.shape for p in parts}) != 1:
            hint(msg("q, k and v should have one shape, (b, h, n, d); yours have {shapes}",
                     shapes=[tuple(p.shape) for p in parts]))
        return torch.stack([p.double() for p in parts])
    got = as_tensor(result, msg("what your function returns"))
    if got.dim() != 5 or got.shape[0] != 3:
        hint(msg("return three tensors, q, k and v (a tuple, or one tensor with a first axis of size 3); yours "
                 "returns one tensor of shape {shape}", shape=tuple(got.shape)))
    return got.double()


@guard_errors
def fused_qkv_heads(answer: object) -> None:
    """Exercise 1: ``split_fused_qkv(qkv, num_heads)`` -> q, k, v, each (b, h, n, d), from the output (b, n, 3e) of a
    fused projection (q's e features first, then k's, then v's), head m holding features m*d ... m*d + d - 1."""
    fn = expect_function(answer, "split_fused_qkv(qkv, num_heads)")
    for index, (b, n, e, h) in enumerate(_FUSED_CASES):
        d = e // h
        qkv = _numbered(b, n, 3 * e)
        result = _call(fn, qkv.clone(), h)
        if isinstance(result, torch.Tensor) and close(result, rearrange(qkv, "b n (h d) -> b h n d", h=h), atol=0):
            hint(msg("that splits all 3e features into heads at once; q, k and v are three blocks of e features: "
                     "cut those apart first, then cut each into heads"))
        got = _three(result, fn)
        expected = rearrange(qkv, "b n (three h d) -> three b h n d", three=3, h=h).double()  # (3, b, h, n, d)
        if close(got, expected, atol=0, rtol=0):
            continue
        where = msg("qkv of shape (b, n, 3e) = {shape} and {h} heads", shape=(b, n, 3 * e), h=h)
        thirds = qkv.chunk(3, dim=-1)  # q, k, v: (b, n, e) each
        mistakes = [
            (rearrange(qkv, "b n (h three d) -> three b h n d", three=3, h=h),
             msg("the fused output holds all of q's e features first, then k's, then v's (not q, k, v side by side "
                 "inside each head): cut it into the three blocks of e before cutting each into heads")),
            (rearrange(qkv, "b n (three d h) -> three b h n d", three=3, h=h),
             msg("each head owns a contiguous block of d features: group each third as (h d), not (d h)")),
            (torch.stack([t.reshape(b, h, n, d) for t in thirds]),
             msg("reshaping (b, n, e) straight to (b, h, n, d) puts features of different tokens into one head's "
                 "row; split the last axis into (h, d) first, then move the head axis next to the batch axis")),
        ]
        for wrong, message in mistakes:
            if close(got, wrong.double(), atol=0, rtol=0):
                hint(message)
        if got.shape[1:] == (b, n, h, d) and (b, n, h, d) != (b, h, n, d):
            hint(msg("the heads are split but the head axis is third; attention wants (b, h, n, d), so swap the "
                     "token and head axes"))
        if got.shape != expected.shape:
            hint(msg("for {where}, q, k and v should each have shape (b, h, n, d) = {expected}, yours {shape}",
                     where=where, expected=(b, h, n, d), shape=tuple(got.shape[1:])))
        order = [next((s for s in range(3) if close(got[r], expected[s], atol=0, rtol=0)), None) for r in range(3)]
        if sorted(o for o in order if o is not None) == [0, 1, 2]:
            hint(msg("q, k and v are right but in another order: the fused output holds q first, then k, then v"))
        if index:
            hint(right_for_some_inputs(learner_name(fn), msg("qkv of shape {shape} and {h} heads",
                                                             shape=(_FUSED_CASES[0][0], _FUSED_CASES[0][1],
                                                                    3 * _FUSED_CASES[0][2]), h=_FUSED_CASES[0][3]),
                                       where))
        fallback_hint(msg("for {where}, the shapes are right but the values are not where they belong: row t of head m "
                          "(counting from 0) of q should be token t's features m*d ... m*d + d - 1", where=where))
    correct(msg("q, k and v each cut into h heads of d features, token by token, for several shapes"))


# ---- exercise 2: FLOPs of cross-attention ----

_CROSS_SIZES = ((10, 50, 64, 8), (7, 3, 32, 4), (12, 12, 16, 2), (1, 20, 48, 6), (30, 4, 8, 1))  # (i, j, e, h)
_FLOP_MISTAKES: tuple[tuple[Callable[[int, int, int, int], int], Message], ...] = (
    (lambda i, j, e, h: 8 * i * e * e + 4 * i * i * e,
     msg("that is self-attention of the queries alone; here the keys and values are the memory's tokens, and there "
         "are not as many of them")),
    (lambda i, j, e, h: 8 * j * e * e + 4 * j * j * e,
     msg("that is self-attention of the memory alone; the query and output projections run only on the query "
         "tokens")),
    (lambda i, j, e, h: 8 * i * e * e + 4 * i * j * e,
     msg("the key and value projections run on the memory's tokens, not on the queries")),
    (lambda i, j, e, h: 8 * i * e * e + 8 * j * e * e + 4 * i * j * e,
     msg("each projection reads one sequence only: the query and output projections the queries, the key and value "
         "projections the memory")),
    (lambda i, j, e, h: 2 * i * e * e + 2 * j * e * e + 2 * i * j * e,
     msg("a multiply-add counts as two FLOPs, as FlopCounterMode counts it")),
    (lambda i, j, e, h: 4 * i * e * e + 4 * j * e * e,
     msg("add the two attention products: the scores and the weighted sum of values")),
    (lambda i, j, e, h: 4 * i * e * e + 4 * j * e * e + 2 * i * j * e,
     msg("there are two attention products: the scores and the weighted sum of values")),
    (lambda i, j, e, h: 2 * i * e * e + 4 * j * e * e + 4 * i * j * e,
     msg("include the output projection W^o, on every query token")),
    (lambda i, j, e, h: 2 * i * e * e + 6 * j * e * e + 4 * i * j * e,
     msg("the output projection mixes the heads' outputs, one per query: it runs on the query tokens, not on the "
         "memory")),
    (lambda i, j, e, h: 4 * i * e * e + 4 * j * e * e + 4 * i * j * e // h,
     msg("the heads together cover all e features (h * d = e): the attention products cost the same as one head of "
         "size e")),
    (lambda i, j, e, h: 4 * i * e * e + 4 * j * e * e + 4 * i * j * e * h,
     msg("each head works on d = e / h features, so the heads together cost what one head of size e costs")),
    (lambda i, j, e, h: 2 * i * e * e + 2 * j * e * e + 4 * i * j * e,
     msg("a multiply-add counts as two FLOPs in the projections too, as FlopCounterMode counts it")),
)


def _sizes(i: int, j: int, e: int, h: int) -> Message:
    return msg("{i} queries, {j} keys, e = {e}, {h} heads", i=i, j=j, e=e, h=h)


@guard_errors
def cross_attention_flops(answer: object) -> None:
    """Exercise 2: ``cross_attention_flops(n_queries, n_keys, embed_dim, num_heads)`` -> the matrix-product FLOPs
    FlopCounterMode counts when ``MultiHeadAttention(embed_dim, num_heads)`` lets ``n_queries`` tokens attend to a
    memory of ``n_keys`` tokens (batch 1, need_weights=True), predicted from the sizes."""
    i, j, e, _ = _CROSS_SIZES[0]
    check_formula(answer, signature="cross_attention_flops(n_queries, n_keys, embed_dim, num_heads)",
                  inputs=_CROSS_SIZES, rule=_cross_flops, mistakes=_FLOP_MISTAKES, describe=_sizes,
                  last_hint=msg("count each matrix product as 2 x (rows of the left) x (shared size) x (columns of "
                                "the right): four projections, each on the tokens it reads, and two attention "
                                "products over every (query, key) pair"),
                  success=msg("{flops:,d} FLOPs for {i} queries on {j} keys: the query and output projections run "
                              "on the queries, the key and value projections on the memory, and the two attention "
                              "products on i x j pairs", flops=_cross_flops(*_CROSS_SIZES[0]), i=i, j=j),
                  call=call_prediction)


def _cross_flops(i: int, j: int, e: int, h: int) -> int:
    return 4 * i * e * e + 4 * j * e * e + 4 * i * j * e  # tests/test_checks_lesson05.py: FlopCounterMode's count


# ---- exercise 3: one head's weights from the packed matrices ----

_HEAD_CASES = ((12, 3, 2, 1, 5, torch.float32), (18, 3, 0, 2, 4, torch.float32), (10, 2, 1, 3, 3, torch.float64),
               (24, 8, 5, 2, 6, torch.float32))  # (e, h, head, b, n, dtype): the lesson's first (d * d != e, so
# 1/d and 1/sqrt(e) differ there), then b == n and float64; d = 4, 6, 5, 3, so no head size can be written in


def _packed_module(e: int, h: int, b: int, n: int, seed: int) -> tuple[nn.MultiheadAttention, torch.Tensor]:
    """nn.MultiheadAttention with random weights and biases (none zero) and an input, from the check's own
    generator: the lesson's random numbers stay as they were."""
    gen = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng(devices=[]):
        module = nn.MultiheadAttention(e, h, batch_first=True).eval()
    with torch.no_grad():
        module.in_proj_weight.copy_(torch.randn(3 * e, e, generator=gen) / math.sqrt(e))
        module.in_proj_bias.copy_(torch.randn(3 * e, generator=gen))
    return module, torch.randn(b, n, e, generator=gen)


def _head_weights(w: torch.Tensor, c: torch.Tensor, x: torch.Tensor, h: int, m: int, *, bias: bool = True,
                  scale: float | None = None, order: Sequence[int] = (0, 1), transpose: bool = True,
                  dim: int = -1) -> torch.Tensor:
    """Head m's weights from the packed matrices, right or with one slip (what a mistake would give)."""
    e = w.shape[1]
    d = e // h
    parts = []
    for part in order:  # 0: W^q and c^q, 1: W^k and c^k
        W = w[part * e:(part + 1) * e]  # (e, e), stored (out, in) like nn.Linear.weight
        full = x @ (W.T if transpose else W) + (c[part * e:(part + 1) * e] if bias else 0)  # (b, n, e)
        parts.append(full[..., m * d:(m + 1) * d])  # (b, n, d): head m's block of features
    scale = 1 / math.sqrt(d) if scale is None else scale
    return torch.softmax(parts[0] @ parts[1].transpose(-2, -1) * scale, dim=dim)  # (b, i, j)


@guard_errors
def head_weights_from_packed(answer: object) -> None:
    """Exercise 3: ``head_weights(in_proj_weight, in_proj_bias, x, num_heads, head)`` -> head ``head``'s attention
    weights (b, i, j) on ``x``, computed from nn.MultiheadAttention's packed matrices alone, for several sizes."""
    fn = expect_function(answer, "head_weights(in_proj_weight, in_proj_bias, x, num_heads, head)")
    for index, (e, h, head, b, n, dtype) in enumerate(_HEAD_CASES):
        module, x = _packed_module(e, h, b, n, seed=50 + index)
        module, x = module.to(dtype), x.to(dtype)
        w, c = module.in_proj_weight.detach(), module.in_proj_bias.detach()
        with torch.no_grad():
            expected = module(x, x, x, need_weights=True, average_attn_weights=False)[1][:, head]  # (b, i, j)
            got = call_learner(fn, w.clone(), c.clone(), x.clone(), h, head)
        wd, cd, xd = w.double(), c.double(), x.double()
        d = e // h
        mistakes = [(_head_weights(wd, cd, xd, h, m), msg("that is head {m}'s pattern; heads are counted from 0, and "
                                                          "head {head} owns rows {head} * d ... {head} * d + d - 1 "
                                                          "of each projection", m=m, head=head))
                    for m in (head - 1, head + 1) if 0 <= m < h]
        mistakes += [
            (_head_weights(wd, cd, xd, h, head, bias=False),
             msg("nn.MultiheadAttention adds biases c^q and c^k after the weights; they are packed in in_proj_bias in "
                 "the same order as the weights")),
            (_head_weights(wd, cd, xd, h, head, scale=1 / math.sqrt(e)),
             msg("scale by 1/sqrt(d) of one head, not by 1/sqrt(e) of the whole model")),
            (_head_weights(wd, cd, xd, h, head, scale=1.0), msg("the scores are missing the 1/sqrt(d) scale")),
            (_head_weights(wd, cd, xd, h, head, scale=1 / d), msg("scale by 1/sqrt(d), the square root of a head's "
                                                                  "size, not by 1/d")),
            (_head_weights(wd, cd, xd, h, head, order=(1, 0)),
             msg("the packed matrix holds W^q, W^k and W^v in that order, e rows each: you swapped the queries and "
                 "the keys")),
            (_head_weights(wd, cd, xd, h, head, dim=-2), msg("softmax over the keys (the last axis): each query's "
                                                             "weights must sum to 1")),
            (_head_weights(wd, cd, xd, h, head, transpose=False),
             msg("nn.Linear-style weights are stored (out, in) like W^q itself; a token in a row is multiplied by the "
                 "transpose")),
            (sum(_head_weights(wd, cd, xd, h, m) for m in range(h)) / h,
             msg("that is the average over all heads; take one head only")),
        ]
        where = msg("e = {e}, {h} heads, head {head}, x of shape {shape} ({dtype})", e=e, h=h, head=head,
                    shape=(b, n, e), dtype=str(dtype).replace("torch.", ""))
        try:
            compare_tensor_answer(got, expected, what=msg("your weights of head {head}", head=head),
                                  mistakes=mistakes, atol=1e-5, rtol=1e-5, unit_axes_ok=True,
                                  shape_hint=msg("for {where}: one weight per (query, key) pair for every sentence "
                                                 "of the batch, shape (b, i, j) = {expected}", where=where,
                                                 expected=(b, n, n)))
        except AssertionError as failed:
            if index and getattr(failed, "generic", False):
                first = _HEAD_CASES[0]
                hint(right_for_some_inputs(learner_name(fn), msg("e = {e}, {h} heads, head {head}", e=first[0],
                                                                 h=first[1], head=first[2]), where))
            raise
    correct(msg("each head's weights equal nn.MultiheadAttention's: its own d rows of the packed W^q and W^k, their "
                "biases, and 1/sqrt(d), for every size and both dtypes"))
