"""Checks for lesson 06 (the cost of attention): scores and FLOPs of cross-attention, the peak bytes of a naive
forward for a batch in float64, and the largest batch that fits a memory budget."""

from __future__ import annotations

import numbers

import torch

from ...measure.cost import attention_memory_bytes
from ...measure.memory import format_bytes, measure_peak_memory
from ._core import correct, guard_errors, hint


def _as_int(answer: object, what: str) -> int:
    if answer is None or answer is Ellipsis:
        hint(f"{what} is still empty: replace the placeholder with your code")
    if isinstance(answer, torch.Tensor) and answer.numel() == 1:
        answer = answer.item()
    if isinstance(answer, bool) or not isinstance(answer, numbers.Real):
        hint(f"{what} should be a single number, got {type(answer).__name__}")
    if float(answer) != int(answer):
        hint(f"{what} counts whole things (scores, FLOPs, bytes, tokens): it should be a whole number")
    return int(answer)


@guard_errors
def score_count(answer: object, n: int, num_heads: int = 1, n_keys: int | None = None) -> None:
    """Exercise 1: how many similarity scores alpha_{i,j} attention computes for n queries, ``n_keys`` keys
    (default: n, self-attention) and ``num_heads`` heads."""
    got = _as_int(answer, "your count")
    j = n if n_keys is None else n_keys
    per_head = n * j
    if got == per_head * num_heads:
        who = "every query meets every key, itself included" if j == n else "one per (query, key) pair"
        correct(f"{n} x {j} scores per head, {got:,} in all: {who}")
        return
    if got == per_head and num_heads > 1:
        hint("that is one head's count; every head computes its own score matrix")
    if j != n and got in (n * n * num_heads, j * j * num_heads, n * n, j * j):
        hint("queries and keys come from different sequences here: there is one score per (query, key) pair, not "
             "per pair of queries or pair of keys")
    if j == n and got in (n * (n - 1) // 2 * num_heads, n * (n + 1) // 2 * num_heads, n * (n - 1) * num_heads):
        hint("alpha_{i,j} and alpha_{j,i} are different numbers (q^i . k^j is not q^j . k^i), and each token "
             "also scores itself: count ordered pairs (i, j), i = j included")
    if got in (n * num_heads, 2 * n * num_heads, j * num_heads, (n + j) * num_heads):
        hint("that grows linearly with the lengths; each query is compared with each key")
    hint("count the entries of the (i, j) score matrix, then think about the heads")


@guard_errors
def flop_count(answer: object, n: int, head_dim: int, num_heads: int = 1, n_keys: int | None = None) -> None:
    """Exercise 1b: the FLOPs of Q K^T and weights @ V for n queries and ``n_keys`` keys (default n), one multiply-add
    = 2 FLOPs."""
    got = _as_int(answer, "your FLOP count")
    j = n if n_keys is None else n_keys
    one_matmul = 2 * n * j * head_dim * num_heads
    if got == 2 * one_matmul:
        correct(f"2 matmuls x 2 n^2 d x {num_heads} head(s) = {got:,} FLOPs")
        return
    if got == 2 * n * j * (2 * head_dim - 1) * num_heads:
        correct(f"{got:,} FLOPs, exactly (a dot product of length d has d - 1 additions); the usual convention, "
                f"which PyTorch's FlopCounterMode follows, counts 2 FLOPs per multiply-add: {2 * one_matmul:,}")
        return
    if got == one_matmul:
        hint("two things to count: there are two n x n x d products (the scores Q K^T and the mix weights @ V), "
             "and a multiply-add is two floating-point operations; one of them is missing")
    if got == one_matmul // 2:
        hint("count both products (Q K^T and weights @ V), and two FLOPs per multiply-add")
    if num_heads > 1 and got * num_heads == 2 * one_matmul:
        hint("every head does its own products: multiply by the number of heads")
    if j != n and got in (4 * n * n * head_dim * num_heads, 4 * j * j * head_dim * num_heads):
        hint("queries and keys come from different sequences here: each product's size involves both lengths")
    hint("each of the n x n scores is a dot product of length d (d multiplies and d adds); the mix with V costs "
         "as much again")


@guard_errors
def predicted_peak(answer: object, n: int, head_dim: int, num_heads: int = 1, *, batch: int = 1,
                   dtype: torch.dtype = torch.float32) -> None:
    """Exercise 2: the peak bytes of the lesson's naive attention forward for a batch in ``dtype``, then checked by
    measuring it."""
    got = _as_int(answer, "your predicted peak")
    m = attention_memory_bytes(n, head_dim=head_dim, num_heads=num_heads, batch=batch, dtype=dtype)
    expected = m.scores + m.weights + m.output
    item = torch.empty((), dtype=dtype).element_size()
    if got != expected:
        if batch > 1 and got * batch == expected:
            hint("that is one sequence's peak; every sequence of the batch has its own matrices and output")
        if item != 4 and got * item == expected * 4:
            hint(f"that counts 4 bytes a number; {dtype} takes {item} bytes")
        if got in (m.scores + m.output, m.scores):
            hint("the softmax reads the scores while it writes the weights, and the scores stay alive as a local "
                 "variable: two n x n matrices at once")
        if got == expected // item or got == (m.scores + m.weights) // item:
            hint(f"that counts values; a {dtype} value takes {item} bytes")
        if got == m.scores + m.weights:
            hint("the output b (n x d per head) is allocated while both matrices are still alive")
        if got in (expected + m.qkv, m.total):
            hint("Q, K and V existed before the call; the peak counts only what the call allocates")
        hint("list the tensors alive at the moment the output is created, and their sizes in bytes")
    generator = torch.Generator().manual_seed(0)  # its own random numbers: the lesson's later cells keep theirs
    q, k, v = torch.randn(3, batch, num_heads, n, head_dim, dtype=dtype, generator=generator).unbind(0)  # (b, h, i, d)

    def naive(q, k, v):
        scores = q @ k.transpose(-2, -1) * head_dim**-0.5  # (b, h, i, j)
        weights = scores.softmax(dim=-1)  # (b, h, i, j)
        return weights @ v  # (b, h, i, d)

    measured = measure_peak_memory(naive, q, k, v).peak_bytes
    correct(f"you predicted {format_bytes(got)}; the meter measured {format_bytes(measured)}")


@guard_errors
def largest_batch(answer: object, *, n: int, budget_bytes: int, head_dim: int, num_heads: int, layers: int) -> None:
    """Exercise 3: the largest batch whose naive attention forward (float32, no gradients) fits ``budget_bytes``,
    in a model of ``layers`` layers that run one after another."""
    got = _as_int(answer, "your batch size")

    def peak(batch: int) -> int:
        m = attention_memory_bytes(n, head_dim=head_dim, num_heads=num_heads, batch=batch)
        return m.scores + m.weights + m.output

    one = peak(1)
    expected = budget_bytes // one  # the peak grows in proportion to the batch
    if got == expected:
        correct(f"a batch of {got} needs {peak(got):,} bytes; {got + 1} would need {peak(got + 1):,}, over the "
                f"budget of {budget_bytes:,}")
        return
    if got < 1:
        hint("a batch holds at least one sequence; if not even one fits, the answer would be 0, but one fits here")
    m = attention_memory_bytes(n, head_dim=head_dim, num_heads=num_heads)
    if got == -(-budget_bytes // one):
        hint("that batch is over the budget by a little: round down, since a batch either fits or does not")
    if got == budget_bytes // (m.scores + m.weights):
        hint("that leaves out the output: it is allocated while both n x n matrices are still alive")
    if got == budget_bytes // (m.scores + m.output):
        hint("that counts one n x n matrix per head; the naive forward holds two at its peak")
    if layers > 1 and got == budget_bytes // (one * layers):
        hint("the layers run one after another and each frees its matrices before the next starts: only one "
             "layer's attention is alive at a time")
    if got == budget_bytes // (one // num_heads):
        hint("every head has its own n x n matrices")
    if got == budget_bytes // (one // 4):
        hint("that counts values; a float32 value takes 4 bytes")
    if peak(got) > budget_bytes:
        hint(f"a batch of {got} needs {peak(got):,} bytes, more than the budget of {budget_bytes:,}: go smaller")
    hint(f"a batch of {got} fits, but a larger one fits too: the peak grows in proportion to the batch")
