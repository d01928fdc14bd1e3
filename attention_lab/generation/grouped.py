"""Grouped-query attention (分组查询注意力): fewer key/value heads than query heads, so a smaller KV cache.

Multi-head attention gives each of its h query heads a key head and a value head of its own. Multi-query attention
(Shazeer 2019) keeps one key/value head for all of them; grouped-query attention (Ainslie et al. 2023) sits between:
the h query heads form h_kv groups of g = h / h_kv consecutive heads, and query head i reads key/value head i // g.
The cache shrinks by the factor h / h_kv; the number of queries and of attention scores stays the same.

:func:`grouped_self_attention` runs a :class:`GroupedQueryAttention` layer (or a
:class:`~attention_lab.MultiHeadAttention`, the case h_kv = h without rotary positions) in two steps: a projection
step (queries, keys and values, rotated by their positions when the layer uses RoPE) and one attention call, over
the new keys alone or, with a cache, over the cached keys that the new ones are appended to.

Reference: :func:`attention_lab.reference.grouped_query_attention`, which repeats each key/value head over its group
of query heads and runs plain attention (tested equal in fp64; with every cache, decoding chunk by chunk equals the
whole sequence at once). How it differs and what that buys: it never repeats the keys and values.
``F.scaled_dot_product_attention(..., enable_gqa=True)`` reads key/value head i // g for query head i, so the cache
holds h / h_kv times fewer numbers and decoding reads h / h_kv times fewer of them at every step.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

from .._validation import (
    check_bool,
    check_heads_divide,
    check_kv_heads,
    check_positive_ints,
    check_sequence_input,
    fail,
)
from ..core.functional import scaled_dot_product_attention
from ..core.multihead import MultiHeadAttention
from .kv_cache import ConcatKVCache, KVCache, SlidingWindowKVCache
from .rope import _check_base, apply_rope

__all__ = ["GroupedQueryAttention", "grouped_self_attention"]

_CACHES = (KVCache, ConcatKVCache, SlidingWindowKVCache)


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


def _project(layer: nn.Module, x: torch.Tensor, num_kv_heads: int, positions: torch.Tensor | None
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The projection step: queries, keys and values of x, rotated for their ``positions`` (RoPE) unless None.

    Shape: x ``(b, n, e)``, positions ``(n,)`` -> q ``(b, h, i, d)``, k and v ``(b, h_kv, j, d)``.
    """
    q = rearrange(layer.q_proj(x), "b i (h d) -> b h i d", h=layer.num_heads)  # (b, h, i, d)
    k = rearrange(layer.k_proj(x), "b j (h d) -> b h j d", h=num_kv_heads)  # (b, h_kv, j, d)
    v = rearrange(layer.v_proj(x), "b j (h d) -> b h j d", h=num_kv_heads)  # (b, h_kv, j, d)
    if positions is not None:
        q, k = apply_rope(q, positions, base=layer.rope_base), apply_rope(k, positions, base=layer.rope_base)
    return q, k, v


def _read_cache(cache: KVCache | ConcatKVCache | SlidingWindowKVCache, k: torch.Tensor, v: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Append k and v to the cache; return the keys and values the new queries read, and which of them each query
    may see (None: one new query, which sees every key held).

    Shape: k and v ``(b, h_kv, n, d)`` -> keys and values ``(b, h_kv, j, d)``, allowed ``(i, j)`` bool or None.
    """
    n, offset = k.shape[2], cache.offset
    window = cache.window if isinstance(cache, SlidingWindowKVCache) else None
    if window is not None and n > 1 and len(cache) + n > window:
        # The ring would overwrite keys that this chunk's earlier queries still need: read them before appending.
        keys = torch.cat([cache.keys[:, :, :len(cache)], k], dim=2)  # (b, h_kv, len + n, d)
        values = torch.cat([cache.values[:, :, :len(cache)], v], dim=2)  # (b, h_kv, len + n, d)
        key_positions = torch.cat([cache.positions, torch.arange(offset, offset + n, device=k.device)])  # (j,)
        cache.append(k, v)
    else:
        keys, values = cache.append(k, v)  # (b, h_kv, len, d)
        if n == 1:
            return keys, values, None
        key_positions = cache.positions  # (j,)
    new_positions = torch.arange(offset, offset + n, device=k.device)  # (i,)
    allowed = key_positions[None, :] <= new_positions[:, None]  # (i, j): query at offset + r sees keys up to it
    if window is not None:
        allowed &= key_positions[None, :] > new_positions[:, None] - window  # and only the last `window` of them
    return keys, values, allowed


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, allowed: torch.Tensor | None, is_causal: bool,
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


def grouped_self_attention(layer: GroupedQueryAttention | MultiHeadAttention, x: torch.Tensor, *,
                           cache: KVCache | ConcatKVCache | SlidingWindowKVCache | None = None, causal: bool = True,
                           mask: torch.Tensor | None = None, need_weights: bool = False
                           ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Self-attention of ``layer`` on x, continuing from ``cache`` when one is given.

    Queries and keys are rotated for positions ``cache.offset, cache.offset + 1, ...`` (when the layer uses RoPE);
    with a cache the new keys and values are appended to it and each new query attends to the cached keys at its
    position or before (for a sliding cache: the last ``window`` of them). Without a cache, ``causal`` and the bool
    ``mask`` (True = may attend) decide what each query sees. ``need_weights`` (only without a cache) also returns
    the weights.

    Shape: x ``(b, n, e)``, mask broadcastable to ``(b, h, i, j)`` -> output ``(b, n, e)``, weights
        ``(b, h, i, j)`` or None.
    """
    fn = "grouped_self_attention"
    grouped = isinstance(layer, GroupedQueryAttention)
    if not grouped and not isinstance(layer, MultiHeadAttention):
        fail(fn, f"layer must be a GroupedQueryAttention or a MultiHeadAttention, got {type(layer).__name__}",
             TypeError)
    check_sequence_input(fn, "x", x, layer.q_proj.weight)
    num_kv_heads = layer.num_kv_heads if grouped else layer.num_heads
    if cache is not None:
        _check_cache(fn, cache, x, num_kv_heads, layer.head_dim)
        if mask is not None or need_weights:
            fail(fn, "mask and need_weights apply only without a cache (decoding is causal and keeps no weights); "
                     "call it with cache=None to get them")
    n, offset = x.shape[1], 0 if cache is None else cache.offset
    positions = torch.arange(offset, offset + n, device=x.device) if grouped and layer.rope else None  # (n,)
    q, k, v = _project(layer, x, num_kv_heads, positions)
    if cache is None:
        if mask is not None and causal:
            mask = mask & torch.ones(n, n, dtype=torch.bool, device=x.device).tril()  # (..., i, j)
        heads, weights = _attend(q, k, v, allowed=mask, is_causal=causal and mask is None, need_weights=need_weights)
    else:
        keys, values, allowed = _read_cache(cache, k, v)
        heads, weights = _attend(q, keys, values, allowed=allowed, is_causal=False, need_weights=False)
    return layer.out_proj(rearrange(heads, "b h i d -> b i (h d)")), weights  # (b, i, e)


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
        check_positive_ints(fn, embed_dim=embed_dim, num_heads=num_heads)
        check_kv_heads(fn, num_heads, num_kv_heads)
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
        """An empty :class:`~attention_lab.KVCache` for this layer, on its device and in its dtype.

        Shape: a cache whose buffers are ``(b, h_kv, max_len, d)``, b = batch_size.
        """
        weight = self.q_proj.weight
        return KVCache(batch_size, self.num_kv_heads, max_len, self.head_dim, dtype=weight.dtype,
                       device=weight.device)

    def forward(self, x: torch.Tensor, *, cache: object = None) -> torch.Tensor:
        """Causal self-attention over x, after the positions already in ``cache`` (if any).

        Shape: x ``(b, n, e)`` -> ``(b, n, e)``.
        """
        return grouped_self_attention(self, x, cache=cache)[0]
