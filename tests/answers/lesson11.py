"""Answers to lesson 11's exercises (attention while generating): the bytes of a cache with an optional sliding
window (11/1), the positions of the new tokens in a cached step with rotary positions (11/2), and a multi-head key
projection pooled into grouped-query heads (11/3)."""

import math

import numpy as np
import torch
from einops import reduce

import attention_lab as al
from attention_lab.measure.memory import format_bytes
from attention_lab.teaching.checks import lesson11

from . import GENERIC, Attempt


def stub(*args):
    raise NotImplementedError("write the body of this function, then run the check cell below")


# ---- 11/1: cache_bytes(num_layers, num_kv_heads, head_dim, seq_len, batch_size, bytes_per_value, window) ---------

def bytes_right(num_layers, num_kv_heads, head_dim, seq_len, batch_size, bytes_per_value, window):
    kept = seq_len if window is None else min(seq_len, window)
    return 2 * num_layers * num_kv_heads * head_dim * kept * batch_size * bytes_per_value


def bytes_if_else(num_layers, num_kv_heads, head_dim, seq_len, batch_size, bytes_per_value, window):
    if window is not None and window < seq_len:
        seq_len = window
    per_layer = num_kv_heads * head_dim * seq_len * 2  # keys and values
    return per_layer * num_layers * batch_size * bytes_per_value


def bytes_math_prod(num_layers, num_kv_heads, head_dim, seq_len, batch_size, bytes_per_value, window):
    return math.prod([2, num_layers, num_kv_heads, head_dim, min(seq_len, window or seq_len), batch_size,
                      bytes_per_value])


def bytes_tensor(num_layers, num_kv_heads, head_dim, seq_len, batch_size, bytes_per_value, window):
    kept = seq_len if window is None else min(seq_len, window)
    return torch.tensor(2.0) * num_layers * num_kv_heads * head_dim * kept * batch_size * bytes_per_value


def bytes_numpy(num_layers, num_kv_heads, head_dim, seq_len, batch_size, bytes_per_value, window):
    return np.int64(bytes_right(num_layers, num_kv_heads, head_dim, seq_len, batch_size, bytes_per_value, window))


def bytes_library(num_layers, num_kv_heads, head_dim, seq_len, batch_size, bytes_per_value, window):
    kept = seq_len if window is None else min(seq_len, window)
    return al.kv_cache_bytes(num_layers=num_layers, num_kv_heads=num_kv_heads, head_dim=head_dim, seq_len=kept,
                             batch_size=batch_size, bytes_per_value=bytes_per_value)


def wrong(change):
    """The right formula with one argument changed: ``change(args) -> args``."""
    def answer(*args):
        return bytes_right(*change(list(args)))
    return answer


WRONG_BYTES = [
    ("keys only", lambda *a: bytes_right(*a) // 2, "key AND a value"),
    ("no window cap", wrong(lambda a: a[:6] + [None]), "keeps only the last `window`"),
    ("the window, always", lambda L, h, d, n, b, s, w: bytes_right(L, h, d, w or n, b, s, None),
     "shorter than the window"),
    ("max(tokens, window)", lambda L, h, d, n, b, s, w: bytes_right(L, h, d, max(n, w or 0), b, s, None),
     "fewer of the two"),
    ("bits", lambda *a: 8 * bytes_right(*a), "no factor 8"),
    ("one layer", wrong(lambda a: [1] + a[1:]), "every layer"),
    ("one sequence", wrong(lambda a: a[:4] + [1] + a[5:]), "each sequence of the batch"),
    ("bf16 always", wrong(lambda a: a[:5] + [2] + a[6:]), "same number when bytes_per_value doubles"),
    ("head_dim left out", wrong(lambda a: a[:2] + [1] + a[3:]), "same number when head_dim doubles"),
    ("the example's number", lambda *a: 1_879_048_192, "same number when"),
    ("a model's example hard-coded in", lambda L, h, d, n, b, s, w: bytes_right(28, h, d, n, b, s, w),
     "same number when num_layers doubles"),
    ("window + 1 positions", lambda L, h, d, n, b, s, w: bytes_right(L, h, d, n, b, s, w + 1 if w else None),
     GENERIC),
    ("the library", bytes_library, "library's answer"),
    ("the library under another name", lambda *a: (lambda alias: alias)(al.kv_cache_bytes) and bytes_library(*a),
     "library's answer"),
    ("in GiB", lambda *a: bytes_right(*a) / 2**30, "whole number"),
    ("a formatted string", lambda *a: format_bytes(bytes_right(*a)), "whole number"),
    ("a list", lambda *a: [bytes_right(*a)], "whole number|one number"),
    ("an error on window None", lambda L, h, d, n, b, s, w: bytes_right(L, h, d, min(n, w), b, s, w), "TypeError"),
    ("the stub", stub, "NotImplementedError"),
    ("no return", lambda *a: None, "None"),
    ("the number, not a function", 1_879_048_192, "define a function"),
]

# ---- 11/2: step_positions(cache, t) -------------------------------------------------------------------------------

RIGHT_POSITIONS = [
    ("arange from the offset", lambda cache, t: torch.arange(cache.offset, cache.offset + t)),
    ("a list", lambda cache, t: list(range(cache.offset, cache.offset + t))),
    ("numpy", lambda cache, t: np.arange(cache.offset, cache.offset + t)),
    ("whole floats", lambda cache, t: torch.arange(t, dtype=torch.float64) + cache.offset),
    ("offset plus arange", lambda cache, t: cache.offset + torch.arange(t)),
]

WRONG_POSITIONS = [
    ("the buggy function", lambda cache, t: torch.arange(t), "restart at 0"),
    ("len(cache)", lambda cache, t: torch.arange(len(cache), len(cache) + t), "stops growing"),
    ("one position for all", lambda cache, t: torch.full((t,), cache.offset), "its own position"),
    ("shifted by one", lambda cache, t: torch.arange(cache.offset + 1, cache.offset + t + 1), "off by 1"),
    ("shifted by 100", lambda cache, t: torch.arange(cache.offset, cache.offset + t) + 100, "off by 100"),
    ("counting from the end", lambda cache, t: torch.arange(cache.offset + t - 1, cache.offset - 1, -1),
     GENERIC),
    ("two apart", lambda cache, t: torch.arange(t) * 2 + cache.offset, GENERIC),
    ("offset mod the window", lambda cache, t: (torch.arange(cache.offset, cache.offset + t)) % 3, GENERIC),
    ("one position only", lambda cache, t: torch.arange(cache.offset, cache.offset + 1), r"shape \(4,\)"),
    ("halves", lambda cache, t: torch.arange(t) + 0.5, "whole numbers"),
    ("a bool mask", lambda cache, t: torch.ones(t, dtype=torch.bool), "whole numbers"),
    ("an attribute that does not exist", lambda cache, t: cache.missing, "AttributeError"),
    ("the stub", stub, "NotImplementedError"),
    ("no return", lambda cache, t: None, "None"),
    ("a tensor, not a function", torch.arange(5), "define a function"),
]

# ---- 11/3: pool_kv_heads(weight, num_heads, num_kv_heads) ---------------------------------------------------------


def pool_loop(weight, num_heads, num_kv_heads):
    d = weight.shape[0] // num_heads
    blocks = [weight[d * i:d * (i + 1)] for i in range(num_heads)]  # one (d, e) block per head
    group = num_heads // num_kv_heads
    return torch.cat([torch.stack(blocks[g * group:(g + 1) * group]).mean(0) for g in range(num_kv_heads)])


RIGHT_POOL = [
    ("unflatten, mean", lambda w, h, kv: w.unflatten(0, (kv, h // kv, -1)).mean(1).flatten(0, 1)),
    ("a loop over the heads", pool_loop),
    ("einops reduce", lambda w, h, kv: reduce(w, "(kv g d) e -> (kv d) e", "mean", kv=kv, g=h // kv)),
    ("view and sum / g", lambda w, h, kv: w.view(kv, h // kv, -1, w.shape[1]).sum(1).reshape(-1, w.shape[1])
     / (h // kv)),
    ("numpy", lambda w, h, kv: pool_loop(w, h, kv).numpy()),
    ("float32", lambda w, h, kv: pool_loop(w.float(), h, kv)),
]

WRONG_POOL = [
    ("every h_kv-th head", lambda w, h, kv: w.unflatten(0, (h // kv, kv, -1)).mean(0).flatten(0, 1), "CONSECUTIVE"),
    ("summed", lambda w, h, kv: w.unflatten(0, (kv, h // kv, -1)).sum(1).flatten(0, 1), "don't add them up"),
    ("the first head of a group", lambda w, h, kv: w.unflatten(0, (kv, h // kv, -1))[:, 0].flatten(0, 1),
     "first head of each group"),
    ("the last head of a group", lambda w, h, kv: w.unflatten(0, (kv, h // kv, -1))[:, -1].flatten(0, 1),
     "last head of each group"),
    ("not flattened", lambda w, h, kv: w.unflatten(0, (kv, h // kv, -1)).mean(1), r"shape \(h_kv d, e\)"),
    ("rows pooled inside the heads", lambda w, h, kv: w.unflatten(0, (kv, -1, h // kv)).mean(2).flatten(0, 1),
     "neighbouring rows"),
    ("transposed", lambda w, h, kv: pool_loop(w, h, kv).T, r"shape \(h_kv d, e\)"),
    ("the first h_kv heads", lambda w, h, kv: w[: kv * (w.shape[0] // h)], GENERIC),
    ("right for 8 heads only", lambda w, h, kv: pool_loop(w, h, kv) if h == 8 else pool_loop(w, h, kv) + 1, GENERIC),
    ("a view that fails", lambda w, h, kv: w.view(kv, -1, 7), "RuntimeError"),
    ("the stub", stub, "NotImplementedError"),
    ("no return", lambda w, h, kv: None, "None"),
]

ATTEMPTS = [
    *(Attempt("11/1", label, lesson11.cache_bytes, fn, right=True) for label, fn in [
        ("min(tokens, window)", bytes_right), ("if, else", bytes_if_else), ("math.prod, window or tokens",
                                                                          bytes_math_prod),
        ("a tensor", bytes_tensor), ("numpy", bytes_numpy)]),
    *(Attempt("11/1", label, lesson11.cache_bytes, fn, hint=hint) for label, fn, hint in WRONG_BYTES),
    *(Attempt("11/2", label, lesson11.step_positions, fn, right=True) for label, fn in RIGHT_POSITIONS),
    *(Attempt("11/2", label, lesson11.step_positions, fn, hint=hint) for label, fn, hint in WRONG_POSITIONS),
    *(Attempt("11/3", label, lesson11.pool_kv_heads, fn, right=True) for label, fn in RIGHT_POOL),
    *(Attempt("11/3", label, lesson11.pool_kv_heads, fn, hint=hint) for label, fn, hint in WRONG_POOL),
]
