"""Checks every mask function shares (the builders of ``masks``, the converters of ``mask_conventions``): a mask is a
bool tensor (True = may attend) with the dimensions it should have; and the mask check of every attention that takes
one (``check_mask``), with the warning for a float 0/1 mask read as additive."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import torch

from .._validation import check_tensor, fail


def check_bool_mask(fn: str, mask: object, *, dims: Sequence[int] | None = None, name: str = "mask",
                     hint: str = "") -> torch.Tensor:
    check_tensor(fn, name, mask)
    if mask.dtype != torch.bool:
        fail(fn, f"{name} must be a bool tensor (True = may attend), got dtype {mask.dtype}; "
                 f"convert other conventions with attention_lab.core.mask_conventions.from_*()", TypeError)
    if dims is not None and mask.dim() not in dims:
        want = " or ".join(f"{d}-D" for d in dims)
        fail(fn, f"{name} must be {want}{hint}, got a {mask.dim()}-D tensor of shape {tuple(mask.shape)}; reshape "
                 f"it to {want}")
    return mask


def check_mask_dims(fn: str, name: str, mask: torch.Tensor, dims: Sequence[int], hint: str) -> None:
    if mask.dim() not in dims:
        want = " or ".join(f"{d}-D" for d in dims)
        fail(fn, f"{name} must be {want} {hint}, got a {mask.dim()}-D tensor of shape {tuple(mask.shape)}; reshape "
                 f"it to {want}")


def check_mask(fn: str, mask: object, target: torch.Size | tuple[int, ...], *, allow_float: bool,
               like: torch.Tensor) -> torch.Tensor:
    """A bool mask (True = may attend), or an additive float mask if ``allow_float``, broadcastable to ``target``."""
    if not isinstance(mask, torch.Tensor):
        fail(fn, f"mask must be a bool torch.Tensor (True = may attend), got {type(mask).__name__}; convert it with "
                 f"torch.as_tensor(mask, dtype=torch.bool)", TypeError)
    if mask.dtype != torch.bool:
        if not mask.is_floating_point():
            fail(fn, f"mask must be bool (True = may attend), got dtype {mask.dtype}; an integer 0/1 mask is "
                     f"ambiguous between conventions: convert it with mask.bool() if 1 means 'may attend'",
                 TypeError)
        if not allow_float:
            fail(fn, f"mask must be bool (True = may attend), got dtype {mask.dtype}; add a float mask to the "
                     f"scores instead", TypeError)
    if mask.device != like.device:
        fail(fn, f"mask must be on the same device as the scores ({like.device}), got {mask.device}; move it with "
                 f"mask.to({str(like.device)!r})")
    target = tuple(target)
    try:
        ok = torch.broadcast_shapes(mask.shape, target) == torch.Size(target)
    except RuntimeError:
        ok = False
    if not ok:
        fail(fn, f"mask must broadcast to the scores' shape {target} (..., i, j), got shape {tuple(mask.shape)}, which "
                 f"does not broadcast; give it shape (i, j), (b, 1, i, j) or (b, 1, 1, j) for a key-padding mask")
    if mask.is_floating_point():
        warn_float_keep_mask(fn, mask)
    return mask


def warn_float_keep_mask(fn: str, mask: torch.Tensor) -> None:
    """Warn when a float mask, read as additive (added to the scores, as PyTorch does), holds only 0s and 1s: most
    likely a keep mask (1 = may attend) given in the wrong dtype, which as an additive mask hides nothing. An all-zero
    additive mask is common and gets no warning."""
    if mask.numel() and bool(((mask == 0) | (mask == 1)).all()) and bool((mask == 1).any()):
        warnings.warn(f"{fn}(): mask is a float mask of only 0s and 1s, read as additive (1 is added to a score and "
                      f"nothing is hidden), not as a keep mask (1 = may attend, 0 = hidden); if 1 means 'may attend', "
                      f"pass attention_lab.from_keep_ones(mask) (a bool mask)", UserWarning, stacklevel=4)
