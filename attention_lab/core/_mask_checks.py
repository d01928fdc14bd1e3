"""Checks every mask function shares (the builders of ``masks``, the converters of ``mask_conventions``): a mask is a
bool tensor (True = may attend) with the dimensions it should have."""

from __future__ import annotations

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
        fail(fn, f"{name} must be {want}{hint}, got a {mask.dim()}-D tensor of shape {tuple(mask.shape)}")
    return mask


def check_mask_dims(fn: str, name: str, mask: torch.Tensor, dims: Sequence[int], hint: str) -> None:
    if mask.dim() not in dims:
        want = " or ".join(f"{d}-D" for d in dims)
        fail(fn, f"{name} must be {want} {hint}, got a {mask.dim()}-D tensor of shape {tuple(mask.shape)}")
