"""Figures for the lessons. The only module that imports matplotlib.

Every function takes an optional ``ax=``, returns the ``Figure`` and never calls ``plt.show()`` or touches global
matplotlib state: without ``ax`` it builds a standalone ``matplotlib.figure.Figure`` (not registered with pyplot),
which Jupyter shows when it is the cell's last value. Colormaps are perceptually uniform and colorblind-safe
(viridis for weights, cividis for masks).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure

__all__ = ["plot_attention"]

WEIGHTS_CMAP = "viridis"
MASK_CMAP = "cividis"
_MAX_LABELLED_TICKS = 40  # beyond this many tokens, label every k-th position by index instead


def _new_axes(ax: Axes | None, figsize: tuple[float, float]) -> tuple[Figure, Axes]:
    if ax is not None:
        return ax.figure, ax
    fig = Figure(figsize=figsize, layout="constrained")
    return fig, fig.add_subplot()


def _as_matrix(fn: str, x: object) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{fn}(): expected a torch.Tensor, got {type(x).__name__}")
    x = x.detach().to("cpu")
    while x.dim() > 2 and x.shape[0] == 1:  # (1, 1, i, j) from a batch of one sentence -> (i, j)
        x = x[0]
    if x.dim() != 2:
        raise ValueError(f"{fn}(): expected a 2-D (i, j) matrix, got shape {tuple(x.shape)}; "
                         f"select one batch element and head first, e.g. weights[0, 0]")
    return x.float() if x.dtype != torch.bool else x


def _set_token_ticks(fn: str, ax: Axes, axis: str, n: int, labels: Sequence[str] | None) -> None:
    if labels is not None and len(labels) != n:
        raise ValueError(f"{fn}(): {axis} labels must have one entry per position, got {len(labels)} labels "
                         f"for {n} positions")
    set_ticks = ax.set_xticks if axis == "x" else ax.set_yticks
    if n <= _MAX_LABELLED_TICKS:
        positions = list(range(n))
        if labels is None:
            labels = [str(p) for p in positions]
        set_ticks(positions, [str(t) for t in labels], rotation=90 if axis == "x" and labels else 0)
    else:
        step = max(1, n // 8)
        positions = list(range(0, n, step))
        set_ticks(positions, [str(p) for p in positions])


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
    fig, ax = _new_axes(ax, (side + 1.0, side))
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


# ---- lessons 03-04: masks and positions ----


# ---- lesson 05: heads ----


# ---- lesson 06: cost (time, memory) ----


# ---- lesson 07: block layouts ----


# ---- lessons 08-09: training curves and reading attention ----
