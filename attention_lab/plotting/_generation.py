"""Figures for attention while generating (lesson 11): a rotary pair, tokens per second, cache memory."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from matplotlib.axes import Axes

from ._base import _finish_axes, _new_axes
from ._fonts import Figure

_MARKERS = ("o", "s", "^", "D", "v")


def _rotate(vector: torch.Tensor, angle: float) -> tuple[float, float]:
    c, s = math.cos(angle), math.sin(angle)
    x, y = (float(v) for v in vector)
    return c * x - s * y, s * x + c * y


def plot_rope_rotation(q: torch.Tensor, k: torch.Tensor, theta: float, pairs: Sequence[tuple[int, int]]) -> Figure:
    """One feature pair of a query and a key, rotated by their positions: one panel per (query position p, key
    position r). The angle between the two arrows is the same in every panel whose p - r is the same.

    Shape: q and k ``(2,)`` (one feature pair each), ``pairs`` a list of (p, r).
    """
    fn = "plot_rope_rotation"
    for name, v in (("q", q), ("k", k)):
        if not isinstance(v, torch.Tensor) or tuple(v.shape) != (2,):
            raise ValueError(f"{fn}(): {name} must be a tensor of shape (2,), one feature pair, got "
                             f"{tuple(v.shape) if isinstance(v, torch.Tensor) else type(v).__name__}")
    if not pairs:
        raise ValueError(f"{fn}(): pairs must name at least one (query position, key position), got none")
    fig = Figure(figsize=(3.0 * len(pairs), 3.2), layout="constrained")
    axes = fig.subplots(1, len(pairs), squeeze=False)[0]
    reach = 1.15 * max(float(q.norm()), float(k.norm()))
    for ax, (p, r) in zip(axes, pairs):
        ax.add_patch(_circle(float(q.norm())))
        for vector, position, colour, name in ((q, p, "tab:blue", "q"), (k, r, "tab:orange", "k")):
            end = _rotate(vector, position * theta)
            ax.annotate("", xy=end, xytext=(0, 0), arrowprops=dict(arrowstyle="->", color=colour, lw=2))
            ax.text(end[0] * 1.08, end[1] * 1.08, f"{name} at {position}", color=colour, ha="center", fontsize=9)
        qx, qy = _rotate(q, p * theta)
        kx, ky = _rotate(k, r * theta)
        ax.set_title(f"p = {p}, r = {r}: q.k = {qx * kx + qy * ky:.3f}", fontsize=10)
        ax.set_xlim(-reach, reach)
        ax.set_ylim(-reach, reach)
        ax.set_aspect("equal")
        ax.axhline(0, color="grey", lw=0.5)
        ax.axvline(0, color="grey", lw=0.5)
        ax.set_xlabel("feature 2m")
    axes[0].set_ylabel("feature 2m + 1")
    return fig


def _circle(radius: float):
    from matplotlib.patches import Circle

    return Circle((0, 0), radius, fill=False, color="lightgrey", linestyle=":")


def plot_generation_speed(lengths: Sequence[int], seconds: dict[str, Sequence[float]], *,
                          benchmark: dict[str, tuple[Sequence[int], Sequence[float]]] | None = None,
                          benchmark_label: str = "benchmark", ax: Axes | None = None,
                          title: str | None = "tokens per second against context length") -> Figure:
    """Tokens per second (1 / seconds per token) against the context, log-log, one line per variant: this run's
    measurements solid, a benchmark file's dashed (``benchmark[name] = (contexts, seconds)``).

    Shape: ``lengths`` (n,), each ``seconds[name]`` (n,).
    """
    fn = "plot_generation_speed"
    fig, ax = _new_axes(fn, ax, (6.4, 4.0))
    colours = {}
    for index, (name, values) in enumerate(seconds.items()):
        if len(values) != len(lengths):
            raise ValueError(f"{fn}(): expected one time per length for {name!r}, got {len(values)} for "
                             f"{len(lengths)} lengths")
        line, = ax.plot(lengths, [1 / s for s in values], marker=_MARKERS[index % len(_MARKERS)],
                        label=f"{name} (this run)")
        colours[name] = line.get_color()
    ticks = list(lengths)
    for name, (contexts, values) in (benchmark or {}).items():
        ax.plot(contexts, [1 / s for s in values], linestyle="--", marker=".", color=colours.get(name),
                label=f"{name} ({benchmark_label})")
        ticks += list(contexts)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ticks = sorted(set(ticks))
    ax.set_xticks(ticks, [str(n) for n in ticks])
    ax.set_xticks([], minor=True)
    _finish_axes(ax, xlabel="context (tokens before the new one)", ylabel="tokens per second", title=title)
    return fig


def plot_cache_memory(lengths: Sequence[int], peak_bytes: dict[str, Sequence[int]], *, ax: Axes | None = None,
                      title: str | None = "memory while generating") -> Figure:
    """Measured peak memory (KiB) against the number of tokens generated, one line per cache.

    Shape: ``lengths`` (n,), each ``peak_bytes[name]`` (n,).
    """
    fn = "plot_cache_memory"
    fig, ax = _new_axes(fn, ax, (6.0, 3.6))
    for index, (name, values) in enumerate(peak_bytes.items()):
        if len(values) != len(lengths):
            raise ValueError(f"{fn}(): expected one value per length for {name!r}, got {len(values)} for "
                             f"{len(lengths)} lengths")
        ax.plot(lengths, [b / 1024 for b in values], marker=_MARKERS[index % len(_MARKERS)], label=name)
    ax.set_xticks(list(lengths), [str(n) for n in lengths])
    ax.set_ylim(bottom=0)
    _finish_axes(ax, xlabel="tokens generated", ylabel="peak memory (KiB)", title=title)
    return fig
