"""Block-sparse attention (块稀疏注意力): compute only the (query block, key block) pairs a :class:`BlockLayout` keeps.

Positions are cut into blocks of ``block_size``, and the layout lists, for every query block r, the key blocks it
keeps (``BlockLayout.kept_blocks``). The gather path: the listed key and value blocks are gathered next to each
query block, and then each query block does what dense attention does: one matmul for the scores, one softmax
over all of its kept keys together (not block by block), one matmul with the values. Keys that a query may not see
inside what was gathered (list padding, positions past n, keys after the query in a causal diagonal block) get
-inf. A query with no kept key gets zeros. Autograd differentiates it like any other tensor code.

How it differs from :func:`attention_lab.reference.block_sparse_attention` (dense attention masked by
``layout.to_dense(n)``; tested equal, values and gradients, in fp64, for every constructor) and what that buys:

* it computes only the kept blocks, so the work follows the number of kept block pairs instead of n^2: for local
  and sliding layouts it grows linearly with the sequence length, where the reference computes all n^2 scores
  and masks most of them;
* query blocks are sorted by how many key blocks they keep and computed in groups of similar count, one batched
  matmul per group: the Python loop runs over groups, never over single blocks, and a list is padded only to the
  longest of its group (a global block that keeps every key block does not make its neighbours pay for it), so
  the block pairs computed stay within 1.25 times the kept ones;
* masked scores are filled in place, and fp16/bf16 scores are normalised in fp32;
* the CPU tuning (:mod:`.cpu_tuning`, which a first reading can skip): what does not depend on the data is a
  plan built once per length and kept, the groups are sized to stay in the CPU's cache, and without autograd band
  layouts (local, sliding window) take the band path, strided views of K and V instead of gathered copies.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F

from ..._validation import LOW_PRECISION, check_qkv, fail
from .cpu_tuning import Plan, band_attention, plan_for, query_block_groups
from .layout import BlockLayout

__all__ = ["block_sparse_attention"]


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
    n = 0 gives an empty output. Differentiable with autograd; fp16/bf16 scores are normalised in fp32. How only
    the kept blocks are computed, and how that differs from :func:`attention_lab.reference.block_sparse_attention`:
    see the module docstring.

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
    layout._blocks(layout.n_blocks(n), fn)  # a custom rule that breaks its contract is refused here, in our name
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    needs_grad = torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad)
    if not needs_grad and q.dtype in (torch.float32, torch.float64) and q.dtype == k.dtype == v.dtype:
        band = plan_for(layout, n, q.device, band=True)
        if band is not None:  # forward only, for band layouts: strided views instead of gathered copies
            q3, k3, v3 = (x.expand(*lead, *x.shape[-2:]).reshape(-1, *x.shape[-2:]) for x in (q, k, v))  # (B, n, d)
            out = band_attention(q3, k3, v3, band, layout.block_size)  # (B, i, dv)
            return _zero_empty_rows(out, band.empty_rows).reshape(*lead, *out.shape[-2:])  # (..., i, dv)
    plan = plan_for(layout, n, q.device, band=False)
    return _zero_empty_rows(_gather(q, k, v, plan, layout.block_size, math.prod(lead)), plan.empty_rows)


def _zero_empty_rows(out: torch.Tensor, empty_rows: torch.Tensor | None) -> torch.Tensor:
    """Queries that keep no key at all get zeros (their softmax ran over every gathered key instead of none)."""
    return out if empty_rows is None else out.masked_fill(empty_rows[:, None], 0.0)


def _gather(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, plan: Plan, size: int, batch: int) -> torch.Tensor:
    """The gather path, differentiable: groups of query blocks with similar counts, each with its kept keys.

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
    for first, last, width in query_block_groups(plan.counts, batch * size * size):
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
        if scores.dtype in LOW_PRECISION:
            weights = torch.softmax(scores, dim=-1, dtype=torch.float32).to(scores.dtype)
        else:
            weights = torch.softmax(scores, dim=-1)  # (..., g, q, C*k)
        outputs.append(weights @ v_kept)  # (..., g, q, dv)
    out = torch.cat(outputs, dim=-3) if len(outputs) > 1 else outputs[0]  # (..., r, q, dv), sorted query blocks
    if plan.inverse is not None:
        out = out.index_select(-3, plan.inverse)  # (..., r, q, dv), in sequence order
    out = out.flatten(-3, -2)  # (..., r*q, dv)
    return out[..., :n, :] if pad else out  # (..., i, dv)
