"""Shared parts of the plot functions: figure creation, matrix input, token ticks, axis labels."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from matplotlib.axes import Axes

from ._fonts import Figure

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


def _finish_axes(ax: Axes, *, xlabel: str, ylabel: str, title: str | None, grid_axis: str = "both") -> None:
    """Labels, optional title, a light grid and a small legend: the common ending of the line and bar plots."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.grid(True, axis=grid_axis, which="major", alpha=0.3)
    ax.legend(fontsize=8)
