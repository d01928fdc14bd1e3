"""Figures for the lessons. The only module that imports matplotlib.

Every function takes an optional ``ax=``, returns the ``Figure`` and never calls ``plt.show()`` or touches global
matplotlib state: without ``ax`` it builds a standalone ``matplotlib.figure.Figure`` (not registered with pyplot),
which Jupyter draws when it is the cell's last value once the inline backend is on (``%matplotlib inline``, the
first line of every lesson's setup cell). Importing this package changes no display setting. Colormaps are
perceptually uniform and colorblind-safe (viridis for weights, cividis for masks).
"""

from ._base import MASK_CMAP, WEIGHTS_CMAP  # noqa: F401 (colormap names for callers)
from ._blocks import plot_block_layout, plot_block_layouts
from ._cost import plot_bench, plot_memory_vs_length, plot_time_vs_length
from ._efficient import plot_attention_family, plot_budget_errors, plot_lra_bubbles, plot_ratio_sweep
from ._generation import plot_cache_memory, plot_generation_speed, plot_rope_rotation
from ._masks import plot_mask, plot_positions, plot_rnn_vs_attention
from ._trained_attention import attention_explorer, plot_rollout, position_labels
from ._training import plot_layer_grad_norms, plot_metric, plot_steps, plot_training_curves
from ._weights import plot_attention, plot_heads

__all__ = [
    "attention_explorer",
    "plot_attention",
    "plot_bench",
    "plot_block_layout",
    "plot_block_layouts",
    "plot_heads",
    "plot_layer_grad_norms",
    "plot_mask",
    "plot_memory_vs_length",
    "plot_metric",
    "plot_positions",
    "plot_rnn_vs_attention",
    "plot_rollout",
    "plot_steps",
    "plot_time_vs_length",
    "plot_training_curves",
    "plot_attention_family",
    "plot_budget_errors",
    "plot_lra_bubbles",
    "plot_ratio_sweep",
    "plot_cache_memory",
    "plot_generation_speed",
    "plot_rope_rotation",
    "position_labels",
]
