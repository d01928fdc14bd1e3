"""Positional encodings: self-attention ignores order, so the position is added to each token's vector.

The sinusoidal encoding of "Attention Is All You Need": position p gets the vector
PE[p, 2m] = sin(p / base^(2m/d)), PE[p, 2m+1] = cos(p / base^(2m/d)), m = 0, 1, ...
Each pair of columns is a clock turning at its own speed, from one radian per position (m = 0) to one turn
every 2*pi*base positions; the dot product PE[p] . PE[p + k] depends only on the offset k.
"""

from __future__ import annotations

import torch

from .._validation import check_device, check_float_dtype, check_number, check_positive_int

__all__ = ["sinusoidal_positions"]


def sinusoidal_positions(n: int, d: int, *, base: float = 10000.0, dtype: torch.dtype = torch.float32,
                         device: torch.device | str | None = None) -> torch.Tensor:
    """The sinusoidal position vectors of positions 0 .. n-1, one row per position.

    Even columns hold sines and odd columns cosines of the same frequency ``base ** (-2m / d)``; for an odd
    ``d`` the last column is a sine whose cosine partner is dropped. Computed in float64, then cast to ``dtype``.
    Add them to the token vectors: ``x + sinusoidal_positions(n, e)``.

    Shape: -> ``(n, d)``; for token vectors ``(b, n, e)`` use ``d = e``.
    """
    fn = "sinusoidal_positions"
    check_positive_int(fn, "n", n)
    check_positive_int(fn, "d", d)
    check_number(fn, "base", base, low=1, low_open=True, hint="the paper uses 10000")
    check_float_dtype(fn, "dtype", dtype)
    device = check_device(fn, "device", device)
    position = torch.arange(n, dtype=torch.float64, device=device)[:, None]  # (n, 1)
    pair = torch.arange(0, d, 2, dtype=torch.float64, device=device)  # 2m, (ceil(d/2),)
    angle = position * float(base) ** (-pair / d)  # (n, ceil(d/2))
    pe = torch.empty(n, d, dtype=torch.float64, device=device)
    pe[:, 0::2] = angle.sin()
    pe[:, 1::2] = angle[:, : d // 2].cos()
    return pe.to(dtype)
