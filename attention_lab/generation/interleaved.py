"""Local and global layers interleaved (局部与全局层交错): most layers see a window, a few see everything.

A global layer's KV cache grows with the context; a local (sliding-window) layer keeps only its last ``window``
positions however long the context. Gemma 3 (Gemma Team 2025, "Gemma 3 Technical Report", section 2) stacks five
local layers of a 1,024-token window for every global layer, starting with a local one, to keep the KV cache of
long contexts small. Gemma 2 alternated them one to one; GPT-3 alternated dense and banded sparse layers.

:func:`interleaved_windows` writes such a pattern as one window per layer (an int for a local layer, None for a
global one), the form :class:`~attention_lab.models.transformer.TransformerConfig` takes (``windows=``) to train a
stack with it; :func:`interleaved_kv_cache_bytes` is the lessons' cache arithmetic
(:func:`~attention_lab.kv_cache_bytes`, lesson 11) applied layer by layer: a global layer holds ``seq_len``
positions, a local one ``min(seq_len, window)``.

Reference: :func:`attention_lab.reference.interleaved_kv_cache_bytes` (the bytes of the tensors each layer's cache
keeps, counted on the meta device; tested equal) and, for one local layer's attention,
:func:`attention_lab.reference.sliding_window_attention`. How it differs and what that buys: integers only (no
dtype, no tensors), so it tabulates a 27B model at 128k positions at once. The layer order follows the report
(local first) and the period of 6 with the sixth layer global that model loaders read from Gemma 3's configuration
(``sliding_window_pattern``; code that reads it was read, none copied).
"""

from __future__ import annotations

from collections.abc import Sequence

from .._validation import check_positive_int, check_positive_ints, fail
from .cache_size import kv_cache_bytes

__all__ = ["interleaved_kv_cache_bytes", "interleaved_windows", "layer_pattern"]


def interleaved_windows(num_layers: int, *, window: int, local_per_global: int) -> tuple[int | None, ...]:
    """One window per layer: ``local_per_global`` local layers of ``window``, then one global layer (None), repeated.

    Layer l is global when ``(l + 1) % (local_per_global + 1) == 0``: with 5 local per global, layers 5, 11, ...
    A stack whose depth is not a multiple of the group ends with local layers. ``local_per_global=0`` is all global.

    Shape: integers -> a tuple of ``num_layers`` entries, each an int or None.
    """
    fn = "interleaved_windows"
    check_positive_ints(fn, num_layers=num_layers, window=window)
    check_positive_int(fn, "local_per_global", local_per_global, minimum=0)
    group = local_per_global + 1
    return tuple(None if (layer + 1) % group == 0 else window for layer in range(num_layers))


def layer_pattern(windows: Sequence[int | None]) -> str:
    """The windows as letters, "L" for a local layer and "G" for a global one: ``"LLLLLG"``.

    Shape: a sequence of ints or None -> a string of the same length.
    """
    return "".join("G" if window is None else "L" for window in _check_windows("layer_pattern", windows))


def _check_windows(fn: str, windows: object) -> tuple[int | None, ...]:
    if isinstance(windows, (str, bytes)) or not isinstance(windows, Sequence) or not windows:
        fail(fn, f"windows must be a non-empty sequence of one window per layer (an int, or None for a global layer), "
                 f"got {windows!r}; build one with interleaved_windows(num_layers, window=..., local_per_global=...)",
             TypeError)
    for window in windows:
        if window is not None:
            check_positive_int(fn, "windows[...]", window)
    return tuple(windows)


def interleaved_kv_cache_bytes(windows: Sequence[int | None], *, num_kv_heads: int, head_dim: int, seq_len: int,
                               batch_size: int = 1, bytes_per_value: int = 2) -> int:
    """Bytes of the KV caches of a stack whose layer l keeps ``min(seq_len, windows[l])`` positions (a local layer)
    or ``seq_len`` (a global one, ``windows[l]`` None).

    Each layer costs ``kv_cache_bytes(num_layers=1, ...)`` at its own length. Example: Gemma-3-style, 6 layers
    ``interleaved_windows(6, window=1024, local_per_global=5)`` at 32,768 positions hold 5 x 1,024 + 32,768
    positions' keys and values instead of 6 x 32,768: 0.19 of all-global.

    Shape: integers -> an integer number of bytes.
    """
    fn = "interleaved_kv_cache_bytes"
    windows = _check_windows(fn, windows)
    check_positive_ints(fn, num_kv_heads=num_kv_heads, head_dim=head_dim, seq_len=seq_len, batch_size=batch_size,
                        bytes_per_value=bytes_per_value)
    return sum(kv_cache_bytes(num_layers=1, num_kv_heads=num_kv_heads, head_dim=head_dim,
                              seq_len=seq_len if window is None else min(seq_len, window), batch_size=batch_size,
                              bytes_per_value=bytes_per_value) for window in windows)
