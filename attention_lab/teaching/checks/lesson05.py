"""Checks for lesson 05 (multi-head attention)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from einops import rearrange
from torch import nn

from ...core.masks import causal_mask
from ...core.multihead import MultiHeadAttention
from ._core import as_tensor, close, correct, hint


def _numbered(*shape: int) -> torch.Tensor:
    """A float tensor whose entries are all different, so that any misplaced entry shows."""
    return torch.arange(torch.Size(shape).numel(), dtype=torch.float32).reshape(shape)


def _call(fn: object, what: str, *args: object) -> torch.Tensor:
    if not callable(fn):
        hint(f"pass your function itself, e.g. {what}(my_function), not the result of calling it")
    try:
        result = fn(*args)
    except NotImplementedError:
        hint("your function still raises NotImplementedError: replace the stub with your code")
    except Exception as error:  # the learner's own bug: say which input broke it, keep their traceback
        shapes = ", ".join(str(tuple(a.shape)) if isinstance(a, torch.Tensor) else repr(a) for a in args)
        raise AssertionError(f"Not yet. Hint: your function raised {type(error).__name__} when called with "
                             f"({shapes}); does it use its arguments' shapes rather than fixed numbers?"
                             ) from error
    return as_tensor(result, "your function's result")


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
                 "tokens; move the head axis next to d first (transpose, or einops 'b h n d -> b n (h d)')")
        if close(got, rearrange(o, "b h n d -> b n (d h)"), atol=0, rtol=0):
            hint("the features of one head must stay together: merge as (h d), so head 0's d values come first")
        if got.shape != expected.shape:
            hint(f"for o of shape (b, h, n, d) = {(b, h, n, d)} the result should be (b, n, h*d) = "
                 f"{tuple(expected.shape)}, yours is {tuple(got.shape)}")
        hint("the shape is right but the values are not; merging must undo split_heads exactly")
    correct("merge_heads puts each token's head outputs side by side; it undoes split_heads")


def parameter_count(answer: object, embed_dim: int, num_heads: int) -> None:
    """Exercise 3: the number of parameters of ``MultiHeadAttention(embed_dim, num_heads)`` (with biases)."""
    if isinstance(answer, (str, bytes)):
        hint(f"give a number, not a string: {answer!r} is text; drop the quotes (an expression in e, such as "
             "3 * e * e, works too)")
    try:
        value = int(answer)
    except (TypeError, ValueError, OverflowError):
        hint("give a whole number (you may write it as an expression in e, such as 3 * e * e)")
    if value != answer:
        hint("a parameter count is a whole number")
    e = embed_dim
    expected = sum(p.numel() for p in MultiHeadAttention(e, num_heads).parameters())
    if value == expected:
        correct(f"{expected} parameters = 4 e^2 + 4 e with e = {e}, the same for any number of heads")
        return
    if value == 4 * e * e:
        hint("that counts the four weight matrices; each projection also has a bias of e numbers")
    if value in (3 * e * e + 3 * e, 3 * e * e):
        hint("q, k and v are three projections, but the heads are then mixed by a fourth, the output "
             "projection W^o")
    if num_heads > 1 and value in (expected // num_heads, expected * num_heads, 4 * e * (e // num_heads)):
        hint("splitting into heads does not change the matrices, only how their output columns are grouped; "
             "the count does not depend on the number of heads")
    hint("add up every weight matrix and bias: q, k, v and output projections, each e x e plus e")


def causal_output(answer: object, torch_module: nn.MultiheadAttention, x: torch.Tensor) -> None:
    """Exercise 4: our module loaded from ``torch_module``, applied to ``x`` with a causal mask."""
    if isinstance(answer, tuple):
        hint("the module returns (output, weights); keep only the output, e.g. out, _ = mha(x, mask=...)")
    n = x.shape[1]
    allowed = causal_mask(n, device=x.device)  # (i, j), True = may attend
    ours = MultiHeadAttention.from_torch(torch_module).eval()
    with torch.no_grad():
        expected = torch_module(x, x, x, attn_mask=~allowed, need_weights=False)[0]
        no_mask = ours(x)[0]
        flipped = ours(x, mask=~allowed)[0]
    got = as_tensor(answer, "your output")
    if got.shape != expected.shape:
        hint(f"the output has the input's shape (b, n, e) = {tuple(x.shape)}, yours has {tuple(got.shape)}")
    if close(got, expected, atol=1e-5, rtol=1e-5):
        correct("same weights, same causal mask, same output as nn.MultiheadAttention")
        return
    if close(got, no_mask, atol=1e-5, rtol=1e-5):
        hint("without a mask every token also attends to the tokens after it; pass a causal mask")
    if close(got, flipped, atol=1e-5, rtol=1e-5):
        hint("the mask has PyTorch's polarity (True = blocked); this library's masks say True = may attend, "
             "as attention_lab.causal_mask builds them")
    hint("right shape, but not PyTorch's output: does your module hold torch_mha's weights (build it with "
         "MultiHeadAttention.from_torch, not a fresh MultiHeadAttention), and is the mask causal?")
