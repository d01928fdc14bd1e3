"""Training curves (lesson 08): a metric against the step for one or several runs and seeds, several metrics side
by side, and the gradient norm of each part of the model."""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.axes import Axes

from .._validation import check_positive_int
from ._base import _check_axes_list, _finish_axes, _new_axes
from ._fonts import Figure

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
            raise TypeError(f"{fn}(): expected History objects (from attention_lab.models.training.train) for "
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
    series = {label: [getattr(history, metric) for history in group] for label, group in runs.items()}
    return _draw_steps(fn, series, ax=ax, ylabel=ylabel, title=title, log=default_log if log is None else log,
                       legend=len(runs) > 1 or next(iter(runs)) != "run")


def _draw_steps(fn: str, series: dict[str, list[Sequence[float]]], *, ax: Axes | None, ylabel: str, title: str | None,
                log: bool, legend: bool) -> Figure:
    """One colour and dash per label; several series under one label (seeds) are thin lines, labelled once."""
    fig, ax = _new_axes(fn, ax, (5.0, 3.4))
    for index, (label, group) in enumerate(series.items()):
        for seed_index, values in enumerate(group):
            ax.plot(range(len(values)), values, color=_RUN_COLOURS[index % len(_RUN_COLOURS)],
                    linestyle=_RUN_DASHES[index % len(_RUN_DASHES)], linewidth=1.6 if len(group) == 1 else 1.0,
                    alpha=1.0 if len(group) == 1 else 0.8, label=label if seed_index == 0 else None)
    if log:
        ax.set_yscale("log")
    ax.set_xlabel("training step")
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.grid(True, alpha=0.3)
    if legend:
        ax.legend(fontsize=8)
    return fig


def plot_steps(
    values: dict[str, Sequence[float] | Sequence[Sequence[float]]],
    *,
    ylabel: str,
    ax: Axes | None = None,
    title: str | None = None,
    log: bool = False,
) -> Figure:
    """Any per-step measurement against the training step, one colour per run, like :func:`plot_metric`.

    For values a ``History`` does not hold, e.g. recorded by a forward hook during :func:`train`:
    ``{label: [v0, v1, ...]}`` for one run, ``{label: [[v0, v1, ...], [...]]}`` for several seeds.

    Shape: each run holds one number per step.
    """
    fn = "plot_steps"
    if not isinstance(values, dict) or not values:
        raise TypeError(f"{fn}(): expected a non-empty dict {{label: list of numbers, or list of such lists}}, "
                        f"got {type(values).__name__}")
    series = {}
    for label, run in values.items():
        run = list(run)
        group = run if run and all(isinstance(v, (list, tuple)) for v in run) else [run]
        if not all(group) or not all(isinstance(v, (int, float)) for seq in group for v in seq):
            raise TypeError(f"{fn}(): expected numbers, one per step, for {label!r}; got {str(run)[:60]}")
        series[str(label)] = group
    return _draw_steps(fn, series, ax=ax, ylabel=ylabel, title=title, log=log, legend=True)


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
        axes = _check_axes_list(fn, ax)
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
    check_positive_int(fn, "first", first)
    parts = list(dict.fromkeys(p for group in runs.values() for h in group for p in h.layer_grad_norm))
    parts.sort(key=lambda p: p == "head")  # the output layer last, also when only some runs have a final norm
    fig, ax = _new_axes(fn, ax, (max(5.0, 1.0 + 0.9 * len(parts)), 3.4))
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
    _finish_axes(ax, xlabel="part of the model (input -> output)", ylabel=f"mean gradient norm, first {first} steps",
                 title=title, grid_axis="y")
    return fig
