"""Rotary position embedding (旋转位置编码, RoPE; Su et al. 2021): a position turns each pair of features.

Feature pair m of a query or key at position p is rotated by the angle p * theta_m, with theta_m = base^(-2m/d):

    [x'_{2m}  ]   [cos(p theta_m)  -sin(p theta_m)] [x_{2m}  ]
    [x'_{2m+1}] = [sin(p theta_m)   cos(p theta_m)] [x_{2m+1}]

A rotation keeps lengths, and the dot product of a query rotated by p theta and a key rotated by r theta depends only
on the difference (p - r) theta, so attention scores see relative positions although each vector was rotated by its
absolute position. Nothing is added to the token vectors and there is no table of positions: a decoder that caches
rotated keys only needs to know where the count stands (the cache's length) to rotate the next token.

How it differs from :func:`attention_lab.reference.rope` (one explicit 2 x 2 rotation matrix per feature pair, in a
Python loop over the pairs; tested equal in fp64, values and gradients) and what that buys: every pair is turned at
once with the formula written out (x' = x cos - y sin, y' = x sin + y cos, from one table of angles), a handful
of tensor operations instead of d/2 small matrix products, with the angles still computed in float64.
"""

from __future__ import annotations

import torch

from .._validation import check_number, check_tensor, fail

__all__ = ["apply_rope"]


def _check_base(fn: str, base: object) -> float:
    return check_number(fn, "base", base, low=1, low_open=True, hint="the paper uses 10000.0")


def apply_rope(x: torch.Tensor, positions: torch.Tensor, *, base: float = 10000.0) -> torch.Tensor:
    """Rotate each adjacent feature pair (x[2m], x[2m+1]) of x by the angle ``positions * base**(-2m/d)``.

    Pairs are adjacent, as in the paper's formula (and Meta's original Llama code), so that pair m is literally the
    2-D vector the lessons draw; GPT-NeoX and Hugging Face's Llama pair feature m with feature m + d/2 instead
    ("split halves"), which saves an interleaving copy in their kernels. The two differ only by a fixed permutation of
    the features, which the learned projections W^q and W^k absorb, so neither is more accurate. Angles are computed
    in float64 and the result has x's dtype and device.

    Shape: x ``(..., n, d)`` with d even, positions ``(n,)`` integers -> ``(..., n, d)``.
    """
    fn = "apply_rope"
    check_tensor(fn, "x", x, min_dim=2, floating=True)
    check_tensor(fn, "positions", positions)
    base = _check_base(fn, base)
    n, d = x.shape[-2], x.shape[-1]
    if d % 2:
        fail(fn, f"the last dimension d of x must be even (RoPE rotates pairs of features), got d={d} in shape "
                 f"{tuple(x.shape)}; choose an even head_dim such as {d + 1}")
    if positions.dtype == torch.bool or positions.is_floating_point() or positions.is_complex():
        fail(fn, f"positions must hold integers (torch.long), got dtype {positions.dtype}; build them with "
                 f"torch.arange(start, start + n)", TypeError)
    if positions.dim() != 1 or positions.shape[0] != n:
        fail(fn, f"positions must have shape (n,) = ({n},), one per row of x {tuple(x.shape)}, got shape "
                 f"{tuple(positions.shape)}; pass e.g. torch.arange({n})")
    pair = torch.arange(0, d, 2, dtype=torch.float64, device=x.device)  # 2m, (d/2,)
    theta = base ** (-pair / d)  # theta_m, (d/2,)
    angle = positions.to(device=x.device, dtype=torch.float64)[:, None] * theta  # p theta_m, (n, d/2)
    cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)  # (n, d/2) each
    pairs = x.unflatten(-1, (d // 2, 2))  # (..., n, d/2, 2)
    first, second = pairs[..., 0], pairs[..., 1]  # x_{2m}, x_{2m+1}: (..., n, d/2) each
    rotated = torch.stack((first * cos - second * sin, first * sin + second * cos), dim=-1)  # (..., n, d/2, 2)
    return rotated.flatten(-2)  # (..., n, d)
