"""Linformer (Wang et al. 2020): keys and values projected along the sequence to ``rank`` rows, so each query scores
``rank`` mixtures of keys instead of n keys.

With E and F learned ``(rank, seq_len)`` matrices, K' = E K and V' = F V are ``(rank, d)``: row r of K' is a weighted
sum of all keys. Attention is then ordinary softmax attention of the n queries over the ``rank`` rows: time and
memory O(n * rank). The effective weight of query i on value j is sum_r alpha'_{i,r} F_{r,j}, a matrix of rank at most
``rank``: the paper's observation is that trained attention matrices are close to low rank. Two limits follow from
the construction: E mixes positions, so there is no causal version (a row of K' would mix future keys), and E has
one column per position, so the model is tied to its ``seq_len`` (shorter inputs use the first columns).
With rank = seq_len and E = F = identity it is exactly multi-head attention.

How it differs from :func:`attention_lab.reference.linformer_attention` (softmax attention over E K and F V, and the
effective weights alpha' F written out as an i x j matrix; tested equal in fp64, values and gradients) and what
that buys: it runs PyTorch's fused attention over the ``rank`` projected rows and never forms the i x j weights,
so time and memory grow as n * rank instead of n^2 (``need_weights=True`` returns the ``(i, rank)`` weights over
the projected rows, not the i x j ones).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

from .._validation import (
    check_bool,
    check_heads_divide,
    check_positive_ints,
    check_qkv,
    check_sequence_input,
    check_tensor,
    fail,
)
from ..core.functional import scaled_dot_product_attention

__all__ = ["LinformerSelfAttention", "linformer_attention"]


def _check_projection(fn: str, name: str, proj: object, j: int, like: torch.Tensor) -> torch.Tensor:
    check_tensor(fn, name, proj, floating=True)
    if proj.dim() != 2 or proj.shape[1] < j:
        fail(fn, f"{name} must have shape (rank, seq_len) with seq_len >= j={j} (one column per key position), got "
                 f"{tuple(proj.shape)}; give it at least {j} columns")
    if proj.dtype != like.dtype or proj.device != like.device:
        fail(fn, f"{name} must share k's dtype and device ({like.dtype}, {like.device}), got ({proj.dtype}, "
                 f"{proj.device}); convert it with {name}.to(k)", TypeError)
    return proj[:, :j]  # the first j columns: a shorter sequence uses the first positions


def _check_ranks(fn: str, e: torch.Tensor, f: torch.Tensor) -> None:
    if e.shape[0] != f.shape[0]:
        fail(fn, f"e_proj and f_proj must have the same rank (rows): E K and F V are the keys and values of one "
                 f"attention, got e_proj {tuple(e.shape)} and f_proj {tuple(f.shape)}; give both rank rows")


def linformer_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, e_proj: torch.Tensor,
                        f_proj: torch.Tensor) -> torch.Tensor:
    """Softmax attention of the queries over K' = E K and V' = F V (``rank`` rows each instead of j).

    Shape: q ``(..., i, d)``, k ``(..., j, d)``, v ``(..., j, dv)``, e_proj and f_proj ``(rank, seq_len)`` with
        seq_len >= j (the first j columns are used) -> ``(..., i, dv)``.
    """
    fn = "linformer_attention"
    check_qkv(fn, q, k, v)
    e = _check_projection(fn, "e_proj", e_proj, k.shape[-2], k)  # (r, j)
    f = _check_projection(fn, "f_proj", f_proj, k.shape[-2], k)  # (r, j)
    _check_ranks(fn, e, f)
    return F.scaled_dot_product_attention(q, e @ k, f @ v)  # keys (..., r, d), values (..., r, dv)


class LinformerSelfAttention(nn.Module):
    """Multi-head self-attention with Linformer's sequence projections E, F (shared by the heads).

    Same q, k, v, output projections as :class:`~attention_lab.MultiHeadAttention` (``q_proj``, ``k_proj``,
    ``v_proj``, ``out_proj``), plus ``e_proj`` and ``f_proj``, parameters of shape ``(rank, seq_len)`` drawn from
    N(0, 1/rank) as in the paper. ``forward(x, *, mask=None, need_weights=False, cache=None)`` returns
    ``(output, weights)``; there is no mask and no cache (E mixes all positions, see the module docstring), and
    ``weights`` are over the ``rank`` projected rows, ``(b, h, i, rank)``. ``causal`` is False: it has no causal
    form.

    Shape: x ``(b, i, e)`` with i <= seq_len -> output ``(b, i, e)``, weights ``(b, h, i, rank)`` or ``None``.
    """

    def __init__(self, embed_dim: int, num_heads: int, seq_len: int, rank: int, *, bias: bool = True) -> None:
        super().__init__()
        fn = "LinformerSelfAttention"
        check_positive_ints(fn, embed_dim=embed_dim, num_heads=num_heads, seq_len=seq_len, rank=rank)
        if rank > seq_len:
            fail(fn, f"rank must be at most seq_len={seq_len} (projecting to more rows than positions adds nothing), "
                     f"got rank={rank}")
        check_heads_divide(fn, "embed_dim", embed_dim, num_heads)
        self.embed_dim, self.num_heads, self.seq_len, self.rank = embed_dim, num_heads, seq_len, rank
        self.causal = False  # no causal form: E and F mix every position
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (nn.Linear(embed_dim, embed_dim, bias=bias)
                                                                for _ in range(4))
        for proj in (self.q_proj, self.k_proj, self.v_proj):
            nn.init.xavier_uniform_(proj.weight)
        self.e_proj = nn.Parameter(torch.randn(rank, seq_len) * rank**-0.5)
        self.f_proj = nn.Parameter(torch.randn(rank, seq_len) * rank**-0.5)

    def extra_repr(self) -> str:
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, seq_len={self.seq_len}, rank={self.rank}"

    def forward(self, x: torch.Tensor, *, mask: torch.Tensor | None = None, need_weights: bool = False,
                cache: None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        fn = "LinformerSelfAttention.forward"
        check_sequence_input(fn, "x", x, self.q_proj.weight, max_len=self.seq_len)
        check_bool(fn, "need_weights", need_weights)
        if mask is not None or cache is not None:
            fail(fn, f"Linformer takes no {'mask' if mask is not None else 'cache'}: E and F mix every position, so "
                     f"no key can be hidden from a query and nothing is kept while generating; use softmax or linear "
                     f"attention for causal or padded inputs")
        h = self.num_heads
        n = x.shape[1]
        q = rearrange(self.q_proj(x), "b i (h d) -> b h i d", h=h)  # (b, h, i, d)
        k = self.e_proj[:, :n] @ rearrange(self.k_proj(x), "b j (h d) -> b h j d", h=h)  # (b, h, r, d)
        v = self.f_proj[:, :n] @ rearrange(self.v_proj(x), "b j (h d) -> b h j d", h=h)  # (b, h, r, d)
        weights = None
        if need_weights:
            heads, weights = scaled_dot_product_attention(q, k, v)  # (b, h, i, d), (b, h, i, r)
        else:
            heads = F.scaled_dot_product_attention(q, k, v)  # (b, h, i, d)
        out = self.out_proj(rearrange(heads, "b h i d -> b i (h d)"))  # (b, i, e)
        return out, weights
