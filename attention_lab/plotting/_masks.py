"""Masks, positional encodings and the RNN-against-attention timing (lessons 03-04)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.patches import Patch

from ._base import _MAX_LABELLED_TICKS, MASK_CMAP, WEIGHTS_CMAP, _as_matrix, _new_axes, _set_token_ticks
from ._fonts import Figure

MASK_LABELS = ("may attend", "hidden")


def _two_swatch_legend(ax: Axes, labels: Sequence[str] = MASK_LABELS) -> None:
    """A legend with one swatch per value of a bool image drawn with ``MASK_CMAP`` on [0, 1]: ``labels[0]`` for
    True (1), ``labels[1]`` for False (0). A mask has two values, so a gradient colorbar would suggest more."""
    cmap = colormaps[MASK_CMAP]
    handles = [Patch(facecolor=cmap(1.0), edgecolor="grey", label=labels[0]),
               Patch(facecolor=cmap(0.0), edgecolor="grey", label=labels[1])]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, frameon=False,
              fontsize=8, handlelength=1.2, handleheight=1.2)


def plot_mask(
    mask: torch.Tensor,
    query_labels: Sequence[str] | None = None,
    key_labels: Sequence[str] | None = None,
    *,
    ax: Axes | None = None,
    title: str | None = None,
) -> Figure:
    """A bool attention mask as a grid: row i is query i, column j is key j, bright = may attend.

    A legend with two swatches names the two values, "may attend" (bright) and "hidden" (dark); up to 40
    positions the cells are outlined and every tick is labelled (with the tokens when given). The title, unless
    given, counts the allowed pairs.

    Shape: mask bool ``(i, j)`` (leading dimensions of size 1 are dropped; for ``(b, h, i, j)`` pick ``[0, 0]``).
    """
    fn = "plot_mask"
    matrix = _as_matrix(fn, mask)
    if matrix.dtype != torch.bool:
        raise TypeError(f"{fn}(): expected a bool mask (True = may attend), got dtype {mask.dtype}; convert other "
                        f"conventions with attention_lab.core.masks (from_keep_ones, from_additive_mask, from_torch_*)")
    n_i, n_j = matrix.shape
    side = min(7.0, 2.2 + 0.25 * max(n_i, n_j))
    fig, ax = _new_axes(fn, ax, (side + 1.2, side))
    ax.imshow(matrix.float().numpy(), cmap=MASK_CMAP, vmin=0.0, vmax=1.0, interpolation="nearest", aspect="auto")
    _set_token_ticks(fn, ax, "x", n_j, key_labels)
    _set_token_ticks(fn, ax, "y", n_i, query_labels)
    if max(n_i, n_j) <= _MAX_LABELLED_TICKS:
        ax.set_xticks([x - 0.5 for x in range(1, n_j)], minor=True)
        ax.set_yticks([y - 0.5 for y in range(1, n_i)], minor=True)
        ax.grid(which="minor", color="grey", linewidth=0.5)
        ax.tick_params(which="minor", length=0)
    ax.set_xlabel("key position j")
    ax.set_ylabel("query position i")
    allowed = int(matrix.sum())
    ax.set_title(title if title is not None else f"{allowed} of {n_i * n_j} (query, key) pairs allowed")
    _two_swatch_legend(ax)
    return fig


def plot_positions(
    positions: torch.Tensor,
    *,
    ax: Axes | None = None,
    title: str | None = "sinusoidal position vectors",
) -> Figure:
    """Position vectors as a heatmap: row p is position p, column c is dimension c, colour the value in [-1, 1].

    For :func:`attention_lab.sinusoidal_positions` the left columns change fast (one radian per position) and
    the right ones slowly, so each row is a distinct pattern.

    Shape: positions ``(n, d)``.
    """
    fn = "plot_positions"
    matrix = _as_matrix(fn, positions).float()
    n, d = matrix.shape
    fig, ax = _new_axes(fn, ax, (6.4, 4.0))
    image = ax.imshow(matrix.numpy(), cmap=WEIGHTS_CMAP, vmin=-1.0, vmax=1.0, interpolation="nearest",
                      aspect="auto")
    ax.set_xlabel("dimension c (even: sin, odd: cos)")
    ax.set_ylabel("position p")
    if title:
        ax.set_title(title)
    fig.colorbar(image, ax=ax, label="value")
    return fig


def plot_rnn_vs_attention(
    lengths: Sequence[int],
    rnn_s: Sequence[float],
    attention_s: Sequence[float],
    *,
    ax: Axes | None = None,
    title: str | None = "one step at a time vs all positions at once",
) -> Figure:
    """Time of a step-by-step recurrent loop and of one batched attention call against sequence length n,
    on log-log axes (a cost growing as n^p is a line of slope p).

    Shape: ``lengths``, ``rnn_s`` and ``attention_s`` one entry per length (times in seconds, drawn in ms).
    """
    fn = "plot_rnn_vs_attention"
    lengths = [int(n) for n in lengths]
    series = {"recurrent loop (n sequential steps)": rnn_s, "self-attention (1 batched call)": attention_s}
    fig, ax = _new_axes(fn, ax, (6.0, 4.0))
    for (name, values), marker in zip(series.items(), ("o", "s")):
        values = [float(v) * 1e3 for v in values]
        if len(values) != len(lengths):
            raise ValueError(f"{fn}(): expected one time per length, got {len(values)} times for "
                             f"{len(lengths)} lengths")
        ax.plot(lengths, values, marker=marker, label=name)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(lengths, [str(n) for n in lengths])
    ax.set_xticks([], minor=True)
    ax.set_xlabel("sequence length n")
    ax.set_ylabel("time per forward pass (ms)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    if title:
        ax.set_title(title)
    return fig
