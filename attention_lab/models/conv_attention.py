"""A convolution computed as self-attention with fixed positions (Cordonnier, Loukas and Jaggi, 2020).

A k x k convolution (stride 1, zero padding k // 2) is k·k attention heads over the pixels: head (dy, dx) puts all
of query pixel (r, c)'s weight on key pixel (r + dy, c + dx), and nothing when that pixel lies outside the image
(the zero padding); its value projection is the kernel's slice for that offset; the heads are summed and the bias
added. :func:`attention_lab.reference.conv_as_attention` writes exactly that, with the k·k one-hot i x j weight
matrices and the package's softmax attention. This module differs in one way: it does not build the one-hot
matrices. A one-hot row only picks one key, so each head becomes a shift of the value map (pad with zeros, slice):
that buys O(k² · n) memory and work per channel pair instead of O(k² · n²), and it is the computation a
convolution does. :func:`offset_weights` gives one head's weights, for a picture or a check.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .._validation import check_positive_ints, check_tensor, fail

__all__ = ["conv_as_attention", "offset_weights"]


def offset_weights(height: int, width: int, dy: int, dx: int) -> torch.Tensor:
    """The attention weights of the head with offset (dy, dx): query pixel (r, c) puts weight 1 on key pixel
    (r + dy, c + dx) when it lies in the image, and its row is all zeros when it does not (zero padding; no
    wrapping around an edge). Pixels are numbered row by row, ``r * width + c``.

    Shape: -> weights ``(i, j)`` with ``i = j = height * width``, float32 zeros and ones.
    """
    fn = "offset_weights"
    check_positive_ints(fn, height=height, width=width)
    for name, value in (("dy", dy), ("dx", dx)):
        if isinstance(value, bool) or not isinstance(value, int):
            fail(fn, f"{name} must be an int (an offset in pixels, negative for up or left), got "
                     f"{type(value).__name__} {value!r}; pass a whole number such as {name}=-1", TypeError)
    pixel = torch.arange(height * width)
    row, col = pixel // width, pixel % width  # (n,) each
    return ((row[None, :] == row[:, None] + dy) & (col[None, :] == col[:, None] + dx)).float()  # (i, j)


def conv_as_attention(images: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """What ``F.conv2d(images, weight, bias, padding=k // 2)`` computes, as the sum of k·k attention heads with fixed
    one-hot weights (see the module docstring): each head's values ``W^v x^j`` taken at the pixel its offset points
    to, zero outside the image.

    Shape: images ``(b, c, H, W)``, weight ``(o, c, kh, kw)`` with odd kh and kw, bias ``(o,)`` or None
        -> ``(b, o, H, W)``.
    """
    fn = "conv_as_attention"
    check_tensor(fn, "images", images, floating=True)
    check_tensor(fn, "weight", weight, floating=True)
    if images.dim() != 4 or weight.dim() != 4 or weight.shape[1] != images.shape[1]:
        fail(fn, f"images must be (b, c, H, W) and weight (o, c, kh, kw) with the same c, got images "
                 f"{tuple(images.shape)} and weight {tuple(weight.shape)}; pass a conv layer's weight, e.g. "
                 f"nn.Conv2d(c, o, 3).weight")
    out_channels, _, kh, kw = weight.shape
    if kh % 2 == 0 or kw % 2 == 0:
        fail(fn, f"the kernel must have odd sizes (a centre pixel, padding k // 2 on each side), got {kh} x {kw}; "
                 f"use a 3 x 3 or 5 x 5 kernel")
    if bias is not None:
        check_tensor(fn, "bias", bias, floating=True)
        if tuple(bias.shape) != (out_channels,):
            fail(fn, f"bias must have shape ({out_channels},), one per output channel, got {tuple(bias.shape)}; "
                     f"pass the conv layer's bias or None")
    height, width = images.shape[-2:]
    padded = F.pad(images, (kw // 2, kw // 2, kh // 2, kh // 2))  # (b, c, H + kh - 1, W + kw - 1): zeros outside
    out = images.new_zeros(images.shape[0], out_channels, height, width)  # (b, o, H, W)
    for ky in range(kh):
        for kx in range(kw):
            # head (dy, dx) = (ky - kh // 2, kx - kw // 2): query (r, c) reads the key at (r + dy, c + dx), which
            # sits at (r + ky, c + kx) of the padded image
            keys = padded[:, :, ky:ky + height, kx:kx + width]  # (b, c, H, W): each query's one key
            out = out + torch.einsum("oc,bchw->bohw", weight[:, :, ky, kx], keys)  # its value, W^v_head x^j
    return out if bias is None else out + bias[:, None, None]  # (b, o, H, W)
