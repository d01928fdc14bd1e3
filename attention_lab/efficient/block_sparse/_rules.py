"""The block-level math behind :class:`~attention_lab.BlockLayout`, as pure functions of tensors and ints.

Each constructor's rule takes ``nb`` (blocks along the sequence) and returns ``(keep, lower)``: ``keep`` ``(r, c)``
bool says which (query block r, key block c) pairs are computed, ``lower`` ``(r,)`` bool says which query blocks'
diagonal block is lower-triangular (key j <= query i), as in a causal layout. The constructors in ``layout.py``
check their arguments and bind them to one of these; ``checked`` holds a custom rule to the same contract. After the
rules: the lists of kept blocks (``kept_first``) and the conversion into a FlexAttention ``BlockMask``, both read
from ``(keep, lower)``.

Reference: :func:`attention_lab.reference.block_sparse_attention` expands ``(keep, lower)`` into the element mask
(``BlockLayout.to_dense``); the tests check every rule's mask against its formula per query row. How the rules
differ from that mask and what that buys: they decide r x c block pairs, not n x n entries, so a layout costs the
same for any sequence length with the same number of blocks.
"""

from __future__ import annotations

import torch

from ..._validation import fail

Blocks = tuple[torch.Tensor, torch.Tensor]  # keep (r, c) bool, lower (r,) bool


def _offsets(nb: int) -> torch.Tensor:
    """r - c for every (query block r, key block c): positive when the key block is in the past."""
    index = torch.arange(nb)
    return index[:, None] - index[None, :]  # (r, c)


def _no_lower(nb: int) -> torch.Tensor:
    return torch.zeros(nb, dtype=torch.bool)  # (r,)


def checked(fn: str, owner: str, blocks: object, nb: int) -> Blocks:
    """``blocks`` as a rule must return them for nb blocks, else a ValueError in the name of ``fn``."""
    if not (isinstance(blocks, tuple) and len(blocks) == 2 and all(isinstance(b, torch.Tensor) for b in blocks)
            and blocks[0].dtype == blocks[1].dtype == torch.bool and blocks[0].shape == (nb, nb)
            and blocks[1].shape == (nb,)):
        got = (tuple(f"{tuple(b.shape)} {b.dtype}" if isinstance(b, torch.Tensor) else type(b).__name__
                     for b in blocks) if isinstance(blocks, tuple) else f"{type(blocks).__name__}")
        fail(fn, f"the rule of {owner} must return (keep, lower), bool tensors of shapes ({nb}, {nb}) and ({nb},) "
                 f"for nb={nb}, got {got}; fix the rule, or build the layout with a constructor")
    return blocks


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


def combine(a: Blocks, b: Blocks, union: bool) -> Blocks:
    """The union (``|``) or intersection (``&``) of two layouts' blocks, element by element."""
    (keep_a, lower_a), (keep_b, lower_b) = a, b
    # A diagonal block is empty, lower-triangular or full; full = kept and not lower.
    full_a, full_b = keep_a.diagonal() & ~lower_a, keep_b.diagonal() & ~lower_b
    keep = keep_a | keep_b if union else keep_a & keep_b
    full = full_a | full_b if union else full_a & full_b
    return keep, keep.diagonal() & ~full


def block_sizes(n: int, block_size: int, nb: int) -> torch.Tensor:
    """How many positions each of the nb blocks of n positions holds (the last one may be short). Shape: ``(r,)``."""
    sizes = torch.full((nb,), block_size, dtype=torch.float64)  # (r,)
    sizes[-1] = n - block_size * (nb - 1)
    return sizes


def kept_first(keep: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's kept columns first, in increasing order, then the others: ``(counts (r,), order (r, c))``, so
    that ``order[r, :counts[r]]`` lists the key blocks query block r keeps."""
    nb = keep.shape[-1]
    order = torch.argsort((~keep).long() * nb + torch.arange(nb), dim=-1)  # sort by (not kept, index)
    return keep.sum(dim=-1), order


def flex_block_mask(keep: torch.Tensor, lower: torch.Tensor, size: int, n: int, device: torch.device | str):
    """A FlexAttention ``BlockMask`` of these blocks: kept off-diagonal blocks as full blocks, lower-triangular
    diagonal blocks as partial blocks finished element by element by a ``mask_mod``; never an n x n mask.

    Shape: keep ``(r, c)``, lower ``(r,)`` -> a ``BlockMask`` for ``(1, 1, i, j)``, i = j = n.
    """
    try:
        from torch.nn.attention.flex_attention import BlockMask
    except ImportError as error:  # pragma: no cover - every supported torch has it
        raise RuntimeError("BlockLayout.to_flex_block_mask(): this torch has no flex_attention") from error
    nb = keep.shape[0]
    partial = torch.zeros_like(keep)  # (r, c)
    partial[torch.arange(nb), torch.arange(nb)] = lower
    full = keep & ~partial

    def as_indices(blocks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        counts, order = kept_first(blocks)  # flex reads only the first counts[r] entries of each row
        return (counts.to(torch.int32)[None, None].to(device),  # (1, 1, r)
                order.to(torch.int32)[None, None].to(device))  # (1, 1, r, c)

    keep_dev, lower_dev = keep.to(device), lower.to(device)

    def mask_mod(b, h, q_idx, kv_idx):
        q_block, kv_block = q_idx // size, kv_idx // size
        return keep_dev[q_block, kv_block] & ((q_block != kv_block) | ~lower_dev[q_block] | (kv_idx <= q_idx))

    return BlockMask.from_kv_blocks(*as_indices(partial), *as_indices(full), BLOCK_SIZE=size,
                                    mask_mod=mask_mod, seq_lengths=(n, n))
