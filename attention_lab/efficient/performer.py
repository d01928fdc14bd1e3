"""Performer attention (FAVOR+, Choromanski et al. 2021): softmax attention estimated with positive random features.

exp(q . k) = E_w[exp(w . q - |q|^2 / 2) exp(w . k - |k|^2 / 2)] for w ~ N(0, I_d). With m samples w_1 .. w_m
stacked as the rows of W (m x d) and

    phi(x) = exp(W x - |x|^2 / 2) / sqrt(m)   (all m features positive),

phi(q) . phi(k) is an unbiased estimate of exp(q . k). Scaling q and k by d^(-1/4) first makes it estimate
exp(q . k / sqrt(d)), softmax's weight, and linear attention's associativity does the rest: O(n m d) time, no i x j
matrix. The estimate's error falls as m grows (roughly as 1/sqrt(m)). Orthogonal rows (blocks of d orthonormal
directions, uniformly random, each row rescaled to the length of a Gaussian vector) lower it at the same m, the more
so the larger d (tests/test_efficient_family.py measures both up to 4096 features).

Each feature vector is multiplied by a constant to keep exp() from overflowing: for a query the largest of its own
logits, for keys the largest logit over all keys of that (batch, head). A constant per query cancels in that query's
normalisation, one constant for all keys cancels in every query's, so the result is unchanged (up to rounding).

How it differs from :func:`attention_lab.reference.performer_attention` (the same features, the i x j matrix
written out; tested equal in fp64 for the same random directions) and what that buys: the associative order of
linear attention (O(n m d) time and no i x j matrix, where the reference is quadratic), and these stabilising
constants, which keep exp() finite for large logits where the reference's features overflow.
"""

from __future__ import annotations

import math

import torch

from .._validation import (
    check_bool,
    check_choice,
    check_device,
    check_float_dtype,
    check_positive_int,
    check_positive_ints,
    check_qkv,
    check_same_dtype_device,
    check_seed,
    check_tensor,
    fail,
)
from ..core.functional import _empty_attention
from .linear import _check_causal, _kernel_attention

__all__ = ["performer_attention", "performer_feature_map", "performer_projection"]


def performer_projection(head_dim: int, num_features: int, *, seed: int = 0, orthogonal: bool = True,
                         dtype: torch.dtype = torch.float32, device: torch.device | str | None = None
                         ) -> torch.Tensor:
    """The random matrix W of FAVOR+: ``num_features`` rows, each a direction w ~ N(0, I_d); the same for a seed.

    ``orthogonal=True`` draws the rows in blocks of ``head_dim`` mutually orthogonal directions (QR of a Gaussian
    matrix, signs fixed so that the directions are uniformly random), each rescaled to the length of an independent
    Gaussian vector, so every row is still N(0, I_d). Drawn in float64 on the CPU from its own generator (the global
    random state is not touched), then converted.

    Shape: -> W ``(m, d)`` with m = num_features, d = head_dim.
    """
    fn = "performer_projection"
    check_positive_ints(fn, head_dim=head_dim, num_features=num_features)
    check_seed(fn, seed)
    check_bool(fn, "orthogonal", orthogonal)
    check_float_dtype(fn, "dtype", dtype)
    device = check_device(fn, "device", device)
    generator = torch.Generator().manual_seed(seed)
    d, m = head_dim, num_features
    if not orthogonal:
        w = torch.randn(m, d, generator=generator, dtype=torch.float64)  # (m, d)
    else:
        blocks = []
        for _ in range(math.ceil(m / d)):
            gaussian = torch.randn(d, d, generator=generator, dtype=torch.float64)  # (d, d)
            basis, triangle = torch.linalg.qr(gaussian)  # columns: d orthonormal directions
            # QR fixes each column's sign by its own convention, which biases the directions; flipping each column
            # to the sign of R's diagonal makes the basis uniformly random (Haar), so each row points anywhere
            basis = basis * torch.sign(torch.diagonal(triangle))  # (d, d)
            blocks.append(basis.T)  # rows: the directions, (d, d)
        lengths = torch.randn(m, d, generator=generator, dtype=torch.float64).norm(dim=-1, keepdim=True)  # (m, 1)
        w = torch.cat(blocks)[:m] * lengths  # (m, d)
    return w.to(dtype=dtype, device=device)


def performer_feature_map(x: torch.Tensor, projection: torch.Tensor, *, stabilise: str = "row") -> torch.Tensor:
    """FAVOR+ features phi(x) = exp(W x' - |x'|^2 / 2 - c) / sqrt(m) of x' = x / d^(1/4), positive.

    ``stabilise`` picks the constant c: ``"row"`` (each vector's own largest logit, for queries), ``"all"`` (the
    largest over the last two axes, for keys: one constant per (batch, head)). Either cancels in the attention.

    Shape: x ``(..., n, d)``, projection ``(m, d)`` -> ``(..., n, m)``.
    """
    fn = "performer_feature_map"
    check_tensor(fn, "x", x, min_dim=1, floating=True)
    check_tensor(fn, "projection", projection, floating=True)
    check_choice(fn, "stabilise", stabilise, ("row", "all"), hint="'row' for queries, 'all' for keys")
    if projection.dim() != 2 or projection.shape[-1] != x.shape[-1]:
        fail(fn, f"projection must have shape (m, d) with d = {x.shape[-1]} (the last axis of x), got "
                 f"{tuple(projection.shape)}; make it with performer_projection({x.shape[-1]}, m)")
    check_same_dtype_device(fn, x=x, projection=projection)
    x = x * x.shape[-1] ** -0.25  # q' . k' = q . k / sqrt(d)
    logits = x @ projection.T  # w . x', (..., n, m)
    half_norm = 0.5 * (x * x).sum(dim=-1, keepdim=True)  # |x'|^2 / 2, (..., n, 1)
    if stabilise == "row":
        c = logits.detach().amax(dim=-1, keepdim=True)  # (..., n, 1)
    else:
        c = logits.detach().amax(dim=(-2, -1), keepdim=True)  # (..., 1, 1)
    return torch.exp(logits - half_norm - c) * projection.shape[0] ** -0.5  # (..., n, m)


def performer_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, num_features: int,
                        causal: bool = False, seed: int = 0, orthogonal: bool = True) -> torch.Tensor:
    """Softmax attention estimated with ``num_features`` positive random features (FAVOR+), in O(n) time and memory.

    The features come from :func:`performer_projection` with ``seed`` (the same seed, the same result); the error
    against exact ``softmax(q k^T / sqrt(d)) v`` falls as ``num_features`` grows. ``causal=True`` lets query i use
    keys j <= i (upper-left aligned, i == j).

    Shape: q ``(..., i, d)``, k ``(..., j, d)``, v ``(..., j, dv)`` -> ``(..., i, dv)``.
    """
    fn = "performer_attention"
    check_qkv(fn, q, k, v)
    check_positive_int(fn, "num_features", num_features)
    _check_causal(fn, causal, q, k)
    check_seed(fn, seed)
    check_bool(fn, "orthogonal", orthogonal)
    empty = _empty_attention(q, k, v)
    if empty is not None:
        return empty
    projection = performer_projection(q.shape[-1], num_features, seed=seed, orthogonal=orthogonal, dtype=q.dtype,
                                      device=q.device)  # (m, d)
    phi_q = performer_feature_map(q, projection, stabilise="row")  # (..., i, m)
    phi_k = performer_feature_map(k, projection, stabilise="all")  # (..., j, m)
    return _kernel_attention(phi_q, phi_k, v, causal)
