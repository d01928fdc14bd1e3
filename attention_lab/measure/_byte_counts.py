"""What attention should cost in memory, by arithmetic: the bytes of each tensor of one call, and how to print bytes."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .._validation import check_positive_int, fail

__all__ = ["AttentionMemory", "MiB", "attention_memory_bytes", "format_bytes"]

MiB = 2**20


def format_bytes(n: int | float) -> str:
    """``1536`` -> ``'1.50 KiB'``: binary units (KiB = 1024 B, MiB = 1024 KiB), two decimals."""
    value = float(n)
    if abs(value) < 1024:
        return f"{int(value)} B"
    for unit in ("KiB", "MiB"):
        value /= 1024
        if abs(value) < 1024:
            return f"{value:.2f} {unit}"
    return f"{value / 1024:.2f} GiB"


@dataclass(frozen=True)
class AttentionMemory:
    """Bytes of each tensor in one attention call (``b`` sequences, ``h`` heads)."""

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
        fail(fn, f"dtype must be a torch.dtype such as torch.float32, got {type(dtype).__name__} {dtype!r}",
             TypeError)
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
