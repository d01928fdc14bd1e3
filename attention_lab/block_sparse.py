"""Block-sparse attention: compute only the (query block, key block) pairs a :class:`BlockLayout` keeps.

Every query block r keeps a short list of key blocks. We pad those lists to the longest one (marking the padding
invalid), gather the listed key and value blocks next to each query block, and then do what dense attention does,
batched over all query blocks at once: one matmul for the scores, one masked softmax over all kept keys of a row,
one matmul with the values. There is no Python loop over blocks, and for local or sliding layouts the work grows
linearly with the sequence length instead of quadratically. Autograd differentiates it like any other tensor code.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ._checks import check_qkv, fail
from .layouts import BlockLayout

__all__ = ["block_sparse_attention"]

_LOW_PRECISION = (torch.float16, torch.bfloat16)
_TILE_ELEMENTS = 1 << 21  # scores computed at once: 8 MiB in fp32, small enough to stay in the CPU's cache


@dataclass(frozen=True)
class _Plan:
    """Everything about one (layout, n) that does not depend on the data, computed once."""

    key_blocks: torch.Tensor  # (r, C) long: the kept key blocks of each query block, padded with block 0
    hidden: torch.Tensor | None  # (r, q, C*k) bool: gathered keys a query may not see; None = it sees all
    hidden_any: list[bool]  # per query block: is any gathered key hidden from one of its queries?
    empty_rows: torch.Tensor | None  # (i,) bool: queries with no key at all (their output is 0); None = none


_plans: weakref.WeakKeyDictionary[BlockLayout, dict[tuple[int, torch.device], _Plan]] = weakref.WeakKeyDictionary()


def _plan(layout: BlockLayout, n: int, device: torch.device) -> _Plan:
    cache = _plans.setdefault(layout, {})
    if (n, device) in cache:
        return cache[(n, device)]
    size, nb = layout.block_size, layout.n_blocks(n)
    keep, lower = layout._blocks(nb)
    counts = keep.sum(dim=1)  # (r,)
    width = max(int(counts.max()), 1)  # C: the longest list of kept key blocks
    # Kept blocks first, in increasing order: sort by (not kept, index).
    order = torch.argsort((~keep).long() * nb + torch.arange(nb), dim=1)[:, :width]  # (r, C)
    valid = torch.arange(width) < counts[:, None]  # (r, C)
    key_blocks = torch.where(valid, order, torch.zeros_like(order))  # (r, C)
    query_pos = torch.arange(nb * size).view(nb, size, 1, 1)  # (r, q, 1, 1)
    key_pos = (key_blocks[:, None, :, None] * size + torch.arange(size)).view(nb, 1, width, size)  # (r, 1, C, k)
    on_diagonal = (key_blocks == torch.arange(nb)[:, None]).view(nb, 1, width, 1)
    causal_cut = lower.view(nb, 1, 1, 1) & on_diagonal & (key_pos > query_pos)
    allowed = valid.view(nb, 1, width, 1) & (key_pos < n) & ~causal_cut  # (r, q, C, k)
    allowed = allowed.reshape(nb, size, width * size)  # (r, q, C*k)
    empty = ~allowed.any(dim=-1)  # (r, q)
    # An empty row would be all -inf (softmax gives NaN); let it see everything and zero its output afterwards.
    allowed = allowed | empty[..., None]
    empty_rows = empty.flatten()[:n]
    plan = _Plan(key_blocks=key_blocks.to(device),
                 hidden=None if bool(allowed.all()) else (~allowed).to(device),
                 hidden_any=(~allowed).flatten(1).any(dim=1).tolist(),
                 empty_rows=empty_rows.to(device) if bool(empty_rows.any()) else None)
    cache[(n, device)] = plan
    return plan


def _blocks_of(x: torch.Tensor, size: int, pad: int) -> torch.Tensor:
    """(..., n, d) -> (..., r, size, d), zero-padding the sequence to a whole number of blocks."""
    if pad:
        x = F.pad(x, (0, 0, 0, pad))  # (..., r*size, d)
    return x.unflatten(-2, (-1, size))  # (..., r, size, d)


def block_sparse_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layout: BlockLayout) -> torch.Tensor:
    """Self-attention restricted to the blocks ``layout`` keeps; equal to dense attention masked by
    ``layout.to_dense(n)``, at a cost proportional to the number of kept blocks.

    The softmax of each query row runs over all of its kept keys together (not block by block). A length that is
    not a multiple of the block size is zero-padded and the padding masked; a query with no kept key gets zeros.
    Differentiable with autograd; fp16/bf16 scores are normalised in fp32.

    Shape: q ``(..., i, d)``, k ``(..., j, d)``, v ``(..., j, dv)`` with i = j = n (leading dimensions broadcast)
        -> output ``(..., i, dv)``.
    """
    fn = "block_sparse_attention"
    check_qkv(fn, q, k, v)
    if not isinstance(layout, BlockLayout):
        fail(fn, f"layout must be a BlockLayout, got {type(layout).__name__}; build one with e.g. "
                 f"BlockLayout.sliding_window(128)", TypeError)
    n = q.shape[-2]
    if k.shape[-2] != n or n == 0:
        fail(fn, f"expected self-attention shapes with as many queries as keys (n >= 1), got q {tuple(q.shape)} and "
                 f"k {tuple(k.shape)}; use blockwise_attention for queries and keys of different lengths")
    plan = _plan(layout, n, q.device)
    size = layout.block_size
    pad = size * layout.n_blocks(n) - n
    q_blocks = _blocks_of(q * (1.0 / math.sqrt(q.shape[-1])), size, pad)  # (..., r, q, d)
    k_rows = _blocks_of(k, size, pad).flatten(-2)  # (..., r, q*d): one row per block, for index_select
    v_rows = _blocks_of(v, size, pad).flatten(-2)  # (..., r, q*dv)
    n_blocks, width = plan.key_blocks.shape
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    # Query blocks go in groups whose scores fit in the CPU cache (8 MiB): one huge score tensor would cost page
    # faults and trips to main memory that take longer than the arithmetic. Each group is one batched computation.
    group = max(1, _TILE_ELEMENTS // (math.prod(lead) * size * width * size))
    outputs = []
    for first in range(0, n_blocks, group):
        last = min(first + group, n_blocks)
        kept = plan.key_blocks[first:last].flatten()  # (g*C,)
        # Gather, next to each query block, the key and value blocks it keeps.
        k_kept = k_rows.index_select(-2, kept).view(*k_rows.shape[:-2], last - first, width * size, -1)
        v_kept = v_rows.index_select(-2, kept).view(*v_rows.shape[:-2], last - first, width * size, -1)
        scores = q_blocks[..., first:last, :, :] @ k_kept.transpose(-2, -1)  # (..., g, q, C*k)
        if plan.hidden is not None and any(plan.hidden_any[first:last]):
            # In place is safe: the matmul's backward needs its inputs, not its output.
            scores.masked_fill_(plan.hidden[first:last], float("-inf"))
        if scores.dtype in _LOW_PRECISION:
            weights = torch.softmax(scores, dim=-1, dtype=torch.float32).to(scores.dtype)
        else:
            weights = torch.softmax(scores, dim=-1)  # (..., g, q, C*k)
        outputs.append(weights @ v_kept)  # (..., g, q, dv)
    out = torch.cat(outputs, dim=-3).flatten(-3, -2) if len(outputs) > 1 else outputs[0].flatten(-3, -2)
    if pad:
        out = out[..., :n, :]  # (..., i, dv)
    if plan.empty_rows is not None:
        out = out.masked_fill(plan.empty_rows[:, None], 0.0)
    return out
