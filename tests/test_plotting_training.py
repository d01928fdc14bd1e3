"""Plots of training runs (lesson 08: curves per metric, per-step values recorded outside a History, gradient norm
per layer) and of a trained model's attention (lesson 09: rollout panels, the interactive explorer)."""

import matplotlib.pyplot as plt
import pytest
import torch
from matplotlib.figure import Figure

from attention_lab import plotting
from attention_lab.analysis import attention_rollout
from attention_lab.models.tasks import Reversal
from attention_lab.models.training import History
from attention_lab.models.transformer import TinyTransformer, TransformerConfig


def model(layers=2, heads=2, d_model=12, vocab=7, max_len=9, seed=0):
    torch.manual_seed(seed)
    return TinyTransformer(TransformerConfig(vocab_size=vocab, max_len=max_len, d_model=d_model, num_heads=heads,
                                             num_layers=layers)).eval()


def tokens(b=3, n=6, vocab=7, seed=1):
    return torch.randint(0, vocab, (b, n), generator=torch.Generator().manual_seed(seed))


def _fake(offset=0.0, steps=5):
    return History(step=list(range(steps)), loss=[1.0 + offset - 0.1 * k for k in range(steps)],
                   accuracy=[0.2 * k for k in range(steps)], lr=[0.1] * steps, grad_norm=[1.0] * steps,
                   clipped_grad_norm=[0.5] * steps, weight_norm=[3.0] * steps, seconds=[0.1] * steps,
                   layer_grad_norm={"token_embedding": [0.1] * steps, "layers.0": [0.5] * steps,
                                    "head": [2.0] * steps})


def test_training_curves_figure():
    before = plt.get_fignums()
    fig = plotting.plot_training_curves({"pre-LN": _fake(), "post-LN": [_fake(0.1), _fake(0.2)]},
                                        ("loss", "accuracy", "grad_norm"), title="demo")
    assert isinstance(fig, Figure) and plt.get_fignums() == before
    loss_ax, acc_ax, grad_ax = fig.axes
    assert loss_ax.get_xlabel() == "training step" and loss_ax.get_ylabel() == "loss (cross-entropy)"
    assert loss_ax.get_yscale() == "log" and acc_ax.get_yscale() == "linear"
    assert len(loss_ax.lines) == 3  # one run + two seeds of the other
    assert [t.get_text() for t in loss_ax.get_legend().get_texts()] == ["pre-LN", "post-LN"]
    assert loss_ax.lines[1].get_color() == loss_ax.lines[2].get_color() != loss_ax.lines[0].get_color()
    single = plotting.plot_metric(_fake(), "weight_norm")
    assert single.axes[0].get_legend() is None and single.axes[0].get_ylabel() == "weight norm (matrices)"
    with pytest.raises(ValueError, match=r"plot_metric\(\): metric must be one of .*got 'speed'"):
        plotting.plot_metric(_fake(), "speed")
    with pytest.raises(TypeError, match=r"plot_metric\(\): expected a History"):
        plotting.plot_metric([1, 2], "loss")
    with pytest.raises(ValueError, match=r"expected one Axes per metric \(2\), got 1"):
        plotting.plot_training_curves(_fake(), ax=[loss_ax])


def test_layer_grad_norm_bars():
    fig = plotting.plot_layer_grad_norms({"a": _fake(), "b": [_fake(), _fake()]}, first=3)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["token embedding", "layers.0", "head"]
    heights = [p.get_height() for p in ax.patches]
    assert heights == pytest.approx([0.1, 0.5, 2.0, 0.1, 0.5, 2.0])
    assert ax.get_ylabel() == "mean gradient norm, first 3 steps"
    with pytest.raises(ValueError, match=r"first must be >= 1, got first=0"):
        plotting.plot_layer_grad_norms(_fake(), first=0)


def test_plot_rollout_panels():
    m = model(layers=2)
    _, attention = m(tokens(b=1, n=5), return_attention=True)
    fig = plotting.plot_rollout(attention, list("abcde"), title="demo")
    panels = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
    assert [ax.get_title() for ax in panels] == ["layer 0 (mean of heads)", "layer 1 (mean of heads)",
                                                 "rollout (residual 0.5)"]  # counted from 0, like attention[k]
    assert [t.get_text() for t in panels[0].get_xticklabels()] == list("abcde")
    assert len(fig.axes) == 4  # three panels and one shared colorbar
    rollout = attention_rollout(attention)[0]
    assert torch.allclose(torch.tensor(panels[2].images[0].get_array()), rollout, atol=1e-6)
    with pytest.raises(ValueError, match=r"plot_rollout\(\): expected attention of shape \(layers, h, i, j\)"):
        plotting.plot_rollout(attention[0, 0, 0])


def test_attention_explorer_builds_and_redraws(capsys):
    pytest.importorskip("ipywidgets")
    task = Reversal(seq_len=5, n_symbols=7)
    m = model(max_len=5)
    view = plotting.attention_explorer(m, task, torch.tensor([1, 2, 3, 4, 5]), layer=1, head=0)
    (layer_slider, head_slider), text, out = view.children[0].children, view.children[1], view.children[2]
    # counted from 0, like attention[layer, b, head]: the sliders start where the caller asked
    assert (layer_slider.value, layer_slider.min, layer_slider.max) == (1, 0, 1)
    assert (head_slider.value, head_slider.min, head_slider.max) == (0, 0, 1)
    assert text.value == "1 2 3 4 5"
    first = capsys.readouterr().out  # outside a kernel the Output widget lets prints through
    assert "input  1 2 3 4 5\noutput " in first and "Figure" in first
    text.value = "1 2 x"  # a bad input is reported in the view, not raised
    assert "expected 5 whole numbers separated by spaces, got '1 2 x'" in capsys.readouterr().out
    text.value = "1 2 3"
    assert "expected 5 numbers from 0 to 6, got 3 numbers" in capsys.readouterr().out
    text.value = "6 5 4 3 2"
    head_slider.value = 1
    assert "input  6 5 4 3 2" in capsys.readouterr().out and out is view.children[2]
    with pytest.raises(ValueError, match=r"attention_explorer\(\): layer must be in \[0, 2\)"):
        plotting.attention_explorer(m, task, torch.tensor([1, 2, 3, 4, 5]), layer=2)
    with pytest.raises(ValueError, match=r"expected tokens of shape \(i,\)"):
        plotting.attention_explorer(m, task, torch.tensor([[1, 2, 3, 4, 5]]))


def test_attention_explorer_titles_and_ticks_count_from_zero_and_name_the_token(monkeypatch):
    pytest.importorskip("ipywidgets")
    import IPython.display

    drawn = []  # what the view displays: the figure of one layer and head
    monkeypatch.setattr(IPython.display, "display", lambda figure: drawn.append(figure))
    task = Reversal(seq_len=5, n_symbols=7)
    m = model(max_len=5)
    tokens = torch.tensor([3, 1, 4, 1, 5])  # the digit 1 twice: only the position tells the two apart
    view = plotting.attention_explorer(m, task, tokens, layer=1, head=1)
    _, attention = m(tokens[None], return_attention=True)

    def shown(figure):
        ax = figure.axes[0]
        return (ax.get_title(), [t.get_text() for t in ax.get_yticklabels()],
                [t.get_text() for t in ax.get_xticklabels()], torch.tensor(ax.images[0].get_array()))

    title, rows, cols, weights = shown(drawn[-1])
    assert title == "layer 1, head 1"
    assert rows == cols == ["0:3", "1:1", "2:4", "3:1", "4:5"]
    assert torch.allclose(weights, attention[1, 0, 1])
    view.children[0].children[0].value = 0  # the layer slider
    title, _, _, weights = shown(drawn[-1])
    assert title == "layer 0, head 1" and torch.allclose(weights, attention[0, 0, 1])


def test_position_labels():
    assert plotting.position_labels(["3", "1", "->1"]) == ["0:3", "1:1", "2:->1"]
    assert plotting.position_labels([]) == []


# ---- plot_steps: per-step values recorded outside a History, drawn the way plot_metric draws one ----

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
