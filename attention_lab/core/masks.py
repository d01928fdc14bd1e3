"""Attention masks: the builders.

Inside ``attention_lab`` a mask is a bool tensor and ``True`` means "this query may attend to this key",
the convention of ``F.scaled_dot_product_attention`` and FlexAttention. Other conventions (PyTorch's
``key_padding_mask`` and ``attn_mask``, additive float masks, 0/1 masks) enter and leave only through the named
converters of :mod:`attention_lab.core.mask_conventions`.

Builders: :func:`causal_mask`, :func:`padding_mask` (+ :func:`as_key_mask`), :func:`sliding_window_mask`;
:func:`expand_mask` broadcasts an ``(i, j)`` mask to ``(b, h, i, j)`` without copying, and
:func:`combine_masks` intersects masks (a key must be allowed by all of them). The check that a mask is bool, which
builders and converters share, is in ``_mask_checks``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from .._validation import check_bool, check_device, check_positive_int, fail
from ._mask_checks import check_bool_mask

__all__ = ["as_key_mask", "causal_mask", "combine_masks", "expand_mask", "padding_mask", "sliding_window_mask"]


def causal_mask(n_queries: int, n_keys: int | None = None, *, device: torch.device | str | None = None
                ) -> torch.Tensor:
    """Causal (decoder) mask: query i may attend to key j exactly when ``j <= i``.

    Aligned at the upper-left corner, like ``F.scaled_dot_product_attention(is_causal=True)``, also when
    ``n_queries != n_keys``: row 0 sees key 0 only, and rows ``i >= n_keys - 1`` see every key. (A decoder
    continuing after a cache of past keys needs the lower-right alignment instead:
    ``j <= i + n_keys - n_queries``.) Built as the complement of the strictly upper triangle
    (``triu(diagonal=1)`` marks the future). To apply it to a batch of heads, broadcast it:
    ``expand_mask(mask, b, h)`` is a view, no copy.

    Shape: -> bool ``(i, j)`` with ``i = n_queries``, ``j = n_keys`` (default ``n_queries``).
    """
    fn = "causal_mask"
    check_positive_int(fn, "n_queries", n_queries)
    if n_keys is None:
        n_keys = n_queries
    check_positive_int(fn, "n_keys", n_keys)
    device = check_device(fn, "device", device)
    future = torch.ones(n_queries, n_keys, dtype=torch.bool, device=device).triu(diagonal=1)  # (i, j)
    return ~future


def padding_mask(lengths: torch.Tensor | Sequence[int], max_len: int | None = None) -> torch.Tensor:
    """Padding mask of a batch of sequences: True at real tokens, False at padding.

    Sequence ``b`` has ``lengths[b]`` real tokens followed by padding up to ``max_len`` (default: the
    longest). A length of 0 is allowed (a fully padded sequence); attention gives its queries zeros, not
    NaN. Use :func:`as_key_mask` to apply it to attention scores ``(b, h, i, j)``.

    Args:
        lengths: integer tensor (on the device the mask should live on) or a list of ints, each ``>= 0``.
        max_len: number of positions ``j``; must be ``>= max(lengths)``.

    Shape: lengths ``(b,)`` -> bool ``(b, j)`` with ``j = max_len``.
    """
    fn = "padding_mask"
    if not isinstance(lengths, torch.Tensor):
        if isinstance(lengths, (str, bytes)) or not isinstance(lengths, Sequence):
            fail(fn, f"lengths must be a 1-D integer tensor or a list of ints, got {type(lengths).__name__}; pass "
                     f"e.g. [3, 5] or torch.tensor([3, 5])", TypeError)
        bad = [x for x in lengths if isinstance(x, bool) or not isinstance(x, int)]
        if bad:
            fail(fn, f"lengths must be whole numbers of tokens (ints), got {list(lengths)}; "
                     f"convert them with int() or torch.tensor(lengths, dtype=torch.long)")
        lengths = torch.tensor(list(lengths), dtype=torch.long)
    if lengths.is_floating_point() or lengths.is_complex() or lengths.dtype == torch.bool:
        fail(fn, f"lengths must be an integer tensor (a count of tokens), got dtype {lengths.dtype} with "
                 f"values {lengths.tolist()}; convert it with lengths.long()")
    if lengths.dim() != 1:
        fail(fn, f"lengths must be 1-D (one length per sequence, shape (b,)), got shape "
                 f"{tuple(lengths.shape)}")
    if (lengths < 0).any():
        fail(fn, f"lengths must be >= 0, got lengths={lengths.tolist()}; give each sequence's count of real tokens")
    longest = int(lengths.max()) if lengths.numel() else 0
    if max_len is None:
        max_len = longest
    else:
        check_positive_int(fn, "max_len", max_len, minimum=0)
        if longest > max_len:
            fail(fn, f"every length must be <= max_len={max_len}, got lengths={lengths.tolist()}; "
                     f"raise max_len or truncate the sequences")
    positions = torch.arange(max_len, device=lengths.device)  # (j,)
    return positions[None, :] < lengths[:, None]  # (b, j)


def as_key_mask(mask: torch.Tensor) -> torch.Tensor:
    """A ``(b, j)`` padding mask as a key mask that broadcasts over heads and queries: every query of
    sequence b may attend to the real keys of sequence b. A view, no copy.

    Shape: bool ``(b, j)`` -> bool ``(b, 1, 1, j)``.
    """
    mask = check_bool_mask("as_key_mask", mask, dims=(2,), hint=" (b, j), e.g. from padding_mask()")
    return mask[:, None, None, :]  # (b, 1, 1, j)


def sliding_window_mask(n: int, window: int, *, causal: bool = False,
                        device: torch.device | str | None = None) -> torch.Tensor:
    """Local (banded) mask: query i may attend to key j exactly when ``|i - j| < window``.

    ``window`` is the reach counted in keys, the query's own position included. Keys per row:

    * ``causal=False``: ``2 * window - 1`` in the interior (``window - 1`` on each side plus the query
      itself), fewer near the edges: row i sees ``min(i, window - 1) + 1 + min(n - 1 - i, window - 1)``
      keys. This is the receptive field of a 1-D convolution with an odd kernel of size ``2 * window - 1``.
    * ``causal=True``: the last ``window`` keys up to and including the query, ``min(i + 1, window)`` for
      row i; equal to ``sliding_window_mask(n, window) & causal_mask(n)``.

    ``window = 1`` lets each query see only itself; ``window >= n`` (non-causal) allows everything.

    The same band in other libraries (tests/test_conventions.py, docs/conventions.md): Longformer's one-sided
    window ``window - 1`` (Hugging Face's ``attention_window = 2 * (window - 1)``), flash-attn's
    ``window_size=(window - 1, window - 1)`` (``(window - 1, 0)`` with ``causal=True``), and OpenAI
    sparse_attention's causal ``'local'`` mode with bandwidth ``window`` (our ``causal=True``). The block-level
    ``BlockLayout.sliding_window(b, neighbours=k)`` counts blocks instead and equals ``window = k + 1`` only for
    ``b = 1``.

    Shape: -> bool ``(i, j)`` with ``i = j = n``.
    """
    fn = "sliding_window_mask"
    check_positive_int(fn, "n", n)
    check_positive_int(fn, "window", window)
    check_bool(fn, "causal", causal)
    device = check_device(fn, "device", device)
    idx = torch.arange(n, device=device)
    offset = idx[:, None] - idx[None, :]  # (i, j): i - j, positive when the key is in the past
    allowed = offset.abs() < window  # (i, j)
    if causal:
        allowed = allowed & (offset >= 0)
    return allowed


def expand_mask(mask: torch.Tensor, batch: int, heads: int) -> torch.Tensor:
    """Broadcast an ``(i, j)`` mask to ``(b, h, i, j)`` as a view: ``expand`` sets stride 0 on the new
    axes, so every (b, h) slice shares the one ``(i, j)`` block of memory (same ``data_ptr``). Read it, never
    write to it.

    Shape: bool ``(i, j)`` -> bool ``(b, h, i, j)``.
    """
    fn = "expand_mask"
    mask = check_bool_mask(fn, mask, dims=(2,), hint=" (i, j), e.g. from causal_mask()")
    check_positive_int(fn, "batch", batch)
    check_positive_int(fn, "heads", heads)
    return mask[None, None].expand(batch, heads, *mask.shape)  # (b, h, i, j)


def combine_masks(*masks: torch.Tensor | None) -> torch.Tensor | None:
    """Intersection of masks that broadcast together: a key stays allowed only if every mask allows it.
    ``None`` entries are skipped; with no mask at all the result is ``None`` (no masking).

    Typical use: ``combine_masks(causal_mask(n), as_key_mask(padding_mask(lengths)))`` -> ``(b, 1, i, j)``.

    Shape: bool masks broadcastable together -> bool, their broadcast shape.
    """
    fn = "combine_masks"
    present = [m for m in masks if m is not None]
    for k, m in enumerate(present):
        check_bool_mask(fn, m, name=f"masks[{k}]")
    if not present:
        return None
    try:
        torch.broadcast_shapes(*(m.shape for m in present))
    except RuntimeError:
        fail(fn, f"masks must broadcast together, got shapes {[tuple(m.shape) for m in present]}; give "
                 f"them shapes like (i, j), (b, 1, i, j) and (b, 1, 1, j)")
    result = present[0]
    for m in present[1:]:
        result = result & m  # a new tensor: the inputs stay untouched
    return result
