"""Answers to lesson 06's exercises (the cost of attention): the scores and FLOPs of cross-attention, the peak bytes
of a query-chunked naive attention, and the largest batch within a memory budget, each a function of the sizes."""

import math

import numpy as np
import torch

from attention_lab.measure.cost import attention_flops, attention_memory_bytes
from attention_lab.teaching.checks import lesson06

from . import GENERIC, Attempt


def stub(*args):
    raise NotImplementedError("write the body of this function, then run the check cell below")


# ---- 06/1a: cross_scores(n_queries, n_keys, num_heads) ----------------------------------------------------------

def scores_right(n_queries, n_keys, num_heads):
    return num_heads * n_queries * n_keys


def scores_tensor(n_queries, n_keys, num_heads):
    return torch.ones(num_heads, n_queries, n_keys).sum()


def scores_float(n_queries, n_keys, num_heads):
    return float(n_queries) * n_keys * num_heads


def scores_numpy(n_queries, n_keys, num_heads):
    return np.prod([n_queries, n_keys, num_heads])


def scores_shape(n_queries, n_keys, num_heads):
    return math.prod((num_heads, n_queries, n_keys))


def scores_example_only(n_queries, n_keys, num_heads):
    return 6 * 448 * 1500


def scores_self_attention_of_512(n_queries, n_keys, num_heads):  # the lesson's own table, read at n = 512
    return num_heads * 512 * 512


WRONG_SCORES = [
    ("one head", lambda n_queries, n_keys, num_heads: n_queries * n_keys, "one head's count"),
    ("queries squared", lambda n_queries, n_keys, num_heads: num_heads * n_queries**2, "squares the number of queries"),
    ("keys squared", lambda n_queries, n_keys, num_heads: num_heads * n_keys**2, "squares the number of keys"),
    ("both sequences as one", lambda n_queries, n_keys, num_heads: num_heads * (n_queries + n_keys) ** 2,
     "every token of both sequences"),
    ("half the pairs", lambda n_queries, n_keys, num_heads: num_heads * n_queries * n_keys // 2, "nothing to halve"),
    ("sum of the lengths", lambda n_queries, n_keys, num_heads: num_heads * (n_queries + n_keys), "linearly"),
    ("one per query", lambda n_queries, n_keys, num_heads: num_heads * n_queries, "one score per query"),
    ("one per key", lambda n_queries, n_keys, num_heads: num_heads * n_keys, "one score per key"),
    ("heads counted twice", lambda n_queries, n_keys, num_heads: num_heads**2 * n_queries * n_keys,
     "heads twice"),
    ("the example's number", scores_example_only, "same number when n_queries or n_keys or num_heads doubles"),
    ("self-attention at 512", scores_self_attention_of_512, "same number when n_queries or n_keys doubles"),
    ("queries times keys minus one", lambda n_queries, n_keys, num_heads: num_heads * n_queries * (n_keys - 1),
     GENERIC),
    ("the stub", stub, "NotImplementedError"),
    ("no return", lambda n_queries, n_keys, num_heads: None, "None"),
    ("a string", lambda n_queries, n_keys, num_heads: f"{num_heads * n_queries * n_keys}", "whole number"),
    ("an error inside", lambda n_queries, n_keys, num_heads: n_queries / 0, "ZeroDivisionError"),
    ("two arguments only", lambda n_queries, n_keys: n_queries * n_keys, "TypeError"),
    ("the number, not a function", 4_032_000, "should be a function"),
]

# ---- 06/1b: cross_flops(n_queries, n_keys, num_heads, head_dim) -------------------------------------------------


def flops_right(n_queries, n_keys, num_heads, head_dim):
    return num_heads * 2 * (2 * n_queries * n_keys * head_dim)


def flops_exact_additions(n_queries, n_keys, num_heads, head_dim):
    return num_heads * 2 * n_queries * n_keys * (2 * head_dim - 1)


def flops_from_e(n_queries, n_keys, num_heads, head_dim):
    e = num_heads * head_dim
    return 4 * n_queries * n_keys * e


def flops_library(n_queries, n_keys, num_heads, head_dim):
    return attention_flops(n_queries, n_keys, head_dim=head_dim, num_heads=num_heads)


WRONG_FLOPS = [
    ("one product", lambda i, j, h, d: 2 * h * i * j * d, "half the count"),
    ("multiply-adds, one product", lambda i, j, h, d: h * i * j * d, "a quarter"),
    ("one head", lambda i, j, h, d: 4 * i * j * d, "one head's count"),
    ("queries squared", lambda i, j, h, d: 4 * h * i * i * d, "squares the number of queries"),
    ("keys squared", lambda i, j, h, d: 4 * h * j * j * d, "squares the number of keys"),
    ("heads twice", lambda i, j, h, d: 4 * h * h * i * j * d, "heads twice"),
    ("no d", lambda i, j, h, d: 4 * h * i * j, "dot product of length d"),
    ("plus the softmax", lambda i, j, h, d: 4 * h * i * j * d + 5 * h * i * j, "softmax"),
    ("the library", flops_library, "library's answer"),
    ("self-attention at 512", lambda i, j, h, d: 4 * h * 512 * 512 * d, "same number when n_queries or n_keys doubles"),
    ("projections added", lambda i, j, h, d: 4 * h * i * j * d + 2 * (i + 2 * j) * (h * d) ** 2, GENERIC),
    ("the stub", stub, "NotImplementedError"),
    ("an error inside", lambda i, j, h, d: [i][j], "IndexError"),
]

# ---- 06/2: chunked_peak_bytes(batch, heads, n, head_dim, chunk, item_bytes) --------------------------------------


def peak_right(batch, heads, n, head_dim, chunk, item_bytes):
    out = batch * heads * n * head_dim * item_bytes  # allocated before the loop
    matrix = batch * heads * min(chunk, n) * n * item_bytes  # one chunk's (c x n) scores, then weights
    chunk_out = batch * heads * min(chunk, n) * head_dim * item_bytes
    return out + 2 * matrix + chunk_out


def peak_library(batch, heads, n, head_dim, chunk, item_bytes):  # one chunk as an attention of its own, plus out
    dtype = {8: torch.float64, 4: torch.float32, 2: torch.bfloat16}[item_bytes]
    c = attention_memory_bytes(min(chunk, n), n, head_dim=head_dim, num_heads=heads, batch=batch, dtype=dtype)
    return c.naive_peak + batch * heads * n * head_dim * item_bytes


def peak_tensor(batch, heads, n, head_dim, chunk, item_bytes):
    sizes = torch.tensor([n * head_dim, 2 * min(chunk, n) * n, min(chunk, n) * head_dim])
    return sizes.sum() * batch * heads * item_bytes


def peak_without_min(batch, heads, n, head_dim, chunk, item_bytes):  # right: chunk <= n in every case
    return batch * heads * item_bytes * (n * head_dim + 2 * chunk * n + chunk * head_dim)


def scaled(f):
    return lambda b, h, n, d, c, s: f(b, h, n, d, min(c, n), s)


WRONG_PEAK = [
    ("n x n matrices", scaled(lambda b, h, n, d, c, s: b * h * s * (n * d + 2 * n * n + n * d)), "n x n per head"),
    ("the unchunked peak", scaled(lambda b, h, n, d, c, s: b * h * s * (2 * n * n + n * d)), "without chunks"),
    ("out forgotten", scaled(lambda b, h, n, d, c, s: b * h * s * (2 * c * n + c * d)), "leaves out `out`"),
    ("chunk output forgotten", scaled(lambda b, h, n, d, c, s: b * h * s * (n * d + 2 * c * n)),
     "allocates its own output"),
    ("one matrix", scaled(lambda b, h, n, d, c, s: b * h * s * (n * d + c * n + c * d)), "two chunk x n"),
    ("the previous chunk's matrices still alive",
     scaled(lambda b, h, n, d, c, s: b * h * s * (n * d + 4 * c * n + c * d)), "freed when it returns"),
    ("three matrices", scaled(lambda b, h, n, d, c, s: b * h * s * (n * d + 3 * c * n + c * d)), "one too many"),
    ("chunk x chunk", scaled(lambda b, h, n, d, c, s: b * h * s * (n * d + 2 * c * c + c * d)), "all n keys"),
    ("with Q, K and V", scaled(lambda b, h, n, d, c, s: b * h * s * (4 * n * d + 2 * c * n + c * d)),
     "existed before"),
    ("one sequence", scaled(lambda b, h, n, d, c, s: h * s * (n * d + 2 * c * n + c * d)), "one sequence's"),
    ("one head", scaled(lambda b, h, n, d, c, s: b * s * (n * d + 2 * c * n + c * d)), "one head's"),
    ("numbers, not bytes", scaled(lambda b, h, n, d, c, s: b * h * (n * d + 2 * c * n + c * d)), "counts numbers"),
    ("4 bytes always", scaled(lambda b, h, n, d, c, s: b * h * 4 * (n * d + 2 * c * n + c * d)), "4 bytes"),
    ("every chunk's matrices", scaled(lambda b, h, n, d, c, s: -(-n // c) * b * h * s * (n * d + 2 * c * n + c * d)),
     "one after another"),
    ("the example's number", lambda b, h, n, d, c, s: 9_043_968, "same number when batch or heads or n"),
    ("the library's naive peak", lambda b, h, n, d, c, s: attention_memory_bytes(n, head_dim=d).naive_peak,
     "library's answer"),
    ("e for d", scaled(lambda b, h, n, d, c, s: b * h * s * (n * h * d + 2 * c * n + c * h * d)), GENERIC),
    ("in MiB", lambda *sizes: peak_right(*sizes) / 2**20, "whole number"),
    ("the stub", stub, "NotImplementedError"),
]

# ---- 06/3: largest_fitting_batch(budget_bytes, n, num_heads, head_dim, layers) -----------------------------------


def batch_right(budget_bytes, n, num_heads, head_dim, layers):
    per_sequence = num_heads * (2 * n * n + n * head_dim) * 4  # scores, weights and output, float32
    return budget_bytes // per_sequence


def batch_by_search(budget_bytes, n, num_heads, head_dim, layers):
    batch = 0
    while (batch + 1) * num_heads * (2 * n * n + n * head_dim) * 4 <= budget_bytes:
        batch += 1
    return batch


def batch_floor(budget_bytes, n, num_heads, head_dim, layers):
    return math.floor(budget_bytes / (num_heads * (2 * n * n + n * head_dim) * 4))


def per(n, h, d, *, matrices=2, out=True, item=4, extra=0):
    return h * item * (matrices * n * n + (n * d if out else 0) + extra)


WRONG_BATCH = [
    ("rounded up", lambda B, n, h, d, L: math.ceil(B / per(n, h, d)), "rounds up"),
    ("at least one", lambda B, n, h, d, L: max(1, B // per(n, h, d)), "largest batch that fits is 0"),
    ("no output", lambda B, n, h, d, L: B // per(n, h, d, out=False), "leaves out the output"),
    ("one matrix", lambda B, n, h, d, L: B // per(n, h, d, matrices=1), "one n x n matrix per head"),
    ("times the layers", lambda B, n, h, d, L: B // (L * per(n, h, d)), "one after another"),
    ("one head", lambda B, n, h, d, L: B // per(n, 1, d), "every head"),
    ("numbers", lambda B, n, h, d, L: B // per(n, h, d, item=1), "counts numbers"),
    ("float64", lambda B, n, h, d, L: B // per(n, h, d, item=8), "8 bytes"),
    ("with Q, K and V", lambda B, n, h, d, L: B // per(n, h, d, extra=3 * n * d), "existed before"),
    ("e for d", lambda B, n, h, d, L: B // per(n, h, h * d), "whole model's width"),
    ("a fraction", lambda B, n, h, d, L: B / per(n, h, d), "whole number"),
    ("the example's answer", lambda B, n, h, d, L: 30, "right for the exercise's sizes but not"),
    ("the library", lambda B, n, h, d, L: B // attention_memory_bytes(n, head_dim=d, num_heads=h).naive_peak,
     "library's answer"),
    ("rounded to a power of two", lambda B, n, h, d, L: 2 ** int(math.log2(max(1, B // per(n, h, d)))), GENERIC),
    ("the stub", stub, "NotImplementedError"),
]

ATTEMPTS = [
    *(Attempt("06/1a", label, lesson06.score_count, fn, right=True) for label, fn in [
        ("heads x queries x keys", scores_right), ("a tensor of ones, summed", scores_tensor),
        ("a float", scores_float), ("numpy", scores_numpy), ("math.prod", scores_shape)]),
    *(Attempt("06/1a", label, lesson06.score_count, fn, hint=hint) for label, fn, hint in WRONG_SCORES),
    *(Attempt("06/1b", label, lesson06.flop_count, fn, right=True) for label, fn in [
        ("2 products x 2 FLOPs", flops_right), ("exact additions", flops_exact_additions), ("from e", flops_from_e)]),
    *(Attempt("06/1b", label, lesson06.flop_count, fn, hint=hint) for label, fn, hint in WRONG_FLOPS),
    *(Attempt("06/2", label, lesson06.chunked_peak, fn, right=True) for label, fn in [
        ("out, two chunk x n matrices, the chunk's output", peak_right), ("a tensor", peak_tensor),
        ("without min(chunk, n)", peak_without_min)]),
    Attempt("06/2", "one chunk through the library, plus out", lesson06.chunked_peak, peak_library,
            hint="library's answer"),
    *(Attempt("06/2", label, lesson06.chunked_peak, fn, hint=hint) for label, fn, hint in WRONG_PEAK),
    *(Attempt("06/3", label, lesson06.largest_batch, fn, right=True) for label, fn in [
        ("integer division", batch_right), ("a search", batch_by_search), ("math.floor", batch_floor)]),
    *(Attempt("06/3", label, lesson06.largest_batch, fn, hint=hint) for label, fn, hint in WRONG_BATCH),
]
