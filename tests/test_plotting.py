"""Plot functions of attention weights, heads and block layouts: a Figure comes back, with labels and a colorbar, and
no global state is touched (neither pyplot's figures nor IPython's display formatters)."""

import io
import os
import subprocess
import sys
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
import torch
from matplotlib.figure import Figure

from attention_lab import BlockLayout, plotting


def colorbars(fig):
    return [ax for ax in fig.axes if ax.get_label() == "<colorbar>"]


def test_plot_attention_returns_labelled_figure():
    weights = torch.softmax(torch.randn(5, 5), -1)
    tokens = ["the", "cat", "sat", "on", "mats"]
    before = plt.get_fignums()
    fig = plotting.plot_attention(weights, tokens, tokens, title="demo")
    assert isinstance(fig, Figure)
    assert plt.get_fignums() == before, "the library must not register figures with pyplot"
    ax = fig.axes[0]
    assert ax.get_xlabel() == "key position j" and ax.get_ylabel() == "query position i"
    assert [t.get_text() for t in ax.get_xticklabels()] == tokens
    assert [t.get_text() for t in ax.get_yticklabels()] == tokens
    assert ax.get_title() == "demo"
    assert len(colorbars(fig)) == 1
    assert len(ax.texts) == 25, "small matrices are annotated with their weights"


def test_plot_attention_into_given_axes():
    fig, (left, right) = plt.subplots(1, 2)
    try:
        out = plotting.plot_attention(torch.rand(3, 4), ax=right)
        assert out is fig
        assert right.images and not left.images
    finally:
        plt.close(fig)


@pytest.mark.parametrize("n", [5, 64, 512])
def test_plot_attention_readable_up_to_512_tokens(n):
    fig = plotting.plot_attention(torch.rand(1, 1, n, n))
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_xticklabels()]
    if n <= 40:  # every position labelled
        assert labels == [str(p) for p in range(n)]
    else:  # every k-th position, at most 40 labels
        assert 4 <= len(labels) <= 40 and labels[:2] == ["0", str(n // 8)]
    assert len(ax.texts) == (n * n if n <= 8 else 0), "only small matrices carry their weights as text"
    fig.savefig(io.BytesIO(), format="png")  # renders without error


def test_plot_attention_bad_input():
    with pytest.raises(ValueError, match=r"plot_attention\(\): expected a 2-D \(i, j\) matrix, got shape \(2, 3, 4\)"):
        plotting.plot_attention(torch.rand(2, 3, 4))
    with pytest.raises(ValueError, match=r"labels must have one entry per position, got 2 labels for 3"):
        plotting.plot_attention(torch.rand(3, 3), ["a", "b"])
    with pytest.raises(TypeError, match=r"expected a torch.Tensor, got list"):
        plotting.plot_attention([[1.0]])


@pytest.mark.parametrize("layout", [
    BlockLayout.bigbird(8, neighbours=1, global_blocks=1, random_per_row=2, seed=0),
    BlockLayout.fixed(8, 4, 1),
], ids=["bigbird", "fixed"])
@pytest.mark.parametrize("n", [96, 600])
def test_plot_block_layout_draws_bigbird_and_fixed(layout, n):
    fig = plotting.plot_block_layout(layout, n)
    drawn = fig.axes[0].images[0].get_array()
    expected = layout.to_dense(n) if n <= 512 else layout.block_fill(n)  # pairs, or blocks beyond n = 512
    assert (drawn == expected.float().numpy()).all()
    assert f"sparsity {layout.sparsity(n):.3f}" in fig.axes[0].get_title()


@pytest.mark.parametrize("n", [40, 600])
def test_plot_block_layout(n):
    layout = BlockLayout.sliding_window(32, neighbours=1, causal=True)
    fig = plotting.plot_block_layout(layout, n)
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    assert f"sparsity {layout.sparsity(n):.3f}" in ax.get_title()
    assert ax.get_xlabel().startswith("key") and ax.get_ylabel().startswith("query")
    assert len(fig.axes) == (1 if n <= 512 else 2)  # pairs: a two-swatch legend; shares of blocks: a colorbar
    assert ax.images[0].get_array().shape == ((n, n) if n <= 512 else (layout.n_blocks(n),) * 2)


def test_plot_block_layout_bad_input():
    with pytest.raises(TypeError, match=r"plot_block_layout\(\): expected an attention_lab.BlockLayout"):
        plotting.plot_block_layout(torch.ones(4, 4, dtype=torch.bool), 4)
    with pytest.raises(ValueError, match=r"n must be >= 1, got n=0"):
        plotting.plot_block_layout(BlockLayout.local(4), 0)


def test_plot_block_layouts_grid():
    layouts_by_name = {"local": BlockLayout.local(8), "causal": BlockLayout.causal(8),
                       "strided": BlockLayout.strided(8, 2)}
    fig = plotting.plot_block_layouts(layouts_by_name, 64, columns=2)
    panels = [ax for ax in fig.axes if ax.get_visible() and ax.images]
    assert len(panels) == 3
    assert panels[1].get_title() == f"causal\nsparsity {BlockLayout.causal(8).sparsity(64):.3f}"
    with pytest.raises(ValueError, match="at least one layout"):
        plotting.plot_block_layouts({}, 64)


def _panels(fig):
    return [ax for ax in fig.axes if ax.images and ax.get_label() != "<colorbar>"]


def test_plot_heads_grid_with_shared_scale_and_one_colorbar():
    tokens = ["the", "cat", "sat", "on", "mat"]
    weights = torch.softmax(torch.randn(1, 4, 5, 5), dim=-1)  # (b=1, h, i, j) as the module returns it
    before = plt.get_fignums()
    fig = plotting.plot_heads(weights, tokens, title="four heads")
    assert isinstance(fig, Figure) and plt.get_fignums() == before
    panels = _panels(fig)
    assert [ax.get_title() for ax in panels] == ["head 0", "head 1", "head 2", "head 3"]
    assert len(colorbars(fig)) == 1
    limits = {ax.images[0].get_clim() for ax in panels}
    assert limits == {(0.0, float(weights.max()))}, "every panel must share one colour scale"
    for head, ax in enumerate(panels):
        torch.testing.assert_close(torch.as_tensor(ax.images[0].get_array()), weights[0, head])
    assert [t.get_text() for t in panels[0].get_yticklabels()] == tokens
    assert [t.get_text() for t in panels[3].get_xticklabels()] == tokens
    assert panels[0].get_ylabel() == "query i" and panels[0].get_xlabel() == "key j"
    assert fig._suptitle.get_text() == "four heads"
    fig.savefig(io.BytesIO(), format="png")


def test_plot_heads_wraps_rows_and_hides_spare_cells():
    fig = plotting.plot_heads(torch.rand(6, 3, 4), ["a", "b", "c"], ["w", "x", "y", "z"])
    panels = _panels(fig)
    assert len(panels) == 6 and len(fig.axes) == 8 + 1  # 2 x 4 grid, 2 spare cells, 1 colorbar
    assert [t.get_text() for t in panels[5].get_xticklabels()] == ["w", "x", "y", "z"]
    assert not any(ax.axison for ax in fig.axes if not ax.images and ax.get_label() != "<colorbar>")


def test_plot_heads_layers_by_heads():
    layers = [torch.rand(1, 3, 4, 4), torch.rand(1, 3, 4, 4)]  # per-layer weights of one sentence
    for weights in (layers, torch.stack([w[0] for w in layers])):
        fig = plotting.plot_heads(weights, list("abcd"))
        panels = _panels(fig)
        assert len(panels) == 6 and len(colorbars(fig)) == 1
        assert panels[0].get_ylabel() == "layer 0\nquery i" and panels[3].get_ylabel() == "layer 1\nquery i"
        assert [ax.get_title() for ax in panels[:3]] == ["head 0", "head 1", "head 2"]
        torch.testing.assert_close(torch.as_tensor(panels[4].images[0].get_array()), layers[1][0, 1])
        assert len({ax.images[0].get_clim() for ax in panels}) == 1


def test_plot_heads_into_given_axes():
    fig, axes = plt.subplots(1, 2)
    try:
        out = plotting.plot_heads(torch.rand(2, 3, 3), ax=axes)
        assert out is fig and all(ax.images for ax in axes)
        with pytest.raises(ValueError, match=r"ax must hold one Axes per panel, got 2 Axes for 1 layer\(s\) x "
                                             r"3 head\(s\) = 3 panels"):
            plotting.plot_heads(torch.rand(3, 3, 3), ax=axes)
    finally:
        plt.close(fig)


def test_plot_heads_bad_input():
    with pytest.raises(ValueError, match=r"plot_heads\(\): expected weights of shape \(h, i, j\) or "
                                         r"\(layers, h, i, j\), got shape \(4, 4\)"):
        plotting.plot_heads(torch.rand(4, 4))
    with pytest.raises(ValueError, match=r"got shape \(2, 2, 3, 4, 4\); for a batch"):
        plotting.plot_heads(torch.rand(2, 2, 3, 4, 4))
    with pytest.raises(TypeError, match=r"expected floating-point attention weights, got dtype torch.bool"):
        plotting.plot_heads(torch.ones(2, 3, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"labels must have one entry per position, got 2 labels for 3"):
        plotting.plot_heads(torch.rand(2, 3, 3), ["a", "b"])
    with pytest.raises(ValueError, match=r"all of one shape"):
        plotting.plot_heads([torch.rand(2, 3, 3), torch.rand(3, 3, 3)])
    with pytest.raises(TypeError, match=r"expected a torch.Tensor of weights, got ndarray"):
        plotting.plot_heads(torch.rand(2, 3, 3).numpy())
    with pytest.raises(ValueError, match=r"ncols must be >= 1, got ncols=0"):
        plotting.plot_heads(torch.rand(2, 3, 3), ncols=0)


_DISPLAY_PROBE = """
import torch
from IPython.core.interactiveshell import InteractiveShell
from matplotlib.figure import Figure



class KernelLikeShell(InteractiveShell):
    def enable_gui(self, gui=None):  # a Jupyter kernel has no GUI loop to start for the inline backend
        pass


shell = KernelLikeShell.instance()


def printers():
    return {mime: (dict(f.type_printers), dict(f.deferred_printers))
            for mime, f in shell.display_formatter.formatters.items()}


before = printers()
from attention_lab import plotting

print("untouched" if printers() == before else "changed")
fig = plotting.plot_mask(torch.ones(3, 3, dtype=torch.bool))
print(sorted(shell.display_formatter.format(fig)[0]))
shell.run_line_magic("matplotlib", "inline")  # what every lesson's setup cell does
print(sorted(shell.display_formatter.format(fig)[0]))
"""


@pytest.mark.slow
def test_importing_plotting_leaves_ipython_display_alone():
    # a fresh interpreter: in this one the package is imported already
    result = subprocess.run([sys.executable, "-c", _DISPLAY_PROBE], capture_output=True, text=True, check=True,
                            env={**os.environ, "PYTHONPATH": str(Path(plotting.__file__).parents[2])})
    untouched, plain, inline = result.stdout.splitlines()
    assert untouched == "untouched", "importing attention_lab.plotting must not register display formatters"
    assert plain == "['text/plain']"
    assert inline == "['image/png', 'text/plain']", "after %matplotlib inline a returned Figure is drawn"
