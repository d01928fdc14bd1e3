"""The plan of block-sparse attention: everything about (layout, n, device, path) that does not depend on the data.

A plan lists, for every query block, the key blocks to gather (``BlockLayout.kept_blocks``, or a band of
consecutive blocks on the band path) and masks, element by element, the gathered keys a query may not see: list
padding, positions past n, keys after the query in a causal diagonal block. It is built once and kept on the
layout (``BlockLayout._cached``), so a second call with the same length pays nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ._band import band_shape
from .layouts import BlockLayout


@dataclass(frozen=True)
class Plan:
    """The key blocks each query block gathers and which gathered keys each of its queries may see.

    On the general path the query blocks are stored sorted by how many key blocks they keep (``order``), so that
    groups of consecutive rows have lists of similar length; ``inverse`` puts the outputs back in sequence order.
    On the band path (``before`` set) rows stay in sequence order and row r gathers blocks r - before .. r -
    before + C - 1, some of them outside the sequence at both ends (hidden).
    """

    key_blocks: torch.Tensor  # (r, C) long: the key blocks gathered for each (sorted) query block, 0 for padding
    counts: list[int]  # how many of each (sorted) row's C listed blocks are kept
    hidden: torch.Tensor | None  # (r, q, C, k) bool: gathered keys a query may not see; None = it sees all
    hidden_any: list[bool]  # per (sorted) query block: does any of its queries have a hidden key?
    empty_rows: torch.Tensor | None  # (i,) bool, sequence order: queries with no key at all (output 0); None = none
    order: torch.Tensor | None = None  # (r,) long: query blocks by increasing count; None = sequence order
    inverse: torch.Tensor | None = None  # (r,) long: position of each query block in ``order``
    before: int | None = None  # band path: blocks before its own where each query block's band starts


def plan_for(layout: BlockLayout, n: int, device: torch.device, *, band: bool) -> Plan | None:
    """The plan for the general path, or (``band=True``) for the band path: None when the layout is no band.

    Shape: a :class:`Plan` for ``(i, j)`` with i = j = n.
    """
    return layout._cached(("block_sparse plan", n, device, band), lambda: _build(layout, n, device, band))


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
