"""Checks for lesson 14 (attention in today's open LLMs).

Exercise 1: which positions a StreamingLLM cache holds, a function of t, sinks and window, tried
on inputs where the cache is not yet full, exactly full and long past full, with no sink, one and four, and windows
on which forgetting the sinks, counting them inside the window, counting early positions twice, listing sinks that
have not arrived yet or shifting the window by one each give another list. The right lists come from
:class:`~attention_lab.SinkKVCache` itself.

Exercise 2: the KV cache of a stack of local and global layers in a pattern the lesson did not show, a function
tried on several stacks: the exercise's (Gemma 2 9B's sizes, one to one), a depth that
is not a multiple of the group (so that starting with a global layer, or forgetting the last local layers, changes
the count), a context shorter than the window (so that keeping `window` positions anyway shows), an all-global
stack (local_per_global = 0) and one shallower than its group (no global layer at all); on these the common wrong
formulas differ from the right one and from each other.

Exercise 3 (find the bug): soft-capped attention weights with a mask, tried on scores of several shapes (i != j),
caps of 1, 5 and 30, float32 and float64, with keys masked in every row but never all of them, so that capping after
the mask (a masked -inf becomes -cap and gets weight), clamping instead of tanh, tanh without dividing by the cap,
and no cap at all each give other weights. Helpers are prefixed by exercise: ``_a_`` for 1 and 3, ``_b_`` for 2.
"""

from __future__ import annotations

import math

import torch

from ...generation.sink_cache import SinkKVCache
from ...i18n import msg
from ...measure.memory import format_bytes
from ._core import (
    as_tensor,
    call_learner,
    close,
    correct,
    fallback_hint,
    guard_errors,
    hint,
    learner_name,
    right_for_some_inputs,
)
from ._function_answers import expect_function
from ._sizes import check_function

__all__ = ["capped_weights", "kept_positions", "stack_cache_bytes"]  # the checks; the rest is their machinery

# ---- exercise 1: what a StreamingLLM cache holds ----

# (t, sinks, window): the exercise's example first; then not yet full, exactly full, one past full, no sink (a plain
# sliding window), fewer positions than sinks, one sink with a window of 1.
_A_CASES = ((20, 4, 8), (5, 4, 8), (12, 4, 8), (13, 4, 8), (9, 1, 3), (7, 0, 5), (3, 4, 2), (6, 1, 1))


def _a_cache_positions(t: int, sinks: int, window: int) -> list[int]:
    """The positions a SinkKVCache holds after t appended positions, in increasing order."""
    cache = SinkKVCache(1, 1, sinks, window, 1, dtype=torch.float64)
    for _ in range(t):
        cache.append(torch.zeros(1, 1, 1, 1, dtype=torch.float64), torch.zeros(1, 1, 1, 1, dtype=torch.float64))
    return sorted(cache.positions.tolist())


def _a_no_sinks(t: int, sinks: int, window: int) -> list[int]:
    return list(range(max(0, t - window), t))


def _a_sinks_inside_window(t: int, sinks: int, window: int) -> list[int]:
    return sorted(set(range(min(t, sinks))) | set(range(max(0, t - (window - sinks)), t)))


def _a_counted_twice(t: int, sinks: int, window: int) -> list[int]:
    return sorted(list(range(min(t, sinks))) + list(range(max(0, t - window), t)))


def _a_sinks_not_yet_arrived(t: int, sinks: int, window: int) -> list[int]:
    return sorted(set(range(sinks)) | set(range(max(sinks, t - window), t)))


def _a_window_shifted(t: int, sinks: int, window: int) -> list[int]:
    return sorted(set(range(min(t, sinks))) | set(range(max(sinks, t - window + 1), t + 1)))


def _a_window_too_long(t: int, sinks: int, window: int) -> list[int]:
    return sorted(set(range(min(t, sinks))) | set(range(max(sinks, t - window - 1), t)))


_A_MISTAKES = (
    (_a_no_sinks, msg("your list is the last `window` positions only: that is a sliding window; the cache also keeps "
                      "the first `sinks` positions for ever")),
    (_a_sinks_inside_window, msg("your list holds sinks + (window - sinks) positions: the sinks come on top of the "
                                 "window, so the cache holds up to sinks + window positions")),
    (_a_counted_twice, msg("your list names some positions twice: before the cache is full, the first positions are "
                           "both sinks and in the window; list each position once")),
    (_a_sinks_not_yet_arrived, msg("your list holds sink positions that were never appended: after t positions the "
                                   "cache holds only positions below t")),
    (_a_window_shifted, msg("your window ends at position t, which is not appended yet: positions 0 ... t - 1 are "
                            "in the cache")),
    (_a_window_too_long, msg("your window holds window + 1 positions: it should be the last `window` positions "
                             "before t")),
)


def _a_as_positions(value: object, name: object, t: int, sinks: int, window: int) -> list[int]:
    if isinstance(value, torch.Tensor):
        value = value.tolist()
    elif hasattr(value, "tolist"):  # a numpy array
        value = value.tolist()
    if isinstance(value, (set, frozenset)):
        hint(msg("{name} returned a set: return a list in increasing order", name=name))
    if not isinstance(value, (list, tuple, range)) or not all(
            isinstance(p, int) and not isinstance(p, bool) for p in value):
        hint(msg("{name}({t}, {sinks}, {window}) should return a list of whole numbers (positions), got {type}",
                 name=name, t=t, sinks=sinks, window=window, type=type(value).__name__))
    return list(value)


def _a_describe(t: int, sinks: int, window: int) -> str:
    return msg("t={t}, sinks={sinks}, window={window}", t=t, sinks=sinks, window=window)


@guard_errors
def kept_positions(fn: object) -> None:
    """Exercise 1: ``fn(t, sinks, window)``, the positions a :class:`~attention_lab.SinkKVCache` holds after
    positions 0 ... t - 1 were appended, in increasing order."""
    fn = expect_function(fn, "kept_positions(t, sinks, window)")
    name = learner_name(fn)
    got = [_a_as_positions(call_learner(fn, *case), name, *case) for case in _A_CASES]
    right = [_a_cache_positions(*case) for case in _A_CASES]
    if got == right:
        correct(msg("the first min(t, sinks) positions, then the last `window` positions after them. The exercise's "
                    "example, t=20, sinks=4, window=8: {positions}", positions=right[0]))
        return
    if all(sorted(g) == r for g, r in zip(got, right)):
        hint(msg("{name} holds the right positions but not in increasing order: sort them", name=name))
    for mistake, message in _A_MISTAKES:
        if all(g == mistake(*case) for g, case in zip(got, _A_CASES)):
            hint(message)
    wrong = next(k for k, (g, r) in enumerate(zip(got, right)) if g != r)
    fine = next((k for k, (g, r) in enumerate(zip(got, right)) if g == r), None)
    if fine is not None:
        hint(right_for_some_inputs(name, _a_describe(*_A_CASES[fine]), _a_describe(*_A_CASES[wrong])))
    fallback_hint(msg("for {where}: the cache holds positions 0 ... t - 1 at most; of those, the first `sinks` stay "
                      "for ever and the rest is the last `window` positions", where=_a_describe(*_A_CASES[wrong])))


# ---- exercise 2: the cache of an interleaved stack ----

_B_STACKS = (
    {"num_layers": 42, "local_per_global": 1, "window": 4096, "seq_len": 8192, "num_kv_heads": 8, "head_dim": 256,
     "bytes_per_value": 2},
    {"num_layers": 26, "local_per_global": 5, "window": 512, "seq_len": 32_768, "num_kv_heads": 1, "head_dim": 256,
     "bytes_per_value": 2},
    {"num_layers": 11, "local_per_global": 2, "window": 2048, "seq_len": 1000, "num_kv_heads": 4, "head_dim": 64,
     "bytes_per_value": 4},
    {"num_layers": 6, "local_per_global": 0, "window": 128, "seq_len": 300, "num_kv_heads": 2, "head_dim": 32,
     "bytes_per_value": 1},
    {"num_layers": 3, "local_per_global": 5, "window": 100, "seq_len": 700, "num_kv_heads": 3, "head_dim": 48,
     "bytes_per_value": 2},
)


def _b_stack(num_layers, local_per_global, window, seq_len, num_kv_heads, head_dim, bytes_per_value, *,
             global_layers=None, local_layers=None, cap=True, pair=2) -> int:
    """The right bytes and their common variants (each keyword is one mistake)."""
    if global_layers is None:
        global_layers = num_layers // (local_per_global + 1)
    if local_layers is None:
        local_layers = num_layers - global_layers
    local_kept = min(seq_len, window) if cap else window
    return pair * num_kv_heads * head_dim * bytes_per_value * (global_layers * seq_len + local_layers * local_kept)


def _b_global_first(**s) -> int:
    return _b_stack(**s, global_layers=math.ceil(s["num_layers"] / (s["local_per_global"] + 1)))


def _b_groups_only(**s) -> int:
    groups = s["num_layers"] // (s["local_per_global"] + 1)
    return _b_stack(**s, local_layers=groups * s["local_per_global"])


_B_STACK_MISTAKES = (
    (lambda **s: _b_stack(**s, global_layers=s["num_layers"], local_layers=0),
     msg("that counts every layer at the whole context: a local layer keeps at most `window` positions")),
    (lambda **s: _b_stack(**s, global_layers=0, local_layers=s["num_layers"]),
     msg("that caps every layer at the window: the global layers keep every position")),
    (lambda **s: _b_stack(**s, cap=False),
     msg("a context shorter than the window fills only as many positions as it has tokens: min(seq_len, window)")),
    (_b_global_first, msg("the group is local layers THEN the global one: a stack whose depth is not a multiple of "
                          "the group ends with local layers, so there are num_layers // (local_per_global + 1) "
                          "global layers")),
    (_b_groups_only, msg("the layers after the last whole group are local layers too: count them")),
    (lambda **s: _b_stack(**s, pair=1), msg("each position keeps a key AND a value in every layer")),
    (lambda **s: 8 * _b_stack(**s), msg("bytes_per_value is already in bytes; no factor 8 for bits")),
)


@guard_errors
def stack_cache_bytes(fn: object) -> None:
    """Exercise 2: ``fn(num_layers, local_per_global, window, seq_len, num_kv_heads, head_dim, bytes_per_value)``,
    the KV-cache bytes of one sequence in a stack of ``local_per_global`` local layers then one global layer,
    repeated."""
    fn = expect_function(fn, "stack_cache_bytes(num_layers, local_per_global, window, seq_len, num_kv_heads, "
                             "head_dim, bytes_per_value)")
    check_function(fn, _B_STACKS, _b_stack, _B_STACK_MISTAKES, fallback=msg(
        "count the global layers (one per group of local_per_global + 1), the rest are local; a global layer keeps "
        "seq_len positions, a local one min(seq_len, window); each position holds a key and a value of head_dim "
        "numbers per key/value head"))
    example = _B_STACKS[0]
    correct(msg("global layers keep every position, local ones min(seq_len, window). The exercise's stack: {size} "
                "(all global: {full})", size=format_bytes(_b_stack(**example)),
                full=format_bytes(_b_stack(**example, global_layers=example["num_layers"], local_layers=0))))


# ---- exercise 3: soft-capping and a mask, the bug to find ----


def _a_capped_inputs() -> list[tuple[torch.Tensor, torch.Tensor, float]]:
    """(scores, mask, cap): the exercise's example first; every row keeps at least one key."""
    g = torch.Generator().manual_seed(14)
    cases = []
    for shape, cap, dtype in (((3, 4), 5.0, torch.float32), ((4, 6), 1.0, torch.float64),
                              ((2, 3, 5), 30.0, torch.float32), ((5, 2), 5.0, torch.float64)):
        scores = (torch.randn(shape, generator=g) * 4).to(dtype)  # (..., i, j)
        mask = torch.rand(scores.shape, generator=g) > 0.4
        mask[..., 0] = True  # every row keeps a key
        mask[..., -1] = False  # and hides one
        cases.append((scores, mask, cap))
    return cases


def _a_capped(scores: torch.Tensor, mask: torch.Tensor, cap: float, *, order: str = "cap first",
              squash: str = "tanh") -> torch.Tensor:
    """The right weights and their common variants (each keyword one mistake)."""
    def squashed(x: torch.Tensor) -> torch.Tensor:  # (..., i, j)
        if squash == "tanh":
            return cap * torch.tanh(x / cap)
        if squash == "clamp":
            return x.clamp(-cap, cap)
        if squash == "undivided":
            return cap * torch.tanh(x)
        return x
    if order == "cap first":
        return torch.softmax(squashed(scores.double()).masked_fill(~mask, float("-inf")), dim=-1)
    return torch.softmax(squashed(scores.double().masked_fill(~mask, float("-inf"))), dim=-1)


_A_CAPPED_MISTAKES = (
    (dict(order="mask first"), msg("your weights give masked keys some weight: tanh turns a masked -inf into -cap, "
                                   "a finite score; cap the scores first, then mask them")),
    (dict(squash="clamp"), msg("your scores are clamped at the cap: soft-capping bends them smoothly, "
                               "cap * tanh(score / cap)")),
    (dict(squash="undivided"), msg("your capping takes tanh of the score itself: divide by the cap inside tanh, "
                                   "cap * tanh(score / cap), so that small scores pass unchanged")),
    (dict(squash="none"), msg("your weights are plain masked softmax: the scores are not capped")),
)


@guard_errors
def capped_weights(fn: object) -> None:
    """Exercise 3: ``fn(scores, mask, cap)``, the attention weights of soft-capped scores with a bool mask (True =
    may attend)."""
    fn = expect_function(fn, "capped_weights(scores, mask, cap)")
    name = learner_name(fn)
    cases = _a_capped_inputs()
    got = []
    for scores, mask, cap in cases:
        value = as_tensor(call_learner(fn, scores.clone(), mask.clone(), cap), msg("what {name} returns", name=name))
        if value.shape != scores.shape:
            hint(msg("{name} should return weights of the scores' shape {expected}, got {shape}", name=name,
                     expected=tuple(scores.shape), shape=tuple(value.shape)))
        got.append(value.double())
    right = [_a_capped(*case) for case in cases]
    if all(close(g, r, atol=1e-5, rtol=1e-4) for g, r in zip(got, right)):
        correct(msg("cap first, cap * tanh(scores / cap), then mask with -inf, then softmax over the keys: a masked "
                    "key gets exactly 0"))
        return
    for options, message in _A_CAPPED_MISTAKES:
        if all(close(g, _a_capped(*case, **options), atol=1e-5, rtol=1e-4) for g, case in zip(got, cases)):
            hint(message)
    fallback_hint(msg("compute cap * tanh(scores / cap), set the masked entries to -inf, and take the softmax over "
                      "the last axis"))
