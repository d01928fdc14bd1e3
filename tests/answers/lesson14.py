"""Answers to lesson 14's exercises (attention in today's open LLMs): the positions a StreamingLLM cache holds
(14/1); the KV-cache bytes of a stack of local and global layers (14/2); soft-capped weights with a mask, the bug
to find (14/3)."""

import math

import numpy as np
import torch

import attention_lab as al
from attention_lab.teaching.checks import lesson14

from . import GENERIC, Attempt

# ---- 14/1: kept_positions(t, sinks, window) ------------------------------------------------------------------------


def kept_ranges(t, sinks, window):
    first = list(range(min(t, sinks)))
    return first + list(range(max(sinks, t - window), t))


def kept_filter(t, sinks, window):
    return [p for p in range(t) if p < sinks or p >= t - window]


def kept_tensor(t, sinks, window):
    positions = torch.arange(t)
    return positions[(positions < sinks) | (positions >= t - window)]


def kept_numpy(t, sinks, window):
    return np.array(sorted(set(range(min(t, sinks))) | set(range(max(0, t - window), t))))


def kept_tuple(t, sinks, window):
    return tuple(kept_filter(t, sinks, window))


RIGHT_KEPT = [("two ranges", kept_ranges), ("a filter over 0 ... t - 1", kept_filter), ("a tensor", kept_tensor),
              ("a numpy array", kept_numpy), ("a tuple", kept_tuple)]


def kept_no_sinks(t, sinks, window):
    return list(range(max(0, t - window), t))


def kept_sinks_inside(t, sinks, window):
    return sorted(set(range(min(t, sinks))) | set(range(max(0, t - (window - sinks)), t)))


def kept_twice(t, sinks, window):
    return list(range(min(t, sinks))) + list(range(max(0, t - window), t))


def kept_early_sinks(t, sinks, window):
    return list(range(sinks)) + list(range(max(sinks, t - window), t))


def kept_shifted(t, sinks, window):
    return sorted(set(range(min(t, sinks))) | set(range(max(sinks, t - window + 1), t + 1)))


def kept_too_long(t, sinks, window):
    return sorted(set(range(min(t, sinks))) | set(range(max(sinks, t - window - 1), t)))


def kept_unsorted(t, sinks, window):
    return kept_filter(t, sinks, window)[::-1]


def kept_set(t, sinks, window):
    return set(kept_filter(t, sinks, window))


def kept_example_only(t, sinks, window):
    return [0, 1, 2, 3, 12, 13, 14, 15, 16, 17, 18, 19]


WRONG_KEPT = [
    ("the last window only, no sinks", kept_no_sinks, "sliding window"),
    ("sinks counted inside the window", kept_sinks_inside, "sinks come on top of the window"),
    ("early positions listed twice", kept_twice, "twice"),
    ("sinks that have not arrived yet", kept_early_sinks, "never appended"),
    ("the window shifted to end at t", kept_shifted, "not appended yet"),
    ("a window of window + 1", kept_too_long, r"window \+ 1 positions"),
    ("the right positions, newest first", kept_unsorted, "increasing order"),
    ("a set", kept_set, "returned a set"),
    ("the example's list written in", kept_example_only, "right for t=20, sinks=4, window=8 but not"),
    ("a value, not a function", [0, 1, 2, 3], "define a function"),
    ("a random rule", lambda t, sinks, window: list(range(t))[::2], GENERIC),
]

# ---- 14/3: capped_weights(scores, mask, cap) ------------------------------------------------------------------------


def capped_right(scores, mask, cap):
    return torch.softmax((cap * torch.tanh(scores / cap)).masked_fill(~mask, float("-inf")), dim=-1)


def capped_where(scores, mask, cap):
    capped = cap * torch.tanh(scores / cap)
    return torch.where(mask, capped, -torch.inf).softmax(-1)


def capped_zeroed(scores, mask, cap):
    weights = torch.exp(cap * torch.tanh(scores / cap)) * mask
    return weights / weights.sum(-1, keepdim=True)


def capped_library(scores, mask, cap):
    import attention_lab as al
    return al.masked_softmax(al.softcap(scores, cap), mask)


def capped_numpy(scores, mask, cap):
    s = cap * np.tanh(scores.numpy() / cap)
    s = np.where(mask.numpy(), s, -np.inf)
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


RIGHT_CAPPED = [("cap, mask, softmax", capped_right), ("torch.where", capped_where),
                ("exp times the mask, normalised", capped_zeroed), ("the library's softcap and masked_softmax",
                                                                     capped_library), ("numpy", capped_numpy)]


def capped_colleague(scores, mask, cap):
    return torch.softmax(cap * torch.tanh(scores.masked_fill(~mask, float("-inf")) / cap), dim=-1)


WRONG_CAPPED = [
    ("the colleague's: mask, then cap", capped_colleague, "cap the scores first, then mask"),
    ("clamped at the cap", lambda s, m, c: torch.softmax(s.clamp(-c, c).masked_fill(~m, float("-inf")), -1),
     "clamped"),
    ("tanh of the score itself", lambda s, m, c: torch.softmax((c * torch.tanh(s)).masked_fill(~m, float("-inf")),
                                                               -1), "divide by the cap inside tanh"),
    ("no cap", lambda s, m, c: torch.softmax(s.masked_fill(~m, float("-inf")), -1), "not capped"),
    ("weights of another shape", lambda s, m, c: capped_right(s, m, c)[..., 0], "shape"),
    ("softmax over the queries", lambda s, m, c: torch.softmax((c * torch.tanh(s / c)).masked_fill(~m, -1e9), -2),
     GENERIC),
]


def stub(*args):
    raise NotImplementedError("write the body of this function, then run the check cell below")


# ---- 14/2: stack_cache_bytes(num_layers, local_per_global, window, seq_len, num_kv_heads, head_dim, bytes_per_value)


def stack_counted(num_layers, local_per_global, window, seq_len, num_kv_heads, head_dim, bytes_per_value):
    global_layers = num_layers // (local_per_global + 1)
    kept = global_layers * seq_len + (num_layers - global_layers) * min(seq_len, window)
    return 2 * num_kv_heads * head_dim * bytes_per_value * kept


def stack_layer_by_layer(num_layers, local_per_global, window, seq_len, num_kv_heads, head_dim, bytes_per_value):
    total = 0
    for layer in range(num_layers):
        is_global = (layer + 1) % (local_per_global + 1) == 0
        total += 2 * num_kv_heads * head_dim * bytes_per_value * (seq_len if is_global else min(seq_len, window))
    return total


def stack_variant(*, first_global=False, whole_groups=False, cap=True, pair=2, every="", bits=False):
    """The right count with one mistake switched on."""
    def answer(num_layers, local_per_global, window, seq_len, num_kv_heads, head_dim, bytes_per_value):
        group = local_per_global + 1
        global_layers = math.ceil(num_layers / group) if first_global else num_layers // group
        local_layers = (num_layers // group) * local_per_global if whole_groups else num_layers - global_layers
        if every == "global":
            global_layers, local_layers = num_layers, 0
        if every == "local":
            global_layers, local_layers = 0, num_layers
        local_kept = min(seq_len, window) if cap else window
        size = pair * num_kv_heads * head_dim * bytes_per_value * (global_layers * seq_len + local_layers * local_kept)
        return 8 * size if bits else size
    return answer


def stack_library(num_layers, local_per_global, window, seq_len, num_kv_heads, head_dim, bytes_per_value):
    windows = al.interleaved_windows(num_layers, window=window, local_per_global=local_per_global)
    return al.interleaved_kv_cache_bytes(windows, num_kv_heads=num_kv_heads, head_dim=head_dim, seq_len=seq_len,
                                         bytes_per_value=bytes_per_value)


RIGHT_STACK = [
    ("global and local layers counted", stack_counted),
    ("layer by layer", stack_layer_by_layer),
    ("a float", lambda *a: float(stack_counted(*a))),
    ("a numpy integer", lambda *a: np.int64(stack_counted(*a))),
    ("a 0-d tensor", lambda *a: torch.tensor(stack_counted(*a))),
]

WRONG_STACK = [
    ("every layer global", stack_variant(every="global"), "whole context"),
    ("every layer local", stack_variant(every="local"), "global layers keep every position"),
    ("window kept even when the context is shorter", stack_variant(cap=False), r"min\(seq_len, window\)"),
    ("the group starts with the global layer", stack_variant(first_global=True), "local layers THEN the global"),
    ("the layers after the last group forgotten", stack_variant(whole_groups=True), "after the last whole group"),
    ("keys only", stack_variant(pair=1), "key AND a value"),
    ("bits", stack_variant(bits=True), "no factor 8"),
    ("the library", stack_library, "library's answer"),
    ("the example's number", lambda *a: stack_counted(42, 1, 4096, 8192, 8, 256, 2), "same number when"),
    ("the stub", stub, "NotImplementedError"),
    ("a string", lambda *a: "1.97 GiB", "whole number"),
    ("the number, not a function", 528_482_304, "define a function"),
]

ATTEMPTS_B = [
    *(Attempt("14/2", label, lesson14.stack_cache_bytes, fn, right=True) for label, fn in RIGHT_STACK),
    *(Attempt("14/2", label, lesson14.stack_cache_bytes, fn, hint=hint) for label, fn, hint in WRONG_STACK),
]

ATTEMPTS = [
    *(Attempt("14/1", label, lesson14.kept_positions, fn, right=True) for label, fn in RIGHT_KEPT),
    *(Attempt("14/1", label, lesson14.kept_positions, fn, hint=hint) for label, fn, hint in WRONG_KEPT),
    *ATTEMPTS_B,
    *(Attempt("14/3", label, lesson14.capped_weights, fn, right=True) for label, fn in RIGHT_CAPPED),
    *(Attempt("14/3", label, lesson14.capped_weights, fn, hint=hint) for label, fn, hint in WRONG_CAPPED),
]
