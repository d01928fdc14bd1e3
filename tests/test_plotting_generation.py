"""Lesson 11's figures: what they draw, and clear errors for mismatched inputs."""

import pytest
import torch
from matplotlib.figure import Figure

from attention_lab import plotting


def test_rope_rotation_draws_one_panel_per_pair_with_the_score_in_its_title():
    q, k = torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0])
    fig = plotting.plot_rope_rotation(q, k, 0.5, [(3, 1), (6, 4)])
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    titles = [ax.get_title() for ax in fig.axes]
    assert titles[0].split("q.k = ")[1] == titles[1].split("q.k = ")[1]  # same distance, same score
    with pytest.raises(ValueError, match=r"q must be a tensor of shape \(2,\), one feature pair, got \(3,\)"):
        plotting.plot_rope_rotation(torch.ones(3), k, 0.5, [(1, 0)])
    with pytest.raises(ValueError, match=r"pairs must name at least one"):
        plotting.plot_rope_rotation(q, k, 0.5, [])


def test_generation_speed_plots_tokens_per_second_with_the_benchmark_dashed():
    fig = plotting.plot_generation_speed([64, 128], {"recompute": [0.01, 0.02], "cache": [0.001, 0.001]},
                                         benchmark={"recompute": ([128, 256], [0.02, 0.05])}, benchmark_label="file")
    lines = fig.axes[0].get_lines()
    assert len(lines) == 3 and list(lines[0].get_ydata()) == [100.0, 50.0]
    assert lines[2].get_linestyle() == "--" and "file" in lines[2].get_label()
    with pytest.raises(ValueError, match=r"expected one time per length for 'cache', got 1 for 2 lengths"):
        plotting.plot_generation_speed([64, 128], {"cache": [0.1]})


def test_cache_memory_plots_kib_per_cache():
    fig = plotting.plot_cache_memory([8, 32], {"full": [2048, 8192], "sliding": [4096, 4096]})
    assert [list(line.get_ydata()) for line in fig.axes[0].get_lines()] == [[2.0, 8.0], [4.0, 4.0]]
    with pytest.raises(ValueError, match=r"expected one value per length for 'full', got 1 for 2 lengths"):
        plotting.plot_cache_memory([8, 32], {"full": [1]})
