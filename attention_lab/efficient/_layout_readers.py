"""What a :class:`~attention_lab.BlockLayout` says about a sequence of n positions: its block mask, the key blocks
each query block keeps, the element mask, its sparsity, a text picture, a FlexAttention ``BlockMask``.

``BlockLayout`` (``layouts.py``) inherits these readers; they need only its ``block_size`` and ``_blocks(nb)``.
"""

from __future__ import annotations

import math

import torch

from .._validation import check_positive_int
from . import _layout_rules as rules


class LayoutReaders:
    """The reading half of :class:`~attention_lab.BlockLayout` (the rules and constructors are the other half)."""

    block_size: int

    def _blocks(self, nb: int) -> rules.Blocks:  # pragma: no cover - BlockLayout provides it
        raise NotImplementedError

    def n_blocks(self, n: int) -> int:
        """Number of blocks along a sequence of n positions (the last one may be short; n = 0 has none).

        Shape: an int, ``r``.
        """
        return math.ceil(check_positive_int("BlockLayout.n_blocks", "n", n, minimum=0) / self.block_size)

    def _n_blocks_nonempty(self, fn: str, n: int) -> int:
        """n_blocks(n) for the readers that report shares of the n x n pairs or draw them: n = 0 has none."""
        check_positive_int(f"BlockLayout.{fn}", "n", n)
        return self.n_blocks(n)

    def block_mask(self, n: int) -> torch.Tensor:
        """Which (query block, key block) pairs are computed. Shape: ``(r, c)``, bool."""
        return self._blocks(self.n_blocks(n))[0].clone()

    def kept_blocks(self, n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """For every query block, the list of key blocks it computes: what block-sparse attention gathers.

        Returns ``(key_blocks, counts, lower)``. Row r of ``key_blocks`` holds the key blocks query block r keeps,
        in increasing order, in its first ``counts[r]`` entries, and -1 after them (C is the longest list, at
        least 1). ``lower[r]`` is True when query block r keeps its own block lower-triangular (a causal
        diagonal: keys after the query hidden); every other kept block is kept whole.

        Shape: ``key_blocks`` ``(r, C)`` long, ``counts`` ``(r,)`` long, ``lower`` ``(r,)`` bool.
        """
        keep, lower = self._blocks(self.n_blocks(n))
        counts, order = rules.kept_first(keep)  # (r,), (r, c)
        width = max(int(counts.max()) if len(counts) else 0, 1)  # C
        listed = torch.arange(width) < counts[:, None]  # (r, C)
        key_blocks = torch.where(listed, order[:, :width], torch.full_like(order[:, :width], -1))  # (r, C)
        return key_blocks, counts, lower.clone()

    def to_dense(self, n: int) -> torch.Tensor:
        """The element-level mask this layout stands for (True = may attend); empty for n = 0.

        Shape: ``(i, j)`` with i = j = n.
        """
        keep, lower = self._blocks(self.n_blocks(n))
        block = torch.arange(n) // self.block_size  # block index of every position
        dense = keep[block[:, None], block[None, :]]  # (i, j)
        position = torch.arange(n)
        future_in_diagonal = (block[:, None] == block[None, :]) & lower[block][:, None] & (
            position[None, :] > position[:, None])
        return dense & ~future_in_diagonal

    def block_fill(self, n: int) -> torch.Tensor:
        """Share of each block pair's (query, key) pairs that are computed: 1, 0, or about 1/2 on causal diagonals.

        Shape: ``(r, c)``, float64.
        """
        keep, lower = self._blocks(self._n_blocks_nonempty("block_fill", n))
        sizes = self._sizes(n, keep.shape[0])
        fill = keep.double()
        fill.diagonal().sub_(lower * (sizes - 1) / (2 * sizes))  # a triangle with its diagonal: (s + 1) / (2 s)
        return fill

    def _sizes(self, n: int, nb: int) -> torch.Tensor:
        sizes = torch.full((nb,), self.block_size, dtype=torch.float64)  # (r,)
        sizes[-1] = n - self.block_size * (nb - 1)
        return sizes

    def sparsity(self, n: int) -> float:
        """Fraction of the n x n (query, key) pairs this layout skips (0 = dense, near 1 = very sparse).

        Shape: a float, from the ``(i, j)`` pairs of ``to_dense(n)`` (computed from block sizes, never built).
        """
        keep, lower = self._blocks(self._n_blocks_nonempty("sparsity", n))
        sizes = self._sizes(n, keep.shape[0])
        kept = (keep * sizes[:, None] * sizes[None, :]).sum() - (lower * sizes * (sizes - 1) / 2).sum()
        return 1.0 - float(kept) / (n * n)

    def describe(self, n: int) -> str:
        """A text picture, one character per block: '#' computed, '\\' lower triangle (causal), '.' skipped.

        Shape: two header lines, then ``r`` lines of ``c`` characters.
        """
        keep, lower = self._blocks(self._n_blocks_nonempty("describe", n))
        nb = keep.shape[0]
        lines = [f"{self!r}, n={n}: {nb} x {nb} blocks of {self.block_size}, sparsity {self.sparsity(n):.4f}",
                 "rows = query blocks, columns = key blocks; '#' computed, '\\' lower triangle, '.' skipped"]
        for r in range(nb):
            lines.append("".join("\\" if (c == r and lower[r]) else "#" if keep[r, c] else "." for c in range(nb)))
        return "\n".join(lines)

    def to_flex_block_mask(self, n: int, device: torch.device | str = "cpu"):
        """The same layout as a FlexAttention ``BlockMask`` (needs ``torch.nn.attention.flex_attention``).

        Kept off-diagonal blocks are passed as full blocks; lower-triangular diagonal blocks as partial blocks,
        finished element by element by a ``mask_mod``. Built from block indices directly, never from an n x n mask.

        Shape: a ``BlockMask`` for ``(1, 1, i, j)``, i = j = n, with blocks of ``block_size``.
        """
        try:
            from torch.nn.attention.flex_attention import BlockMask
        except ImportError as error:  # pragma: no cover - every supported torch has it
            raise RuntimeError("BlockLayout.to_flex_block_mask(): this torch has no flex_attention") from error
        keep, lower = self._blocks(self._n_blocks_nonempty("to_flex_block_mask", n))
        nb, size = keep.shape[0], self.block_size
        partial = torch.zeros_like(keep)  # (r, c)
        partial[torch.arange(nb), torch.arange(nb)] = lower
        full = keep & ~partial

        def as_indices(blocks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            counts, order = rules.kept_first(blocks)  # flex reads only the first counts[r] entries of each row
            return (counts.to(torch.int32)[None, None].to(device),  # (1, 1, r)
                    order.to(torch.int32)[None, None].to(device))  # (1, 1, r, c)

        keep_dev, lower_dev = keep.to(device), lower.to(device)

        def mask_mod(b, h, q_idx, kv_idx):
            q_block, kv_block = q_idx // size, kv_idx // size
            return keep_dev[q_block, kv_block] & ((q_block != kv_block) | ~lower_dev[q_block] | (kv_idx <= q_idx))

        return BlockMask.from_kv_blocks(*as_indices(partial), *as_indices(full), BLOCK_SIZE=size,
                                        mask_mod=mask_mod, seq_lengths=(n, n))
