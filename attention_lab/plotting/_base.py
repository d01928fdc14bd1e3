"""Shared parts of the plot functions: figure creation, matrix input, token ticks, axis labels."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import torch
from matplotlib.axes import Axes

from .._validation import fail
from ._fonts import Figure

WEIGHTS_CMAP = "viridis"
MASK_CMAP = "cividis"
_MAX_LABELLED_TICKS = 40  # beyond this many tokens, label every k-th position by index instead


def _check_axes(fn: str, ax: object) -> Axes:
    """A matplotlib Axes to draw into (the ``ax=`` of every plot function)."""
    if not isinstance(ax, Axes):
        fail(fn, f"ax must be a matplotlib Axes (or None for a new figure), got {type(ax).__name__}; pass an Axes "
                 f"from fig.add_subplot(), or leave ax=None", TypeError)
    return ax


def _check_axes_list(fn: str, ax: object) -> list[Axes]:
    """The Axes of a plot with several panels (``ax=`` a sequence, one Axes per panel)."""
    many = [ax] if isinstance(ax, (str, Axes)) or not hasattr(ax, "__iter__") else list(ax)
    return [_check_axes(fn, one) for one in many]


def _check_rows(fn: str, rows: Iterable[object], columns: Sequence[str]) -> None:
    """Each row a mapping with every one of ``columns`` (the rows of a benchmark CSV, as read_results reads them)."""
    for index, row in enumerate(rows):
        missing = [c for c in columns if c not in row] if isinstance(row, Mapping) else list(columns)
        if missing:
            fail(fn, f"each row must be a mapping with the columns {list(columns)}, got row {index} "
                     f"({type(row).__name__}) without {missing}; pass the rows read_results() gives for the benchmark")


def _new_axes(fn: str, ax: Axes | None, figsize: tuple[float, float]) -> tuple[Figure, Axes]:
    if ax is not None:
        return _check_axes(fn, ax).figure, ax
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
                         f"for {n} positions; give {n} labels, or None for position numbers")
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
