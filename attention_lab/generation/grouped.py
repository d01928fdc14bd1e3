"""Grouped-query attention (分组查询注意力): fewer key/value heads than query heads, so a smaller KV cache.

Multi-head attention gives each of its h query heads a key head and a value head of its own. Multi-query attention
(Shazeer 2019) keeps one key/value head for all of them; grouped-query attention (Ainslie et al. 2023) sits between:
the h query heads form h_kv groups of g = h / h_kv consecutive heads, and query head i reads key/value head i // g.
The cache shrinks by the factor h / h_kv; the number of queries and of attention scores stays the same.

:func:`grouped_self_attention` is the computation, for any layer with ``q_proj``, ``k_proj``, ``v_proj`` and
``out_proj`` (this module's :class:`GroupedQueryAttention`, or a :class:`~attention_lab.MultiHeadAttention`, which is
the case h_kv = h without rotary positions): it projects, rotates (RoPE) from the cache's offset, appends to the
cache and attends, causally.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

from .._validation import check_bool, check_heads_divide, check_positive_int, check_tensor, fail
from ..core.functional import scaled_dot_product_attention
from .kv_cache import ConcatKVCache, KVCache, SlidingWindowKVCache
from .rope import _check_base, apply_rope

__all__ = ["GroupedQueryAttention", "grouped_self_attention"]

_CACHES = (KVCache, ConcatKVCache, SlidingWindowKVCache)


def _divisors(n: int) -> list[int]:
    return [k for k in range(1, n + 1) if n % k == 0]


def _check_grouping(fn: str, num_heads: int, num_kv_heads: int) -> None:
    check_positive_int(fn, "num_kv_heads", num_kv_heads)
    if num_heads % num_kv_heads:
        fail(fn, f"num_heads must be a multiple of num_kv_heads (each key/value head serves a group of query heads), "
                 f"got num_heads={num_heads} and num_kv_heads={num_kv_heads}; choose num_kv_heads from the "
                 f"divisors of {num_heads}: {_divisors(num_heads)}")


def _check_input(fn: str, layer: nn.Module, x: object) -> None:
    check_tensor(fn, "x", x, floating=True)
    weight = layer.q_proj.weight
    e = weight.shape[1]
    if x.dim() != 3 or x.shape[-1] != e:
        fail(fn, f"x must have shape (b, n, e) with e={e} (the layer's embed_dim), got shape {tuple(x.shape)}; for "
                 f"one sequence add the batch axis with x.unsqueeze(0)")
    if x.dtype != weight.dtype or x.device != weight.device:
        fail(fn, f"x must have the layer's dtype {weight.dtype} and device {weight.device}, got {x.dtype} on "
                 f"{x.device}; convert it with x.to(...)", TypeError)


def _check_cache(fn: str, cache: object, x: torch.Tensor, num_kv_heads: int, head_dim: int) -> None:
    if not isinstance(cache, _CACHES):
        fail(fn, f"cache must be one of {', '.join(c.__name__ for c in _CACHES)} (or None), got "
                 f"{type(cache).__name__}", TypeError)
    layer_says = (x.shape[0], num_kv_heads, head_dim)
    cache_has = (cache.batch_size, cache.num_kv_heads, cache.head_dim)
    if cache_has != layer_says:
        fail(fn, f"the cache does not match the layer and input: (batch_size, num_kv_heads, head_dim) is "
                 f"{cache_has} for the cache and {layer_says} for the layer and x; build the cache with "
                 f"batch_size={layer_says[0]}, num_kv_heads={num_kv_heads}, head_dim={head_dim}")


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, allowed: torch.Tensor | None, is_causal: bool,
            need_weights: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Softmax attention of h query heads over h_kv key/value heads (query head i reads head i // g).

    Shape: q ``(b, h, i, d)``, k and v ``(b, h_kv, j, d)``, allowed bool broadcastable to ``(b, h, i, j)``
        -> ``(b, h, i, d)``, weights ``(b, h, i, j)`` or None.
    """
    if need_weights:
        group = q.shape[1] // k.shape[1]
        if is_causal:
            allowed = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool, device=q.device).tril()  # (i, j)
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)  # (b, h, j, d)
        return scaled_dot_product_attention(q, k, v, allowed)
    heads = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, is_causal=is_causal, enable_gqa=True)
    if allowed is not None:  # a query with no allowed key gets zeros, as everywhere in the package
        heads = torch.where(allowed.any(dim=-1, keepdim=True), heads, heads.new_zeros(()))
    return heads, None  # (b, h, i, d)


def grouped_self_attention(layer: nn.Module, x: torch.Tensor, *, cache: object = None, causal: bool = True,
                           mask: torch.Tensor | None = None, need_weights: bool = False
                           ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Self-attention of ``layer`` on x, continuing from ``cache`` when one is given.

    ``layer`` has ``q_proj``, ``k_proj``, ``v_proj``, ``out_proj`` and ``num_heads``; ``num_kv_heads`` (default
    ``num_heads``), ``rope`` (default False) and ``rope_base`` are read from it when present. Queries and keys are
    rotated for positions ``cache.offset, cache.offset + 1, ...``; the new keys and values are appended to the cache
    and each new query attends to the cached keys at its position or before (for a sliding cache: the last
    ``window`` of them). Without a cache, ``causal`` and the bool ``mask`` (True = may attend) decide what each
    query sees. ``need_weights`` (only without a cache) also returns the weights.

    Shape: x ``(b, n, e)``, mask broadcastable to ``(b, h, i, j)`` -> output ``(b, n, e)``, weights
        ``(b, h, i, j)`` or None.
    """
    fn = "grouped_self_attention"
    _check_input(fn, layer, x)
    h = layer.num_heads
    h_kv = getattr(layer, "num_kv_heads", h)
    d = layer.q_proj.weight.shape[0] // h
    if cache is not None:
        _check_cache(fn, cache, x, h_kv, d)
        if mask is not None or need_weights:
            fail(fn, "mask and need_weights apply only without a cache (decoding is causal and keeps no weights); "
                     "call it with cache=None to get them")
    n = x.shape[1]
    offset = 0 if cache is None else cache.offset
    q = rearrange(layer.q_proj(x), "b i (h d) -> b h i d", h=h)  # (b, h, i, d)
    k = rearrange(layer.k_proj(x), "b j (h d) -> b h j d", h=h_kv)  # (b, h_kv, j, d)
    v = rearrange(layer.v_proj(x), "b j (h d) -> b h j d", h=h_kv)  # (b, h_kv, j, d)
    if getattr(layer, "rope", False):
        positions = torch.arange(offset, offset + n, device=x.device)  # (n,)
        q, k = apply_rope(q, positions, base=layer.rope_base), apply_rope(k, positions, base=layer.rope_base)
    weights = None
    if cache is None:
        if mask is not None and causal:
            mask = mask & torch.ones(n, n, dtype=torch.bool, device=x.device).tril()  # (..., i, j)
        heads, weights = _attend(q, k, v, mask, causal and mask is None, need_weights)
    elif isinstance(cache, SlidingWindowKVCache) and n > 1 and len(cache) + n > cache.window:
        # The ring would overwrite keys that earlier queries of this chunk still need: one position at a time.
        steps = []
        for s in range(n):
            keys, values = cache.append(k[:, :, s:s + 1], v[:, :, s:s + 1])  # (b, h_kv, len, d)
            steps.append(_attend(q[:, :, s:s + 1], keys, values, None, False, False)[0])  # (b, h, 1, d)
        heads = torch.cat(steps, dim=2)  # (b, h, i, d)
    else:
        keys, values = cache.append(k, v)  # (b, h_kv, len, d)
        allowed = None
        if n > 1:  # query at position offset + r may see the keys at positions <= offset + r
            query_positions = torch.arange(offset, offset + n, device=x.device)  # (i,)
            allowed = cache.positions[None, :] <= query_positions[:, None]  # (i, j)
        heads, _ = _attend(q, keys, values, allowed, False, False)
    merged = rearrange(heads, "b h i d -> b i (h d)")  # (b, i, e)
    return layer.out_proj(merged), weights


class GroupedQueryAttention(nn.Module):
    """Causal self-attention with ``num_kv_heads`` key/value heads shared by groups of query heads.

    ``num_kv_heads == num_heads`` is multi-head attention, ``num_kv_heads == 1`` multi-query attention. With
    ``rope=True`` queries and keys are rotated by their positions (:func:`~attention_lab.apply_rope`), continuing
    from the cache's offset. ``forward(x, *, cache=None)`` equals repeating each key/value head over its group of
    query heads and calling ``F.scaled_dot_product_attention(..., is_causal=True)``.

    Attributes: ``embed_dim`` (e), ``num_heads`` (h), ``num_kv_heads`` (h_kv), ``head_dim`` (d = e / h), ``rope``,
    ``rope_base``, and the projections ``q_proj`` (e -> e), ``k_proj`` and ``v_proj`` (e -> h_kv d), ``out_proj``
    (e -> e), each an ``nn.Linear``. :meth:`new_cache` builds a matching :class:`~attention_lab.KVCache`.

    Shape: x ``(b, n, e)`` -> ``(b, n, e)``.
    """

    def __init__(self, embed_dim: int, num_heads: int, num_kv_heads: int, *, bias: bool = False, rope: bool = True,
                 rope_base: float = 10000.0) -> None:
        super().__init__()
        fn = "GroupedQueryAttention"
        check_positive_int(fn, "embed_dim", embed_dim)
        check_positive_int(fn, "num_heads", num_heads)
        _check_grouping(fn, num_heads, num_kv_heads)
        check_heads_divide(fn, "embed_dim", embed_dim, num_heads)
        check_bool(fn, "bias", bias)
        check_bool(fn, "rope", rope)
        head_dim = embed_dim // num_heads
        if rope and head_dim % 2:
            fail(fn, f"RoPE rotates pairs of features, so head_dim = embed_dim / num_heads must be even, got "
                     f"head_dim={head_dim} (embed_dim={embed_dim}, num_heads={num_heads}); change num_heads or "
                     f"embed_dim, or pass rope=False")
        self.embed_dim, self.num_heads, self.num_kv_heads, self.head_dim = embed_dim, num_heads, num_kv_heads, head_dim
        self.rope, self.rope_base = rope, _check_base(fn, rope_base)
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.k_proj = nn.Linear(embed_dim, num_kv_heads * head_dim, bias=bias)
        self.v_proj = nn.Linear(embed_dim, num_kv_heads * head_dim, bias=bias)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        for proj in (self.q_proj, self.k_proj, self.v_proj):  # as MultiHeadAttention and nn.MultiheadAttention
            nn.init.xavier_uniform_(proj.weight)
            if proj.bias is not None:
                nn.init.zeros_(proj.bias)

    def extra_repr(self) -> str:
        return (f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, num_kv_heads={self.num_kv_heads}, "
                f"head_dim={self.head_dim}, rope={self.rope}")

    def new_cache(self, batch_size: int, max_len: int) -> KVCache:
        """An empty :class:`~attention_lab.KVCache` for this layer, on its device and in its dtype."""
        weight = self.q_proj.weight
        return KVCache(batch_size, self.num_kv_heads, max_len, self.head_dim, dtype=weight.dtype,
                       device=weight.device)

    def forward(self, x: torch.Tensor, *, cache: object = None) -> torch.Tensor:
        """Causal self-attention over x, after the positions already in ``cache`` (if any).

        Shape: x ``(b, n, e)`` -> ``(b, n, e)``.
        """
        return grouped_self_attention(self, x, cache=cache)[0]
