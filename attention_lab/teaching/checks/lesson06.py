"""Checks for lesson 06 (the cost of attention): the scores and FLOPs of cross-attention, the peak bytes of a naive
attention that takes its queries a chunk at a time (then measured), and the largest batch that fits a memory budget.

Every answer is a function of the sizes. Each check calls it on several sizes, chosen so that the common wrong
formulas give numbers different from the right one and from each other; a function that matches a wrong formula on
every size gets that formula's hint, and one that is right for the exercise's example only (a number typed in, a
size written into the function) is told so.
"""

from __future__ import annotations

import math

import torch

from ...i18n import msg
from ...measure.memory import format_bytes, measure_peak_memory
from ._core import correct, guard_errors, hint
from ._sizes import Formula, check_function

__all__ = ["chunked_peak", "flop_count", "largest_batch", "score_count"]  # the checks; the rest is their machinery

# --- exercise 1: scores and FLOPs of cross-attention ------------------------------------------------------------

# Whisper-sized cross-attention first (448 text positions over 1500 audio frames, 6 heads), then sizes on which
# i*j, i*i, j*j, i+j and (i+j)^2 all differ, with 1 head and with i > j.
_COUNT_CASES = ({"n_queries": 448, "n_keys": 1500, "num_heads": 6}, {"n_queries": 7, "n_keys": 12, "num_heads": 3},
                {"n_queries": 20, "n_keys": 5, "num_heads": 1}, {"n_queries": 1, "n_keys": 9, "num_heads": 2})
_HEAD_DIMS = (64, 5, 16, 8)


def _scores(n_queries, n_keys, num_heads):
    return num_heads * n_queries * n_keys


_SCORE_MISTAKES = (
    (lambda n_queries, n_keys, num_heads: n_queries * n_keys,
     msg("that is one head's count; every head computes its own score matrix")),
    (lambda n_queries, n_keys, num_heads: num_heads * n_queries**2,
     msg("that squares the number of queries: here the queries and the keys are different tokens, and there is one "
         "score per (query, key) pair")),
    (lambda n_queries, n_keys, num_heads: num_heads * n_keys**2,
     msg("that squares the number of keys: here the queries and the keys are different tokens, and there is one "
         "score per (query, key) pair")),
    (lambda n_queries, n_keys, num_heads: num_heads * (n_queries + n_keys) ** 2,
     msg("that pairs every token of both sequences with every other; a score pairs one query with one key, never "
         "two queries or two keys")),
    (lambda n_queries, n_keys, num_heads: num_heads * n_queries * n_keys / 2,
     msg("there is nothing to halve here: a query and a key come from different sequences, so every (query, key) "
         "pair is a score of its own")),
    (lambda n_queries, n_keys, num_heads: num_heads * (n_queries + n_keys),
     msg("that grows linearly with the lengths; each query is compared with each key")),
    (lambda n_queries, n_keys, num_heads: num_heads * n_queries,
     msg("that counts one score per query; each query gets one score for every key")),
    (lambda n_queries, n_keys, num_heads: num_heads * n_keys,
     msg("that counts one score per key; every query scores every key")),
    (lambda n_queries, n_keys, num_heads: num_heads**2 * n_queries * n_keys,
     msg("that counts the heads twice: each head has one i x j score matrix")),
)


@guard_errors
def score_count(answer: object) -> None:
    """Exercise 1a: ``answer(n_queries, n_keys, num_heads)`` -> how many scores alpha_{i,j} cross-attention
    computes."""
    check_function(answer, _COUNT_CASES, _scores, _SCORE_MISTAKES,
                    fallback=msg("count the entries of one head's (i, j) score matrix, then think about the heads"))
    first = _COUNT_CASES[0]
    correct(msg("one score per (query, key) pair and head: {heads} x {i} x {j} = {total:,} for Whisper-sized "
                "cross-attention, and right for every other size tried", heads=first["num_heads"],
                i=first["n_queries"], j=first["n_keys"], total=_scores(**first)))


def _flops(n_queries, n_keys, head_dim, num_heads):
    return 4 * num_heads * n_queries * n_keys * head_dim


def _flops_exact(n_queries, n_keys, head_dim, num_heads):  # d multiplies and d - 1 additions per dot product
    return 2 * num_heads * n_queries * n_keys * (2 * head_dim - 1)


_FLOP_MISTAKES = (
    (lambda n_queries, n_keys, head_dim, num_heads: 2 * num_heads * n_queries * n_keys * head_dim,
     msg("half the count: either one of the two products (the scores Q K^T and the mix weights @ V) is missing, "
         "or a multiply-add is counted as one FLOP instead of two")),
    (lambda n_queries, n_keys, head_dim, num_heads: num_heads * n_queries * n_keys * head_dim,
     msg("a quarter of the count: count both products (Q K^T and weights @ V), and two FLOPs per multiply-add")),
    (lambda n_queries, n_keys, head_dim, num_heads: 4 * n_queries * n_keys * head_dim,
     msg("that is one head's count; every head does its own two products")),
    (lambda n_queries, n_keys, head_dim, num_heads: 4 * num_heads * n_queries**2 * head_dim,
     msg("that squares the number of queries: each product's size involves both lengths, queries and keys")),
    (lambda n_queries, n_keys, head_dim, num_heads: 4 * num_heads * n_keys**2 * head_dim,
     msg("that squares the number of keys: each product's size involves both lengths, queries and keys")),
    (lambda n_queries, n_keys, head_dim, num_heads: 4 * num_heads**2 * n_queries * n_keys * head_dim,
     msg("that counts the heads twice: a head's dot products have length d, the head size, not e = heads x d")),
    (lambda n_queries, n_keys, head_dim, num_heads: 4 * num_heads * n_queries * n_keys,
     msg("each score is a dot product of length d: d multiplications and d additions, so d appears in the count")),
)


@guard_errors
def flop_count(answer: object) -> None:
    """Exercise 1b: ``answer(n_queries, n_keys, head_dim, num_heads)`` -> the FLOPs of Q K^T and weights @ V, one
    multiply-add = 2 FLOPs."""
    cases = [{**case, "head_dim": d} for case, d in zip(_COUNT_CASES, _HEAD_DIMS)]

    def softmax_added(got: list[int]) -> None:
        extra = [mine - _flops(**case) for mine, case in zip(got, cases)]
        pairs = [_scores(case["n_queries"], case["n_keys"], case["num_heads"]) for case in cases]
        if all(e > 0 and e % p == 0 for e, p in zip(extra, pairs)) and len({e // p for e, p in zip(extra, pairs)}) == 1:
            hint(msg("that adds a few operations per score, the softmax's: the exercise counts only the two matrix "
                     "products, as FlopCounterMode does"))

    got, formula = check_function(
        answer, cases, _flops, _FLOP_MISTAKES, also_right=(_flops_exact,), more_mistakes=softmax_added,
        fallback=msg("each score is a dot product of length d (d multiplications and d additions); the mix with V "
                     "costs as much again; then count the heads"))
    first = cases[0]
    if formula is _flops_exact:
        correct(msg("{total:,} FLOPs for the first size, exactly (a dot product of length d has d - 1 additions); "
                    "the usual convention, which PyTorch's FlopCounterMode follows, counts 2 FLOPs per "
                    "multiply-add: {usual:,}", total=got[0], usual=_flops(**first)))
        return
    correct(msg("2 products x 2 FLOPs x {heads} x {i} x {j} x {d} = {total:,} FLOPs for the first size, and "
                "right for every other size tried", heads=first["num_heads"], i=first["n_queries"],
                j=first["n_keys"], d=first["head_dim"], total=got[0]))


# --- exercise 2: the peak of naive attention, a chunk of queries at a time ----------------------------------------

_DTYPES = {8: torch.float64, 4: torch.float32}  # item_bytes of the measured cases
# The exercise's own example first (measured), then a length that is not a multiple of the chunk (measured), one
# chunk holding every query, and chunks of one query. Batch, heads, head size and bytes differ from case to case.
_PEAK_CASES = ({"batch": 3, "heads": 2, "n": 640, "head_dim": 32, "chunk": 128, "item_bytes": 8},
               {"batch": 1, "heads": 5, "n": 1000, "head_dim": 16, "chunk": 96, "item_bytes": 4},
               {"batch": 2, "heads": 3, "n": 300, "head_dim": 64, "chunk": 300, "item_bytes": 4},
               {"batch": 4, "heads": 1, "n": 50, "head_dim": 8, "chunk": 1, "item_bytes": 2})
_MEASURED = 2  # the first two cases are also measured


def _naive_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """The lesson's naive attention (section 1). Shape: q ``(b, h, i, d)``, k and v ``(b, h, j, d)`` -> q's."""
    scores = q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5  # (b, h, i, j)
    weights = scores.softmax(dim=-1)  # (b, h, i, j)
    return weights @ v  # (b, h, i, d)


def _chunked_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, chunk: int) -> torch.Tensor:
    """The exercise's query-chunked naive attention, as the lesson shows it.

    Shape: q ``(b, h, i, d)``, k and v ``(b, h, j, d)`` -> ``(b, h, i, d)``.
    """
    out = torch.empty_like(q)  # (b, h, i, d)
    for start in range(0, q.shape[-2], chunk):
        out[..., start:start + chunk, :] = _naive_attention(q[..., start:start + chunk, :], k, v)  # (b, h, c, d)
    return out


def _peak(batch, heads, n, head_dim, chunk, item_bytes, *, out=True, matrices=2, rows=None, keys=None,
          chunk_out=True):
    """What the lesson's chunked attention allocates at its peak: out, then one chunk's two (chunk x n) matrices
    and its output; the keyword arguments give the common wrong versions."""
    c = min(chunk, n)
    rows = c if rows is None else rows
    keys = n if keys is None else keys
    per = batch * heads * item_bytes
    return per * ((n * head_dim if out else 0) + matrices * rows * keys + (rows * head_dim if chunk_out else 0))


def _in_values(formula: Formula) -> Formula:
    return lambda **case: formula(**case) / case["item_bytes"]


_PEAK_MISTAKES = (
    (lambda **case: _peak(**case, rows=case["n"]),
     msg("that holds matrices of n x n per head: a chunk of queries only meets the keys, so each matrix is "
         "chunk x n")),
    (lambda **case: _peak(**case, rows=case["n"], out=False),
     msg("that is the peak of the whole naive attention, without chunks: here each chunk's matrices are "
         "chunk x n, and the output tensor out exists from the start")),
    (lambda **case: _peak(**case, out=False),
     msg("that leaves out `out`: it is allocated before the loop and stays alive through every chunk")),
    (lambda **case: _peak(**case, chunk_out=False),
     msg("each chunk's `weights @ v` allocates its own output (chunk x d per head) before it is copied into out, "
         "while both matrices are still alive")),
    (lambda **case: _peak(**case, matrices=1),
     msg("the softmax reads the scores while it writes the weights, and `scores` stays alive as a variable: two "
         "chunk x n matrices at once")),
    (lambda **case: _peak(**case, matrices=4),
     msg("the scores and weights of one chunk are local variables of naive_attention: they are freed when it "
         "returns, before the next chunk starts")),
    (lambda **case: _peak(**case, matrices=3),
     msg("three matrices is one too many: the unscaled product is freed as soon as it has been scaled, before the "
         "softmax allocates the weights")),
    (lambda **case: _peak(**case, keys=min(case["chunk"], case["n"])),
     msg("each chunk's queries meet all n keys, not only the keys of their own chunk: the matrices are chunk x n")),
    (lambda **case: _peak(**case) + 3 * case["batch"] * case["heads"] * case["n"] * case["head_dim"] * case[
        "item_bytes"], msg("Q, K and V existed before the call; the peak counts only what the call allocates")),
    (lambda **case: _peak(**case) // case["batch"],
     msg("that is one sequence's peak; every sequence of the batch has its own matrices and output")),
    (lambda **case: _peak(**case) // case["heads"],
     msg("that is one head's peak; every head has its own matrices")),
    (_in_values(_peak), msg("that counts numbers; the peak is in bytes: multiply by item_bytes")),
    (lambda **case: _peak(**case) * 4 // case["item_bytes"],
     msg("that counts 4 bytes for every number; use item_bytes, the size of one number of this dtype")),
    (lambda **case: _peak(**case) * math.ceil(case["n"] / min(case["chunk"], case["n"])),
     msg("the chunks run one after another, and each frees its matrices before the next begins: the peak is one "
         "chunk's, not the sum over all chunks")),
)


def _measure_chunked(batch, heads, n, head_dim, chunk, item_bytes) -> int:
    generator = torch.Generator().manual_seed(0)  # its own random numbers: the lesson's later cells keep theirs
    q, k, v = torch.randn(3, batch, heads, n, head_dim, generator=generator,
                          dtype=_DTYPES[item_bytes]).unbind(0)  # (b, h, i, d) each
    return measure_peak_memory(_chunked_attention, q, k, v, chunk).peak_bytes


@guard_errors
def chunked_peak(answer: object) -> None:
    """Exercise 2: ``answer(batch, heads, n, head_dim, chunk, item_bytes)`` -> the peak bytes of the lesson's
    ``chunked_attention`` (self-attention, n queries and n keys), then checked by measuring it."""
    got, _ = check_function(answer, _PEAK_CASES, _peak, _PEAK_MISTAKES,
                             fallback=msg("list the tensors alive at the moment a chunk's output is created, and "
                                          "their sizes in bytes"))
    measured = [_measure_chunked(**case) for case in _PEAK_CASES[:_MEASURED]]
    correct(msg("you predicted {predicted} and {second_predicted} for the first two sizes; the meter measured "
                "{measured} and {second}", predicted=format_bytes(got[0]), second_predicted=format_bytes(got[1]),
                measured=format_bytes(measured[0]), second=format_bytes(measured[1])))


# --- exercise 3: the largest batch within a budget -------------------------------------------------------------

# The exercise's server first; then a budget that holds exactly 5 sequences, one too small for any, and another size.
def _per_sequence(n, num_heads, head_dim, *, matrices=2, output=True, item=4, extra=0):
    return num_heads * item * (matrices * n * n + (n * head_dim if output else 0) + extra)


_BATCH_CASES = ({"budget_bytes": 2**32, "n": 1024, "num_heads": 16, "head_dim": 128, "layers": 12},
                {"budget_bytes": 5 * _per_sequence(512, 4, 64), "n": 512, "num_heads": 4, "head_dim": 64,
                 "layers": 2},
                {"budget_bytes": 10**6, "n": 1024, "num_heads": 8, "head_dim": 64, "layers": 4},
                {"budget_bytes": 2**30, "n": 2048, "num_heads": 8, "head_dim": 64, "layers": 6})


def _batch(budget_bytes, n, num_heads, head_dim, layers, **per):
    return budget_bytes // _per_sequence(n, num_heads, head_dim, **per)


_BATCH_MISTAKES = (
    (lambda **case: -(-case["budget_bytes"] // _per_sequence(case["n"], case["num_heads"], case["head_dim"])),
     msg("that rounds up: the last sequence of that batch does not fit; a batch either fits or does not, so round "
         "down")),
    (lambda **case: max(1, _batch(**case)),
     msg("when not even one sequence fits the budget, the largest batch that fits is 0")),
    (lambda **case: _batch(**case, output=False),
     msg("that leaves out the output: it is allocated while both n x n matrices are still alive")),
    (lambda **case: _batch(**case, matrices=1),
     msg("that counts one n x n matrix per head; the naive forward holds two at its peak")),
    (lambda **case: case["budget_bytes"] // (case["layers"] * _per_sequence(case["n"], case["num_heads"],
                                                                            case["head_dim"])),
     msg("the layers run one after another and each frees its matrices before the next starts: only one layer's "
         "attention is alive at a time")),
    (lambda **case: case["budget_bytes"] // _per_sequence(case["n"], 1, case["head_dim"]),
     msg("every head has its own n x n matrices")),
    (lambda **case: _batch(**case, item=1), msg("that counts numbers; a float32 number takes 4 bytes")),
    (lambda **case: _batch(**case, item=8), msg("that counts 8 bytes a number; the model runs in float32: 4 bytes")),
    (lambda **case: _batch(**case, extra=3 * case["n"] * case["head_dim"]),
     msg("Q, K and V existed before the call; the budget holds only what the attention call allocates")),
    (lambda **case: _batch(**case, output=False, extra=case["n"] * case["head_dim"] * case["num_heads"]),
     msg("the output of one head is n x d numbers, d the head size; e = heads x d is the whole model's width")),
)


@guard_errors
def largest_batch(answer: object) -> None:
    """Exercise 3: ``answer(budget_bytes, n, num_heads, head_dim, layers)`` -> the largest batch whose naive
    attention forward (float32, no gradients; Q, K and V not counted) fits ``budget_bytes``, the layers running one
    after another."""
    def rounded_another_way(got: list[int]) -> None:
        quotients = [(case["budget_bytes"], _per_sequence(case["n"], case["num_heads"], case["head_dim"]))
                     for case in _BATCH_CASES]
        if all(mine in (budget // one, -(-budget // one)) for mine, (budget, one) in zip(got, quotients)):
            hint(msg("the budget over one sequence's peak is right on every size, but rounded up on some: a batch "
                     "either fits or does not, so always round down"))

    got, _ = check_function(answer, _BATCH_CASES, _batch, _BATCH_MISTAKES, probe=False,
                             more_mistakes=rounded_another_way,
                             fallback=msg("a batch of b sequences needs b times one sequence's peak: find the "
                                          "largest b for which that stays within the budget"))
    first = _BATCH_CASES[0]
    one = _per_sequence(first["n"], first["num_heads"], first["head_dim"])
    correct(msg("a batch of {batch} needs {need:,} bytes; {more} would need {over:,}, over the budget of {budget:,} "
                "(and right for every other size tried, including a budget too small for one sequence)",
                batch=got[0], need=got[0] * one, more=got[0] + 1, over=(got[0] + 1) * one,
                budget=first["budget_bytes"]))
