"""Attention weights as heatmaps: one matrix (lesson 00 on), one panel per head (lesson 05), heads and layers
counted from 0."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from matplotlib.axes import Axes

from .._validation import check_positive_int
from ._base import WEIGHTS_CMAP, _as_matrix, _check_axes_list, _new_axes, _set_token_ticks
from ._fonts import Figure


def plot_attention(
    weights: torch.Tensor,
    query_labels: Sequence[str] | None = None,
    key_labels: Sequence[str] | None = None,
    *,
    ax: Axes | None = None,
    title: str | None = None,
    annotate: bool | None = None,
    vmin: float | None = 0.0,
    vmax: float | None = None,
    cmap: str = WEIGHTS_CMAP,
) -> Figure:
    """Heatmap of an attention matrix: row i is query i, column j is key j, colour alpha'_{i,j}.

    Readable from 5 to 512 tokens: up to 40 positions every tick is labelled (with the tokens when given), beyond
    that every n/8-th position by index. ``annotate`` writes each weight in its cell (default: up to 8 x 8).

    Shape: weights ``(i, j)`` (leading dimensions of size 1 are dropped).
    """
    fn = "plot_attention"
    matrix = _as_matrix(fn, weights)
    n_i, n_j = matrix.shape
    side = min(9.0, 2.5 + 0.3 * max(n_i, n_j))
    fig, ax = _new_axes(fn, ax, (side + 1.0, side))
    image = ax.imshow(matrix.numpy(), cmap=cmap, vmin=vmin, vmax=vmax, interpolation="nearest", aspect="auto")
    _set_token_ticks(fn, ax, "x", n_j, key_labels)
    _set_token_ticks(fn, ax, "y", n_i, query_labels)
    ax.set_xlabel("key position j")
    ax.set_ylabel("query position i")
    if title:
        ax.set_title(title)
    if annotate is None:
        annotate = max(n_i, n_j) <= 8
    if annotate:
        top = float(matrix.max()) if matrix.numel() else 1.0
        for (row, col), value in zip(torch.cartesian_prod(torch.arange(n_i), torch.arange(n_j)).tolist(),
                                     matrix.flatten().tolist()):
            colour = "black" if value > 0.6 * top else "white"
            ax.text(col, row, f"{value:.2f}", ha="center", va="center", fontsize=8, color=colour)
    fig.colorbar(image, ax=ax, label="attention weight")
    return fig


def _as_head_stack(fn: str, weights: object) -> torch.Tensor:
    """(h, i, j) or (layers, h, i, j) on the CPU in float, from a tensor or a list of per-layer tensors."""
    if isinstance(weights, (list, tuple)):
        if not weights or not all(isinstance(w, torch.Tensor) for w in weights):
            raise TypeError(f"{fn}(): expected a tensor or a non-empty list of per-layer tensors, got "
                            f"{type(weights).__name__} of {[type(w).__name__ for w in weights]}")
        layers = [w.detach().to("cpu") for w in weights]
        # A batch of one per layer, (1, h, i, j), becomes (h, i, j).
        layers = [w[0] if w.dim() == 4 and w.shape[0] == 1 else w for w in layers]
        if len({tuple(w.shape) for w in layers}) != 1 or layers[0].dim() != 3:
            raise ValueError(f"{fn}(): expected one (h, i, j) tensor per layer, all of one shape, got shapes "
                             f"{[tuple(w.shape) for w in layers]}")
        stack = torch.stack(layers)  # (layers, h, i, j)
    elif isinstance(weights, torch.Tensor):
        stack = weights.detach().to("cpu")
        while stack.dim() > 3 and stack.shape[0] == 1:  # (1, h, i, j) from a batch of one -> (h, i, j)
            stack = stack[0]
        if stack.dim() == 5 and stack.shape[1] == 1:  # (layers, 1, h, i, j) -> (layers, h, i, j)
            stack = stack[:, 0]
    else:
        raise TypeError(f"{fn}(): expected a torch.Tensor of weights, got {type(weights).__name__}")
    if stack.dim() not in (3, 4):
        raise ValueError(f"{fn}(): expected weights of shape (h, i, j) or (layers, h, i, j), got shape "
                         f"{tuple(stack.shape)}; for a batch select one element first, e.g. weights[0]")
    if stack.dtype == torch.bool or not stack.is_floating_point():
        raise TypeError(f"{fn}(): expected floating-point attention weights, got dtype {stack.dtype}; "
                        f"use plot_attention for a mask")
    return stack.float()


def plot_heads(
    weights: torch.Tensor | Sequence[torch.Tensor],
    labels: Sequence[str] | None = None,
    key_labels: Sequence[str] | None = None,
    *,
    ax: Sequence[Axes] | None = None,
    title: str | None = None,
    ncols: int | None = None,
    vmax: float | None = None,
    annotate: bool = False,
    cmap: str = WEIGHTS_CMAP,
) -> Figure:
    """One heatmap per head in a grid, all on one colour scale with one shared colorbar.

    ``weights`` of shape ``(h, i, j)`` (one layer) give one panel per head, titled ``head 0`` ... ``head h-1``
    (counted from 0 like the code: ``head m`` is ``weights[m]``, Lee's q^{i,m}), in rows of ``ncols`` (default:
    all heads in one row up to 4, else 4 per row). ``(layers, h, i, j)`` (or a list of per-layer ``(h, i, j)``
    tensors) give a layers x heads grid, rows labelled ``layer 0`` ... A leading batch axis of size 1, as returned by
    ``MultiHeadAttention(..., need_weights=True)`` for one sentence, is dropped; for a bigger batch pass
    ``weights[b]``.

    ``labels`` names the query tokens (rows) and, unless ``key_labels`` is given, the keys too
    (self-attention). Tick labels appear on the left column and bottom row only. The colour scale runs from 0
    to ``vmax`` (default: the largest weight in any panel), so panels compare directly. ``ax``: a sequence
    of Axes, one per panel in row-major order (layer by layer, head by head), to draw into an existing
    figure. ``annotate`` writes each weight in its cell (readable up to about 8 x 8).

    Shape: weights ``(h, i, j)`` or ``(layers, h, i, j)`` (leading size-1 batch axes dropped).
    """
    fn = "plot_heads"
    stack = _as_head_stack(fn, weights)
    layered = stack.dim() == 4
    if not layered:
        stack = stack[None]  # (1, h, i, j): a single row of layers
    n_layers, n_heads, n_i, n_j = stack.shape
    if key_labels is None and labels is not None and n_i == n_j:
        key_labels = labels
    if ncols is not None:
        check_positive_int(fn, "ncols", ncols)
    ncols = _columns(ncols, n_heads, layered)
    if vmax is None:
        vmax = float(stack.max()) if stack.numel() else 1.0
    if ax is None:
        fig, panels = _new_panels(n_layers, n_heads, ncols, max(n_i, n_j), title)
    else:
        panels = _given_panels(fn, ax, n_layers, n_heads)
        fig = panels[0].figure

    image = None
    for index, panel in enumerate(panels):
        layer, head = divmod(index, n_heads)
        matrix = stack[layer, head]  # (i, j)
        image = panel.imshow(matrix.numpy(), cmap=cmap, vmin=0.0, vmax=vmax, interpolation="nearest",
                             aspect="auto")
        _set_token_ticks(fn, panel, "x", n_j, key_labels)
        _set_token_ticks(fn, panel, "y", n_i, labels)
        if ax is None:
            _label_grid_panel(panel, layer, head, n_layers=n_layers, n_heads=n_heads, ncols=ncols, layered=layered)
        else:
            _label_own_panel(panel, layer, head, layered=layered)
        if annotate:
            _write_weights(panel, matrix, vmax)
    fig.colorbar(image, ax=panels, label="attention weight", shrink=0.9)
    if title:
        fig.suptitle(title)
    return fig


def _columns(ncols: int | None, n_heads: int, layered: bool) -> int:
    """Panels per row: a layer's heads in one row when there are layers, else ``ncols`` (default: every head in one
    row up to 4, else 4 per row), never more than the heads."""
    if layered:
        return n_heads
    return min(4 if ncols is None else ncols, n_heads)


def _new_panels(n_layers: int, n_heads: int, ncols: int, cells: int, title: str | None) -> tuple[Figure, list[Axes]]:
    """A figure with one panel per (layer, head), layer by layer in rows of ``ncols``, each ``cells`` positions
    wide; spare cells at the end of a layer's last row are hidden. Returns the figure and its panels in order."""
    rows_per_layer = -(-n_heads // ncols)
    nrows = n_layers * rows_per_layer
    side = min(3.0, 1.4 + 0.1 * cells)
    height = nrows * side + (0.6 if title else 0.3)
    fig = Figure(figsize=(ncols * side + 1.2, height), layout="constrained")
    grid = fig.subplots(nrows, ncols, squeeze=False)
    axes = [grid[r, c] for r in range(nrows) for c in range(ncols)]
    panels = []
    for layer in range(n_layers):
        cells_of_layer = axes[layer * rows_per_layer * ncols:(layer + 1) * rows_per_layer * ncols]
        panels.extend(cells_of_layer[:n_heads])
        for spare in cells_of_layer[n_heads:]:
            spare.set_axis_off()
    return fig, panels


def _given_panels(fn: str, ax: Sequence[Axes], n_layers: int, n_heads: int) -> list[Axes]:
    """The caller's Axes, one per panel in row-major order (layer by layer, head by head)."""
    panels = _check_axes_list(fn, ax)
    n_panels = n_layers * n_heads
    if len(panels) != n_panels:
        raise ValueError(f"{fn}(): ax must hold one Axes per panel, got {len(panels)} Axes for "
                         f"{n_layers} layer(s) x {n_heads} head(s) = {n_panels} panels")
    return panels


def _label_grid_panel(panel: Axes, layer: int, head: int, *, n_layers: int, n_heads: int, ncols: int,
                      layered: bool) -> None:
    """A panel of the function's own grid: shared axes, so tick labels only on the left column and on the lowest
    panel of each column; head titles on the first layer's row, layer names on the left."""
    first_column = head % ncols == 0
    lowest = layer == n_layers - 1 and head + ncols >= n_heads
    panel.tick_params(labelleft=first_column, labelbottom=lowest)
    if layer == 0 or not layered:
        panel.set_title(f"head {head}", fontsize=10)
    if first_column:
        panel.set_ylabel(f"layer {layer}\nquery i" if layered else "query i")
    if lowest:
        panel.set_xlabel("key j")


def _label_own_panel(panel: Axes, layer: int, head: int, *, layered: bool) -> None:
    """A panel the caller placed: it names its layer and head and labels both axes itself."""
    panel.set_title(f"layer {layer}, head {head}" if layered else f"head {head}", fontsize=10)
    panel.set_xlabel("key j")
    panel.set_ylabel("query i")


def _write_weights(panel: Axes, matrix: torch.Tensor, vmax: float) -> None:
    """Each weight written in its cell, dark on light colours. Shape: matrix ``(i, j)``."""
    for row, values in enumerate(matrix.tolist()):
        for col, value in enumerate(values):
            colour = "black" if value > 0.6 * vmax else "white"
            panel.text(col, row, f"{value:.2f}", ha="center", va="center", fontsize=7, color=colour)
