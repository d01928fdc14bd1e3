"""What a trained model attends to (lesson 09): each layer's attention beside the rollout through all layers, and
the interactive explorer (sliders for layer and head, a text box for the input)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from .._validation import check_number, fail
from ..analysis import attention_rollout
from ._base import WEIGHTS_CMAP, _set_token_ticks
from ._fonts import Figure
from ._weights import plot_attention


def plot_rollout(
    attention: torch.Tensor,
    labels: Sequence[str] | None = None,
    *,
    residual: float = 0.5,
    title: str | None = None,
) -> Figure:
    """Each layer's head-averaged attention, then the rollout through all layers, side by side.

    ``attention`` is one sequence's weights from ``model(tokens, return_attention=True)`` (``[:, 0]`` of a
    batch). The panels are titled ``layer 0``, ``layer 1``, ... (counted from 0, like the tensor's first axis);
    the last panel is :func:`attention_lab.analysis.attention_rollout` with ``residual``.

    Shape: attention ``(layers, h, i, j)`` or ``(layers, 1, h, i, j)``.
    """
    fn = "plot_rollout"
    if not isinstance(attention, torch.Tensor):
        raise TypeError(f"{fn}(): expected a torch.Tensor, got {type(attention).__name__}")
    check_number(fn, "residual", residual, low=0, high=1, hint="it is the share of the residual path")
    attention = attention.detach().to("cpu").float()
    if attention.dim() == 5 and attention.shape[1] == 1:
        attention = attention[:, 0]  # (layers, h, i, j)
    if attention.dim() != 4:
        raise ValueError(f"{fn}(): expected attention of shape (layers, h, i, j) for one sequence, got shape "
                         f"{tuple(attention.shape)}; pass attention[:, 0] for the first sequence of a batch")
    rollout = attention_rollout(attention[:, None], residual=residual)[0]  # (i, j)
    panels = [(f"layer {k} (mean of heads)", a.mean(0)) for k, a in enumerate(attention)]
    panels.append((f"rollout (residual {residual:g})", rollout))
    n = attention.shape[-1]
    side = min(3.4, 1.6 + 0.12 * n)
    fig = Figure(figsize=(side * len(panels) + 0.8, side + 0.5), layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for axis, (name, matrix) in zip(axes, panels):
        image = axis.imshow(matrix.numpy(), cmap=WEIGHTS_CMAP, vmin=0.0, vmax=1.0, interpolation="nearest")
        _set_token_ticks(fn, axis, "x", n, labels)
        _set_token_ticks(fn, axis, "y", n, labels)
        axis.set_xlabel("key position j")
        axis.set_title(name, fontsize=9)
    axes[0].set_ylabel("query position i")
    fig.colorbar(image, ax=list(axes), label="attention weight", shrink=0.8)
    if title:
        fig.suptitle(title)
    return fig


def _parse_tokens(text: str, n_symbols: int, seq_len: int) -> torch.Tensor:
    parts = text.replace(",", " ").split()
    try:
        ids = [int(p) for p in parts]
    except ValueError:
        raise ValueError(f"expected {seq_len} whole numbers separated by spaces, got {text!r}") from None
    if len(ids) != seq_len or not all(0 <= t < n_symbols for t in ids):
        raise ValueError(f"expected {seq_len} numbers from 0 to {n_symbols - 1}, got {len(ids)} numbers: {text!r}")
    return torch.tensor(ids)


def position_labels(labels: Sequence[str]) -> list[str]:
    """Tick labels that name the position and the token, ``["0:3", "1:1", "2:4", "3:1"]``: a digit can appear twice.

    Shape: ``i`` labels in, ``i`` labels out.
    """
    if isinstance(labels, str) or not isinstance(labels, Sequence):
        fail("position_labels", f"labels must be a sequence of token labels, got {type(labels).__name__} "
                                f"{labels!r}; pass e.g. task.decode(tokens) or [str(t) for t in tokens]", TypeError)
    return [f"{position}:{label}" for position, label in enumerate(labels)]


def attention_explorer(model: torch.nn.Module, task: object, tokens: torch.Tensor, *, layer: int = 0,
                       head: int = 0) -> object:
    """An ipywidgets view of a trained model's attention: sliders for layer and head, a text box for the input.

    Layers and heads are counted from 0, like the axes of the attention tensor (``attention[layer, b, head]``).
    Typing a new sequence (numbers separated by spaces) re-runs the model and redraws; the model's output is
    printed above the heatmap, whose axes name each position and its token (``"0:3"``). Needs a running kernel
    with ipywidgets; without one, show a static figure too (e.g. :func:`plot_heads`). Returns the widget
    (display it, or make it the cell's last value).

    Shape: tokens ``(i,)``, one sequence of ``task.seq_len`` symbols.
    """
    import ipywidgets as widgets
    from IPython.display import display

    fn = "attention_explorer"
    if not isinstance(tokens, torch.Tensor) or tokens.dim() != 1:
        raise ValueError(f"{fn}(): expected tokens of shape (i,) (one sequence), got "
                         f"{tuple(tokens.shape) if isinstance(tokens, torch.Tensor) else type(tokens).__name__}")
    n_layers, n_heads = model.num_layers, model.num_heads
    if not (0 <= layer < n_layers and 0 <= head < n_heads):
        raise ValueError(f"{fn}(): layer must be in [0, {n_layers}) and head in [0, {n_heads}) (counted from 0), "
                         f"got layer={layer}, head={head}")
    style = {"description_width": "60px"}
    layer_slider = widgets.IntSlider(value=layer, min=0, max=n_layers - 1, description="layer", style=style)
    head_slider = widgets.IntSlider(value=head, min=0, max=n_heads - 1, description="head", style=style)
    text = widgets.Text(value=" ".join(str(t) for t in tokens.tolist()), description="input", style=style,
                        continuous_update=False, layout=widgets.Layout(width="420px"))
    out = widgets.Output()

    def redraw(_change: object = None) -> None:
        with out:
            out.clear_output(wait=True)
            try:
                seq = _parse_tokens(text.value, task.n_symbols, task.seq_len)
            except ValueError as error:
                print(error)
                return
            with torch.no_grad():
                logits, attention = model(seq[None].to(next(model.parameters()).device), return_attention=True)
            labels = task.token_labels(seq)
            prediction = " ".join(str(t) for t in logits.argmax(-1)[0].tolist())
            print(f"input  {' '.join(labels)}\noutput {prediction}")
            at_layer, at_head = layer_slider.value, head_slider.value
            ticks = position_labels(labels)
            display(plot_attention(attention[at_layer, 0, at_head], ticks, ticks,
                                   title=f"layer {at_layer}, head {at_head}"))

    for control in (layer_slider, head_slider, text):
        control.observe(redraw, names="value")
    redraw()
    return widgets.VBox([widgets.HBox([layer_slider, head_slider]), text, out])
