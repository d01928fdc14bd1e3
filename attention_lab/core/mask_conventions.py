"""Converters between our mask convention (bool, True = may attend) and the others, named for the way they go:

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
"""

from __future__ import annotations

import torch

from .._validation import check_float_dtype, check_positive_int, check_tensor, fail
from ._mask_checks import check_bool_mask, check_mask_dims

__all__ = [
    "from_additive_mask",
    "from_keep_ones",
    "from_torch_attn_mask",
    "from_torch_padding_mask",
    "to_additive_mask",
    "to_torch_attn_mask",
    "to_torch_padding_mask",
]


def to_additive_mask(mask: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """A bool mask as an additive float mask: 0.0 where attention is allowed, ``-inf`` where it is not.

    Adding it to the scores before softmax removes the masked keys. ``-inf`` (not ``-1e9``) is exact in
    every floating dtype, fp16 included, where ``-1e9`` does not fit. A fully masked row becomes all
    ``-inf``: a plain softmax turns that into NaN; ``attention_lab.masked_softmax`` and SDPA return zeros.

    Shape: bool, any shape -> ``dtype``, same shape.
    """
    fn = "to_additive_mask"
    mask = check_bool_mask(fn, mask)
    check_float_dtype(fn, "dtype", dtype)
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
    check_mask_dims(fn, "key_padding_mask", key_padding_mask, (1, 2), "(b, j) as nn.MultiheadAttention takes it")
    if key_padding_mask.is_floating_point():
        return from_additive_mask(key_padding_mask)
    check_bool_mask(fn, key_padding_mask, name="key_padding_mask")
    return ~key_padding_mask


def to_torch_padding_mask(mask: torch.Tensor) -> torch.Tensor:
    """Our padding mask (True = real token) as ``nn.MultiheadAttention``'s ``key_padding_mask``
    (True = ignore).

    Shape: bool ``(b, j)`` (or ``(j,)``) -> bool, same shape.
    """
    fn = "to_torch_padding_mask"
    check_bool_mask(fn, mask, dims=(1, 2), hint=" (b, j), e.g. from padding_mask()")
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
    if num_heads is not None:
        check_positive_int(fn, "num_heads", num_heads)
    check_mask_dims(fn, "attn_mask", attn_mask, (2, 3), "(i, j) or (b*h, i, j) as nn.MultiheadAttention takes it")
    if attn_mask.is_floating_point():
        allowed = from_additive_mask(attn_mask)
    else:
        check_bool_mask(fn, attn_mask, name="attn_mask")
        allowed = ~attn_mask
    if num_heads is not None and allowed.dim() == 3:
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
    mask = check_bool_mask(fn, mask, dims=(2, 4), hint=" ((i, j) or (b, h, i, j))")
    if num_heads is not None:
        check_positive_int(fn, "num_heads", num_heads)
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
