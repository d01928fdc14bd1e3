"""Checks for lesson 11 (attention while generating: the size of a cache with a sliding window, the position offset
that rotary positions need in a cache, pooling key/value heads into groups).

Each answer is a function, tried on several inputs: cache sizes on which the common wrong formulas differ from the
right one and from each other; decoding from an empty cache and from one a prompt already filled (where positions
shifted by a constant no longer cancel under RoPE), with a full and a sliding cache; head counts whose groups differ.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from einops import rearrange

from ...generation.cache_size import kv_cache_bytes
from ...generation.grouped import GroupedQueryAttention
from ...generation.kv_cache import KVCache, SlidingWindowKVCache
from ...generation.rope import apply_rope
from ...i18n import msg
from ...measure.memory import format_bytes
from ._core import as_tensor, call_learner, correct, fallback_hint, guard_errors, hint, learner_name
from ._function_answers import expect_function
from ._sizes import check_function

__all__ = ["cache_bytes", "pool_kv_heads", "step_positions"]  # the checks; the rest is their machinery

# ---- exercise 1: the bytes of a cache, with an optional sliding window ----

# The exercise's model first (the "ignores an argument" probe doubles its sizes), then: no window; a window longer
# than the sequence; a window equal to it; one layer of one head; so that each wrong formula below differs from the
# right one on some case and the hints never name a mistake the answer did not make.
_CACHE_CASES = (
    {"num_layers": 28, "num_kv_heads": 4, "head_dim": 128, "seq_len": 32_768, "batch_size": 8, "bytes_per_value": 2,
     "window": 4_096},
    {"num_layers": 32, "num_kv_heads": 8, "head_dim": 128, "seq_len": 8_192, "batch_size": 1, "bytes_per_value": 2,
     "window": None},
    {"num_layers": 2, "num_kv_heads": 1, "head_dim": 64, "seq_len": 100, "batch_size": 3, "bytes_per_value": 4,
     "window": 500},
    {"num_layers": 40, "num_kv_heads": 2, "head_dim": 96, "seq_len": 4_096, "batch_size": 2, "bytes_per_value": 1,
     "window": 4_096},
    {"num_layers": 12, "num_kv_heads": 12, "head_dim": 64, "seq_len": 1_024, "batch_size": 5, "bytes_per_value": 4,
     "window": 256},
)


def _kept(seq_len: int, window: int | None) -> int:
    return seq_len if window is None else min(seq_len, window)


def _cache(num_layers, num_kv_heads, head_dim, seq_len, batch_size, bytes_per_value, window) -> int:
    return kv_cache_bytes(num_layers=num_layers, num_kv_heads=num_kv_heads, head_dim=head_dim,
                          seq_len=_kept(seq_len, window), batch_size=batch_size, bytes_per_value=bytes_per_value)


def _per_position(num_layers, num_kv_heads, head_dim, batch_size, bytes_per_value) -> int:
    return 2 * num_layers * num_kv_heads * head_dim * batch_size * bytes_per_value


_CACHE_MISTAKES = (
    (lambda **c: _cache(**c) // 2, msg("each position keeps a key AND a value, two vectors per key/value head")),
    (lambda *, seq_len, window, **c: _per_position(**c) * seq_len,
     msg("a sliding cache keeps only the last `window` positions, however long the sequence grows")),
    (lambda *, seq_len, window, **c: _per_position(**c) * (seq_len if window is None else window),
     msg("a sequence shorter than the window fills only as many positions as it has tokens")),
    (lambda *, seq_len, window, **c: _per_position(**c) * max(seq_len, window or 0),
     msg("the cache holds the fewer of the two, the tokens or the window, never the more")),
    (lambda **c: 8 * _cache(**c), msg("bytes_per_value is already in bytes; no factor 8 for bits")),
    (lambda *, num_layers, **c: _cache(num_layers=1, **c),
     msg("every layer keeps its own keys and values: count all the layers")),
    (lambda *, batch_size, **c: _cache(batch_size=1, **c), msg("each sequence of the batch has its own cache")),
)


@guard_errors
def cache_bytes(fn: object) -> None:
    """Exercise 1: ``fn(num_layers, num_kv_heads, head_dim, seq_len, batch_size, bytes_per_value, window)``, the
    bytes of a model's whole KV cache; ``window`` is None (keep everything) or the positions a sliding cache keeps."""
    fn = expect_function(fn, "cache_bytes(num_layers, num_kv_heads, head_dim, seq_len, batch_size, "
                             "bytes_per_value, window)")
    check_function(fn, _CACHE_CASES, _cache, _CACHE_MISTAKES, fallback=msg(
        "multiply the values one position needs in one layer (keys and values of every key/value head) by the "
        "layers, the positions kept, the sequences and the bytes per value"))
    example = _CACHE_CASES[0]
    correct(msg("2 x layers x kv heads x head_dim x min(tokens, window) x batch x bytes; the window caps the cache. "
                "The exercise's model: {size} (without the window: {full})", size=format_bytes(_cache(**example)),
                full=format_bytes(_cache(**{**example, "window": None}))))


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


def _decode(layer: GroupedQueryAttention, x: torch.Tensor, make_cache, prompt: int, chunks: list[int],
            positions_of) -> torch.Tensor:
    """The outputs of the tokens after the prompt: the layer's own forward fills the cache with the first ``prompt``
    tokens (rotated at 0 .. prompt - 1), then the rest are decoded ``chunks`` at a time with ``positions_of``."""
    cache = make_cache()
    if prompt:
        layer(x[:, :prompt], cache=cache)
    pieces, start = [], prompt
    for t in chunks:
        pieces.append(_step(layer, x[:, start:start + t], cache, positions_of(cache, t)))
        start += t
    return torch.cat(pieces, dim=1)  # (b, n - prompt, e)


def _right_positions(cache: object, t: int) -> torch.Tensor:
    return torch.arange(cache.offset, cache.offset + t)


class _Recorder:
    """Calls the learner's step_positions, checks what it returns, and keeps (theirs, the right ones, len(cache))."""

    def __init__(self, fn: object) -> None:
        self.fn, self.name, self.seen = fn, learner_name(fn), []

    def __call__(self, cache: object, t: int) -> torch.Tensor:
        right, length = _right_positions(cache, t), len(cache)
        got = call_learner(self.fn, cache, t)
        positions = as_tensor(got, msg("the positions {name} returned", name=self.name))
        if positions.is_floating_point() and torch.equal(positions, positions.round()):
            positions = positions.long()
        if positions.is_floating_point() or positions.dtype == torch.bool:
            hint(msg("positions are whole numbers (torch.long), one per new token"))
        if tuple(positions.shape) != (t,):
            hint(msg("return one position per new token: shape ({t},) for t={t}, got {shape}", t=t,
                     shape=tuple(positions.shape)))
        self.seen.append((positions, right, length))
        return positions


def _position_mistake(seen: list[tuple[torch.Tensor, torch.Tensor, int]]) -> None:
    """A hint for the rule the learner's positions follow on every call, when they follow a common wrong one."""
    offsets = [int(got[0] - right[0]) for got, right, _ in seen]
    if all(torch.equal(got, torch.arange(len(got))) for got, _, _ in seen):
        hint(msg("the positions restart at 0 at every step: the new tokens come after every token appended so far"))
    if all(torch.equal(got, torch.arange(length, length + len(got))) for got, _, length in seen):
        hint(msg("len(cache) stops growing once a sliding cache is full, but positions keep counting: use how many "
                 "positions were ever appended"))
    if any(len(got) > 1 and bool((got == got[0]).all()) for got, _, _ in seen):
        hint(msg("each new token needs its own position, one apart"))
    if len(set(offsets)) == 1 and offsets[0] and all(torch.equal(got - right, torch.full_like(got, offsets[0]))
                                                       for got, right, _ in seen):
        hint(msg("every position is off by {shift}: from an empty cache a constant shift cancels (RoPE sees "
                 "distances only), but the keys a prompt left in the cache were rotated at positions 0, 1, ..., so "
                 "the new tokens must continue that count exactly", shift=offsets[0]))


_POSITION_CASES = (  # (the cache, the prompt the layer's forward puts in it first, the chunks decoded after it)
    (lambda: KVCache(2, 2, 9, 4, dtype=torch.float64), 0, [1] * 9),
    (lambda: KVCache(2, 2, 9, 4, dtype=torch.float64), 0, [4, 1, 3, 1]),
    (lambda: KVCache(2, 2, 9, 4, dtype=torch.float64), 4, [1, 2, 1, 1]),
    (lambda: SlidingWindowKVCache(2, 2, 3, 4, dtype=torch.float64), 0, [1] * 9),
    (lambda: SlidingWindowKVCache(2, 2, 3, 4, dtype=torch.float64), 3, [1] * 6),
)


@guard_errors
def step_positions(fn: object) -> None:
    """Exercise 2: ``fn(cache, t)`` gives the positions (a ``(t,)`` long tensor) of the t tokens about to be
    appended; decoding with them must equal the layer over the whole sequence, from an empty cache and from one a
    prompt already filled, for a full and a sliding cache."""
    fn = expect_function(fn, "step_positions(cache, t)")
    generator = torch.Generator().manual_seed(11)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(11)
        layer = GroupedQueryAttention(16, 4, 2).double()
    x = torch.randn(2, 9, 16, dtype=torch.float64, generator=generator)
    learner = _Recorder(fn)
    with torch.no_grad():
        for make_cache, prompt, chunks in _POSITION_CASES:
            expected = _decode(layer, x, make_cache, prompt, chunks, _right_positions)
            got = _decode(layer, x, make_cache, prompt, chunks, learner)
            if not torch.allclose(got, expected, atol=1e-9, rtol=1e-9):
                _position_mistake(learner.seen)
                fallback_hint(msg("decoding with your positions differs from running the layer over the whole "
                                  "sequence; print them at each step next to the positions the tokens have in the "
                                  "sequence"))
    correct(msg("the new tokens continue the count: cache.offset, cache.offset + 1, ... (not len(cache), which a "
                "sliding cache caps), also after a prompt filled the cache"))


# ---- exercise 3: pool a multi-head key projection into grouped-query heads ----

@guard_errors
def pool_kv_heads(fn: object) -> None:
    """Exercise 3: ``fn(weight, num_heads, num_kv_heads)`` turns a multi-head key projection weight ``(h d, e)``
    into a grouped one ``(h_kv d, e)`` whose kv head g is the mean of the heads of its group."""
    fn = expect_function(fn, "pool_kv_heads(weight, num_heads, num_kv_heads)")
    generator = torch.Generator().manual_seed(3)
    for h, h_kv, d, e in [(8, 2, 3, 5), (6, 3, 2, 4), (4, 4, 2, 3), (4, 1, 5, 2)]:
        weight = torch.randn(h * d, e, dtype=torch.float64, generator=generator)
        got = as_tensor(call_learner(fn, weight.clone(), h, h_kv), msg("your pooled weight"))
        group = h // h_kv
        expected = weight.unflatten(0, (h_kv, group, d)).mean(1).flatten(0, 1)  # (h_kv d, e)
        if got.shape != expected.shape:
            hint(msg("the result has one block of d={d} rows per key/value head: shape (h_kv d, e) = {expected} for "
                     "h={h}, h_kv={h_kv}; got {shape}", d=d, expected=tuple(expected.shape), h=h, h_kv=h_kv,
                     shape=tuple(got.shape)))
        got = got.double()
        if torch.allclose(got, expected, atol=1e-6):
            continue
        heads = weight.unflatten(0, (h, d))  # (h, d, e)
        mistakes = (
            (weight.unflatten(0, (group, h_kv, d)).mean(0).flatten(0, 1),  # heads g, g + h_kv, ... pooled
             msg("a group is g = h / h_kv CONSECUTIVE query heads (heads 0 .. g-1 share key/value head 0), not "
                 "every h_kv-th head")),
            (expected * group, msg("average the heads of a group (the GQA paper mean-pools them), don't add them up")),
            (heads.unflatten(0, (h_kv, group))[:, 0].flatten(0, 1),
             msg("keeping the first head of each group throws the others away; pool all heads of the group")),
            (heads.unflatten(0, (h_kv, group))[:, -1].flatten(0, 1),
             msg("keeping the last head of each group throws the others away; pool all heads of the group")),
            (weight.unflatten(0, (h_kv, d, group)).mean(2).flatten(0, 1),
             msg("that pools neighbouring rows inside the heads: each head owns d consecutive rows, and a group "
                 "pools whole heads")),
        )
        for wrong, message in mistakes:
            if not torch.allclose(wrong, expected, atol=1e-6) and torch.allclose(got, wrong, atol=1e-6):
                hint(message)
        if group > 1 and torch.allclose(got, heads.unflatten(0, (h_kv, group)).median(1).values.flatten(0, 1),
                                        atol=1e-6):
            hint(msg("that is the median of each group's heads; GQA takes their mean"))
        factor = (got * expected).sum() / (expected * expected).sum()  # the best scale of the right answer
        if torch.allclose(got, factor * expected, atol=1e-6):
            hint(msg("the right heads in each group, but scaled by {factor:.3g}: the mean of a group is the sum of "
                     "its g = h / h_kv heads divided by g", factor=factor.item()))
        fallback_hint(msg("each head owns d consecutive rows of the weight; find the rows of the heads in each group "
                          "and pool those"))
    correct(msg("key/value head g is the mean of query heads g*h/h_kv ... (g+1)*h/h_kv - 1: the grouping SDPA's "
                "enable_gqa uses"))
