"""Attention masks: builders and converters between conventions.

Inside ``attention_lab`` a mask is a bool tensor and ``True`` means "this query may attend to this key",
the convention of ``F.scaled_dot_product_attention`` and FlexAttention. Other conventions enter and leave
only through the converters below, whose names say which way they go:

================================  ================================  ===============================
other convention                  into ours (True = may attend)     out of ours
================================  ================================  ===============================
``nn.MultiheadAttention``         :func:`from_torch_padding_mask`   :func:`to_torch_padding_mask`
``key_padding_mask`` (b, j),
True = ignore this key
``nn.MultiheadAttention``         :func:`from_torch_attn_mask`      :func:`to_torch_attn_mask`
``attn_mask`` (i, j) or
(b*h, i, j), True = NOT allowed
additive float mask,              :func:`from_additive_mask`        :func:`to_additive_mask`
0 = keep, -inf = remove
``masked_fill(mask == 0, -1e9)``  :func:`from_keep_ones`            ``mask.long()``
0/1 mask, 1 = keep
================================  ================================  ===============================

Converters never change a mask's shape (except :func:`from_torch_attn_mask` / :func:`to_torch_attn_mask`,
which unfold / fold PyTorch's ``(b*h, i, j)`` layout when given ``num_heads``) and never modify their input.

Builders: :func:`causal_mask`, :func:`padding_mask` (+ :func:`as_key_mask`), :func:`sliding_window_mask`;
:func:`expand_mask` broadcasts an ``(i, j)`` mask to ``(b, h, i, j)`` without copying, and
:func:`combine_masks` intersects masks (a key must be allowed by all of them).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from .._validation import check_bool, check_positive_int, check_tensor, fail

__all__ = [
    "as_key_mask",
    "causal_mask",
    "combine_masks",
    "expand_mask",
    "from_additive_mask",
    "from_keep_ones",
    "from_torch_attn_mask",
    "from_torch_padding_mask",
    "padding_mask",
    "sliding_window_mask",
    "to_additive_mask",
    "to_torch_attn_mask",
    "to_torch_padding_mask",
]


# ---------------------------------------------------------------- validation helpers


def _check_bool_mask(fn: str, mask: object, *, dims: Sequence[int] | None = None, name: str = "mask",
                     hint: str = "") -> torch.Tensor:
    check_tensor(fn, name, mask)
    if mask.dtype != torch.bool:
        fail(fn, f"{name} must be a bool tensor (True = may attend), got dtype {mask.dtype}; "
                 f"convert other conventions with attention_lab.core.masks.from_*()", TypeError)
    if dims is not None and mask.dim() not in dims:
        want = " or ".join(f"{d}-D" for d in dims)
        fail(fn, f"{name} must be {want}{hint}, got a {mask.dim()}-D tensor of shape {tuple(mask.shape)}")
    return mask


def _check_dims(fn: str, name: str, mask: torch.Tensor, dims: Sequence[int], hint: str) -> None:
    if mask.dim() not in dims:
        want = " or ".join(f"{d}-D" for d in dims)
        fail(fn, f"{name} must be {want} {hint}, got a {mask.dim()}-D tensor of shape {tuple(mask.shape)}")


# ---------------------------------------------------------------- builders


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
            fail(fn, f"lengths must be a 1-D integer tensor or a list of ints, got {type(lengths).__name__}",
                 TypeError)
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
        fail(fn, f"lengths must be >= 0, got lengths={lengths.tolist()}")
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
    mask = _check_bool_mask("as_key_mask", mask, dims=(2,), hint=" (b, j), e.g. from padding_mask()")
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
    mask = _check_bool_mask(fn, mask, dims=(2,), hint=" (i, j), e.g. from causal_mask()")
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
        _check_bool_mask(fn, m, name=f"masks[{k}]")
    if not present:
        return None
    try:
        torch.broadcast_shapes(*(m.shape for m in present))
    except RuntimeError:
        fail(fn, f"the masks' shapes {[tuple(m.shape) for m in present]} do not broadcast together; give "
                 f"them shapes like (i, j), (b, 1, i, j) and (b, 1, 1, j)")
    result = present[0]
    for m in present[1:]:
        result = result & m  # a new tensor: the inputs stay untouched
    return result


# ---------------------------------------------------------------- converters


def to_additive_mask(mask: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """A bool mask as an additive float mask: 0.0 where attention is allowed, ``-inf`` where it is not.

    Adding it to the scores before softmax removes the masked keys. ``-inf`` (not ``-1e9``) is exact in
    every floating dtype, fp16 included, where ``-1e9`` does not fit. A fully masked row becomes all
    ``-inf``: a plain softmax turns that into NaN; ``attention_lab.masked_softmax`` and SDPA return zeros.

    Shape: bool, any shape -> ``dtype``, same shape.
    """
    fn = "to_additive_mask"
    mask = _check_bool_mask(fn, mask)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        fail(fn, f"dtype must be a floating torch.dtype, got {dtype!r}", TypeError)
    zeros = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
    return zeros.masked_fill(~mask, float("-inf"))


def from_additive_mask(mask: torch.Tensor) -> torch.Tensor:
    """An additive float mask (0 = keep, ``-inf`` = remove) as a bool mask (True = may attend).

    Only masks made of 0 and ``-inf`` convert without loss; any other value (a bias such as ALiBi, or
    ``-1e9``) raises ``ValueError``: such a mask is a score bias, pass it as a float mask instead.

    Shape: float, any shape -> bool, same shape.
    """
    fn = "from_additive_mask"
    check_tensor(fn, "mask", mask, floating=True)
    keep = mask == 0
    remove = mask == float("-inf")
    if not bool((keep | remove).all()):
        odd = mask[~(keep | remove)].unique()[:5].tolist()
        fail(fn, f"an additive mask must contain only 0.0 and -inf, got other values such as {odd}; "
                 f"replace -1e9 by -inf, or pass a bias as a float mask to attention instead")
    return keep


def from_keep_ones(mask: torch.Tensor) -> torch.Tensor:
    """A 0/1 mask of the ``scores.masked_fill(mask == 0, -1e9)`` style of older tutorials as a bool mask.

    In that style 1 (or True) marks a key the query may attend to and 0 marks one it may not, so the
    conversion is ``mask != 0``. Values other than 0 and 1 raise ``ValueError`` (a float mask of 0/-inf is
    additive: use :func:`from_additive_mask`).

    Shape: int / float / bool 0/1 mask, any shape -> bool, same shape.
    """
    fn = "from_keep_ones"
    check_tensor(fn, "mask", mask)
    if mask.dtype == torch.bool:
        return mask.clone()
    if mask.is_complex() or not bool(((mask == 0) | (mask == 1)).all()):
        values = mask.unique()[:5].tolist()
        fail(fn, f"expected a 0/1 mask (1 = may attend), got values such as {values}; for a 0/-inf additive "
                 f"mask use from_additive_mask()")
    return mask != 0


def from_torch_padding_mask(key_padding_mask: torch.Tensor) -> torch.Tensor:
    """``nn.MultiheadAttention``'s ``key_padding_mask`` (True = ignore this key) as our padding mask.

    A bool mask is inverted; a float (additive) one goes through :func:`from_additive_mask`. Apply the
    result to scores with :func:`as_key_mask`.

    Shape: ``(b, j)`` (or ``(j,)`` for one unbatched sequence) -> bool, same shape (True = real token).
    """
    fn = "from_torch_padding_mask"
    check_tensor(fn, "key_padding_mask", key_padding_mask)
    _check_dims(fn, "key_padding_mask", key_padding_mask, (1, 2), "(b, j) as nn.MultiheadAttention takes it")
    if key_padding_mask.is_floating_point():
        return from_additive_mask(key_padding_mask)
    _check_bool_mask(fn, key_padding_mask, name="key_padding_mask")
    return ~key_padding_mask


def to_torch_padding_mask(mask: torch.Tensor) -> torch.Tensor:
    """Our padding mask (True = real token) as ``nn.MultiheadAttention``'s ``key_padding_mask``
    (True = ignore).

    Shape: bool ``(b, j)`` (or ``(j,)``) -> bool, same shape.
    """
    fn = "to_torch_padding_mask"
    _check_bool_mask(fn, mask, dims=(1, 2), hint=" (b, j), e.g. from padding_mask()")
    return ~mask


def from_torch_attn_mask(attn_mask: torch.Tensor, num_heads: int | None = None) -> torch.Tensor:
    """``nn.MultiheadAttention``'s ``attn_mask`` (bool: True = NOT allowed; or additive float) as our
    bool mask.

    A 2-D ``(i, j)`` mask keeps its shape. PyTorch's 3-D layout ``(b*h, i, j)`` (batch-major: row
    ``b*h + h'``) is unfolded to ``(b, h, i, j)`` when ``num_heads`` is given, and kept 3-D otherwise.

    Shape: ``(i, j)`` -> ``(i, j)``; ``(b*h, i, j)`` -> ``(b, h, i, j)`` with ``num_heads`` (else unchanged).
    """
    fn = "from_torch_attn_mask"
    check_tensor(fn, "attn_mask", attn_mask)
    _check_dims(fn, "attn_mask", attn_mask, (2, 3), "(i, j) or (b*h, i, j) as nn.MultiheadAttention takes it")
    if attn_mask.is_floating_point():
        allowed = from_additive_mask(attn_mask)
    else:
        _check_bool_mask(fn, attn_mask, name="attn_mask")
        allowed = ~attn_mask
    if num_heads is not None and allowed.dim() == 3:
        check_positive_int(fn, "num_heads", num_heads)
        if allowed.shape[0] % num_heads:
            fail(fn, f"the first dimension of a 3-D attn_mask is b*h and must be a multiple of "
                     f"num_heads={num_heads}, got shape {tuple(allowed.shape)}")
        allowed = allowed.reshape(-1, num_heads, *allowed.shape[1:])  # (b, h, i, j)
    return allowed


def to_torch_attn_mask(mask: torch.Tensor, num_heads: int | None = None) -> torch.Tensor:
    """Our bool mask (True = may attend) as ``nn.MultiheadAttention``'s bool ``attn_mask``
    (True = NOT allowed).

    An ``(i, j)`` mask stays 2-D. A 4-D ``(b, h, i, j)`` or ``(b, 1, i, j)`` mask is broadcast to
    ``num_heads`` heads and folded to PyTorch's ``(b*h, i, j)`` layout; ``num_heads`` is required for it.
    For a key mask ``(b, 1, 1, j)`` pass ``to_torch_padding_mask`` of the ``(b, j)`` mask as
    ``key_padding_mask`` instead.

    Shape: bool ``(i, j)`` -> ``(i, j)``; bool ``(b, h or 1, i, j)`` -> ``(b*h, i, j)``.
    """
    fn = "to_torch_attn_mask"
    mask = _check_bool_mask(fn, mask, dims=(2, 4), hint=" ((i, j) or (b, h, i, j))")
    if mask.dim() == 2:
        return ~mask
    if num_heads is None:
        fail(fn, f"a 4-D mask of shape {tuple(mask.shape)} needs num_heads to fold it into PyTorch's "
                 f"(b*h, i, j) layout; pass num_heads=<the module's num_heads>")
    check_positive_int(fn, "num_heads", num_heads)
    if mask.shape[1] not in (1, num_heads):
        fail(fn, f"the mask's head dimension must be 1 or num_heads={num_heads}, got shape "
                 f"{tuple(mask.shape)}")
    b, _, i, j = mask.shape
    full = mask.expand(b, num_heads, i, j)  # (b, h, i, j)
    return ~full.reshape(b * num_heads, i, j)  # (b*h, i, j)
