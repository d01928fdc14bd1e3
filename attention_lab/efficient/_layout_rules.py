"""The rules behind :class:`~attention_lab.BlockLayout`'s constructors, as pure functions of the number of blocks.

Each rule takes ``nb`` (blocks along the sequence) and returns ``(keep, lower)``: ``keep`` ``(r, c)`` bool says which
(query block r, key block c) pairs are computed, ``lower`` ``(r,)`` bool says which query blocks' diagonal block is
lower-triangular (key j <= query i), as in a causal layout. The constructors in ``layouts.py`` check their
arguments and bind them to one of these.
"""

from __future__ import annotations

import torch

Blocks = tuple[torch.Tensor, torch.Tensor]  # keep (r, c) bool, lower (r,) bool


def _offsets(nb: int) -> torch.Tensor:
    """r - c for every (query block r, key block c): positive when the key block is in the past."""
    index = torch.arange(nb)
    return index[:, None] - index[None, :]  # (r, c)


def _no_lower(nb: int) -> torch.Tensor:
    return torch.zeros(nb, dtype=torch.bool)  # (r,)


def local(nb: int) -> Blocks:
    return torch.eye(nb, dtype=torch.bool), _no_lower(nb)


def sliding_window(nb: int, neighbours: int, causal: bool) -> Blocks:
    offset = _offsets(nb)
    keep = (offset >= 0) & (offset <= neighbours) if causal else offset.abs() <= neighbours
    return keep, torch.full((nb,), causal, dtype=torch.bool)


def strided(nb: int, stride: int) -> Blocks:
    return _offsets(nb) % stride == 0, _no_lower(nb)


def global_blocks(nb: int, chosen: list[int]) -> Blocks:
    is_global = torch.zeros(nb, dtype=torch.bool)  # (r,)
    is_global[[b for b in chosen if b < nb]] = True
    return is_global[:, None] | is_global[None, :], _no_lower(nb)


def causal(nb: int) -> Blocks:
    return _offsets(nb) >= 0, torch.ones(nb, dtype=torch.bool)


def _draw(candidates: torch.Tensor, per_row: int, generator: torch.Generator, draws: int = 1) -> torch.Tensor:
    """Up to ``per_row`` of each row's candidate columns, drawn uniformly without replacement.

    Every entry gets a uniform random key; candidates are ranked by key, the rest after them, and the first
    ``per_row`` ranks of each row are taken where they are candidates. With ``draws`` > 1 the keys of
    ``draws`` independent draws are made in turn and the last one is used, so that draw h does not depend on how
    many draws follow it.
    """
    keys = torch.rand(draws, *candidates.shape, generator=generator)[-1]  # (r, c), uniform in [0, 1)
    keys = torch.where(candidates, keys, keys + 2.0)  # non-candidates rank after every candidate
    ranked = keys.argsort(dim=1)[:, :per_row]  # (r, per_row)
    chosen = torch.zeros_like(candidates)
    chosen.scatter_(1, ranked, True)
    return chosen & candidates  # a row with fewer candidates than per_row keeps them all


def random(nb: int, per_row: int, seed: int) -> Blocks:
    generator = torch.Generator().manual_seed(seed)
    return _draw(torch.ones(nb, nb, dtype=torch.bool), per_row, generator), _no_lower(nb)


def bigbird(nb: int, neighbours: int, global_blocks: int, random_per_row: int, seed: int, head: int) -> Blocks:
    """BigBird's three parts (Zaheer et al. 2020, its ITC variant): a window, global blocks at both ends, and
    random blocks drawn per row among the blocks neither part already covers; global rows get none."""
    window = _offsets(nb).abs() <= neighbours  # (r, c)
    index = torch.arange(nb)
    is_global = (index < global_blocks) | (index >= nb - global_blocks)  # (r,): the first and last blocks
    everywhere = is_global[:, None] | is_global[None, :]  # (r, c)
    candidates = ~window & ~is_global[None, :] & ~is_global[:, None]  # (r, c)
    generator = torch.Generator().manual_seed(seed)
    chosen = _draw(candidates, random_per_row, generator, draws=head + 1)
    return window | everywhere | chosen, _no_lower(nb)


def fixed(nb: int, stride: int, summary: int) -> Blocks:
    """Sparse Transformers' fixed pattern (Child et al. 2019) on blocks: a query block sees the blocks of its own
    stride and the last ``summary`` blocks of every stride, never a key block after its own (causal)."""
    index = torch.arange(nb)
    same_stride = (index[:, None] // stride) == (index[None, :] // stride)  # (r, c)
    summary_column = (index % stride) >= stride - summary  # (c,)
    keep = (same_stride | summary_column[None, :]) & (_offsets(nb) >= 0)
    return keep, torch.ones(nb, dtype=torch.bool)


def kept_first(keep: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's kept columns first, in increasing order, then the others: ``(counts (r,), order (r, c))``, so
    that ``order[r, :counts[r]]`` lists the key blocks query block r keeps."""
    nb = keep.shape[-1]
    order = torch.argsort((~keep).long() * nb + torch.arange(nb), dim=-1)  # sort by (not kept, index)
    return keep.sum(dim=-1), order
