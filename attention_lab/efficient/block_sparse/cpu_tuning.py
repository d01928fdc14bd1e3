"""The CPU tuning of block-sparse attention: plans, tiles and the band path. A first reading can skip this module.

None of it changes a result: :mod:`.attention` is tested equal to :func:`attention_lab.reference.block_sparse_attention`
with every path below taken. What each part buys:

* **Plans.** Everything about (layout, n, device, path) that does not depend on the data is a :class:`Plan`: the key
  blocks each query block gathers, which gathered keys each query may not see (list padding, positions past n,
  keys after the query in a causal diagonal block), and the order in which query blocks are taken (sorted by how
  many key blocks they keep). It is built once and kept for that layout, so a second call pays nothing for it.
* **Tiles.** The gather path computes query blocks in groups (:func:`query_block_groups`) whose scores fit in
  ``TILE_ELEMENTS`` (one huge score tensor costs page faults and trips to main memory that take longer than the
  arithmetic) and whose lists of key blocks differ by at most a quarter (so padding wastes little).
* **The band path** (:func:`band_attention`), taken without autograd for fp32/fp64 inputs of one dtype when the
  kept key blocks of every query block r are exactly r - before .. r + after, clipped to the sequence (``local``,
  ``sliding_window``, a causal ``sliding_window``), and computing every row's whole band costs at most
  ``BAND_WASTE`` times the kept block pairs (a causal layout, or a window as long as the sequence, fails that
  test: the sorted groups waste less there). The keys of consecutive query blocks overlap in one stretch of K, so
  one strided view of K (and of V) serves a whole group of query blocks, where the gather path copies each query
  block's keys (``index_select``) next to it. The scores live in one reused buffer, the softmax runs in place with
  ``exp2`` on base-2 scores, and the division by the row sums happens on the (narrower) output. It has no backward
  pass, which is why autograd takes the gather path.
"""

from __future__ import annotations

import bisect
import math
import weakref
from dataclasses import dataclass

import torch

from .layout import BlockLayout

__all__ = ["BAND_TILE_ELEMENTS", "BAND_WASTE", "TILE_ELEMENTS", "Plan", "band_attention", "band_shape", "plan_for",
           "query_block_groups"]

TILE_ELEMENTS = 1 << 21  # gather path: scores computed at once, 8 MiB in fp32, small enough to stay in the CPU's cache
BAND_WASTE = 1.5  # a band is worth it while it computes at most 1.5 times the kept block pairs
BAND_TILE_ELEMENTS = 3 << 18  # band path: scores per group (3 MiB in fp32; 16 blocks of 128 x 384), measured


def query_block_groups(counts: list[int], scores_per_pair: int) -> list[tuple[int, int, int]]:
    """Runs ``(first, last, width)`` of query blocks (sorted by count) computed together, padded to ``width``.

    A run grows while its scores fit in ``TILE_ELEMENTS`` and while its longest list is at most a quarter longer
    than its shortest.

    Shape: counts ``r`` ints (kept key blocks per sorted query block) -> a list of ``(first, last, width)``.
    """
    runs, first = [], 0
    while first < len(counts):
        shortest, last = max(counts[first], 1), first + 1
        while (last < len(counts) and max(counts[last], 1) <= shortest + shortest // 4
               and (last + 1 - first) * max(counts[last], 1) * scores_per_pair <= TILE_ELEMENTS):
            last += 1
        runs.append((first, last, max(counts[last - 1], 1)))
        first = last
    return runs


@dataclass(frozen=True)
class Plan:
    """The key blocks each query block gathers and which gathered keys each of its queries may see.

    On the gather path the query blocks are stored sorted by how many key blocks they keep (``order``), so that
    groups of consecutive rows have lists of similar length; ``inverse`` puts the outputs back in sequence order.
    On the band path (``before`` set) rows stay in sequence order and row r gathers blocks r - before .. r -
    before + C - 1, some of them outside the sequence at both ends (hidden).

    Shape: see each field.
    """

    key_blocks: torch.Tensor  # (r, C) long: the key blocks gathered for each (sorted) query block, 0 for padding
    counts: list[int]  # how many of each (sorted) row's C listed blocks are kept
    hidden: torch.Tensor | None  # (r, q, C, k) bool: gathered keys a query may not see; None = it sees all
    hidden_any: list[bool]  # per (sorted) query block: does any of its queries have a hidden key?
    empty_rows: torch.Tensor | None  # (i,) bool, sequence order: queries with no key at all (output 0); None = none
    order: torch.Tensor | None = None  # (r,) long: query blocks by increasing count; None = sequence order
    inverse: torch.Tensor | None = None  # (r,) long: position of each query block in ``order``
    before: int | None = None  # band path: blocks before its own where each query block's band starts


_PLANS: weakref.WeakKeyDictionary[BlockLayout, dict] = weakref.WeakKeyDictionary()  # kept while the layout lives


def plan_for(layout: BlockLayout, n: int, device: torch.device, *, band: bool) -> Plan | None:
    """The plan for the gather path, or (``band=True``) for the band path: None when the layout is no band.

    Shape: a :class:`Plan` for ``(i, j)`` with i = j = n.
    """
    plans = _PLANS.setdefault(layout, {})
    key = (n, device, band)
    if key not in plans:
        plans[key] = _build(layout, n, device, band)
    return plans[key]


def band_shape(keep: torch.Tensor) -> tuple[int, int] | None:
    """``(before, width)`` when the kept blocks of every row r are exactly r - before .. r - before + width - 1
    (clipped to the sequence) and the band wastes at most ``BAND_WASTE``; else None.

    Shape: keep ``(r, c)`` bool -> two ints.
    """
    if not bool(keep.any()):
        return None
    nb = keep.shape[0]
    offset = torch.arange(nb)[None, :] - torch.arange(nb)[:, None]  # (r, c): c - r
    before, after = -int(offset[keep].min()), int(offset[keep].max())
    width = before + 1 + after
    one_band = before >= 0 and after >= 0 and bool((keep == ((offset >= -before) & (offset <= after))).all())
    return (before, width) if one_band and width * nb <= BAND_WASTE * int(keep.sum()) else None


def _build(layout: BlockLayout, n: int, device: torch.device, band: bool) -> Plan | None:
    size, nb = layout.block_size, layout.n_blocks(n)
    key_blocks, counts, lower = layout.kept_blocks(n)  # (r, C) with -1 after each list, (r,), (r,)
    before = None
    if band:
        shape = band_shape(layout.block_mask(n))
        if shape is None:
            return None
        before, width = shape
        key_blocks = torch.arange(nb)[:, None] - before + torch.arange(width)  # (r, C), may leave 0..r-1 at the ends
    allowed = _allowed(key_blocks, lower, size, n)  # (r, q, C, k)
    empty = ~allowed.flatten(2).any(dim=-1)  # (r, q)
    # An empty row would be all -inf (softmax gives NaN); let it see everything and zero its output afterwards.
    allowed = allowed | empty[..., None, None]
    empty_rows = empty.flatten()[:n]  # (i,)
    order = None if band else torch.argsort(counts, stable=True)  # (r,)
    if order is not None and bool((order == torch.arange(nb)).all()):
        order = None
    if order is not None:
        allowed, key_blocks, counts = allowed[order], key_blocks[order], counts[order]
    hidden = ~allowed
    return Plan(key_blocks=key_blocks.clamp(min=0).to(device),
                counts=counts.tolist(),
                hidden=hidden.to(device) if bool(hidden.any()) else None,
                hidden_any=hidden.flatten(1).any(dim=1).tolist(),  # (r, q*C*k) -> r bools
                empty_rows=empty_rows.to(device) if bool(empty_rows.any()) else None,
                order=None if order is None else order.to(device),
                inverse=None if order is None else torch.argsort(order).to(device),
                before=before)


def _allowed(key_blocks: torch.Tensor, lower: torch.Tensor, size: int, n: int) -> torch.Tensor:
    """Which gathered keys each query may see: the listed block exists (0 <= c < r_total), the key lies before n,
    and in a lower-triangular diagonal block it is not after the query.

    Shape: key_blocks ``(r, C)`` long (query block r in sequence order), lower ``(r,)`` -> bool ``(r, q, C, k)``.
    """
    nb, width = key_blocks.shape
    query_pos = torch.arange(nb * size).view(nb, size, 1, 1)  # (r, q, 1, 1)
    key_pos = (key_blocks[:, None, :, None] * size + torch.arange(size)).view(nb, 1, width, size)  # (r, 1, C, k)
    listed = ((key_blocks >= 0) & (key_blocks < nb)).view(nb, 1, width, 1)  # (r, 1, C, 1)
    on_diagonal = (key_blocks == torch.arange(nb)[:, None]).view(nb, 1, width, 1)  # (r, 1, C, 1)
    causal_cut = lower.view(nb, 1, 1, 1) & on_diagonal & (key_pos > query_pos)  # (r, q, C, k)
    return listed & (key_pos < n) & ~causal_cut  # (r, q, C, k)


def _rows(x: torch.Tensor, lo: int, hi: int) -> torch.Tensor:
    """Rows lo..hi of a contiguous ``(m, d)`` tensor, zeros where outside 0..m; a view (no copy) when none is."""
    if lo >= 0 and hi <= x.shape[0]:
        return x[lo:hi]  # (hi - lo, d)
    rows = x.new_zeros((hi - lo, x.shape[1]))  # (hi - lo, d)
    rows[max(0, -lo):min(hi, x.shape[0]) - lo] = x[max(0, lo):min(hi, x.shape[0])]
    return rows


def _flat_blocks(x: torch.Tensor, nb: int, size: int) -> torch.Tensor:
    """(B, n, d) -> (B*r*k, d), every head's r blocks after the other, zero-padding each head to whole blocks."""
    batch, n, d = x.shape
    if nb * size == n:
        return x.reshape(batch * n, d)  # (B*r*k, d)
    flat = x.new_zeros((batch, nb * size, d))  # (B, r*k, d)
    flat[:, :n] = x
    return flat.view(batch * nb * size, d)  # (B*r*k, d)


def band_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, plan: Plan, size: int) -> torch.Tensor:
    """Forward only (no autograd): q, k, v ``(B, n, d)`` -> ``(B, n, dv)``, strided views instead of gathers.

    K and V are taken as one long run of blocks, every head's ``r`` blocks after the other; the kept keys of query
    block r of head h are then the ``C`` consecutive blocks starting at flat block ``h * r + r - before``, so one
    strided view (overlapping rows, no copy) gives every query block of a group its ``(C*k, d)`` keys. Only a
    group at either end copies its rows, to add zero blocks. Keys that a view takes from a neighbouring head or from
    padding are hidden by the plan's mask.

    Shape: q ``(B, i, d)``, k ``(B, j, d)``, v ``(B, j, dv)`` with i = j = n -> ``(B, i, dv)``.
    """
    batch, n, d = q.shape
    dv = v.shape[-1]
    nb, width = plan.key_blocks.shape
    before = plan.before
    blocks = batch * nb  # flat (head, query block) pairs
    q_blocks = _flat_blocks(q, nb, size).view(blocks, size, d)  # (B*r, q, d)
    k_flat, v_flat = _flat_blocks(k, nb, size), _flat_blocks(v, nb, size)  # (B*r*k, d), (B*r*k, dv)
    out = q.new_empty((blocks, size, dv))  # (B*r, q, dv)
    # Scores are kept in base 2 (times log2 e), so that exp2, nearly twice as fast as exp on CPUs, gives the
    # same weights: 2^(s log2 e - m log2 e) = e^(s - m). FlashAttention does the same.
    scale = math.log2(math.e) / math.sqrt(d)
    group = max(1, min(blocks, BAND_TILE_ELEMENTS // (size * width * size)))
    scores_buffer = q.new_empty(group * size * width * size)  # (g*q*C*k,)
    hidden = None if plan.hidden is None else plan.hidden.flatten(-2)  # (r, q, C*k), a view
    # Flat block indices (head * r + query block) whose scores need a mask, in increasing order for bisect: one
    # gather and one scatter per group.
    hidden_flat = [head * nb + r for head in range(batch) for r, any_hidden in enumerate(plan.hidden_any) if any_hidden]
    for first in range(0, blocks, group):
        last = min(first + group, blocks)
        g = last - first
        lo, hi = (first - before) * size, (last - before + width - 1) * size
        k_rows, v_rows = _rows(k_flat, lo, hi), _rows(v_flat, lo, hi)  # (rows, d), (rows, dv)
        # Row g' of the view starts size rows after row g' - 1: consecutive query blocks share C - 1 key blocks.
        k_band = k_rows.as_strided((g, width * size, d), (size * d, d, 1), k_rows.storage_offset())  # (g, C*k, d)
        v_band = v_rows.as_strided((g, width * size, dv), (size * dv, dv, 1),
                                   v_rows.storage_offset())  # (g, C*k, dv)
        scores = scores_buffer[: g * size * width * size].view(g, size, width * size)  # (g, q, C*k)
        # baddbmm with beta=0 writes straight into the buffer (bmm's out= clears it first) and folds in the scale.
        torch.baddbmm(scores, q_blocks[first:last], k_band.transpose(1, 2), beta=0.0, alpha=scale, out=scores)
        lo_mask, hi_mask = bisect.bisect_left(hidden_flat, first), bisect.bisect_left(hidden_flat, last)
        if hi_mask > lo_mask:
            flat = torch.tensor(hidden_flat[lo_mask:hi_mask], device=scores.device)  # (m,) flat block indices
            mask = hidden[flat % nb]  # (m, q, C*k)
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
