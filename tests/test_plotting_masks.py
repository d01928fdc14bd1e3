"""plot_mask, plot_positions and plot_rnn_vs_attention. Bool masks are drawn with a two-swatch legend (may attend /
hidden) whose colours are the cells' colours, not a gradient colorbar; block layouts likewise while they are bool;
heads and layers are titled from 0."""

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure

import attention_lab as al
from attention_lab import plotting


def _colorbars(fig):
    return [ax for ax in fig.axes if ax.get_label() == "<colorbar>"]


def _swatches(ax):
    """(label, RGBA) of each legend entry."""
    legend = ax.get_legend()
    assert legend is not None, "expected a legend naming the two values"
    return [(text.get_text(), to_rgba(patch.get_facecolor()))
            for text, patch in zip(legend.get_texts(), legend.get_patches())]


def _cell_colour(ax, row, col):
    image = ax.images[0]
    return to_rgba(image.cmap(image.norm(image.get_array()[row, col])))


@pytest.mark.parametrize("mask", [al.causal_mask(5), al.causal_mask(3, 7), al.sliding_window_mask(60, 4),
                                  al.as_key_mask(al.padding_mask([2, 4]))[0, 0].expand(3, 4)])
def test_plot_mask_has_a_two_swatch_legend_and_no_colorbar(mask):
    fig = plotting.plot_mask(mask)
    ax = fig.axes[0]
    assert _colorbars(fig) == [] and len(fig.axes) == 1
    (allowed_label, allowed_rgba), (hidden_label, hidden_rgba) = _swatches(ax)
    assert (allowed_label, hidden_label) == ("may attend", "hidden")
    true_cell = tuple(torch.nonzero(mask)[0].tolist())
    false_cell = tuple(torch.nonzero(~mask)[0].tolist())
    assert np.allclose(_cell_colour(ax, *true_cell), allowed_rgba)
    assert np.allclose(_cell_colour(ax, *false_cell), hidden_rgba)
    assert allowed_rgba != hidden_rgba


def test_plot_mask_legend_sits_beside_the_grid_when_drawn_into_given_axes():
    fig, axes = plt.subplots(1, 2, layout="constrained")
    try:
        for ax, mask in zip(axes, (al.causal_mask(4), al.sliding_window_mask(4, 2))):
            out = plotting.plot_mask(mask, ax=ax, title="t")
            assert out is fig
        assert len(fig.axes) == 2 and _colorbars(fig) == []
        assert all([label for label, _ in _swatches(ax)] == ["may attend", "hidden"] for ax in axes)
        fig.canvas.draw()
        for ax in axes:  # the legend lies to the right of its grid, not over it
            assert ax.get_legend().get_window_extent().x0 >= ax.get_window_extent().x1
    finally:
        plt.close(fig)


def test_plot_block_layout_is_a_legend_while_bool_and_a_colorbar_for_shares():
    layout = al.BlockLayout.sliding_window(16, 1, causal=True)
    dense = plotting.plot_block_layout(layout, 64)
    assert _colorbars(dense) == [] and len(dense.axes) == 1
    labels = [label for label, _ in _swatches(dense.axes[0])]
    assert labels == ["computed:\nmay attend", "skipped:\nhidden"]
    blocks = plotting.plot_block_layout(layout, 1024)  # shares of causal diagonal blocks lie between 0 and 1
    assert len(_colorbars(blocks)) == 1 and blocks.axes[0].get_legend() is None
    assert _colorbars(blocks)[0].get_ylabel() == "share of pairs computed"
    whole_blocks = plotting.plot_block_layout(al.BlockLayout.local(64), 1024)  # every block all in or all out
    assert _colorbars(whole_blocks) == [] and whole_blocks.axes[0].get_legend() is not None


def test_plot_block_layouts_panels_each_carry_the_legend():
    fig = plotting.plot_block_layouts({"local": al.BlockLayout.local(8), "causal": al.BlockLayout.causal(8)}, 32)
    panels = [ax for ax in fig.axes if ax.get_visible() and ax.images]
    assert len(panels) == 2 and _colorbars(fig) == []
    assert all(ax.get_legend() is not None for ax in panels)


def test_plot_heads_counts_heads_and_layers_from_zero():
    fig = plotting.plot_heads(torch.softmax(torch.rand(3, 4, 4), -1), list("abcd"))
    titles = [ax.get_title() for ax in fig.axes if ax.images and ax.get_label() != "<colorbar>"]
    assert titles == ["head 0", "head 1", "head 2"]
    layered = plotting.plot_heads(torch.softmax(torch.rand(2, 2, 3, 3), -1))
    panels = [ax for ax in layered.axes if ax.images and ax.get_label() != "<colorbar>"]
    assert [ax.get_ylabel() for ax in panels[::2]] == ["layer 0\nquery i", "layer 1\nquery i"]
    fig, axes = plt.subplots(1, 4)
    try:
        plotting.plot_heads(torch.softmax(torch.rand(2, 2, 3, 3), -1), ax=axes)
        assert [ax.get_title() for ax in axes] == ["layer 0, head 0", "layer 0, head 1", "layer 1, head 0",
                                                   "layer 1, head 1"]
    finally:
        plt.close(fig)


def test_plot_mask_every_mask_of_the_lesson():
    masks = [al.causal_mask(4, 6), al.padding_mask([3, 1]), al.sliding_window_mask(50, 3),
             al.expand_mask(al.causal_mask(3), 1, 1), al.as_key_mask(al.padding_mask([2]))]
    for m in masks:
        fig = plotting.plot_mask(m)
        assert isinstance(fig, Figure) and len(fig.axes) == 1  # the grid, with a legend instead of a colorbar
    ax = fig.axes[0]
    assert ax.get_xlabel() == "key position j" and ax.get_ylabel() == "query position i"
    fig = plotting.plot_mask(al.causal_mask(3), ["a", "b", "c"], ["a", "b", "c"])
    assert fig.axes[0].get_title() == "6 of 9 (query, key) pairs allowed"
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == ["may attend", "hidden"]
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["a", "b", "c"]


def test_plot_mask_refuses_non_bool_and_batched():
    with pytest.raises(TypeError, match="plot_mask\\(\\): expected a bool mask.*torch.int64"):
        plotting.plot_mask(al.causal_mask(3).long())
    with pytest.raises(ValueError, match="plot_mask\\(\\): expected a 2-D"):
        plotting.plot_mask(al.expand_mask(al.causal_mask(3), 2, 2))


def test_plot_positions_and_rnn_vs_attention():
    fig = plotting.plot_positions(al.sinusoidal_positions(32, 16))
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    assert fig.axes[0].get_ylabel() == "position p"
    fig = plotting.plot_rnn_vs_attention([16, 32, 64], [1e-3, 2e-3, 4e-3], [1e-4, 1.5e-4, 3e-4])
    ax = fig.axes[0]
    assert len(ax.get_lines()) == 2 and ax.get_xlabel() == "sequence length n"
    assert ax.get_lines()[0].get_ydata()[0] == pytest.approx(1.0)  # drawn in ms
    with pytest.raises(ValueError, match="plot_rnn_vs_attention\\(\\): expected one time per length"):
        plotting.plot_rnn_vs_attention([16, 32], [1.0], [1.0, 2.0])
