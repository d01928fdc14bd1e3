"""Answers to lesson 14's exercises (attention in today's open LLMs). Exercise 2 (helper B's part): the KV-cache
bytes of a stack of local and global layers (14/2)."""

import math

import numpy as np
import torch

import attention_lab as al
from attention_lab.teaching.checks import lesson14

from . import Attempt


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
ATTEMPTS = ATTEMPTS_B  # the lead joins helper A's: ATTEMPTS = [*ATTEMPTS_A, *ATTEMPTS_B]
