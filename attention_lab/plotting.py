"""Figures for the lessons. The only module that imports matplotlib.

Every function takes an optional ``ax=``, returns the ``Figure`` and never calls ``plt.show()`` or touches global
matplotlib state: without ``ax`` it builds a standalone ``matplotlib.figure.Figure`` (not registered with pyplot),
which Jupyter shows when it is the cell's last value. Colormaps are perceptually uniform and colorblind-safe
(viridis for weights, cividis for masks).
"""

from __future__ import annotations

import io
import textwrap
from collections.abc import Sequence

import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from .layouts import BlockLayout

__all__ = [
    "attention_explorer",
    "plot_attention",
    "plot_bench",
    "plot_block_layout",
    "plot_block_layouts",
    "plot_heads",
    "plot_layer_grad_norms",
    "plot_mask",
    "plot_memory_vs_length",
    "plot_metric",
    "plot_positions",
    "plot_rnn_vs_attention",
    "plot_rollout",
    "plot_time_vs_length",
    "plot_training_curves",
]

WEIGHTS_CMAP = "viridis"
MASK_CMAP = "cividis"
_MAX_LABELLED_TICKS = 40  # beyond this many tokens, label every k-th position by index instead


def _figure_png(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    fig.canvas.print_figure(buffer, format="png", bbox_inches="tight")
    return buffer.getvalue()


def _show_figures_in_ipython() -> None:
    """Let Jupyter draw a returned ``Figure`` even when pyplot was never imported.

    Our figures are not registered with pyplot, so the inline backend does not know them until a learner imports
    pyplot; without this, a lesson that only calls ``plot_*`` would show ``<Figure size ...>`` instead of the image.
    Only IPython's display table is touched, and only when nothing else draws ``Figure`` objects yet.
    """
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None or not hasattr(shell, "display_formatter"):
        return
    png = shell.display_formatter.formatters["image/png"]
    if Figure not in png.type_printers:
        png.for_type(Figure, _figure_png)


_show_figures_in_ipython()


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


def plot_mask(
    mask: torch.Tensor,
    query_labels: Sequence[str] | None = None,
    key_labels: Sequence[str] | None = None,
    *,
    ax: Axes | None = None,
    title: str | None = None,
) -> Figure:
    """A bool attention mask as a grid: row i is query i, column j is key j, bright = may attend.

    The colorbar has two ticks, "blocked" and "may attend"; up to 40 positions the cells are outlined and every
    tick is labelled (with the tokens when given). The title, unless given, counts the allowed pairs.

    Shape: mask bool ``(i, j)`` (leading dimensions of size 1 are dropped; for ``(b, h, i, j)`` pick ``[0, 0]``).
    """
    fn = "plot_mask"
    matrix = _as_matrix(fn, mask)
    if matrix.dtype != torch.bool:
        raise TypeError(f"{fn}(): expected a bool mask (True = may attend), got dtype {mask.dtype}; convert other "
                        f"conventions with attention_lab.masks (from_keep_ones, from_additive_mask, from_torch_*)")
    n_i, n_j = matrix.shape
    side = min(7.0, 2.2 + 0.25 * max(n_i, n_j))
    fig, ax = _new_axes(ax, (side + 1.2, side))
    image = ax.imshow(matrix.float().numpy(), cmap=MASK_CMAP, vmin=0.0, vmax=1.0, interpolation="nearest",
                      aspect="auto")
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
    bar = fig.colorbar(image, ax=ax, ticks=[0.0, 1.0])
    bar.ax.set_yticklabels(["blocked", "may attend"])
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
    fig, ax = _new_axes(ax, (6.4, 4.0))
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
    fig, ax = _new_axes(ax, (6.0, 4.0))
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


# ---- lesson 05: heads ----

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

    ``weights`` of shape ``(h, i, j)`` (one layer) give one panel per head, titled ``head 1`` ... ``head h``
    (Lee's q^{i,1}, q^{i,2}, ...; head 1 is ``weights[0]``), in rows of ``ncols`` (default: all heads in one
    row up to 4, else 4 per row). ``(layers, h, i, j)`` (or a list of per-layer ``(h, i, j)`` tensors) give a
    layers x heads grid, rows labelled ``layer 1`` ... A leading batch axis of size 1, as returned by
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
    if ncols is not None and (isinstance(ncols, bool) or not isinstance(ncols, int) or ncols < 1):
        raise ValueError(f"{fn}(): ncols must be a positive int or None, got {ncols!r}")
    if layered:
        ncols = n_heads
    elif ncols is None:
        ncols = n_heads if n_heads <= 4 else 4
    ncols = min(ncols, n_heads)
    rows_per_layer = -(-n_heads // ncols)
    nrows = n_layers * rows_per_layer
    n_panels = n_layers * n_heads
    if vmax is None:
        vmax = float(stack.max()) if stack.numel() else 1.0

    if ax is None:
        side = min(3.0, 1.4 + 0.1 * max(n_i, n_j))
        height = nrows * side + (0.6 if title else 0.3)
        fig = Figure(figsize=(ncols * side + 1.2, height), layout="constrained")
        grid = fig.subplots(nrows, ncols, squeeze=False)
        axes = [grid[r, c] for r in range(nrows) for c in range(ncols)]
        # Panels go layer by layer, head by head; spare cells at the end of a layer's last row are hidden.
        panels = []
        for layer in range(n_layers):
            cells = axes[layer * rows_per_layer * ncols:(layer + 1) * rows_per_layer * ncols]
            panels.extend(cells[:n_heads])
            for spare in cells[n_heads:]:
                spare.set_axis_off()
    else:
        panels = list(ax)
        if len(panels) != n_panels:
            raise ValueError(f"{fn}(): ax must hold one Axes per panel, got {len(panels)} Axes for "
                             f"{n_layers} layer(s) x {n_heads} head(s) = {n_panels} panels")
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
            # Shared axes: tick labels only on the left column and on the lowest panel of each column.
            first_column = head % ncols == 0
            lowest = layer == n_layers - 1 and head + ncols >= n_heads
            panel.tick_params(labelleft=first_column, labelbottom=lowest)
            if layer == 0 or not layered:
                panel.set_title(f"head {head + 1}", fontsize=10)
            if first_column:
                panel.set_ylabel(f"layer {layer + 1}\nquery i" if layered else "query i")
            if lowest:
                panel.set_xlabel("key j")
        else:
            panel.set_title(f"layer {layer + 1}, head {head + 1}" if layered else f"head {head + 1}",
                            fontsize=10)
            panel.set_xlabel("key j")
            panel.set_ylabel("query i")
        if annotate:
            for row, values in enumerate(matrix.tolist()):
                for col, value in enumerate(values):
                    colour = "black" if value > 0.6 * vmax else "white"
                    panel.text(col, row, f"{value:.2f}", ha="center", va="center", fontsize=7, color=colour)
    fig.colorbar(image, ax=panels, label="attention weight", shrink=0.9)
    if title:
        fig.suptitle(title)
    return fig


# ---- lesson 06: cost (time, memory) ----

_COST_MARKERS = ("o", "s", "^", "D", "v")


def _series(fn: str, lengths: Sequence[int], values: Sequence[float], name: str) -> list[float]:
    values = [float(v) for v in values]
    if len(values) != len(lengths):
        raise ValueError(f"{fn}(): expected one value per length for {name!r}, got {len(values)} values for "
                         f"{len(lengths)} lengths")
    return values


def _length_axis(ax: Axes, lengths: Sequence[int]) -> None:
    """Log axes (base 2 for n) with the lengths themselves as tick labels."""
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(list(lengths), [str(n) for n in lengths])
    ax.set_xticks([], minor=True)


def plot_time_vs_length(
    lengths: Sequence[int],
    times_s: dict[str, Sequence[float]],
    *,
    fit_from: int = 0,
    ax: Axes | None = None,
    title: str | None = "forward time against sequence length",
) -> Figure:
    """Time against n on log-log axes, one line per variant; the legend gives each line's fitted slope.

    A cost growing as n^p is a straight line of slope p here; the slope is fitted on the points with n >= fit_from.

    Shape: ``lengths`` (n,), each ``times_s[name]`` (n,) in seconds.
    """
    from .bench import loglog_slope

    fn = "plot_time_vs_length"
    fig, ax = _new_axes(ax, (6.0, 4.0))
    for index, (name, values) in enumerate(times_s.items()):
        ms = [t * 1e3 for t in _series(fn, lengths, values, name)]
        fit = [(n, t) for n, t in zip(lengths, ms) if n >= fit_from]
        label = name
        if len(fit) >= 2:
            label += f" (slope {loglog_slope([n for n, _ in fit], [t for _, t in fit]):.2f})"
        ax.plot(lengths, ms, marker=_COST_MARKERS[index % len(_COST_MARKERS)], label=label)
    _length_axis(ax, lengths)
    ax.set_xlabel("sequence length n (tokens)")
    ax.set_ylabel("time per call (ms)")
    if title:
        ax.set_title(title)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def plot_memory_vs_length(
    lengths: Sequence[int],
    peak_bytes: dict[str, Sequence[int]],
    *,
    predicted_bytes: Sequence[int] | None = None,
    ax: Axes | None = None,
    title: str | None = "peak memory against sequence length",
) -> Figure:
    """Measured peak memory (MiB) against n on log-log axes, with the arithmetic prediction as a dashed line.

    Shape: ``lengths`` (n,), each ``peak_bytes[name]`` (n,), ``predicted_bytes`` (n,).
    """
    fn = "plot_memory_vs_length"
    fig, ax = _new_axes(ax, (6.0, 4.0))
    for index, (name, values) in enumerate(peak_bytes.items()):
        mib = [max(b, 1) / 2**20 for b in _series(fn, lengths, values, name)]  # log axes: no zeros
        ax.plot(lengths, mib, marker=_COST_MARKERS[index % len(_COST_MARKERS)], label=f"{name} (measured)")
    if predicted_bytes is not None:
        predicted = _series(fn, lengths, predicted_bytes, "predicted_bytes")
        ax.plot(lengths, [b / 2**20 for b in predicted], linestyle="--", color="black", label="arithmetic")
    _length_axis(ax, lengths)
    ax.set_xlabel("sequence length n (tokens)")
    ax.set_ylabel("peak memory (MiB)")
    if title:
        ax.set_title(title)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def plot_bench(rows: Sequence) -> Figure:
    """Two panels from ``attention_lab.bench.run_sweep`` rows: time and peak memory against n, per variant."""
    if not rows:
        raise ValueError("plot_bench(): expected at least one row from run_sweep(), got none")
    lengths = sorted({r.n for r in rows})
    times: dict[str, list[float]] = {}
    peaks: dict[str, list[int]] = {}
    for name in dict.fromkeys(r.variant for r in rows):
        by_n = {r.n: r for r in rows if r.variant == name}
        if set(by_n) != set(lengths):
            raise ValueError(f"plot_bench(): variant {name!r} lacks some lengths of the sweep")
        times[name] = [by_n[n].median_ms / 1e3 for n in lengths]
        peaks[name] = [by_n[n].peak_bytes for n in lengths]
    fig = Figure(figsize=(11.0, 4.0), layout="constrained")
    left, right = fig.subplots(1, 2)
    plot_time_vs_length(lengths, times, fit_from=512 if sum(n >= 512 for n in lengths) >= 2 else 0, ax=left)
    plot_memory_vs_length(lengths, peaks, ax=right)
    return fig



# ---- lesson 07: block layouts ----

_DENSE_LAYOUT_LIMIT = 512  # up to this n every (query, key) pair is drawn; beyond it, one cell per block pair


def plot_block_layout(layout: BlockLayout, n: int, *, ax: Axes | None = None, title: str | None = None) -> Figure:
    """Which (query, key) pairs a ``BlockLayout`` computes at length n, with block boundaries and its sparsity.

    Up to n = 512 each pair is a cell (so causal diagonal blocks show their triangle); beyond that each cell is a
    block pair, shaded by the share of its pairs that are computed. The title, unless given, names the layout and
    its sparsity (the share of the n x n pairs skipped).

    Shape: draws ``layout.to_dense(n)`` ``(i, j)``, or ``layout.block_fill(n)`` ``(r, c)`` for n > 512.
    """
    fn = "plot_block_layout"
    if not isinstance(layout, BlockLayout):
        raise TypeError(f"{fn}(): expected an attention_lab.BlockLayout, got {type(layout).__name__}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"{fn}(): n must be an int >= 1, got {n!r}")
    fig, ax = _new_axes(ax, (5.2, 4.2))
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
    bar = fig.colorbar(image, ax=ax, ticks=[0.0, 1.0], shrink=0.8)
    bar.ax.set_yticklabels(["skipped", "computed"])
    return fig


def plot_block_layouts(layouts: dict[str, BlockLayout], n: int, *, columns: int = 3) -> Figure:
    """Several layouts side by side at length n, each titled with its name and sparsity (see plot_block_layout).

    Shape: each panel draws ``layout.to_dense(n)`` ``(i, j)``.
    """
    if not layouts:
        raise ValueError("plot_block_layouts(): expected at least one layout, got an empty dict")
    if isinstance(columns, bool) or not isinstance(columns, int) or columns < 1:
        raise ValueError(f"plot_block_layouts(): columns must be an int >= 1, got {columns!r}")
    columns = min(columns, len(layouts))
    rows = -(-len(layouts) // columns)
    fig = Figure(figsize=(3.6 * columns, 3.2 * rows), layout="constrained")
    axes = fig.subplots(rows, columns, squeeze=False).flatten()
    for ax, (name, layout) in zip(axes, layouts.items()):
        plot_block_layout(layout, n, ax=ax, title=f"{name}\nsparsity {layout.sparsity(n):.3f}")
    for ax in axes[len(layouts):]:
        ax.set_visible(False)
    return fig


# ---- lessons 08-09: training curves and reading attention ----

# Okabe-Ito: distinguishable with every common colour-vision deficiency; dashes add a second cue.
_RUN_COLOURS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")
_RUN_DASHES = ("-", "--", "-.", ":")
_METRIC_LABELS = {
    "loss": ("loss (cross-entropy)", True),
    "accuracy": ("token accuracy (fresh batch)", False),
    "lr": ("learning rate", False),
    "grad_norm": ("gradient norm (before clipping)", True),
    "clipped_grad_norm": ("gradient norm (after clipping)", True),
    "weight_norm": ("weight norm (matrices)", False),
}


def _runs(fn: str, histories: object) -> dict[str, list]:
    """``History``, ``{label: History}`` or ``{label: [History, ...]}`` (seeds) -> ``{label: [History, ...]}``."""
    if hasattr(histories, "step"):
        histories = {"run": histories}
    if not isinstance(histories, dict) or not histories:
        raise TypeError(f"{fn}(): expected a History or a non-empty dict {{label: History or list of Histories}}, "
                        f"got {type(histories).__name__}")
    runs = {}
    for label, value in histories.items():
        group = list(value) if isinstance(value, (list, tuple)) else [value]
        if not group or not all(hasattr(h, "step") for h in group):
            raise TypeError(f"{fn}(): expected History objects (from attention_lab.training.train) for "
                            f"{label!r}, got {type(value).__name__}")
        runs[str(label)] = group
    return runs


def plot_metric(
    histories: object,
    metric: str = "loss",
    *,
    ax: Axes | None = None,
    title: str | None = None,
    log: bool | None = None,
) -> Figure:
    """One training metric against the step, one colour per run (several seeds of a run share its colour).

    ``histories``: a ``History``, ``{label: History}``, or ``{label: [History, ...]}`` for several seeds (thin
    lines, labelled once). ``metric``: ``"loss"``, ``"accuracy"``, ``"lr"``, ``"grad_norm"``,
    ``"clipped_grad_norm"``, ``"weight_norm"``.
    ``log``: logarithmic y axis (default: for the loss and the gradient norm).

    Shape: each history holds one value per step.
    """
    fn = "plot_metric"
    if metric not in _METRIC_LABELS:
        raise ValueError(f"{fn}(): metric must be one of {', '.join(map(repr, _METRIC_LABELS))}, got {metric!r}")
    runs = _runs(fn, histories)
    ylabel, default_log = _METRIC_LABELS[metric]
    fig, ax = _new_axes(ax, (5.0, 3.4))
    for index, (label, group) in enumerate(runs.items()):
        for seed_index, history in enumerate(group):
            ax.plot(history.step, getattr(history, metric), color=_RUN_COLOURS[index % len(_RUN_COLOURS)],
                    linestyle=_RUN_DASHES[index % len(_RUN_DASHES)], linewidth=1.6 if len(group) == 1 else 1.0,
                    alpha=1.0 if len(group) == 1 else 0.8, label=label if seed_index == 0 else None)
    if log if log is not None else default_log:
        ax.set_yscale("log")
    ax.set_xlabel("training step")
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.grid(True, alpha=0.3)
    if len(runs) > 1 or next(iter(runs)) != "run":
        ax.legend(fontsize=8)
    return fig


def plot_training_curves(
    histories: object,
    metrics: Sequence[str] = ("loss", "accuracy"),
    *,
    ax: Sequence[Axes] | None = None,
    title: str | None = None,
) -> Figure:
    """One panel per metric side by side (see :func:`plot_metric` for ``histories`` and the metric names).

    ``ax``: a sequence of Axes, one per metric, to draw into an existing figure.

    Shape: each history holds one value per step.
    """
    fn = "plot_training_curves"
    metrics = list(metrics)
    if not metrics:
        raise ValueError(f"{fn}(): expected at least one metric, got none")
    if ax is None:
        fig = Figure(figsize=(4.2 * len(metrics), 3.3), layout="constrained")
        axes = list(fig.subplots(1, len(metrics), squeeze=False)[0])
    else:
        axes = list(ax)
        if len(axes) != len(metrics):
            raise ValueError(f"{fn}(): expected one Axes per metric ({len(metrics)}), got {len(axes)}")
        fig = axes[0].figure
    for metric, axis in zip(metrics, axes):
        plot_metric(histories, metric, ax=axis)
    if title:
        fig.suptitle(title)
    return fig


def plot_layer_grad_norms(
    histories: object,
    *,
    first: int = 20,
    ax: Axes | None = None,
    title: str | None = None,
) -> Figure:
    """Mean gradient norm of each part of the model over the first ``first`` steps, bars grouped by part.

    Parts run from the input (embeddings) to the output (``head``), so a run whose bars grow to the right has its
    largest gradients near the output. Several seeds of one run are averaged.

    Shape: ``history.layer_grad_norm[part]`` holds one value per step.
    """
    fn = "plot_layer_grad_norms"
    runs = _runs(fn, histories)
    if isinstance(first, bool) or not isinstance(first, int) or first < 1:
        raise ValueError(f"{fn}(): first must be an int >= 1, got {first!r}")
    parts = list(dict.fromkeys(p for group in runs.values() for h in group for p in h.layer_grad_norm))
    parts.sort(key=lambda p: p == "head")  # the output layer last, also when only some runs have a final norm
    fig, ax = _new_axes(ax, (max(5.0, 1.0 + 0.9 * len(parts)), 3.4))
    width = 0.8 / len(runs)
    for index, (label, group) in enumerate(runs.items()):
        means = []
        for part in parts:
            values = [v for h in group for v in h.layer_grad_norm.get(part, [])[:first]]
            means.append(sum(values) / len(values) if values else 0.0)
        offsets = [p + (index - (len(runs) - 1) / 2) * width for p in range(len(parts))]
        ax.bar(offsets, means, width=width, label=label, color=_RUN_COLOURS[index % len(_RUN_COLOURS)],
               hatch=("", "//", "..", "xx")[index % 4], edgecolor="white")
    ax.set_xticks(range(len(parts)), [p.replace("_", " ") for p in parts], rotation=30, ha="right")
    ax.set_xlabel("part of the model (input -> output)")
    ax.set_ylabel(f"mean gradient norm, steps 1-{first}")
    if title:
        ax.set_title(title)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def plot_rollout(
    attention: torch.Tensor,
    labels: Sequence[str] | None = None,
    *,
    residual: float = 0.5,
    title: str | None = None,
) -> Figure:
    """Each layer's head-averaged attention, then the rollout through all layers, side by side.

    ``attention`` is one sequence's weights from ``model(tokens, return_attention=True)`` (``[:, 0]`` of a
    batch); the last panel is :func:`attention_lab.model.attention_rollout` with ``residual``.

    Shape: attention ``(layers, h, i, j)`` or ``(layers, 1, h, i, j)``.
    """
    from .model import attention_rollout

    fn = "plot_rollout"
    if not isinstance(attention, torch.Tensor):
        raise TypeError(f"{fn}(): expected a torch.Tensor, got {type(attention).__name__}")
    attention = attention.detach().to("cpu").float()
    if attention.dim() == 5 and attention.shape[1] == 1:
        attention = attention[:, 0]  # (layers, h, i, j)
    if attention.dim() != 4:
        raise ValueError(f"{fn}(): expected attention of shape (layers, h, i, j) for one sequence, got shape "
                         f"{tuple(attention.shape)}; pass attention[:, 0] for the first sequence of a batch")
    rollout = attention_rollout(attention[:, None], residual=residual)[0]  # (i, j)
    panels = [(f"layer {k + 1} (mean of heads)", a.mean(0)) for k, a in enumerate(attention)]
    panels.append((f"rollout (residual {residual:g})", rollout))
    n = attention.shape[-1]
    side = min(3.4, 1.6 + 0.12 * n)
    fig = Figure(figsize=(side * len(panels) + 0.8, side + 0.5), layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for axis, (name, matrix) in zip(axes, panels):
        image = axis.imshow(matrix.numpy(), cmap=WEIGHTS_CMAP, vmin=0.0, vmax=1.0, interpolation="nearest")
        _set_token_ticks(fn, axis, "x", n, labels)
        _set_token_ticks(fn, axis, "y", n, labels)
        axis.set_xlabel("key position j")
        axis.set_title(name, fontsize=9)
    axes[0].set_ylabel("query position i")
    fig.colorbar(image, ax=list(axes), label="attention weight", shrink=0.8)
    if title:
        fig.suptitle(title)
    return fig


def _parse_tokens(text: str, n_symbols: int, seq_len: int) -> torch.Tensor:
    parts = text.replace(",", " ").split()
    try:
        ids = [int(p) for p in parts]
    except ValueError:
        raise ValueError(f"expected {seq_len} whole numbers separated by spaces, got {text!r}") from None
    if len(ids) != seq_len or not all(0 <= t < n_symbols for t in ids):
        raise ValueError(f"expected {seq_len} numbers from 0 to {n_symbols - 1}, got {len(ids)} numbers: {text!r}")
    return torch.tensor(ids)


def attention_explorer(model: torch.nn.Module, task: object, tokens: torch.Tensor, *, layer: int = 0,
                       head: int = 0) -> object:
    """An ipywidgets view of a trained model's attention: sliders for layer and head, a text box for the input.

    Typing a new sequence (numbers separated by spaces) re-runs the model and redraws; the model's output is
    printed above the heatmap. Needs a running kernel with ipywidgets; without one, show a static figure too
    (e.g. :func:`plot_heads`). Returns the widget (display it, or make it the cell's last value).

    Shape: tokens ``(i,)``, one sequence of ``task.seq_len`` symbols.
    """
    import ipywidgets as widgets
    from IPython.display import display

    fn = "attention_explorer"
    if not isinstance(tokens, torch.Tensor) or tokens.dim() != 1:
        raise ValueError(f"{fn}(): expected tokens of shape (i,) (one sequence), got "
                         f"{tuple(tokens.shape) if isinstance(tokens, torch.Tensor) else type(tokens).__name__}")
    n_layers, n_heads = model.num_layers, model.num_heads
    if not (0 <= layer < n_layers and 0 <= head < n_heads):
        raise ValueError(f"{fn}(): layer must be in [0, {n_layers}) and head in [0, {n_heads}), got "
                         f"layer={layer}, head={head}")
    style = {"description_width": "60px"}
    layer_slider = widgets.IntSlider(value=layer + 1, min=1, max=n_layers, description="layer", style=style)
    head_slider = widgets.IntSlider(value=head + 1, min=1, max=n_heads, description="head", style=style)
    text = widgets.Text(value=" ".join(str(t) for t in tokens.tolist()), description="input", style=style,
                        continuous_update=False, layout=widgets.Layout(width="420px"))
    out = widgets.Output()

    def redraw(_change: object = None) -> None:
        with out:
            out.clear_output(wait=True)
            try:
                seq = _parse_tokens(text.value, task.n_symbols, task.seq_len)
            except ValueError as error:
                print(error)
                return
            with torch.no_grad():
                logits, attention = model(seq[None].to(next(model.parameters()).device), return_attention=True)
            labels = task.token_labels(seq)
            prediction = " ".join(str(t) for t in logits.argmax(-1)[0].tolist())
            print(f"input  {' '.join(labels)}\noutput {prediction}")
            at_layer, at_head = layer_slider.value, head_slider.value
            display(plot_attention(attention[at_layer - 1, 0, at_head - 1], labels, labels,
                                   title=f"layer {at_layer}, head {at_head}"))

    for control in (layer_slider, head_slider, text):
        control.observe(redraw, names="value")
    redraw()
    return widgets.VBox([widgets.HBox([layer_slider, head_slider]), text, out])
