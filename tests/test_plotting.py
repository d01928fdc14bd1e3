"""Plot functions: a Figure comes back, with labels and a colorbar, and no global matplotlib state is touched."""

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
    assert len(ax.get_xticks()) <= 40
    assert not ax.texts or n <= 8
    fig.savefig(__import__("io").BytesIO(), format="png")  # renders without error


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
