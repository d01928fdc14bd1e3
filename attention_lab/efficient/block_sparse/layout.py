"""Block layouts: which (query block, key block) pairs block-sparse attention computes.

A :class:`BlockLayout` is a rule, not a matrix: it works for any sequence length n. Positions are cut into blocks of
``block_size`` (the last one may be short); for ``n_blocks = ceil(n / block_size)`` the rule answers, for every pair
(query block r, key block c), "compute it or skip it". It plays the role of FlexAttention's ``mask_mod`` at block
granularity. A kept block is either full, or, for causal layouts on the diagonal, lower-triangular (key j <= query i),
so that ``BlockLayout.causal(b).to_dense(n)`` is exactly the causal mask. Layouts combine with ``|`` (union) and
``&`` (intersection) element by element, as masks do. One layout is one head's pattern; layouts that differ per
head (BigBird's random blocks) are a list of layouts, one per head, which ``block_sparse_attention`` accepts.

Reference: :func:`attention_lab.reference.block_sparse_attention` is dense attention masked by ``to_dense(n)``, the
element mask this rule stands for (the tests check each constructor's mask against its formula, row by row). How a
layout differs from that mask and what that buys: it answers per block pair, so what block-sparse attention
computes (``kept_blocks``) and what it skips (``sparsity``) come from r x c blocks, never from n x n entries.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import torch

from ..._validation import check_bool, check_positive_int, check_positive_ints, check_seed, fail
from . import _rules as rules

__all__ = ["BlockLayout"]

Rule = Callable[[int], rules.Blocks]  # nb -> (keep (r, c) bool, lower (r,) bool)


class BlockLayout:
    """Which (query block, key block) pairs attention computes, for any sequence length.

    Build one with a constructor (``local``, ``sliding_window``, ``strided``, ``global_blocks``, ``random``,
    ``bigbird``, ``fixed``, ``causal``) and combine them with ``|`` and ``&``. ``to_dense(n)`` expands the rule to
    the element mask that ``block_sparse_attention`` obeys (True = may attend); ``kept_blocks(n)`` lists, per
    query block, the key blocks it computes.

    Shape: ``block_mask(n)`` -> ``(r, c)``, r = c = ceil(n / block_size); ``to_dense(n)`` -> ``(i, j)``, i = j = n.
    """

    def __init__(self, block_size: int, rule: Rule, name: str):
        self.block_size = check_positive_int("BlockLayout", "block_size", block_size)
        if not callable(rule) or not isinstance(name, str):
            fail("BlockLayout", f"expected rule a function nb -> (keep, lower), name a str, got {type(rule).__name__} "
                                f"and {type(name).__name__}; pass those, or use BlockLayout.local", TypeError)
        self._rule = rule
        self._name = name
        self._blocks_by_count: dict[int, rules.Blocks] = {}  # a layout never changes: its blocks are computed once

    # ---- constructors ----
    @classmethod
    def local(cls, block_size: int) -> BlockLayout:
        """Each query block sees only its own key block (block diagonal).

        Shape: a rule for any n; ``block_mask(n)`` -> ``(r, c)``, ``to_dense(n)`` -> ``(i, j)``.
        """
        check_positive_int("BlockLayout.local", "block_size", block_size)
        return cls(block_size, rules.local, f"local({block_size})")

    @classmethod
    def sliding_window(cls, block_size: int, neighbours: int = 1, *, causal: bool = False) -> BlockLayout:
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
        check_positive_int(fn, "block_size", block_size)
        check_positive_int(fn, "neighbours", neighbours, minimum=0)
        check_bool(fn, "causal", causal)
        extra = ", causal=True" if causal else ""
        return cls(block_size, lambda nb: rules.sliding_window(nb, neighbours, causal),
                   f"sliding_window({block_size}, neighbours={neighbours}{extra})")

    @classmethod
    def strided(cls, block_size: int, stride: int) -> BlockLayout:
        """Dilated: query block r sees key blocks c with (r - c) a multiple of ``stride`` (its own block included).

        Shape: a rule for any n; ``block_mask(n)`` -> ``(r, c)``, ``to_dense(n)`` -> ``(i, j)``.
        """
        fn = "BlockLayout.strided"
        check_positive_ints(fn, block_size=block_size, stride=stride)
        return cls(block_size, lambda nb: rules.strided(nb, stride), f"strided({block_size}, stride={stride})")

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
        return cls(block_size, lambda nb: rules.global_blocks(nb, chosen), f"global_blocks({block_size}, {chosen})")

    @classmethod
    def random(cls, block_size: int, per_row: int, *, seed: int) -> BlockLayout:
        """Each query block sees ``per_row`` key blocks drawn uniformly from all blocks, without replacement.

        The draw depends only on ``seed`` and the number of blocks, so the same layout gives the same mask each
        call. It may pick a block a window already covers; BigBird's rule, which does not, is :meth:`bigbird`.

        Shape: a rule for any n; ``block_mask(n)`` -> ``(r, c)``, ``to_dense(n)`` -> ``(i, j)``.
        """
        fn = "BlockLayout.random"
        check_positive_ints(fn, block_size=block_size, per_row=per_row)
        check_seed(fn, seed)
        return cls(block_size, lambda nb: rules.random(nb, per_row, seed),
                   f"random({block_size}, per_row={per_row}, seed={seed})")

    @classmethod
    def bigbird(cls, block_size: int, *, neighbours: int, global_blocks: int, random_per_row: int, seed: int,
                head: int = 0) -> BlockLayout:
        """BigBird's block-sparse pattern (Zaheer et al. 2020, the ITC variant): window, global and random blocks.

        * window: query block r sees key blocks r - neighbours .. r + neighbours (BigBird uses 1: three blocks);
        * global: the first and the last ``global_blocks`` blocks see every block and every block sees them;
        * random: every other query block also sees ``random_per_row`` key blocks drawn uniformly, without
          replacement, from the blocks that are neither in its window nor global (fewer if fewer are left). The
          global rows, among them the first and the last block, get none: they already see everything.

        BigBird draws the random blocks independently for every head. One layout is one head's pattern: the draw
        depends on ``seed``, ``head`` and the number of blocks, and heads with the same seed get independent
        draws. For h heads pass ``[BlockLayout.bigbird(..., seed=s, head=i) for i in range(h)]`` to
        ``block_sparse_attention``; the window and global parts are the same in every head.

        Shape: a rule for any n; ``block_mask(n)`` -> ``(r, c)``, ``to_dense(n)`` -> ``(i, j)``.
        """
        fn = "BlockLayout.bigbird"
        check_positive_ints(fn, block_size=block_size, global_blocks=global_blocks)
        check_positive_ints(fn, minimum=0, neighbours=neighbours, random_per_row=random_per_row, seed=seed, head=head)
        return cls(block_size, lambda nb: rules.bigbird(nb, neighbours, global_blocks, random_per_row, seed, head),
                   f"bigbird({block_size}, neighbours={neighbours}, global_blocks={global_blocks}, "
                   f"random_per_row={random_per_row}, seed={seed}, head={head})")

    @classmethod
    def fixed(cls, block_size: int, stride: int, summary: int) -> BlockLayout:
        """Sparse Transformers' "fixed" pattern (Child et al. 2019), causal as in the paper.

        With l = ``stride * block_size`` and c = ``summary * block_size`` positions, query i sees key j <= i when
        j lies in i's own stretch of l positions (floor(j / l) = floor(i / l)) or among the last c positions of a
        stretch (j mod l >= l - c): the summary columns, through which information crosses stretches. This is the
        union of the paper's two parts (its "merged" head), as OpenAI's block-sparse ``'fixed'`` layout builds it;
        OpenAI's code can also give heads different summary columns, which this layout does not.

        Shape: a rule for any n; ``block_mask(n)`` -> ``(r, c)``, ``to_dense(n)`` -> ``(i, j)``.
        """
        fn = "BlockLayout.fixed"
        check_positive_ints(fn, block_size=block_size, stride=stride, summary=summary)
        if summary > stride:
            fail(fn, f"summary must be <= stride (the summary blocks are the last ones of each stride), got "
                     f"summary={summary} and stride={stride}")
        return cls(block_size, lambda nb: rules.fixed(nb, stride, summary),
                   f"fixed({block_size}, stride={stride}, summary={summary})")

    @classmethod
    def causal(cls, block_size: int) -> BlockLayout:
        """Every block on or below the diagonal, lower-triangular on it: ``to_dense(n)`` is the causal mask.

        Shape: a rule for any n; ``block_mask(n)`` -> ``(r, c)``, ``to_dense(n)`` -> ``(i, j)``.
        """
        check_positive_int("BlockLayout.causal", "block_size", block_size)
        return cls(block_size, rules.causal, f"causal({block_size})")

    # ---- combining ----
    def _combine(self, other: object, op: str) -> BlockLayout:
        fn = f"BlockLayout.__{'or' if op == '|' else 'and'}__"
        if not isinstance(other, BlockLayout):
            fail(fn, f"expected another BlockLayout after '{op}', got {type(other).__name__}", TypeError)
        if other.block_size != self.block_size:
            fail(fn, f"expected layouts with the same block_size, got {self.block_size} and {other.block_size}; "
                     f"rebuild one of them with block_size={self.block_size}")
        return BlockLayout(self.block_size, lambda nb: rules.combine(self._blocks(nb), other._blocks(nb), op == "|"),
                           f"({self._name} {op} {other._name})")

    def __or__(self, other: BlockLayout) -> BlockLayout:
        return self._combine(other, "|")

    def __and__(self, other: BlockLayout) -> BlockLayout:
        return self._combine(other, "&")

    def __repr__(self) -> str:
        name = self._name[1:-1] if self._name.startswith("(") else self._name
        return f"BlockLayout({name})"

    def _blocks(self, nb: int, fn: str = "BlockLayout") -> rules.Blocks:
        """(keep (r, c), lower (r,)) for nb blocks, computed once per nb and kept; lower only where the diagonal
        block is kept. A rule that breaks this contract is refused in the name of ``fn``, the function called."""
        if nb not in self._blocks_by_count:
            keep, lower = rules.checked(fn, repr(self), self._rule(nb), nb)
            self._blocks_by_count[nb] = keep, lower & keep.diagonal()
        return self._blocks_by_count[nb]

    # ---- what a layout says about n positions ----
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
        sizes = rules.block_sizes(n, self.block_size, keep.shape[0])  # (r,)
        fill = keep.double()
        fill.diagonal().sub_(lower * (sizes - 1) / (2 * sizes))  # a triangle with its diagonal: (s + 1) / (2 s)
        return fill

    def sparsity(self, n: int) -> float:
        """Fraction of the n x n (query, key) pairs this layout skips (0 = dense, near 1 = very sparse).

        Shape: a float, from the ``(i, j)`` pairs of ``to_dense(n)`` (computed from block sizes, never built).
        """
        keep, lower = self._blocks(self._n_blocks_nonempty("sparsity", n))
        sizes = rules.block_sizes(n, self.block_size, keep.shape[0])  # (r,)
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
        keep, lower = self._blocks(self._n_blocks_nonempty("to_flex_block_mask", n))
        return rules.flex_block_mask(keep, lower, self.block_size, n, device)
