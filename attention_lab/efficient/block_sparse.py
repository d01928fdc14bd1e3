"""Block-sparse attention: compute only the (query block, key block) pairs a :class:`BlockLayout` keeps.

Every query block r keeps a list of key blocks. Query blocks are sorted by the length of their list and taken in
groups of similar length; within a group the lists are padded to the longest one (the padding masked), the listed
key and value blocks are gathered next to each query block, and then the group does what dense attention does,
batched: one matmul for the scores, one masked softmax over all kept keys of a row, one matmul with the values.
Sorting keeps the padding small when the lists differ (a global block keeps every key block, its neighbours keep
three), so the work follows the number of kept blocks: for local or sliding layouts it grows linearly with the
sequence length instead of quadratically. The Python loop runs over groups, never over single blocks. Autograd
differentiates it like any other tensor code.

Without autograd, layouts whose kept blocks form one narrow band per row (local, sliding window) take a faster
path: the keys of consecutive query blocks overlap in one stretch of K, so strided views replace the gathered
copies.
"""

from __future__ import annotations

import bisect
import math
import weakref
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .._validation import check_qkv, fail
from .layouts import BlockLayout

__all__ = ["block_sparse_attention"]

_LOW_PRECISION = (torch.float16, torch.bfloat16)
_TILE_ELEMENTS = 1 << 21  # scores computed at once: 8 MiB in fp32, small enough to stay in the CPU's cache
_BAND_TILE_ELEMENTS = 3 << 18  # scores per group on the band path (3 MiB in fp32; 16 blocks of 128 x 384), measured


@dataclass(frozen=True)
class _Plan:
    """Everything about one (layout, n) that does not depend on the data, computed once.

    Query blocks are stored sorted by how many key blocks they keep (``order``), so that groups of consecutive
    rows have lists of similar length; ``inverse`` puts the outputs back in sequence order.
    """

    order: torch.Tensor | None  # (r,) long: query blocks by increasing count; None = already in that order
    inverse: torch.Tensor | None  # (r,) long: position of each query block in ``order``
    counts: list[int]  # kept key blocks per query block, in ``order``
    key_blocks: torch.Tensor  # (r, C) long: kept key blocks of each (sorted) query block, padded with block 0
    hidden: torch.Tensor | None  # (r, q, C, k) bool: gathered keys a query may not see; None = it sees all
    hidden_any: list[bool]  # per (sorted) query block: is any gathered key hidden from one of its queries?
    empty_rows: torch.Tensor | None  # (i,) bool: queries with no key at all (their output is 0); None = none


@dataclass(frozen=True)
class _BandPlan:
    """A layout whose kept key blocks of row r are exactly r - before .. r + after (clipped to the sequence).

    Such a band needs no gather: in K padded with ``before`` blocks in front, the keys of query block r are one
    contiguous stretch of rows starting at block r, so a strided view serves every query block at once.
    """

    before: int
    width: int  # C = before + 1 + after
    hidden: torch.Tensor | None  # (r, q, C*k) bool in band order; None = every query sees every band key
    hidden_any: list[bool]
    empty_rows: torch.Tensor | None  # (i,) bool, as in _Plan


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
    empty = ~allowed.flatten(2).any(dim=-1)  # (r, q)
    # An empty row would be all -inf (softmax gives NaN); let it see everything and zero its output afterwards.
    allowed = allowed | empty[..., None, None]
    empty_rows = empty.flatten()[:n]
    order = torch.argsort(counts, stable=True)  # (r,)
    identity = bool((order == torch.arange(nb)).all())
    plan = _Plan(order=None if identity else order.to(device),
                 inverse=None if identity else torch.argsort(order).to(device),
                 counts=counts[order].tolist(),
                 key_blocks=key_blocks[order].to(device),
                 hidden=None if bool(allowed.all()) else (~allowed[order]).to(device),
                 hidden_any=(~allowed[order]).flatten(1).any(dim=1).tolist(),
                 empty_rows=empty_rows.to(device) if bool(empty_rows.any()) else None)
    cache[(n, device)] = plan
    return plan


_band_plans: weakref.WeakKeyDictionary[BlockLayout, dict[tuple[int, torch.device], _BandPlan | None]] = (
    weakref.WeakKeyDictionary())


_BAND_WASTE = 1.5  # a band is worth it while it computes at most 1.5 times the kept block pairs


def _band_plan(layout: BlockLayout, n: int, device: torch.device) -> _BandPlan | None:
    """The band description of ``layout`` at length n, or None when its kept blocks are not one band per row, or
    when the band is so wide (a causal layout, a window as long as the sequence) that computing it whole would
    cost more than ``_BAND_WASTE`` times the kept blocks: the sorted groups of the general path waste less."""
    cache = _band_plans.setdefault(layout, {})
    if (n, device) in cache:
        return cache[(n, device)]
    size, nb = layout.block_size, layout.n_blocks(n)
    keep, lower = layout._blocks(nb)
    plan = None
    if bool(keep.any()):
        offset = torch.arange(nb)[None, :] - torch.arange(nb)[:, None]  # (r, c): c - r
        before, after = -int(offset[keep].min()), int(offset[keep].max())
        width = before + 1 + after
        if (before >= 0 and after >= 0 and bool((keep == ((offset >= -before) & (offset <= after))).all())
                and width * nb <= _BAND_WASTE * int(keep.sum())):
            blocks = torch.arange(nb)[:, None] - before + torch.arange(width)  # (r, C)
            query_pos = torch.arange(nb * size).view(nb, size, 1, 1)  # (r, q, 1, 1)
            key_pos = (blocks[:, None, :, None] * size + torch.arange(size)).view(nb, 1, width, size)  # (r, 1, C, k)
            on_diagonal = (blocks == torch.arange(nb)[:, None]).view(nb, 1, width, 1)
            causal_cut = lower.view(nb, 1, 1, 1) & on_diagonal & (key_pos > query_pos)
            allowed = (key_pos >= 0) & (key_pos < n) & ~causal_cut  # (r, q, C, k)
            allowed = allowed.reshape(nb, size, width * size)  # (r, q, C*k)
            empty = ~allowed.any(dim=-1)  # (r, q)
            allowed = allowed | empty[..., None]
            empty_rows = empty.flatten()[:n]
            plan = _BandPlan(before=before, width=width,
                             hidden=None if bool(allowed.all()) else (~allowed).to(device),
                             hidden_any=(~allowed).flatten(1).any(dim=1).tolist(),
                             empty_rows=empty_rows.to(device) if bool(empty_rows.any()) else None)
    cache[(n, device)] = plan
    return plan


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


def _rows(x: torch.Tensor, lo: int, hi: int) -> torch.Tensor:
    """Rows lo..hi of a contiguous ``(m, d)`` tensor, zeros where outside 0..m; a view (no copy) when none is."""
    if lo >= 0 and hi <= x.shape[0]:
        return x[lo:hi]  # (hi - lo, d)
    rows = x.new_zeros((hi - lo, x.shape[1]))  # (hi - lo, d)
    rows[max(0, -lo):min(hi, x.shape[0]) - lo] = x[max(0, lo):min(hi, x.shape[0])]
    return rows


def _band_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, plan: _BandPlan, size: int,
                    nb: int) -> torch.Tensor:
    """Forward only (no autograd): q, k, v ``(B, n, d)`` -> ``(B, n, dv)``, strided views instead of gathers.

    K and V are taken as one long run of blocks, every head's ``r`` blocks after the other; the kept keys of query
    block r of head h are then the ``C`` consecutive blocks starting at flat block ``h * r_total + r - before``, so
    one strided view (overlapping rows, no copy) gives every query block of a group its ``(C*k, d)`` keys. Only a
    group at either end copies its rows, to add zero blocks. Keys that a view takes from a neighbouring head or from
    padding are hidden by the plan's mask. Scores live in one reused buffer, the softmax runs in place, and the
    division by the row sums happens on the output.
    """
    batch, n, d = q.shape
    dv = v.shape[-1]
    before, width = plan.before, plan.width
    blocks = batch * nb  # flat (head, query block) pairs

    def flat_blocks(x: torch.Tensor) -> torch.Tensor:
        """(B, n, d) -> (B*r*k, d), zero-padding each head to whole blocks."""
        if nb * size == n:
            return x.reshape(blocks * size, x.shape[-1])  # (B*r*k, d)
        flat = x.new_zeros((batch, nb * size, x.shape[-1]))  # (B, r*k, d)
        flat[:, :n] = x
        return flat.view(blocks * size, x.shape[-1])  # (B*r*k, d)

    q_blocks = flat_blocks(q).view(blocks, size, d)  # (B*r, q, d)
    k_flat, v_flat = flat_blocks(k), flat_blocks(v)  # (B*r*k, d), (B*r*k, dv)
    out = q.new_empty((blocks, size, dv))  # (B*r, q, dv)
    # Scores are kept in base 2 (times log2 e), so that exp2, nearly twice as fast as exp on CPUs, gives the
    # same weights: 2^(s log2 e - m log2 e) = e^(s - m). FlashAttention does the same.
    scale = math.log2(math.e) / math.sqrt(d)
    group = max(1, min(blocks, _BAND_TILE_ELEMENTS // (size * width * size)))
    scores_buffer = q.new_empty(group * size * width * size)
    # Flat block indices (head * r + query block) whose scores need a mask, in increasing order for bisect: one
    # gather and one scatter per group.
    hidden_flat = [head * nb + r for head in range(batch) for r, hidden in enumerate(plan.hidden_any) if hidden]
    for first in range(0, blocks, group):
        last = min(first + group, blocks)
        g = last - first
        lo, hi = (first - before) * size, (last - before + width - 1) * size
        k_rows, v_rows = _rows(k_flat, lo, hi), _rows(v_flat, lo, hi)  # (rows, d), (rows, dv)
        k_band = k_rows.as_strided((g, width * size, d), (size * d, d, 1), k_rows.storage_offset())  # (g, C*k, d)
        v_band = v_rows.as_strided((g, width * size, dv), (size * dv, dv, 1),
                                   v_rows.storage_offset())  # (g, C*k, dv)
        scores = scores_buffer[: g * size * width * size].view(g, size, width * size)  # (g, q, C*k)
        # baddbmm with beta=0 writes straight into the buffer (bmm's out= clears it first) and folds in the scale.
        torch.baddbmm(scores, q_blocks[first:last], k_band.transpose(1, 2), beta=0.0, alpha=scale, out=scores)
        lo_mask, hi_mask = bisect.bisect_left(hidden_flat, first), bisect.bisect_left(hidden_flat, last)
        if hi_mask > lo_mask:
            flat = torch.tensor(hidden_flat[lo_mask:hi_mask], device=scores.device)  # (m,) flat block indices
            mask = plan.hidden[flat % nb]  # (m, q, C*k)
            if hi_mask - lo_mask == g:  # every block of the group (a causal band): in place
                scores.masked_fill_(mask, float("-inf"))
            else:  # a few edge blocks: gather, mask, put back
                local = flat - first
                scores[local] = scores[local].masked_fill(mask, float("-inf"))
        row_max = scores.amax(dim=-1, keepdim=True)  # (g, q, 1)
        weights = scores.sub_(row_max).exp2_()  # unnormalised, (g, q, C*k)
        row_sum = weights.sum(dim=-1, keepdim=True)  # (g, q, 1)
        out_group = out[first:last]  # (g, q, dv)
        torch.baddbmm(out_group, weights, v_band, beta=0.0, out=out_group)
        out_group.div_(row_sum)
    return out.view(batch, nb * size, dv)[:, :n]  # (B, i, dv)


def _blocks_of(x: torch.Tensor, size: int, pad: int) -> torch.Tensor:
    """(..., n, d) -> (..., r, size, d), zero-padding the sequence to a whole number of blocks."""
    if pad:
        x = F.pad(x, (0, 0, 0, pad))  # (..., r*size, d)
    return x.unflatten(-2, (-1, size))  # (..., r, size, d)


def block_sparse_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layout: BlockLayout) -> torch.Tensor:
    """Self-attention restricted to the blocks ``layout`` keeps; equal to dense attention masked by
    ``layout.to_dense(n)``, at a cost proportional to the number of kept blocks.

    The softmax of each query row runs over all of its kept keys together (not block by block). A length that is
    not a multiple of the block size is zero-padded and the padding masked; a query with no kept key gets zeros;
    n = 0 gives an empty output.
    Query blocks that keep different numbers of key blocks are padded only within groups of similar count, so the
    block pairs computed stay within 1.25 times the kept ones (1.5 times on the band path). Differentiable with
    autograd; fp16/bf16 scores are normalised in fp32.

    Shape: q ``(..., i, d)``, k ``(..., j, d)``, v ``(..., j, dv)`` with i = j = n (leading dimensions broadcast)
        -> output ``(..., i, dv)``.
    """
    fn = "block_sparse_attention"
    check_qkv(fn, q, k, v)
    if not isinstance(layout, BlockLayout):
        fail(fn, f"layout must be a BlockLayout, got {type(layout).__name__}; build one with e.g. "
                 f"BlockLayout.sliding_window(128)", TypeError)
    n = q.shape[-2]
    if k.shape[-2] != n:
        fail(fn, f"expected self-attention shapes with as many queries as keys, got q {tuple(q.shape)} and "
                 f"k {tuple(k.shape)}; use blockwise_attention for queries and keys of different lengths")
    if n == 0:  # an empty sequence: nothing to compute, an empty output (kept connected to autograd)
        return (q @ k.transpose(-2, -1)) @ v  # (..., 0, 0) @ (..., 0, dv) -> (..., 0, dv)
    size = layout.block_size
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    needs_grad = torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad)
    if not needs_grad and q.dtype in (torch.float32, torch.float64) and q.dtype == k.dtype == v.dtype:
        band = _band_plan(layout, n, q.device)
        if band is not None:
            # Forward only, for band layouts (local, sliding window): strided views instead of gathered copies.
            q3, k3, v3 = (x.expand(*lead, *x.shape[-2:]).reshape(-1, *x.shape[-2:]) for x in (q, k, v))
            out = _band_attention(q3, k3, v3, band, size, layout.n_blocks(n))  # (B, i, dv)
            if band.empty_rows is not None:
                out = out.masked_fill(band.empty_rows[:, None], 0.0)
            return out.reshape(*lead, *out.shape[-2:])  # (..., i, dv)
    plan = _plan(layout, n, q.device)
    pad = size * layout.n_blocks(n) - n
    q_blocks = _blocks_of(q * (1.0 / math.sqrt(q.shape[-1])), size, pad)  # (..., r, q, d)
    k_rows = _blocks_of(k, size, pad).flatten(-2)  # (..., r, q*d): one row per block, for index_select
    v_rows = _blocks_of(v, size, pad).flatten(-2)  # (..., r, q*dv)
    outputs = []
    for first, last, width in _groups(plan.counts, math.prod(lead) * size * size):
        # Gather, next to each query block, the key and value blocks it keeps (the first ``width`` of each list).
        kept = plan.key_blocks[first:last, :width].flatten()  # (g*C,)
        k_kept = k_rows.index_select(-2, kept).view(*k_rows.shape[:-2], last - first, width * size, -1)
        v_kept = v_rows.index_select(-2, kept).view(*v_rows.shape[:-2], last - first, width * size, -1)
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
    if pad:
        out = out[..., :n, :]  # (..., i, dv)
    if plan.empty_rows is not None:
        out = out.masked_fill(plan.empty_rows[:, None], 0.0)
    return out
