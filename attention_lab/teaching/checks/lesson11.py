"""Checks for lesson 11 (attention while generating: the size of a cache with a sliding window, the position offset
that rotary positions need in a cache, pooling key/value heads into groups)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from einops import rearrange

from ...generation.cache_size import kv_cache_bytes
from ...generation.grouped import GroupedQueryAttention
from ...generation.kv_cache import KVCache, SlidingWindowKVCache
from ...generation.rope import apply_rope
from ._core import as_tensor, call_learner, correct, guard_errors, hint

# ---- exercise 1: the bytes of a cache, with an optional sliding window ----

_CONFIGS = [  # (num_layers, num_kv_heads, head_dim, seq_len, batch_size, bytes_per_value, window)
    (32, 8, 128, 8_192, 1, 2, None),
    (28, 4, 128, 32_768, 8, 2, 4_096),
    (2, 1, 64, 100, 3, 4, 500),
    (40, 2, 96, 4_096, 2, 1, 4_096),
    (12, 12, 64, 1_024, 5, 4, 256),
]


def _bytes(layers: int, kv_heads: int, head_dim: int, tokens: int, batch: int, per_value: int) -> int:
    return kv_cache_bytes(num_layers=layers, num_kv_heads=kv_heads, head_dim=head_dim, seq_len=tokens,
                          batch_size=batch, bytes_per_value=per_value)


def _as_count(value: object, what: str) -> float:
    number = as_tensor(value, what)
    if number.numel() != 1:
        hint(f"{what} should be one number of bytes, got {number.numel()} numbers")
    return float(number.reshape(()))


@guard_errors
def cache_bytes(fn: object) -> None:
    """Exercise 1: ``fn(num_layers, num_kv_heads, head_dim, seq_len, batch_size, bytes_per_value, window)``, the
    bytes of a model's whole KV cache; ``window`` is None (keep everything) or the positions a sliding cache keeps."""
    for layers, kv_heads, head_dim, tokens, batch, per_value, window in _CONFIGS:
        got = _as_count(call_learner(fn, layers, kv_heads, head_dim, tokens, batch, per_value, window,
                                     what="your cache_bytes"), "the bytes your cache_bytes returned")
        kept = tokens if window is None else min(tokens, window)
        expected = _bytes(layers, kv_heads, head_dim, kept, batch, per_value)
        if abs(got - expected) < 0.5:
            continue
        if abs(got - expected / 2) < 0.5:
            hint("each position keeps a key AND a value, two vectors per key/value head")
        if window is not None and abs(got - _bytes(layers, kv_heads, head_dim, tokens, batch, per_value)) < 0.5:
            hint("a sliding cache keeps only the last `window` positions, however long the sequence grows")
        if window is not None and abs(got - _bytes(layers, kv_heads, head_dim, window, batch, per_value)) < 0.5:
            hint("a sequence shorter than the window fills only as many positions as it has tokens")
        if abs(got - 8 * expected) < 0.5:
            hint("bytes_per_value is already in bytes; no factor 8 for bits")
        if abs(got - expected / layers) < 0.5:
            hint("every layer keeps its own keys and values: count all the layers")
        if abs(got - expected / batch) < 0.5:
            hint("each sequence of the batch has its own cache")
        hint("multiply the values one position needs in one layer (keys and values of every key/value head) by the "
             "layers, the positions kept, the sequences and the bytes per value")
    correct("2 x layers x kv heads x head_dim x min(tokens, window) x batch x bytes; the window caps the cache")


# ---- exercise 2: the positions of the new tokens in a cached step ----

def _step(layer: GroupedQueryAttention, x_new: torch.Tensor, cache: object, positions: torch.Tensor) -> torch.Tensor:
    """One decoding step written out, rotating the new queries and keys for ``positions``."""
    q = rearrange(layer.q_proj(x_new), "b i (h d) -> b h i d", h=layer.num_heads)  # (b, h, t, d)
    k = rearrange(layer.k_proj(x_new), "b j (h d) -> b h j d", h=layer.num_kv_heads)  # (b, h_kv, t, d)
    v = rearrange(layer.v_proj(x_new), "b j (h d) -> b h j d", h=layer.num_kv_heads)  # (b, h_kv, t, d)
    q, k = apply_rope(q, positions), apply_rope(k, positions)
    offset = cache.offset
    keys, values = cache.append(k, v)  # (b, h_kv, len, d)
    new_positions = torch.arange(offset, offset + x_new.shape[1])  # (t,)
    allowed = cache.positions[None, :] <= new_positions[:, None]  # (t, len)
    heads = F.scaled_dot_product_attention(q, keys, values, attn_mask=allowed, enable_gqa=True)  # (b, h, t, d)
    return layer.out_proj(rearrange(heads, "b h i d -> b i (h d)"))  # (b, t, e)


def _decode(layer: GroupedQueryAttention, x: torch.Tensor, make_cache, chunks: list[int], positions_of) -> torch.Tensor:
    cache, pieces, start = make_cache(), [], 0
    for t in chunks:
        positions = positions_of(cache, t)
        pieces.append(_step(layer, x[:, start:start + t], cache, positions))
        start += t
    return torch.cat(pieces, dim=1)  # (b, n, e)


def _learner_positions(fn: object):
    def positions_of(cache: object, t: int) -> torch.Tensor:
        got = call_learner(fn, cache, t, what="your step_positions")
        positions = as_tensor(got, "the positions your step_positions returned")
        if positions.is_floating_point() and torch.equal(positions, positions.round()):
            positions = positions.long()
        if positions.is_floating_point() or positions.dtype == torch.bool:
            hint("positions are whole numbers (torch.long), one per new token")
        if tuple(positions.shape) != (t,):
            hint(f"return one position per new token: shape ({t},) for t={t}, got {tuple(positions.shape)}")
        return positions
    return positions_of


@guard_errors
def step_positions(fn: object) -> None:
    """Exercise 2: ``fn(cache, t)`` gives the positions (a ``(t,)`` long tensor) of the t tokens about to be
    appended; decoding with them must equal the layer over the whole sequence, for a full and a sliding cache."""
    torch.manual_seed(11)
    layer = GroupedQueryAttention(16, 4, 2).double()
    x = torch.randn(2, 9, 16, dtype=torch.float64)
    learner = _learner_positions(fn)
    cases = [(lambda: KVCache(2, 2, 9, 4, dtype=torch.float64), [1] * 9),
             (lambda: KVCache(2, 2, 9, 4, dtype=torch.float64), [4, 1, 3, 1]),
             (lambda: SlidingWindowKVCache(2, 2, 3, 4, dtype=torch.float64), [1] * 9)]
    right = lambda cache, t: torch.arange(cache.offset, cache.offset + t)
    with torch.no_grad():
        for make_cache, chunks in cases:
            expected = _decode(layer, x, make_cache, chunks, right)
            got = _decode(layer, x, make_cache, chunks, learner)
            if torch.allclose(got, expected, atol=1e-9, rtol=1e-9):
                continue
            mistakes = [
                (lambda cache, t: torch.arange(t), "the positions restart at 0 at every step: the new tokens come "
                                                   "after every token appended so far"),
                (lambda cache, t: torch.arange(len(cache), len(cache) + t),
                 "len(cache) stops growing once a sliding cache is full, but positions keep counting: use how many "
                 "positions were ever appended"),
                (lambda cache, t: torch.full((t,), cache.offset), "each new token needs its own position, one apart"),
            ]
            for wrong, message in mistakes:
                if torch.allclose(got, _decode(layer, x, make_cache, chunks, wrong), atol=1e-9, rtol=1e-9):
                    hint(message)
            hint("decoding with your positions differs from running the layer over the whole sequence; print "
                 "them at each step next to the positions the tokens have in the sequence")
    correct("the new tokens continue the count: cache.offset, cache.offset + 1, ... (not len(cache), which a "
            "sliding cache caps)")


# ---- exercise 3: pool a multi-head key projection into grouped-query heads ----

@guard_errors
def pool_kv_heads(fn: object) -> None:
    """Exercise 3: ``fn(weight, num_heads, num_kv_heads)`` turns a multi-head key projection weight ``(h d, e)``
    into a grouped one ``(h_kv d, e)`` whose kv head g is the mean of the heads of its group."""
    for h, h_kv, d, e in [(8, 2, 3, 5), (6, 3, 2, 4), (4, 4, 2, 3), (4, 1, 5, 2)]:
        weight = torch.randn(h * d, e, dtype=torch.float64)
        got = as_tensor(call_learner(fn, weight.clone(), h, h_kv, what="your pool_kv_heads"), "your pooled weight")
        group = h // h_kv
        expected = weight.unflatten(0, (h_kv, group, d)).mean(1).flatten(0, 1)  # (h_kv d, e)
        if got.shape != expected.shape:
            hint(f"the result has one block of d={d} rows per key/value head: shape (h_kv d, e) = "
                 f"{tuple(expected.shape)} for h={h}, h_kv={h_kv}; got {tuple(got.shape)}")
        got = got.double()
        if torch.allclose(got, expected, atol=1e-9):
            continue
        round_robin = weight.unflatten(0, (group, h_kv, d)).mean(0).flatten(0, 1)  # heads g, g + h_kv, ... pooled
        if torch.allclose(got, round_robin, atol=1e-9):
            hint("a group is g = h / h_kv CONSECUTIVE query heads (heads 0 .. g-1 share key/value head 0), not "
                 "every h_kv-th head")
        if torch.allclose(got, expected * group, atol=1e-9):
            hint("average the heads of a group (the GQA paper mean-pools them), don't add them up")
        if torch.allclose(got, weight.unflatten(0, (h_kv, group, d))[:, 0].flatten(0, 1), atol=1e-9):
            hint("keeping the first head of each group throws the others away; pool all heads of the group")
        hint("each head owns d consecutive rows of the weight; find the rows of the heads in each group and pool "
             "those")
    correct("key/value head g is the mean of query heads g*h/h_kv ... (g+1)*h/h_kv - 1: the grouping SDPA's "
            "enable_gqa uses")
