"""Time and memory against sequence length (lesson 06)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from matplotlib.axes import Axes

from ..measure.conclusions import fit_slope
from ._base import _check_rows, _finish_axes, _new_axes
from ._fonts import Figure

_COST_MARKERS = ("o", "s", "^", "D", "v")


def _series(fn: str, lengths: Sequence[int], values: Sequence[float], name: str) -> list[float]:
    values = [float(v) for v in values]
    if len(values) != len(lengths):
        raise ValueError(f"{fn}(): expected one value per length for {name!r}, got {len(values)} values for "
                         f"{len(lengths)} lengths; measure every length, or drop the lengths not measured")
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

    A cost growing as n^p is a straight line of slope p here; the slope is fitted on the points with n >= fit_from
    by :func:`~attention_lab.measure.conclusions.fit_slope`, and a series it cannot decide gets no slope in the
    legend (the cell's printed conclusion says why).

    Shape: ``lengths`` (n,), each ``times_s[name]`` (n,) in seconds.
    """
    fn = "plot_time_vs_length"
    fig, ax = _new_axes(fn, ax, (6.0, 4.0))
    for index, (name, values) in enumerate(times_s.items()):
        ms = [t * 1e3 for t in _series(fn, lengths, values, name)]
        fit = [(n, t) for n, t in zip(lengths, ms) if n >= fit_from]
        label = name
        if len(fit) >= 2:
            slope = fit_slope([n for n, _ in fit], [t for _, t in fit])
            label += f" (slope {slope.slope:.2f})" if slope.conclusive else " (no slope: this run cannot tell)"
        ax.plot(lengths, ms, marker=_COST_MARKERS[index % len(_COST_MARKERS)], label=label)
    _length_axis(ax, lengths)
    _finish_axes(ax, xlabel="sequence length n (tokens)", ylabel="time per call (ms)", title=title)
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
    fig, ax = _new_axes(fn, ax, (6.0, 4.0))
    for index, (name, values) in enumerate(peak_bytes.items()):
        mib = [max(b, 1) / 2**20 for b in _series(fn, lengths, values, name)]  # log axes: no zeros
        ax.plot(lengths, mib, marker=_COST_MARKERS[index % len(_COST_MARKERS)], label=f"{name} (measured)")
    if predicted_bytes is not None:
        predicted = _series(fn, lengths, predicted_bytes, "predicted_bytes")
        ax.plot(lengths, [b / 2**20 for b in predicted], linestyle="--", color="black", label="arithmetic")
    _length_axis(ax, lengths)
    _finish_axes(ax, xlabel="sequence length n (tokens)", ylabel="peak memory (MiB)", title=title)
    return fig


def plot_bench(rows: Sequence[Mapping[str, object]]) -> Figure:
    """Two panels from the rows of ``benchmarks/cost_of_attention.py`` (as
    ``attention_lab.measure.results.read_results`` reads its CSV): time and peak memory against n, per variant.

    Shape: one row per (n, variant), with the columns ``n``, ``variant``, ``fastest_ms`` and ``peak_bytes``.
    """
    if not rows:
        raise ValueError("plot_bench(): expected at least one row of benchmarks/cost_of_attention.py, got none; "
                         "read them with read_results('cost_of_attention.csv')")
    _check_rows("plot_bench", rows, ("n", "variant", "fastest_ms", "peak_bytes"))
    lengths = sorted({int(r["n"]) for r in rows})
    times: dict[str, list[float]] = {}
    peaks: dict[str, list[int]] = {}
    for name in dict.fromkeys(str(r["variant"]) for r in rows):
        by_n = {int(r["n"]): r for r in rows if r["variant"] == name}
        if set(by_n) != set(lengths):
            raise ValueError(f"plot_bench(): expected every variant at every length {lengths}, got {name!r} at "
                             f"{sorted(by_n)}; plot rows of one complete sweep")
        times[name] = [float(by_n[n]["fastest_ms"]) / 1e3 for n in lengths]
        peaks[name] = [int(by_n[n]["peak_bytes"]) for n in lengths]
    fig = Figure(figsize=(11.0, 4.0), layout="constrained")
    left, right = fig.subplots(1, 2)
    plot_time_vs_length(lengths, times, fit_from=512 if sum(n >= 512 for n in lengths) >= 2 else 0, ax=left)
    plot_memory_vs_length(lengths, peaks, ax=right)
    return fig
