"""The attention step of :class:`~attention_lab.GroupedQueryAttention`: reading a cache (the keys each new query may
see) and softmax attention of h query heads over h_kv key/value heads, with lesson 14's sink logits and
soft-capping written out where they are asked for. Private to ``generation``.

Reference: :func:`attention_lab.reference.grouped_query_attention` (and, with sinks or a cap,
:func:`attention_lab.reference.attention_with_sinks` and :func:`attention_lab.reference.softcap`). How it differs
and what that buys: without sinks or a cap it calls ``F.scaled_dot_product_attention(..., enable_gqa=True)``, which
reads key/value head i // g for query head i instead of repeating the keys; with them it repeats the keys and
writes the scores out, because no fused kernel has either.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..core.functional import attention_scores, masked_softmax, scaled_dot_product_attention
from ..core.masks import causal_mask
from ..core.sinks import softmax_with_sinks
from ..core.softcapping import softcap
from .kv_cache import ConcatKVCache, KVCache, SlidingWindowKVCache

__all__ = ["attend", "read_cache"]


def read_cache(cache: KVCache | ConcatKVCache | SlidingWindowKVCache, k: torch.Tensor, v: torch.Tensor
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


def _plain_attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, allowed: torch.Tensor | None, is_causal: bool,
            need_weights: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Softmax attention of h query heads over h_kv key/value heads (query head i reads head i // g).

    Shape: q ``(b, h, i, d)``, k and v ``(b, h_kv, j, d)``, allowed bool broadcastable to ``(b, h, i, j)``
        -> ``(b, h, i, d)``, weights ``(b, h, i, j)`` or None.
    """
    if need_weights:
        group = q.shape[1] // k.shape[1]
        if is_causal:
            allowed = causal_mask(q.shape[-2], k.shape[-2], device=q.device)  # (i, j)
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)  # (b, h, j, d)
        return scaled_dot_product_attention(q, k, v, allowed)
    heads = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, is_causal=is_causal, enable_gqa=True)
    if allowed is not None:  # a query with no allowed key gets zeros, as everywhere in the package
        heads = torch.where(allowed.any(dim=-1, keepdim=True), heads, heads.new_zeros(()))
    return heads, None  # (b, h, i, d)


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, allowed: torch.Tensor | None, is_causal: bool,
           need_weights: bool, sinks: torch.Tensor | None = None, cap: float | None = None
           ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Softmax attention (:func:`_plain_attend`), or with ``sinks`` (one logit per head) or a soft cap ``cap`` the
    scores written out.

    Shape: q ``(b, h, i, d)``, k and v ``(b, h_kv, j, d)``, allowed bool broadcastable to ``(b, h, i, j)``, sinks
        ``(h,)`` -> ``(b, h, i, d)``, weights ``(b, h, i, j)`` or None.
    """
    if sinks is None and cap is None:
        return _plain_attend(q, k, v, allowed=allowed, is_causal=is_causal, need_weights=need_weights)
    if is_causal:
        allowed = causal_mask(q.shape[-2], k.shape[-2], device=q.device)  # (i, j)
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)  # (b, h, j, d)
    scores = attention_scores(q, k) if cap is None else softcap(attention_scores(q, k), cap)
    weights = (masked_softmax(scores, allowed) if sinks is None
               else softmax_with_sinks(scores, sinks.to(scores.dtype), allowed))  # (b, h, i, j)
    return weights @ v, weights if need_weights else None  # (b, h, i, d)
