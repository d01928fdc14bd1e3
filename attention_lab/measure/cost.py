"""What one attention call should cost, by arithmetic: the bytes of each of its tensors, and its FLOPs.

:func:`attention_memory_bytes` counts the tensors of one call by hand (lesson 06 checks it against the exact meter of
:mod:`attention_lab.measure.memory`); :func:`attention_flops` counts the multiply-adds of its two matrix products.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .._validation import check_positive_int, fail
from .memory import format_bytes

__all__ = ["AttentionMemory", "attention_flops", "attention_memory_bytes"]


@dataclass(frozen=True)
class AttentionMemory:
    """Bytes of each tensor in one attention call (``b`` sequences, ``h`` heads).

    Shape: one int of bytes per tensor: q, k, v, scores, weights, output.
    """

    q: int
    k: int
    v: int
    scores: int
    weights: int
    output: int

    @property
    def qkv(self) -> int:
        """Q, K and V together: 3 * n * d values per head when i == j."""
        return self.q + self.k + self.v

    @property
    def naive_peak(self) -> int:
        """What a naive forward allocates beyond its inputs: the scores and the weights alive together + output."""
        return self.scores + self.weights + self.output

    @property
    def total(self) -> int:
        return self.qkv + self.scores + self.weights + self.output

    def as_dict(self) -> dict[str, int]:
        return {"q": self.q, "k": self.k, "v": self.v, "scores": self.scores, "weights": self.weights,
                "output": self.output}

    def __str__(self) -> str:
        rows = [f"{name:>8}: {format_bytes(size)}" for name, size in self.as_dict().items()]
        return "\n".join(rows + [f"{'total':>8}: {format_bytes(self.total)}"])


def attention_memory_bytes(
    n_queries: int,
    n_keys: int | None = None,
    *,
    head_dim: int,
    num_heads: int = 1,
    batch: int = 1,
    dtype: torch.dtype = torch.float32,
) -> AttentionMemory:
    """Bytes of Q, K, V, the score matrix, the weight matrix and the output of one attention call: arithmetic only.

    Each ``(i, j)`` matrix holds ``b * h * i * j`` values, Q and the output ``b * h * i * d``, K and V
    ``b * h * j * d``; each value takes ``dtype``'s item size (4 bytes for float32, 2 for float16 and bfloat16).

    Shape: q ``(b, h, i, d)``, k and v ``(b, h, j, d)``, scores and weights ``(b, h, i, j)``, output ``(b, h, i, d)``.
    """
    fn = "attention_memory_bytes"
    check_positive_int(fn, "n_queries", n_queries)
    n_keys = n_queries if n_keys is None else check_positive_int(fn, "n_keys", n_keys)
    check_positive_int(fn, "head_dim", head_dim)
    check_positive_int(fn, "num_heads", num_heads)
    check_positive_int(fn, "batch", batch)
    if not isinstance(dtype, torch.dtype):
        fail(fn, f"dtype must be a torch.dtype such as torch.float32, got {type(dtype).__name__} {dtype!r}; pass "
                 f"dtype=torch.float32 (or the dtype of your tensors)", TypeError)
    item = torch.empty((), dtype=dtype).element_size()
    per_head = batch * num_heads * item
    return AttentionMemory(
        q=per_head * n_queries * head_dim,
        k=per_head * n_keys * head_dim,
        v=per_head * n_keys * head_dim,
        scores=per_head * n_queries * n_keys,
        weights=per_head * n_queries * n_keys,
        output=per_head * n_queries * head_dim,
    )


def attention_flops(n_queries: int, n_keys: int | None = None, *, head_dim: int, num_heads: int = 1,
                    batch: int = 1) -> int:
    """Multiply-add FLOPs of one attention forward: Q K^T and weights @ V, 2 * i * j * d each, per head.

    The softmax adds a few operations per score (O(i * j), not O(i * j * d)) and is left out, as is usual.

    Shape: q ``(b, h, i, d)``, k and v ``(b, h, j, d)``.
    """
    fn = "attention_flops"
    check_positive_int(fn, "n_queries", n_queries)
    n_keys = n_queries if n_keys is None else check_positive_int(fn, "n_keys", n_keys)
    for name, value in (("head_dim", head_dim), ("num_heads", num_heads), ("batch", batch)):
        check_positive_int(fn, name, value)
    return 4 * batch * num_heads * n_queries * n_keys * head_dim
