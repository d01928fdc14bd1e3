"""Block layouts: which (query block, key block) pairs block-sparse attention computes.

A :class:`BlockLayout` is a rule, not a matrix: it works for any sequence length n. Positions are cut into blocks of
``block_size`` (the last one may be short); for ``n_blocks = ceil(n / block_size)`` the rule answers, for every pair
(query block r, key block c), "compute it or skip it". It plays the role of FlexAttention's ``mask_mod`` at block
granularity. A kept block is either full, or, for causal layouts on the diagonal, lower-triangular (key j <= query i),
so that ``BlockLayout.causal(b).to_dense(n)`` is exactly the causal mask. Layouts combine with ``|`` (union) and
``&`` (intersection) element by element, as masks do.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import torch

from .._validation import check_positive_int, fail

__all__ = ["BlockLayout"]

# For n_blocks: (keep (r, c) bool, lower (r,) bool); lower[r] makes a kept diagonal block lower-triangular.
Rule = Callable[[int], tuple[torch.Tensor, torch.Tensor]]


def _offsets(n_blocks: int) -> torch.Tensor:
    """(r - c) for every (query block r, key block c)."""
    index = torch.arange(n_blocks)
    return index[:, None] - index[None, :]  # (r, c)


def _no_lower(n_blocks: int) -> torch.Tensor:
    return torch.zeros(n_blocks, dtype=torch.bool)


class BlockLayout:
    """Which (query block, key block) pairs attention computes, for any sequence length.

    Build one with a constructor (``local``, ``sliding_window``, ``strided``, ``global_blocks``, ``random``,
    ``causal``) and combine them with ``|`` and ``&``. ``to_dense(n)`` expands the rule to the element mask that
    ``block_sparse_attention`` obeys (True = may attend).

    Shape: ``block_mask(n)`` -> ``(r, c)``, r = c = ceil(n / block_size); ``to_dense(n)`` -> ``(i, j)``, i = j = n.
    """

    def __init__(self, block_size: int, rule: Rule, name: str):
        self.block_size = check_positive_int("BlockLayout", "block_size", block_size)
        self._rule = rule
        self._name = name
        self._cache: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    # ---- constructors ----
    @classmethod
    def local(cls, block_size: int) -> BlockLayout:
        """Each query block sees only its own key block (block diagonal).

        Shape: a rule for any n; ``block_mask(n)`` -> ``(r, c)``, ``to_dense(n)`` -> ``(i, j)``.
        """
        check_positive_int("BlockLayout.local", "block_size", block_size)
        return cls(block_size, lambda nb: (torch.eye(nb, dtype=torch.bool), _no_lower(nb)), f"local({block_size})")

    @classmethod
    def sliding_window(cls, block_size: int, neighbours: int = 1, *, causal: bool = False,
                       **renamed: object) -> BlockLayout:
        """Query block r sees key blocks c with |r - c| <= neighbours: its own block and ``neighbours`` key blocks
        on each side; with ``causal``, only the ``neighbours`` blocks before it (0 <= r - c <= neighbours).

        ``neighbours`` counts whole blocks on one side, the own block not included. The element-level
        ``sliding_window_mask(n, w)`` counts keys with the query included (|i - j| < w): the two agree only at
        ``block_size=1``, where ``sliding_window(1, neighbours=k).to_dense(n)`` equals
        ``sliding_window_mask(n, k + 1)``. With larger blocks the reach depends on where a query sits in its
        block: from ``neighbours * block_size`` to ``(neighbours + 1) * block_size - 1`` keys on each side.
        A causal window also hides, inside the diagonal block, every key after the query.

        Shape: a rule for any n; ``block_mask(n)`` -> ``(r, c)``, ``to_dense(n)`` -> ``(i, j)``.
        """
        fn = "BlockLayout.sliding_window"
        if "window" in renamed:
            fail(fn, f"the keyword window= is now neighbours= (got window={renamed['window']!r}): it counts the "
                     f"key blocks on each side, the own block not included, while the window w of "
                     f"sliding_window_mask(n, w) means |i - j| < w, the query included; write "
                     f"sliding_window({block_size}, neighbours={renamed['window']!r})", TypeError)
        if renamed:
            fail(fn, f"unexpected keyword argument {next(iter(renamed))!r}; the parameters are block_size, "
                     f"neighbours and causal", TypeError)
        check_positive_int(fn, "block_size", block_size)
        check_positive_int(fn, "neighbours", neighbours, minimum=0)
        _check_bool(fn, "causal", causal)

        def rule(nb: int) -> tuple[torch.Tensor, torch.Tensor]:
            offset = _offsets(nb)
            keep = (offset >= 0) & (offset <= neighbours) if causal else offset.abs() <= neighbours
            return keep, torch.full((nb,), causal, dtype=torch.bool)

        extra = ", causal=True" if causal else ""
        return cls(block_size, rule, f"sliding_window({block_size}, neighbours={neighbours}{extra})")

    @classmethod
    def strided(cls, block_size: int, stride: int) -> BlockLayout:
        """Dilated: query block r sees key blocks c with (r - c) a multiple of ``stride`` (its own block included).

        Shape: a rule for any n; ``block_mask(n)`` -> ``(r, c)``, ``to_dense(n)`` -> ``(i, j)``.
        """
        fn = "BlockLayout.strided"
        check_positive_int(fn, "block_size", block_size)
        check_positive_int(fn, "stride", stride)
        return cls(block_size, lambda nb: (_offsets(nb) % stride == 0, _no_lower(nb)),
                   f"strided({block_size}, stride={stride})")

    @classmethod
    def global_blocks(cls, block_size: int, blocks: Iterable[int]) -> BlockLayout:
        """The listed blocks attend to every block and every block attends to them (Longformer's global tokens).

        Indices past the end of a shorter sequence are ignored; combine with ``local`` or ``sliding_window`` via ``|``.

        Shape: a rule for any n; ``block_mask(n)`` -> ``(r, c)``, ``to_dense(n)`` -> ``(i, j)``.
        """
        fn = "BlockLayout.global_blocks"
        check_positive_int(fn, "block_size", block_size)
        if isinstance(blocks, (str, bytes)) or not isinstance(blocks, Iterable):
            fail(fn, f"blocks must be a list of block indices, got {type(blocks).__name__}", TypeError)
        chosen = sorted({check_positive_int(fn, "each block index", b, minimum=0) for b in blocks})
        if not chosen:
            fail(fn, "blocks must name at least one block index, got an empty list")

        def rule(nb: int) -> tuple[torch.Tensor, torch.Tensor]:
            is_global = torch.zeros(nb, dtype=torch.bool)
            is_global[[b for b in chosen if b < nb]] = True
            return is_global[:, None] | is_global[None, :], _no_lower(nb)

        return cls(block_size, rule, f"global_blocks({block_size}, {chosen})")

    @classmethod
    def random(cls, block_size: int, per_row: int, *, seed: int) -> BlockLayout:
        """Each query block sees ``per_row`` key blocks drawn at random without replacement (BigBird's random part).

        The draw depends only on ``seed`` and the number of blocks, so the same layout gives the same mask each call.

        Shape: a rule for any n; ``block_mask(n)`` -> ``(r, c)``, ``to_dense(n)`` -> ``(i, j)``.
        """
        fn = "BlockLayout.random"
        check_positive_int(fn, "block_size", block_size)
        check_positive_int(fn, "per_row", per_row)
        check_positive_int(fn, "seed", seed, minimum=0)

        def rule(nb: int) -> tuple[torch.Tensor, torch.Tensor]:
            generator = torch.Generator().manual_seed(seed)
            order = torch.rand(nb, nb, generator=generator).argsort(dim=1)  # a random permutation per row
            keep = torch.zeros(nb, nb, dtype=torch.bool)
            keep.scatter_(1, order[:, : min(per_row, nb)], True)
            return keep, _no_lower(nb)

        return cls(block_size, rule, f"random({block_size}, per_row={per_row}, seed={seed})")

    @classmethod
    def causal(cls, block_size: int) -> BlockLayout:
        """Every block on or below the diagonal, lower-triangular on it: ``to_dense(n)`` is the causal mask.

        Shape: a rule for any n; ``block_mask(n)`` -> ``(r, c)``, ``to_dense(n)`` -> ``(i, j)``.
        """
        check_positive_int("BlockLayout.causal", "block_size", block_size)
        return cls(block_size, lambda nb: (_offsets(nb) >= 0, torch.ones(nb, dtype=torch.bool)),
                   f"causal({block_size})")

    # ---- combining ----
    def _combine(self, other: object, op: str) -> BlockLayout:
        fn = f"BlockLayout.__{'or' if op == '|' else 'and'}__"
        if not isinstance(other, BlockLayout):
            fail(fn, f"expected another BlockLayout after '{op}', got {type(other).__name__}", TypeError)
        if other.block_size != self.block_size:
            fail(fn, f"expected layouts with the same block_size, got {self.block_size} and {other.block_size}; "
                     f"rebuild one of them with block_size={self.block_size}")
        union = op == "|"

        def rule(nb: int) -> tuple[torch.Tensor, torch.Tensor]:
            (keep_a, lower_a), (keep_b, lower_b) = self._blocks(nb), other._blocks(nb)
            # A diagonal block is empty, lower-triangular or full; full = kept and not lower.
            full_a, full_b = keep_a.diagonal() & ~lower_a, keep_b.diagonal() & ~lower_b
            keep = keep_a | keep_b if union else keep_a & keep_b
            full = full_a | full_b if union else full_a & full_b
            return keep, keep.diagonal() & ~full

        return BlockLayout(self.block_size, rule, f"({self._name} {op} {other._name})")

    def __or__(self, other: BlockLayout) -> BlockLayout:
        return self._combine(other, "|")

    def __and__(self, other: BlockLayout) -> BlockLayout:
        return self._combine(other, "&")

    def __repr__(self) -> str:
        name = self._name[1:-1] if self._name.startswith("(") else self._name
        return f"BlockLayout({name})"

    # ---- reading the rule ----
    def n_blocks(self, n: int) -> int:
        """Number of blocks along a sequence of n positions (the last one may be short; n = 0 has none).

        Shape: an int, ``r``.
        """
        return math.ceil(check_positive_int("BlockLayout.n_blocks", "n", n, minimum=0) / self.block_size)

    def _n_blocks_nonempty(self, fn: str, n: int) -> int:
        """n_blocks(n) for the readers that report shares of the n x n pairs or draw them: n = 0 has none."""
        check_positive_int(f"BlockLayout.{fn}", "n", n)
        return self.n_blocks(n)

    def _blocks(self, nb: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(keep (r, c), lower (r,)) for nb blocks, computed once per nb."""
        if nb not in self._cache:
            keep, lower = self._rule(nb)
            self._cache[nb] = (keep, lower & keep.diagonal())
        return self._cache[nb]

    def block_mask(self, n: int) -> torch.Tensor:
        """Which (query block, key block) pairs are computed. Shape: ``(r, c)``, bool."""
        return self._blocks(self.n_blocks(n))[0].clone()

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
        sizes = torch.full((nb,), self.block_size, dtype=torch.float64)
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
        nb = keep.shape[0]
        partial = torch.zeros_like(keep)
        partial[torch.arange(nb), torch.arange(nb)] = lower
        full = keep & ~partial

        def as_indices(blocks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            counts = blocks.sum(dim=1, dtype=torch.int32)
            # Kept key blocks first (in increasing order), the rest after them: flex reads only the first counts[r].
            order = torch.argsort((~blocks).to(torch.int8) * nb + torch.arange(nb), dim=1).to(torch.int32)
            return counts[None, None].to(device), order[None, None].to(device)  # (1, 1, r), (1, 1, r, c)

        keep_dev, lower_dev, size = keep.to(device), lower.to(device), self.block_size

        def mask_mod(b, h, q_idx, kv_idx):
            q_block, kv_block = q_idx // size, kv_idx // size
            return keep_dev[q_block, kv_block] & ((q_block != kv_block) | ~lower_dev[q_block] | (kv_idx <= q_idx))

        return BlockMask.from_kv_blocks(*as_indices(partial), *as_indices(full), BLOCK_SIZE=size,
                                        mask_mod=mask_mod, seq_lengths=(n, n))


def _check_bool(fn: str, name: str, value: object) -> None:
    if not isinstance(value, bool):
        fail(fn, f"{name} must be True or False, got {type(value).__name__} {value!r}", TypeError)
