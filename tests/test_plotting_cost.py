"""Plots of cost against the sequence length (lesson 06): time with its fitted log-log slope, peak memory with the
arithmetic's prediction, and both panels from a sweep's rows."""

import csv
import io

import pytest

from attention_lab.measure.cost import attention_memory_bytes
from attention_lab.measure.results import read_results
from attention_lab.plotting import plot_bench, plot_memory_vs_length, plot_time_vs_length


def test_plot_time_vs_length_fits_the_slope_in_the_legend():
    lengths = [128, 256, 512]
    fig = plot_time_vs_length(lengths, {"a": [1e-3 * (n / 128) ** 2 for n in lengths]})
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert ax.get_xlabel() and ax.get_ylabel() == "time per call (ms)"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["a (slope 2.00)"]
    with pytest.raises(ValueError, match=r"plot_time_vs_length\(\): expected one value per length"):
        plot_time_vs_length(lengths, {"a": [1.0]})


def test_plot_time_vs_length_gives_no_slope_for_a_series_the_run_cannot_decide():
    lengths = [256, 512, 1024, 2048]
    fig = plot_time_vs_length(lengths, {"noisy": [1.0, 4.0, 0.8, 3.0], "clean": [n * 1e-6 for n in lengths]})
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels == ["noisy (no slope: this run cannot tell)", "clean (slope 1.00)"]


def test_plot_memory_vs_length_draws_measured_and_predicted():
    lengths = [64, 128]
    predicted = [attention_memory_bytes(n, head_dim=8).naive_peak for n in lengths]
    fig = plot_memory_vs_length(lengths, {"naive": predicted, "sdpa": [0, 100]}, predicted_bytes=predicted)
    ax = fig.axes[0]
    assert ax.get_ylabel() == "peak memory (MiB)"
    assert len(ax.get_lines()) == 3
    assert "arithmetic" in [t.get_text() for t in ax.get_legend().get_texts()]


def _rows() -> list[dict[str, str]]:
    """Two variants at three lengths, as a CSV of benchmarks/cost_of_attention.py holds them: the naive one
    quadratic, the other linear."""
    rows = []
    for n in (128, 256, 512):
        for variant, ms, peak in (("naive", 1e-4 * n**2, 8 * n**2), ("fused", 0.01 * n, 1024 * n)):
            rows.append({"n": str(n), "variant": variant, "fastest_ms": str(ms), "peak_bytes": str(peak),
                         "machine": "a laptop", "threads": "1", "torch": "2.13.0", "date": "2026-12-01",
                         "load": "0.5"})
    return rows


def test_plot_bench_draws_time_and_memory_per_variant(tmp_path):
    path = tmp_path / "cost.csv"
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(_rows()[0]))
        writer.writeheader()
        writer.writerows(_rows())
    fig = plot_bench(read_results(path).rows)  # what a reader of `benchmarks/cost_of_attention.py --csv` does
    time_ax, memory_ax = fig.axes
    assert [t.get_text() for t in time_ax.get_legend().get_texts()] == ["naive (slope 2.00)", "fused (slope 1.00)"]
    assert memory_ax.get_ylabel() == "peak memory (MiB)"
    assert list(memory_ax.get_lines()[0].get_ydata()) == [8 * n**2 / 2**20 for n in (128, 256, 512)]
    fig.savefig(io.BytesIO(), format="png")
    with pytest.raises(ValueError, match="at least one row"):
        plot_bench([])
    with pytest.raises(ValueError, match=r"every variant at every length \[128, 256, 512\], got 'fused' at \[128, "):
        plot_bench(_rows()[:-1])
