"""The lesson 10 figures: Figures come back labelled, nothing is registered with pyplot, bad input is named."""

import io

import matplotlib.pyplot as plt
import pytest
import torch
from matplotlib.figure import Figure

from attention_lab import plotting


def renders(fig):
    fig.savefig(io.BytesIO(), format="png")
    return True


def test_attention_family_one_panel_per_method_and_a_shared_colorbar():
    before = plt.get_fignums()
    mats = {name: torch.softmax(torch.randn(6, 6), -1) for name in ("a", "b", "c")}
    fig = plotting.plot_attention_family(mats, ncols=2)
    assert isinstance(fig, Figure) and plt.get_fignums() == before
    titled = [ax.get_title() for ax in fig.axes if ax.images]
    assert titled == ["a", "b", "c"]
    assert sum(ax.get_label() == "<colorbar>" for ax in fig.axes) == 1 and renders(fig)
    with pytest.raises(ValueError, match=r"plot_attention_family\(\): expected at least one matrix"):
        plotting.plot_attention_family({})


def test_budget_errors_lines_and_dashed_baselines():
    fig = plotting.plot_budget_errors({"top-k": ([0.25, 0.5, 1.0], [0.3, 0.1, 0.0])},
                                      {"top-k": ([0.25, 0.5, 1.0], [0.5, 0.2, 0.0])})
    ax = fig.axes[0]
    assert [line.get_linestyle() for line in ax.lines] == ["-", "--"]
    assert ax.get_ylabel() == "relative error of the output" and renders(fig)
    with pytest.raises(ValueError, match=r"'x' has 2 budgets and 1 errors"):
        plotting.plot_budget_errors({"x": ([1, 2], [0.1])})


def test_ratio_sweep_two_panels_from_csv_text():
    rows = [{"n": n, "variant": v, "speed_vs_sdpa": str(s), "memory_vs_sdpa": "0.5"}
            for n in (1024, 2048) for v, s in (("SDPA (dense)", 1.0), ("linear", 3.0))]
    fig = plotting.plot_ratio_sweep(rows, title="machine X")
    left, right = fig.axes
    assert len(left.lines) == 2 and left.get_xlabel() == "sequence length n"  # linear, and the line at 1
    assert fig._suptitle.get_text() == "machine X" and renders(fig)


def test_lra_bubbles_one_panel_per_title_and_needs_the_reference():
    rows = [{"attention": a, "accuracy": acc, "steps_per_s": s, "peak_bytes": m}
            for a, acc, s, m in (("softmax", 0.99, 2.0, 100), ("linear", 0.4, 8.0, 20))]
    fig = plotting.plot_lra_bubbles({"recall": rows, "listops": rows})
    assert len(fig.axes) == 2 and [len(ax.collections) for ax in fig.axes] == [2, 2] and renders(fig)
    with pytest.raises(ValueError, match=r"must include the reference attention 'softmax'"):
        plotting.plot_lra_bubbles({"x": rows[1:]})


def test_lra_bubbles_have_a_key_for_names_and_sizes_and_no_labels_on_the_bubbles():
    rows = [{"attention": a, "accuracy": 0.5, "steps_per_s": 2.0, "peak_bytes": m}
            for a, m in (("softmax", 100), ("linear", 20), ("performer", 400))]
    fig = plotting.plot_lra_bubbles({"recall": rows})
    labels = [text.get_text() for legend in fig.legends for text in legend.get_texts()]
    assert labels[:3] == ["softmax", "linear", "performer"]
    assert labels[3:] == [f"{f}x softmax's peak memory" for f in (1, 2, 4)]
    assert not fig.axes[0].texts and renders(fig)  # the names sit in the key, not over bubbles at the same spot


def test_budget_errors_draw_an_exact_budget_on_the_floor_not_at_its_rounding_error():
    fig = plotting.plot_budget_errors({"top-k": ([0.25, 0.5, 1.0], [0.3, 0.1, 2e-7])})
    line = fig.axes[0].lines[0]
    assert line.get_ydata()[-1] == pytest.approx(1e-3) and fig.axes[0].get_ylim()[0] > 1e-4
