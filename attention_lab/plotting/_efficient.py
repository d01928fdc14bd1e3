"""The efficient-attention family (lesson 10): the map of effective matrices, error against budget, speed and
memory ratios against n, and the Long-Range-Arena-style bubble chart."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import torch
from matplotlib.axes import Axes
from matplotlib.lines import Line2D

from ._base import WEIGHTS_CMAP, _as_matrix, _check_rows, _finish_axes, _new_axes
from ._fonts import Figure

_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "h", "<")


def plot_attention_family(weights: Mapping[str, torch.Tensor], *, ncols: int = 5,
                          title: str | None = "what each method does to the i x j matrix (one input)") -> Figure:
    """One heatmap per method: its effective weight of query i on value j, side by side on one colour scale.

    Shape: each ``weights[name]`` ``(i, j)`` (leading dimensions of size 1 are dropped).
    """
    fn = "plot_attention_family"
    if not weights:
        raise ValueError(f"{fn}(): expected at least one matrix, got none")
    matrices = {name: _as_matrix(fn, w) for name, w in weights.items()}
    top = max(float(m.max()) for m in matrices.values())
    nrows = math.ceil(len(matrices) / ncols)
    fig = Figure(figsize=(2.4 * ncols + 0.8, 2.5 * nrows + 0.4), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False)
    image = None
    for ax, (name, matrix) in zip(axes.flat, matrices.items()):
        image = ax.imshow(matrix.numpy(), cmap=WEIGHTS_CMAP, vmin=0.0, vmax=top, interpolation="nearest")
        ax.set_title(name, fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
    for ax in list(axes.flat)[len(matrices):]:
        ax.set_axis_off()
    for ax in axes[:, 0]:
        ax.set_ylabel("query i")
    for ax in axes[-1, :]:
        ax.set_xlabel("key j")
    fig.colorbar(image, ax=axes, label="weight of query i on value j", shrink=0.8)
    if title:
        fig.suptitle(title)
    return fig


EXACT = 1e-3  # where plot_budget_errors draws an error that is float32 rounding only (below 1e-5)


def plot_budget_errors(errors: Mapping[str, tuple[Sequence[float], Sequence[float]]],
                       baseline: Mapping[str, tuple[Sequence[float], Sequence[float]]] | None = None, *,
                       ax: Axes | None = None, xlabel: str = "budget: numbers each query combines / n",
                       title: str | None = "approximation error against budget") -> Figure:
    """Relative error against budget, one line per method; ``baseline`` (e.g. random inputs) dashed, same colour.
    An error below ``EXACT`` (float32 rounding: the method is exact at that budget) is drawn on the axis' floor,
    ``EXACT``, so that a rounding error of 1e-7 does not stretch the axis down to it.

    Shape: ``errors[name] = (budgets, relative errors)``, two sequences of one length.
    """
    fig, ax = _new_axes("plot_budget_errors", ax, (6.5, 4.2))
    colours = {}
    for index, (name, (budget, error)) in enumerate(errors.items()):
        if len(budget) != len(error):
            raise ValueError(f"plot_budget_errors(): {name!r} has {len(budget)} budgets and {len(error)} errors")
        line, = ax.plot(budget, [max(e, EXACT) for e in error], marker=_MARKERS[index % len(_MARKERS)], label=name)
        colours[name] = line.get_color()
    for name, (budget, error) in (baseline or {}).items():
        ax.plot(budget, [max(e, EXACT) for e in error], linestyle="--", color=colours.get(name), alpha=0.6,
                label=f"{name} (random q, k, v)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_ylim(bottom=EXACT / 1.5)
    ax.annotate("exact (float32 rounding)", (0.01, EXACT), xycoords=("axes fraction", "data"), xytext=(0, 3),
                textcoords="offset points", fontsize=7, color="grey")
    _finish_axes(ax, xlabel=xlabel, ylabel="relative error of the output", title=title)
    return fig


def plot_ratio_sweep(rows: Sequence[Mapping[str, object]], *, baseline: str = "SDPA (dense)",
                     title: str | None = None) -> Figure:
    """Two panels from the sweep CSV: speed and peak memory of each variant relative to the baseline, against n.

    Shape: each row has ``n``, ``variant``, ``speed_vs_sdpa`` and ``memory_vs_sdpa`` (numbers or their text).
    """
    if not rows:
        raise ValueError("plot_ratio_sweep(): expected rows from benchmarks/efficient_attention.py, got none")
    _check_rows("plot_ratio_sweep", rows, ("n", "variant", "speed_vs_sdpa", "memory_vs_sdpa"))
    fig = Figure(figsize=(11.0, 4.2), layout="constrained")
    left, right = fig.subplots(1, 2)
    names = [name for name in dict.fromkeys(str(r["variant"]) for r in rows) if name != baseline]
    for index, name in enumerate(names):
        mine = sorted((int(r["n"]), float(r["speed_vs_sdpa"]), float(r["memory_vs_sdpa"]))
                      for r in rows if r["variant"] == name)
        lengths = [m[0] for m in mine]
        marker = _MARKERS[index % len(_MARKERS)]
        left.plot(lengths, [m[1] for m in mine], marker=marker, label=name)
        right.plot(lengths, [m[2] for m in mine], marker=marker, label=name)
    for ax, what in ((left, "speed / SDPA's speed (above 1: faster)"), (right, "peak memory / SDPA's")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.axhline(1.0, color="black", linewidth=0.8)
        _finish_axes(ax, xlabel="sequence length n", ylabel=what, title=None)
    left.legend(fontsize=7)
    right.get_legend().remove()
    if title:
        fig.suptitle(title)
    return fig


def plot_lra_bubbles(panels: Mapping[str, Sequence[Mapping[str, object]]], *, reference: str = "softmax",
                     title: str | None = None) -> Figure:
    """Long Range Arena's chart, one panel per title: accuracy against training speed relative to ``reference``,
    bubble area proportional to peak memory (the reference's bubble has the same size in every panel). A key under
    the panels gives each colour's attention (a legend, so names never overlap the bubbles or each other) and the
    bubble sizes of 1x, 2x and 4x the reference's peak memory.

    Each panel's rows are the benchmark's results for one task and one n, one or more rows (seeds) per attention.

    Shape: ``panels[title]`` is a list of rows with ``attention``, ``accuracy``, ``steps_per_s``, ``peak_bytes``.
    """
    fn = "plot_lra_bubbles"
    if not panels:
        raise ValueError(f"{fn}(): expected at least one panel of rows, got none")
    for rows in panels.values():
        _check_rows(fn, rows, ("attention", "accuracy", "steps_per_s", "peak_bytes"))
    fig = Figure(figsize=(5.2 * len(panels), 4.4), layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    names = list(dict.fromkeys(str(row["attention"]) for rows in panels.values() for row in rows))
    colour = {name: f"C{index % 10}" for index, name in enumerate(names)}  # one colour per attention, every panel
    for ax, (panel, rows) in zip(axes, panels.items()):
        by_name: dict[str, list[Mapping[str, object]]] = {}
        for row in rows:
            by_name.setdefault(str(row["attention"]), []).append(row)
        if reference not in by_name:
            raise ValueError(f"{fn}(): panel {panel!r} must include the reference attention {reference!r}, got "
                             f"{sorted(by_name)}")

        def mean(name: str, key: str, by_name: dict = by_name) -> float:
            return sum(float(r[key]) for r in by_name[name]) / len(by_name[name])

        ref_speed, ref_memory = mean(reference, "steps_per_s"), mean(reference, "peak_bytes")
        for name in by_name:
            speed, accuracy = mean(name, "steps_per_s") / ref_speed, mean(name, "accuracy")
            area = 300.0 * mean(name, "peak_bytes") / ref_memory  # the reference's bubble: 300 points^2
            ax.scatter([speed], [accuracy], s=area, alpha=0.45, color=colour[name], edgecolors="black")
        ax.set_xscale("log", base=2)
        ax.axvline(1.0, color="black", linewidth=0.6)
        ax.set_ylim(-0.05, 1.1)
        ax.set_xlabel(f"training steps per second / {reference}'s")
        ax.set_ylabel("held-out accuracy")
        ax.grid(True, alpha=0.3)
        ax.set_title(panel, fontsize=9)
    attention_key = [Line2D([], [], linestyle="", marker="o", markersize=7, alpha=0.6, color=colour[name],
                            markeredgecolor="black", label=name) for name in names]
    size_key = [Line2D([], [], linestyle="", marker="o", markersize=(300.0 * factor) ** 0.5, alpha=0.3, color="grey",
                       markeredgecolor="black", label=f"{factor}x {reference}'s peak memory") for factor in (1, 2, 4)]
    fig.legend(handles=attention_key + size_key, loc="outside lower center", ncols=min(len(names) + 3, 6),
               fontsize=7, frameon=False)
    if title:
        fig.suptitle(title, fontsize=10)
    return fig
