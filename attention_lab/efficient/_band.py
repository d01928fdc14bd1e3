"""The band path of block-sparse attention: for layouts whose kept key blocks form one narrow band per row.

When it is taken: by ``block_sparse_attention`` without autograd (inference, ``torch.no_grad()``), for fp32/fp64
inputs of one dtype, when the kept key blocks of every query block r are exactly r - before .. r + after (clipped to
the sequence: ``local``, ``sliding_window``, a causal ``sliding_window``), and when computing every row's whole band
costs at most ``_BAND_WASTE`` (1.5) times the kept block pairs (``band_shape``). A causal layout or a window as long
as the sequence fails that test: the sorted groups of the general path waste less there.

What it buys, against the general path: the keys of consecutive query blocks overlap in one stretch of K, so one
strided view of K (and of V) serves a whole group of query blocks, where the general path copies each query block's
gathered keys (``index_select``) next to it. The scores live in one reused buffer and the softmax runs in place
with ``exp2`` on base-2 scores, and the division by the row sums happens on the (narrower) output. It has no
backward pass, which is why autograd takes the general path.
"""

from __future__ import annotations

import bisect
import math
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:  # the plan imports this module
    from ._block_plan import Plan

_BAND_WASTE = 1.5  # a band is worth it while it computes at most 1.5 times the kept block pairs
_BAND_TILE_ELEMENTS = 3 << 18  # scores per group (3 MiB in fp32; 16 blocks of 128 x 384), measured


def band_shape(keep: torch.Tensor) -> tuple[int, int] | None:
    """``(before, width)`` when the kept blocks of every row r are exactly r - before .. r - before + width - 1
    (clipped to the sequence) and the band wastes at most ``_BAND_WASTE``; else None.

    Shape: keep ``(r, c)`` bool -> two ints.
    """
    if not bool(keep.any()):
        return None
    nb = keep.shape[0]
    offset = torch.arange(nb)[None, :] - torch.arange(nb)[:, None]  # (r, c): c - r
    before, after = -int(offset[keep].min()), int(offset[keep].max())
    width = before + 1 + after
    one_band = before >= 0 and after >= 0 and bool((keep == ((offset >= -before) & (offset <= after))).all())
    return (before, width) if one_band and width * nb <= _BAND_WASTE * int(keep.sum()) else None


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
    group = max(1, min(blocks, _BAND_TILE_ELEMENTS // (size * width * size)))
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
