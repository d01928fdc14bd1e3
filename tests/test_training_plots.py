"""plot_steps draws per-step values recorded outside a History (a forward hook, say) the way plot_metric draws one."""

import pytest
import torch

from attention_lab import plotting
from attention_lab.models.training import History


def _history(values):
    steps = len(values)
    return History(step=list(range(steps)), loss=list(values), accuracy=[0.5] * steps, lr=[0.1] * steps,
                   grad_norm=[1.0] * steps, clipped_grad_norm=[1.0] * steps, weight_norm=[3.0] * steps,
                   seconds=[0.1] * steps, layer_grad_norm={})


def test_plot_steps_draws_one_colour_per_run_and_one_line_per_seed():
    fig = plotting.plot_steps({"post-LN": [[1.0, 0.5, 0.1], [1.0, 0.4, 0.2]], "pre-LN": [0.9, 0.8, 0.7]},
                              ylabel="input signal", title="demo")
    ax = fig.axes[0]
    assert ax.get_ylabel() == "input signal" and ax.get_xlabel() == "training step" and ax.get_title() == "demo"
    assert len(ax.lines) == 3
    assert ax.lines[0].get_color() == ax.lines[1].get_color() != ax.lines[2].get_color()
    assert list(ax.lines[2].get_ydata()) == [0.9, 0.8, 0.7] and list(ax.lines[2].get_xdata()) == [0, 1, 2]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["post-LN", "pre-LN"]
    assert ax.get_yscale() == "linear"
    assert plotting.plot_steps({"a": [1.0, 0.1]}, ylabel="x", log=True).axes[0].get_yscale() == "log"


def test_plot_steps_draws_what_plot_metric_draws_for_the_same_numbers():
    values = [2.0, 1.0, 0.5, 0.25]
    by_metric = plotting.plot_metric({"run a": [_history(values), _history(values[::-1])]}, "loss").axes[0]
    by_steps = plotting.plot_steps({"run a": [values, values[::-1]]}, ylabel="loss", log=True).axes[0]
    for a, b in zip(by_metric.lines, by_steps.lines):
        assert list(a.get_xdata()) == list(b.get_xdata()) and list(a.get_ydata()) == list(b.get_ydata())
        assert (a.get_color(), a.get_linestyle()) == (b.get_color(), b.get_linestyle())


@pytest.mark.parametrize("bad", [{}, [1.0, 2.0], {"a": []}, {"a": ["x", "y"]}, {"a": [[1.0], []]},
                                 {"a": torch.ones(3)}])
def test_plot_steps_rejects_what_it_cannot_draw(bad):
    with pytest.raises(TypeError, match=r"plot_steps\(\): expected"):
        plotting.plot_steps(bad, ylabel="x")
