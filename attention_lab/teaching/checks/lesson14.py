"""Checks for lesson 14 (attention in today's open LLMs). Exercise 2: the KV cache of a stack of local and global
layers in a pattern the lesson did not show.

The answer is a function, tried on several stacks: the exercise's (Gemma 2 9B's sizes, one to one), a depth that
is not a multiple of the group (so that starting with a global layer, or forgetting the last local layers, changes
the count), a context shorter than the window (so that keeping `window` positions anyway shows), an all-global
stack (local_per_global = 0) and one shallower than its group (no global layer at all); on these the common wrong
formulas differ from the right one and from each other.
"""

from __future__ import annotations

import math

from ...i18n import msg
from ...measure.memory import format_bytes
from ._core import correct, guard_errors
from ._function_answers import expect_function
from ._sizes import check_function

__all__ = ["stack_cache_bytes"]  # the checks; the rest is their machinery

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
