"""Block layouts of block-sparse attention (lesson 07)."""

from __future__ import annotations

import textwrap

from matplotlib.axes import Axes

from .._validation import check_positive_int
from ..efficient.block_sparse import BlockLayout
from ._base import MASK_CMAP, _new_axes
from ._fonts import Figure
from ._masks import _two_swatch_legend

_DENSE_LAYOUT_LIMIT = 512  # up to this n every (query, key) pair is drawn; beyond it, one cell per block pair


def plot_block_layout(layout: BlockLayout, n: int, *, ax: Axes | None = None, title: str | None = None) -> Figure:
    """Which (query, key) pairs a ``BlockLayout`` computes at length n, with block boundaries and its sparsity.

    Up to n = 512 each pair is a cell (so causal diagonal blocks show their triangle); beyond that each cell is a
    block pair, shaded by the share of its pairs that are computed. A drawing with two values only gets a legend
    with two swatches ("computed: may attend", "skipped: hidden"); shares in between get a colorbar. The title,
    unless given, names the layout and its sparsity (the share of the n x n pairs skipped).

    Shape: draws ``layout.to_dense(n)`` ``(i, j)``, or ``layout.block_fill(n)`` ``(r, c)`` for n > 512.
    """
    fn = "plot_block_layout"
    if not isinstance(layout, BlockLayout):
        raise TypeError(f"{fn}(): expected an attention_lab.BlockLayout, got {type(layout).__name__}; build one "
                        f"with e.g. BlockLayout.sliding_window(4)")
    check_positive_int(fn, "n", n)
    fig, ax = _new_axes(fn, ax, (5.2, 4.2))
    if n <= _DENSE_LAYOUT_LIMIT:
        matrix, step, unit = layout.to_dense(n).float(), layout.block_size, "position"
    else:
        matrix, step, unit = layout.block_fill(n).float(), 1, "block"
    image = ax.imshow(matrix.numpy(), cmap=MASK_CMAP, vmin=0.0, vmax=1.0, interpolation="nearest", aspect="equal")
    extent = matrix.shape[0]
    if step > 1 and extent // step <= 64:  # outline the blocks while they are few enough to see
        for edge in range(step, extent, step):
            ax.axhline(edge - 0.5, color="grey", linewidth=0.4)
            ax.axvline(edge - 0.5, color="grey", linewidth=0.4)
    ax.set_xlabel("key position j" if unit == "position" else "key block c")
    ax.set_ylabel("query position i" if unit == "position" else "query block r")
    if title is None:
        title = f"{textwrap.fill(repr(layout), 48)}\nn = {n}, sparsity {layout.sparsity(n):.3f}"
    ax.set_title(title, fontsize=9)
    if bool(((matrix == 0) | (matrix == 1)).all()):  # a bool picture: two swatches, not a gradient
        _two_swatch_legend(ax, ("computed:\nmay attend", "skipped:\nhidden"))
    else:
        fig.colorbar(image, ax=ax, shrink=0.8, label="share of pairs computed")
    return fig


def plot_block_layouts(layouts: dict[str, BlockLayout], n: int, *, columns: int = 3) -> Figure:
    """Several layouts side by side at length n, each titled with its name and sparsity (see plot_block_layout).

    Shape: each panel draws ``layout.to_dense(n)`` ``(i, j)``.
    """
    if not layouts:
        raise ValueError("plot_block_layouts(): expected at least one layout, got an empty dict")
    check_positive_int("plot_block_layouts", "columns", columns)
    columns = min(columns, len(layouts))
    rows = -(-len(layouts) // columns)
    fig = Figure(figsize=(3.6 * columns, 3.2 * rows), layout="constrained")
    axes = fig.subplots(rows, columns, squeeze=False).flatten()
    for ax, (name, layout) in zip(axes, layouts.items()):
        plot_block_layout(layout, n, ax=ax, title=f"{name}\nsparsity {layout.sparsity(n):.3f}")
    for ax in axes[len(layouts):]:
        ax.set_visible(False)
    return fig
