"""Grouped-query attention (分组查询注意力): fewer key/value heads than query heads, so a smaller KV cache.

Multi-head attention gives each of its h query heads a key head and a value head of its own. Multi-query attention
(Shazeer 2019) keeps one key/value head for all of them; grouped-query attention (Ainslie et al. 2023) sits between:
the h query heads form h_kv groups of g = h / h_kv consecutive heads, and query head i reads key/value head i // g.
The cache shrinks by the factor h / h_kv; the number of queries and of attention scores stays the same.

:class:`GroupedQueryAttention` runs in two steps: a projection step (queries, keys and values, rotated by their
positions when the layer uses RoPE) and one attention call, over the new keys alone or, with a cache, over the
cached keys that the new ones are appended to. It is the softmax attention of every model block
(:mod:`attention_lab.models.attention_choice`), so it answers the blocks' one call,
``forward(x, *, mask=None, need_weights=False, cache=None) -> (output, weights)``.

Reference: :func:`attention_lab.reference.grouped_query_attention`, which repeats each key/value head over its group
of query heads and runs plain attention (tested equal in fp64; with every cache, decoding chunk by chunk equals the
whole sequence at once). How it differs and what that buys: it never repeats the keys and values.
``F.scaled_dot_product_attention(..., enable_gqa=True)`` reads key/value head i // g for query head i, so the cache
holds h / h_kv times fewer numbers and decoding reads h / h_kv times fewer of them at every step.
"""

from __future__ import annotations

import torch
from einops import rearrange
from torch import nn

from .._validation import (
    check_bool,
    check_choice,
    check_heads_divide,
    check_kv_heads,
    check_number,
    check_positive_int,
    check_positive_ints,
    check_sequence_input,
    fail,
)
from ..core._mask_checks import check_mask
from ..core.masks import causal_mask, sliding_window_mask
from ..core.multihead import MultiHeadAttention
from ..core.output_gate import OutputGate
from ..core.qk_normalization import QKNorm
from ._attend import attend, read_cache
from .kv_cache import ConcatKVCache, KVCache, SlidingWindowKVCache
from .rope import _check_base, apply_rope
from .sink_cache import SinkKVCache

__all__ = ["CACHE_KINDS", "GroupedQueryAttention"]

_CACHES = (KVCache, ConcatKVCache, SlidingWindowKVCache, SinkKVCache)
CACHE_KINDS = ("preallocated", "concat", "sliding")  # what GroupedQueryAttention.new_cache builds


class GroupedQueryAttention(nn.Module):
    """Softmax self-attention with ``num_kv_heads`` key/value heads shared by groups of query heads.

    ``num_kv_heads == num_heads`` is multi-head attention, ``num_kv_heads == 1`` multi-query attention. With
    ``rope=True`` queries and keys are rotated by their positions (:func:`~attention_lab.apply_rope`), continuing
    from the cache's offset. ``causal=True`` (the default) lets query i see keys j <= i; ``causal=False`` is an
    encoder's attention, which keeps no cache. With ``num_kv_heads == num_heads`` and ``rope=False`` it is
    :class:`~attention_lab.MultiHeadAttention` plus a cache (:meth:`from_multihead` and :meth:`to_torch` convert).

    ``window`` (None: every key) makes it a local layer: query i sees only the keys within ``window`` positions of
    it (:func:`~attention_lab.sliding_window_mask`, causal or not as the layer), and its cache keeps only those
    (:meth:`new_cache` gives a sliding cache of ``window``): the local layers of an interleaved stack
    (:mod:`attention_lab.generation.interleaved`).

    ``forward(x, *, mask=None, need_weights=False, cache=None)`` returns ``(output, weights)``: the bool ``mask``
    (True = may attend, broadcastable to ``(b, h, i, j)``) is combined with causality; ``need_weights`` returns the
    per-head weights; with a ``cache`` (:meth:`new_cache`) the new keys and values are appended to it and each new
    query attends to the cached keys at its position or before (for a sliding cache: the last ``window`` of them),
    which takes neither a mask nor weights. Without a mask it equals repeating each key/value head over its group
    and calling ``F.scaled_dot_product_attention(..., is_causal=causal)``.

    Lesson 14's options, all off by default: ``window`` (a local layer: each query sees its last ``window``
    positions), ``qk_norm`` (:class:`~attention_lab.QKNorm`, before RoPE), ``output_gate``
    (:class:`~attention_lab.OutputGate`), ``sink_logits`` (a learned logit per head, ``sinks``,
    :func:`~attention_lab.softmax_with_sinks`), ``softcap=c`` (:func:`~attention_lab.softcap`, before the mask).

    Attributes: ``embed_dim`` (e), ``num_heads`` (h), ``num_kv_heads`` (h_kv), ``head_dim`` (d = e / h), ``rope``,
    ``rope_base``, ``causal``, ``window``, and the projections ``q_proj`` (e -> e), ``k_proj`` and ``v_proj``
    (e -> h_kv d), ``out_proj`` (e -> e), each an ``nn.Linear``.

    Shape: x ``(b, n, e)`` -> output ``(b, n, e)``, weights ``(b, h, i, j)`` or None.
    """

    def __init__(self, embed_dim: int, num_heads: int, num_kv_heads: int, *, bias: bool = False, rope: bool = True,
                 rope_base: float = 10000.0, causal: bool = True, window: int | None = None, qk_norm: bool = False,
                 output_gate: bool = False, sink_logits: bool = False, softcap: float | None = None) -> None:
        super().__init__()
        fn = "GroupedQueryAttention"
        check_positive_ints(fn, embed_dim=embed_dim, num_heads=num_heads)
        check_kv_heads(fn, num_heads, num_kv_heads)
        check_heads_divide(fn, "embed_dim", embed_dim, num_heads)
        check_bool(fn, "bias", bias)
        check_bool(fn, "rope", rope)
        self.causal = check_bool(fn, "causal", causal)
        self.window = None if window is None else check_positive_int(fn, "window", window)
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
        for proj in (self.q_proj, self.k_proj, self.v_proj):  # as nn.MultiheadAttention
            nn.init.xavier_uniform_(proj.weight)
            if proj.bias is not None:
                nn.init.zeros_(proj.bias)
        self.qk_norm = QKNorm(head_dim) if check_bool(fn, "qk_norm", qk_norm) else None
        self.gate = OutputGate(embed_dim, num_heads) if check_bool(fn, "output_gate", output_gate) else None
        self.sinks = nn.Parameter(torch.zeros(num_heads)) if check_bool(fn, "sink_logits", sink_logits) else None
        self.softcap = None if softcap is None else check_number(fn, "softcap", softcap, low=0, low_open=True)

    def extra_repr(self) -> str:
        return (f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, num_kv_heads={self.num_kv_heads}, "
                f"head_dim={self.head_dim}, rope={self.rope}, causal={self.causal}"
                + ("" if self.window is None else f", window={self.window}"))

    def new_cache(self, batch_size: int, max_len: int, *, kind: str = "preallocated", window: int | None = None
                  ) -> KVCache | ConcatKVCache | SlidingWindowKVCache:
        """An empty cache for this layer, on its device and in its dtype: ``kind`` ``"preallocated"``
        (:class:`~attention_lab.KVCache` of ``max_len`` positions), ``"concat"`` (:class:`~attention_lab.ConcatKVCache`)
        or ``"sliding"`` (:class:`~attention_lab.SlidingWindowKVCache` of the last ``window`` positions).

        A local layer (``window`` set) keeps only its window whatever ``kind`` says: a sliding cache of ``window``
        positions (``kind="sliding"`` with another window is refused).

        Shape: a cache whose buffers are ``(b, h_kv, max_len or window, d)``, b = batch_size.
        """
        fn = "GroupedQueryAttention.new_cache"
        check_positive_ints(fn, batch_size=batch_size, max_len=max_len)
        check_choice(fn, "kind", kind, CACHE_KINDS)
        if not self.causal:
            fail(fn, "the layer must be causal to keep a cache (an encoder's earlier positions see later tokens, so "
                     "nothing it computed stays valid when a token is added), got causal=False; build it with "
                     "causal=True")
        if (kind == "sliding") != (window is not None):
            fail(fn, f"window= is needed with kind='sliding' and only then, got kind={kind!r} and window={window!r}; "
                     f"e.g. new_cache(1, 64, kind='sliding', window=16)")
        if self.window is not None and window not in (None, self.window):
            fail(fn, f"window must be the layer's own window {self.window} (a local layer sees no further), got "
                     f"window={window}; pass window={self.window} or leave kind and window out")
        options = dict(dtype=self.q_proj.weight.dtype, device=self.q_proj.weight.device)
        sizes = (batch_size, self.num_kv_heads)
        if self.window is not None:
            return SlidingWindowKVCache(*sizes, self.window, self.head_dim, **options)
        if kind == "preallocated":
            return KVCache(*sizes, max_len, self.head_dim, **options)
        if kind == "concat":
            return ConcatKVCache(*sizes, self.head_dim, **options)
        return SlidingWindowKVCache(*sizes, check_positive_int(fn, "window", window), self.head_dim, **options)

    @classmethod
    def from_multihead(cls, module: MultiHeadAttention, *, causal: bool = True) -> GroupedQueryAttention:
        """Plain multi-head attention (num_kv_heads == num_heads, rope=False) with the weights, dtype, device and
        train/eval mode of ``module``; the caller's random stream is left as it was (the weights are copied).

        Shape: four ``(e, e)`` projections -> the same four.
        """
        if not isinstance(module, MultiHeadAttention):
            fail("GroupedQueryAttention.from_multihead", f"expected a MultiHeadAttention, got {type(module).__name__}",
                 TypeError)
        with torch.random.fork_rng(devices=[]):  # its own draws are overwritten next
            layer = cls(module.embed_dim, module.num_heads, module.num_heads, bias=module.bias, rope=False,
                        causal=causal)
        layer.load_state_dict(module.state_dict())  # the same four projections, by name
        return layer.to(module.q_proj.weight).train(module.training)

    def to_torch(self, *, batch_first: bool = True) -> nn.Module:
        """An ``nn.MultiheadAttention`` with the same weights, for plain multi-head attention only (num_kv_heads ==
        num_heads, rope=False). It is not causal by itself: give it the mask (PyTorch's polarity, ``~mask``).

        Shape: q_proj, k_proj, v_proj weights ``(e, e)`` each -> in_proj_weight ``(3e, e)``.
        """
        check_bool("GroupedQueryAttention.to_torch", "batch_first", batch_first)
        if self.num_kv_heads != self.num_heads or self.rope:
            fail("GroupedQueryAttention.to_torch", f"nn.MultiheadAttention has a key/value head per query head and no "
                 f"rotary positions, got num_kv_heads={self.num_kv_heads} of num_heads={self.num_heads} and "
                 f"rope={self.rope}; only a layer built with num_kv_heads=num_heads, rope=False converts")
        plain = MultiHeadAttention(self.embed_dim, self.num_heads, bias=self.q_proj.bias is not None)
        plain = plain.to(self.q_proj.weight)
        plain.load_state_dict(self.state_dict())  # the same four projections, by name
        return plain.train(self.training).to_torch(batch_first=batch_first)

    def forward(self, x: torch.Tensor, *, mask: torch.Tensor | None = None, need_weights: bool = False,
                cache: KVCache | ConcatKVCache | SlidingWindowKVCache | SinkKVCache | None = None
                ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Self-attention over x, after the positions already in ``cache`` (if any); see the class docstring.

        Shape: x ``(b, n, e)``, mask broadcastable to ``(b, h, i, j)`` -> output ``(b, n, e)``, weights
            ``(b, h, i, j)`` or None.
        """
        fn = "GroupedQueryAttention.forward"
        check_sequence_input(fn, "x", x, self.q_proj.weight)
        check_bool(fn, "need_weights", need_weights)
        n = x.shape[1]
        if mask is not None:
            check_mask(fn, mask, (x.shape[0], self.num_heads, n, n), allow_float=False, like=x)
        if cache is not None:
            self._check_cache(fn, cache, x)
            if mask is not None or need_weights:
                fail(fn, "mask and need_weights apply only without a cache (decoding is causal and keeps no "
                         "weights); call it with cache=None to get them")
        offset = 0 if cache is None else cache.offset
        q, k, v = self._project(x, torch.arange(offset, offset + n, device=x.device) if self.rope else None)
        if self.window is not None and cache is None:
            band = sliding_window_mask(n, self.window, causal=self.causal, device=x.device)  # (i, j)
            mask = band if mask is None else mask & band
        if cache is not None:
            keys, values, allowed = read_cache(cache, k, v)
            heads, weights = attend(q, keys, values, allowed=allowed, is_causal=False, need_weights=False,
                                     sinks=self.sinks, cap=self.softcap)
        else:
            if mask is not None and self.causal:
                mask = mask & causal_mask(n, device=x.device)  # (..., i, j)
            heads, weights = attend(q, k, v, allowed=mask, is_causal=self.causal and mask is None,
                                    need_weights=need_weights, sinks=self.sinks, cap=self.softcap)
        if self.gate is not None:
            heads = self.gate(x, heads)  # (b, h, i, d)
        return self.out_proj(rearrange(heads, "b h i d -> b i (h d)")), weights  # (b, i, e)

    def _check_cache(self, fn: str, cache: object, x: torch.Tensor) -> None:
        if not self.causal:
            fail(fn, "cache must be None for an encoder's attention (its earlier positions see later tokens), got a "
                     "cache with causal=False; build the layer with causal=True to decode with a cache")
        if not isinstance(cache, _CACHES):
            fail(fn, f"cache must be one of {', '.join(c.__name__ for c in _CACHES)} (or None), got "
                     f"{type(cache).__name__}; make one with new_cache(batch_size, max_len)", TypeError)
        layer_says = (x.shape[0], self.num_kv_heads, self.head_dim)
        cache_has = (cache.batch_size, cache.num_kv_heads, cache.head_dim)
        if cache_has != layer_says:
            fail(fn, f"the cache does not match the layer and input: (batch_size, num_kv_heads, head_dim) is "
                     f"{cache_has} for the cache and {layer_says} for the layer and x; build the cache with "
                     f"new_cache(batch_size={layer_says[0]}, max_len=...)")
        if self.window is not None and getattr(cache, "window", None) != self.window:
            fail(fn, f"a local layer (window={self.window}) needs a SlidingWindowKVCache of that window, got "
                     f"{type(cache).__name__} (window {getattr(cache, 'window', None)}); make it with new_cache()")
        if isinstance(cache, KVCache):  # a full buffer is refused before any append, in the layer's name
            cache._check_room(fn, x.shape[1], cache.max_len)

    def _project(self, x: torch.Tensor, positions: torch.Tensor | None
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The projection step: queries, keys and values of x, rotated for their ``positions`` (RoPE) unless None.

        Shape: x ``(b, n, e)``, positions ``(n,)`` -> q ``(b, h, i, d)``, k and v ``(b, h_kv, j, d)``.
        """
        q = rearrange(self.q_proj(x), "b i (h d) -> b h i d", h=self.num_heads)  # (b, h, i, d)
        k = rearrange(self.k_proj(x), "b j (h d) -> b h j d", h=self.num_kv_heads)  # (b, h_kv, j, d)
        v = rearrange(self.v_proj(x), "b j (h d) -> b h j d", h=self.num_kv_heads)  # (b, h_kv, j, d)
        if self.qk_norm is not None:
            q, k = self.qk_norm(q, k)
        if positions is not None:
            q, k = apply_rope(q, positions, base=self.rope_base), apply_rope(k, positions, base=self.rope_base)
        return q, k, v
