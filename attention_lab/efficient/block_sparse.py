"""Block-sparse attention: compute only the (query block, key block) pairs a :class:`BlockLayout` keeps.

Every query block r keeps a list of key blocks (``BlockLayout.kept_blocks``). Query blocks are sorted by the length
of their list and taken in groups of similar length; within a group the lists are padded to the longest one (the
padding masked), the listed key and value blocks are gathered next to each query block, and then the group does what
dense attention does, batched: one matmul for the scores, one masked softmax over all kept keys of a row, one matmul
with the values. Sorting keeps the padding small when the lists differ (a global block keeps every key block, its
neighbours keep three), so the work follows the number of kept blocks: for local or sliding layouts it grows
linearly with the sequence length instead of quadratically. The Python loop runs over groups, never over single
blocks. Autograd differentiates it like any other tensor code.

What is decided before the data arrives (which blocks, which keys of them each query may see) is the plan
(``_block_plan.py``), built once per length and kept on the layout. Without autograd, band layouts (local, sliding
window) take the band path (``_band.py``): strided views of K and V instead of gathered copies.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F

from .._validation import check_qkv, fail
from ._band import band_attention
from ._block_plan import Plan, plan_for
from .layouts import BlockLayout

__all__ = ["block_sparse_attention"]

_LOW_PRECISION = (torch.float16, torch.bfloat16)
_TILE_ELEMENTS = 1 << 21  # scores computed at once: 8 MiB in fp32, small enough to stay in the CPU's cache


def _groups(counts: list[int], scores_per_pair: int) -> list[tuple[int, int, int]]:
    """Runs ``(first, last, width)`` of query blocks (sorted by count) computed together, padded to ``width``.

    A run grows while its scores fit in ``_TILE_ELEMENTS`` (one huge score tensor would cost page faults and trips
    to main memory that take longer than the arithmetic) and while its longest list is at most a quarter longer
    than its shortest (so padding wastes little).
    """
    runs, first = [], 0
    while first < len(counts):
        shortest, last = max(counts[first], 1), first + 1
        while (last < len(counts) and max(counts[last], 1) <= shortest + shortest // 4
               and (last + 1 - first) * max(counts[last], 1) * scores_per_pair <= _TILE_ELEMENTS):
            last += 1
        runs.append((first, last, max(counts[last - 1], 1)))
        first = last
    return runs


def _blocks_of(x: torch.Tensor, size: int, pad: int) -> torch.Tensor:
    """(..., n, d) -> (..., r, size, d), zero-padding the sequence to a whole number of blocks."""
    if pad:
        x = F.pad(x, (0, 0, 0, pad))  # (..., r*size, d)
    return x.unflatten(-2, (-1, size))  # (..., r, size, d)


def _per_head(fn: str, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layouts: list[BlockLayout]) -> torch.Tensor:
    """One layout per head (axis -3): each head's q, k, v run with their own layout, then the heads are stacked."""
    if not layouts or not all(isinstance(one, BlockLayout) for one in layouts):
        fail(fn, f"a list of layouts must hold one BlockLayout per head, got "
                 f"{[type(one).__name__ for one in layouts]}", TypeError)
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    if not lead or lead[-1] != len(layouts):
        fail(fn, f"expected one layout per head: {len(layouts)} layouts need q, k, v of shape (..., h, n, d) with "
                 f"h = {len(layouts)}, got q {tuple(q.shape)}; pass as many layouts as heads")
    q, k, v = (x.expand(*lead, *x.shape[-2:]) for x in (q, k, v))  # (..., h, n, d) each
    heads = [block_sparse_attention(q[..., h, :, :], k[..., h, :, :], v[..., h, :, :], one)
             for h, one in enumerate(layouts)]  # (..., n, dv) each
    return torch.stack(heads, dim=-3)  # (..., h, n, dv)


def block_sparse_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                           layout: BlockLayout | Sequence[BlockLayout]) -> torch.Tensor:
    """Self-attention restricted to the blocks ``layout`` keeps; equal to dense attention masked by
    ``layout.to_dense(n)``, at a cost proportional to the number of kept blocks.

    The softmax of each query row runs over all of its kept keys together (not block by block). A length that is
    not a multiple of the block size is zero-padded and the padding masked; a query with no kept key gets zeros;
    n = 0 gives an empty output.
    Query blocks that keep different numbers of key blocks are padded only within groups of similar count, so the
    block pairs computed stay within 1.25 times the kept ones (1.5 times on the band path). Differentiable with
    autograd; fp16/bf16 scores are normalised in fp32.

    How it differs from :func:`attention_lab.reference.block_sparse_attention` (dense attention with the layout's
    element mask; tested equal, values and gradients, in fp64, for every constructor) and why: it computes only the
    kept blocks (the work follows the kept block pairs, not n^2), gathering each query block's key blocks next to it
    from a plan built once per length and kept on the layout; query blocks are sorted by their number of kept
    blocks so that padding stays small; masked scores are filled in place; without autograd, band layouts take the
    band path of ``_band.py`` (strided views instead of gathered copies).

    ``layout`` is one :class:`BlockLayout` for every head, or a list of h layouts, one per head (the axis -3 of
    q, k, v, of size h), for patterns that differ between heads such as BigBird's random blocks; each head then
    runs with its own layout.

    Shape: q ``(..., i, d)``, k ``(..., j, d)``, v ``(..., j, dv)`` with i = j = n (leading dimensions broadcast;
        with a list of h layouts, ``...`` ends with the head axis h) -> output ``(..., i, dv)``.
    """
    fn = "block_sparse_attention"
    check_qkv(fn, q, k, v)
    if isinstance(layout, (list, tuple)):
        return _per_head(fn, q, k, v, list(layout))
    if not isinstance(layout, BlockLayout):
        fail(fn, f"layout must be a BlockLayout or a list of them (one per head), got {type(layout).__name__}; "
                 f"build one with e.g. BlockLayout.sliding_window(128)", TypeError)
    n = q.shape[-2]
    if k.shape[-2] != n:
        fail(fn, f"expected self-attention shapes with as many queries as keys, got q {tuple(q.shape)} and "
                 f"k {tuple(k.shape)}; use blockwise_attention for queries and keys of different lengths")
    if n == 0:  # an empty sequence: nothing to compute, an empty output (kept connected to autograd)
        return (q @ k.transpose(-2, -1)) @ v  # (..., 0, 0) @ (..., 0, dv) -> (..., 0, dv)
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    needs_grad = torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad)
    if not needs_grad and q.dtype in (torch.float32, torch.float64) and q.dtype == k.dtype == v.dtype:
        band = plan_for(layout, n, q.device, band=True)
        if band is not None:  # forward only, for band layouts: strided views instead of gathered copies
            q3, k3, v3 = (x.expand(*lead, *x.shape[-2:]).reshape(-1, *x.shape[-2:]) for x in (q, k, v))  # (B, n, d)
            out = band_attention(q3, k3, v3, band, layout.block_size)  # (B, i, dv)
            return _zero_empty_rows(out, band.empty_rows).reshape(*lead, *out.shape[-2:])  # (..., i, dv)
    plan = plan_for(layout, n, q.device, band=False)
    return _zero_empty_rows(_general(q, k, v, plan, layout.block_size, math.prod(lead)), plan.empty_rows)


def _zero_empty_rows(out: torch.Tensor, empty_rows: torch.Tensor | None) -> torch.Tensor:
    """Queries that keep no key at all get zeros (their softmax ran over every gathered key instead of none)."""
    return out if empty_rows is None else out.masked_fill(empty_rows[:, None], 0.0)


def _general(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, plan: Plan, size: int, batch: int) -> torch.Tensor:
    """The gathered path, differentiable: groups of query blocks with similar counts, each with its kept keys.

    Shape: q ``(..., i, d)``, k ``(..., j, d)``, v ``(..., j, dv)`` with i = j = n; ``batch`` the product of the
        broadcast leading dimensions -> ``(..., i, dv)``.
    """
    n = q.shape[-2]
    nb = plan.key_blocks.shape[0]
    pad = size * nb - n
    q_blocks = _blocks_of(q * (1.0 / math.sqrt(q.shape[-1])), size, pad)  # (..., r, q, d)
    k_rows = _blocks_of(k, size, pad).flatten(-2)  # (..., r, q*d): one row per block, for index_select
    v_rows = _blocks_of(v, size, pad).flatten(-2)  # (..., r, q*dv)
    outputs = []
    for first, last, width in _groups(plan.counts, batch * size * size):
        # Gather, next to each query block, the key and value blocks it keeps (the first ``width`` of each list).
        kept = plan.key_blocks[first:last, :width].flatten()  # (g*C,)
        gathered = (*k_rows.shape[:-2], last - first, width * size, -1)
        k_kept = k_rows.index_select(-2, kept).view(gathered)  # (..., g*C, k*d) -> (..., g, C*k, d)
        v_kept = v_rows.index_select(-2, kept).view(gathered)  # (..., g*C, k*dv) -> (..., g, C*k, dv)
        if plan.order is None:
            q_group = q_blocks[..., first:last, :, :]  # (..., g, q, d)
        else:
            q_group = q_blocks.index_select(-3, plan.order[first:last])  # (..., g, q, d)
        scores = q_group @ k_kept.transpose(-2, -1)  # (..., g, q, C*k)
        if plan.hidden is not None and any(plan.hidden_any[first:last]):
            hidden = plan.hidden[first:last, :, :width].flatten(-2)  # (g, q, C*k)
            # In place is safe: the matmul's backward needs its inputs, not its output.
            scores.masked_fill_(hidden, float("-inf"))
        if scores.dtype in _LOW_PRECISION:
            weights = torch.softmax(scores, dim=-1, dtype=torch.float32).to(scores.dtype)
        else:
            weights = torch.softmax(scores, dim=-1)  # (..., g, q, C*k)
        outputs.append(weights @ v_kept)  # (..., g, q, dv)
    out = torch.cat(outputs, dim=-3) if len(outputs) > 1 else outputs[0]  # (..., r, q, dv), sorted query blocks
    if plan.inverse is not None:
        out = out.index_select(-3, plan.inverse)  # (..., r, q, dv), in sequence order
    out = out.flatten(-3, -2)  # (..., r*q, dv)
    return out[..., :n, :] if pad else out  # (..., i, dv)
