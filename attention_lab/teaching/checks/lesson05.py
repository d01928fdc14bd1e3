"""Checks for lesson 05 (multi-head attention). Heads are counted from 0: head m owns features m*d ... m*d + d - 1."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from einops import rearrange
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from ...core.multihead import MultiHeadAttention
from ._core import as_tensor, call_learner, check_tensor_answer, close, correct, guard_errors, hint, whole_number


def _numbered(*shape: int) -> torch.Tensor:
    """A float tensor whose entries are all different, so that any misplaced entry shows."""
    return torch.arange(torch.Size(shape).numel(), dtype=torch.float32).reshape(shape)


def _call(fn: object, what: str, *args: object) -> torch.Tensor:
    if not callable(fn):
        hint(f"pass your function itself, e.g. {what}(my_function), not the result of calling it")
    try:
        result = fn(*args)
    except AssertionError:
        raise
    except RuntimeError as error:
        if "view size is not compatible" in str(error):
            hint("a view only re-reads the numbers in their memory order, and after moving an axis they are no "
                 "longer in that order; use the reshaping that copies when it has to, or make the tensor "
                 "contiguous first")
        result = call_learner(fn, *args, what=f"your {what}")
    except Exception:  # any other error (a stub, a fixed size that fits one shape only): named by call_learner
        result = call_learner(fn, *args, what=f"your {what}")
    if result is None:
        hint(f"your {what} returned None: end it with a return statement that gives back the result")
    return as_tensor(result, "your function's result")


@guard_errors
def split_heads(fn: Callable[[torch.Tensor, int], torch.Tensor]) -> None:
    """Exercise 1: ``fn(x, num_heads)`` turns ``(b, n, e)`` into ``(b, h, n, d)``, head m = features m*d..m*d+d-1."""
    for b, n, e, h in ((2, 5, 12, 3), (1, 4, 8, 4), (3, 3, 6, 3)):  # the last one has b == n == h
        x = _numbered(b, n, e)
        d = e // h
        got = _call(fn, "split_heads", x.clone(), h)
        expected = rearrange(x, "b n (h d) -> b h n d", h=h)  # (b, h, n, d)
        if close(got, expected, atol=0, rtol=0):
            continue
        if close(got, x.reshape(b, h, n, d), atol=0, rtol=0):
            hint("reshaping (b, n, e) straight to (b, h, n, d) puts features of different tokens into one head's "
                 "row; split the last axis into (h, d) first, then move the head axis next to the batch axis")
        if close(got, rearrange(x, "b n (d h) -> b h n d", h=h), atol=0, rtol=0):
            hint("each head owns a contiguous block of d features: group the last axis as (h d), not (d h)")
        if got.shape == (b, n, h, d):
            hint("the heads are split but the head axis is third; attention wants (b, h, n, d), so swap the "
                 "token and head axes")
        if got.shape != expected.shape:
            hint(f"for x of shape (b, n, e) = {(b, n, e)} and {h} heads the result should be (b, h, n, d) = "
                 f"{tuple(expected.shape)}, yours is {tuple(got.shape)}")
        hint("the shape is right but the values are not where they belong: row t of head m (counting from 0) "
             "should be token t's features m*d ... m*d + d - 1")
    correct("split_heads gives every head its own block of features, token by token, for several shapes")


@guard_errors
def merge_heads(fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
    """Exercise 2: ``fn(o)`` turns per-head outputs ``(b, h, n, d)`` back into ``(b, n, e)``, heads side by side."""
    for b, h, n, d in ((2, 3, 5, 4), (1, 4, 2, 3), (3, 3, 3, 3)):
        o = _numbered(b, h, n, d)
        got = _call(fn, "merge_heads", o.clone())
        expected = rearrange(o, "b h n d -> b n (h d)")  # (b, n, e)
        if close(got, expected, atol=0, rtol=0):
            continue
        if close(got, o.reshape(b, n, h * d), atol=0, rtol=0):
            hint("reshaping (b, h, n, d) straight to (b, n, e) glues rows of one head together as if they were "
                 "tokens; bring the head axis next to d first")
        if close(got, rearrange(o, "b h n d -> b n (d h)"), atol=0, rtol=0):
            hint("the features of one head must stay together: merge as (h d), so head 0's d values come first")
        if got.shape != expected.shape:
            hint(f"for o of shape (b, h, n, d) = {(b, h, n, d)} the result should be (b, n, h*d) = "
                 f"{tuple(expected.shape)}, yours is {tuple(got.shape)}")
        hint("the shape is right but the values are not; merging must undo split_heads exactly")
    correct("merge_heads puts each token's head outputs side by side; it undoes split_heads")


def _counted_flops(n_queries: int, n_keys: int, embed_dim: int, num_heads: int) -> int:
    """Matrix-product FLOPs of one cross-attention call of the library's module, as FlopCounterMode counts them."""
    module = MultiHeadAttention(embed_dim, num_heads)
    query, memory = torch.zeros(1, n_queries, embed_dim), torch.zeros(1, n_keys, embed_dim)
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        module(query, memory, need_weights=True)  # the written-out path: every product is counted
    return counter.get_total_flops()


@guard_errors
def cross_attention_flops(answer: object, n_queries: int, n_keys: int, embed_dim: int, num_heads: int) -> None:
    """Exercise 3: the matrix-product FLOPs of ``MultiHeadAttention(embed_dim, num_heads)`` when ``n_queries``
    tokens attend to a memory of ``n_keys`` tokens (batch 1)."""
    if isinstance(answer, (str, bytes)):
        hint(f"give a number, not text: {answer!r} is a string; drop the quotes (an expression such as "
             f"2 * 10 * 64 works too)")
    value = whole_number(answer, "a FLOP count")
    i, j, e = n_queries, n_keys, embed_dim
    expected = _counted_flops(i, j, e, num_heads)
    if value == expected:
        correct(f"{expected:,d} FLOPs: the query and output projections run on the {i} queries, the key and "
                f"value projections on the {j} memory tokens, and the two attention products on i x j pairs")
        return
    projections_q_o, projections_k_v, attention = 4 * i * e * e, 4 * j * e * e, 4 * i * j * e
    mistakes = [
        (8 * i * e * e + 4 * i * i * e, "that is self-attention of the queries alone; here the keys and values "
                                        "are the memory's tokens, and there are not as many of them"),
        (8 * j * e * e + 4 * j * j * e, "that is self-attention of the memory alone; the query and output "
                                        "projections run only on the query tokens"),
        (8 * i * e * e + attention, "the key and value projections run on the memory's tokens, not on the "
                                    "queries"),
        (8 * i * e * e + 8 * j * e * e + attention, "each projection reads one sequence only: the query and output "
                                                    "projections the queries, the key and value projections the "
                                                    "memory"),
        (expected // 2, "a multiply-add counts as two FLOPs, as FlopCounterMode counts it"),
        (expected - attention, "add the two attention products: the scores and the weighted sum of values"),
        (expected - attention // 2, "there are two attention products: the scores and the weighted sum of "
                                    "values"),
        (expected - i * e * e, "include the output projection W^o, on every query token"),
        (expected - 2 * i * e * e, "include the output projection W^o, on every query token"),
        (projections_q_o + projections_k_v + attention // num_heads,
         "the heads together cover all e features (h * d = e): the attention products cost the same as one "
         "head of size e"),
        (projections_q_o + projections_k_v + attention * num_heads,
         "each head works on d = e / h features, so the heads together cost what one head of size e costs"),
    ]
    for wrong, message in mistakes:
        if value == wrong:
            hint(message)
    hint("count each matrix product as 2 x (rows of the left) x (shared size) x (columns of the right): four "
         "projections, each on the tokens it reads, and two attention products over every (query, key) pair")


@guard_errors
def head_weights_from_torch(answer: object, torch_module: nn.MultiheadAttention, x: torch.Tensor, head: int
                            ) -> None:
    """Exercise 4: head ``head``'s attention weights of ``torch_module`` on ``x``, computed by hand from the
    packed ``in_proj_weight`` and ``in_proj_bias``."""
    e, h = torch_module.embed_dim, torch_module.num_heads
    d = e // h
    x = as_tensor(x, "x").double()
    w = torch_module.in_proj_weight.detach().double()
    c = torch_module.in_proj_bias.detach().double() if torch_module.in_proj_bias is not None else torch.zeros(3 * e)
    with torch.no_grad():
        expected = torch_module(x.float(), x.float(), x.float(), need_weights=True,
                                average_attn_weights=False)[1][:, head]  # (b, i, j)

    def weights(m: int = head, *, bias: bool = True, scale: float = 1 / math.sqrt(d), order=(0, 1),
                transpose: bool = True, dim: int = -1) -> torch.Tensor:
        """Head m's weights, computed right or with one slip (what a mistake would give)."""
        parts = []
        for part in order:  # 0: W^q and c^q, 1: W^k and c^k
            W = w[part * e:(part + 1) * e]  # (e, e), stored (out, in) like nn.Linear.weight
            full = x @ (W.T if transpose else W) + (c[part * e:(part + 1) * e] if bias else 0)  # (b, n, e)
            parts.append(full[..., m * d:(m + 1) * d])  # (b, n, d): head m's block of features
        return torch.softmax(parts[0] @ parts[1].transpose(-2, -1) * scale, dim=dim)  # (b, i, j)

    mistakes = [(weights(m), f"that is head {m}'s pattern; heads are counted from 0, and head {head} owns rows "
                             f"{head} * d ... {head} * d + d - 1 of each projection") for m in (head - 1, head + 1)
                if 0 <= m < h]
    if bool(c.abs().max() > 0):
        mistakes.append((weights(bias=False), "nn.MultiheadAttention adds biases c^q and c^k after the weights; they "
                                              "are packed in in_proj_bias in the same order as the weights"))
    mistakes += [
        (weights(scale=1 / math.sqrt(e)), "scale by 1/sqrt(d) of one head, not by 1/sqrt(e) of the whole model"),
        (weights(scale=1.0), "the scores are missing the 1/sqrt(d) scale"),
        (weights(order=(1, 0)), "the packed matrix holds W^q, W^k and W^v in that order, e rows each: you swapped "
                                "the queries and the keys"),
        (weights(dim=-2), "softmax over the keys (the last axis): each query's weights must sum to 1"),
        (weights(transpose=False), "nn.Linear-style weights are stored (out, in) like W^q itself; a token in a "
                                   "row is multiplied by the transpose"),
        (sum(weights(m) for m in range(h)) / h, "that is the average over all heads; take one head only"),
    ]
    check_tensor_answer(
        answer,
        expected,
        what=f"your weights of head {head}",
        mistakes=mistakes,
        shape_hint="one weight per (query, key) pair for every sentence of the batch: (b, i, j)",
        atol=1e-5,
        rtol=1e-5,
        unit_axes_ok=True,
        success=f"head {head}'s weights equal nn.MultiheadAttention's: its own d rows of the packed W^q and W^k, "
                f"their biases, and 1/sqrt(d)",
    )
