"""The plain math of lesson 13's images (the package's ``attention_lab.reference``): a convolution written as
self-attention with fixed positions (Cordonnier, Loukas and Jaggi, "On the Relationship between Self-Attention and
Convolutional Layers", ICLR 2020)."""

from __future__ import annotations

import torch

from ._attention import attention

__all__ = ["conv_as_attention"]


def conv_as_attention(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None
                      ) -> tuple[torch.Tensor, torch.Tensor]:
    """``nn.Conv2d`` (odd kernel, stride 1, zero padding ``k // 2``) as k·k attention heads over the pixels.

    Every pixel is a token, numbered row by row. Head (ky, kx) has the offset (dy, dx) = (ky - k//2, kx - k//2):
    query pixel (r, c) may attend to the one key pixel (r + dy, c + dx), so its softmax puts weight 1 there (the
    scores do not matter: one allowed key), and a query whose key falls outside the image has no allowed key and
    gets zeros (the package's rule for such a row), which is the zero padding. The head's value projection is the
    kernel's slice ``weight[:, :, ky, kx]``; the heads' outputs are summed (the output projection of multi-head
    attention, made of identity blocks) and the bias added. The weights returned are each head's i x j matrix.

    Shape: x ``(b, c, H, W)``, weight ``(o, c, kh, kw)`` with odd kh, kw, bias ``(o,)`` or None
        -> output ``(b, o, H, W)``, weights ``(kh * kw, i, j)`` with ``i = j = H * W``.
    """
    b, _, height, width = x.shape
    out_channels, _, kh, kw = weight.shape
    tokens = x.flatten(2).transpose(1, 2)  # (b, n, c): pixel r * W + c is token number r * W + c
    pixel = torch.arange(height * width, device=x.device)
    row, col = pixel // width, pixel % width  # where each token sits in the image
    zeros = torch.zeros(b, height * width, 1, dtype=x.dtype, device=x.device)  # content-free queries and keys
    out, heads = torch.zeros(b, height * width, out_channels, dtype=x.dtype, device=x.device), []
    for ky in range(kh):
        for kx in range(kw):
            dy, dx = ky - kh // 2, kx - kw // 2
            allowed = (row[None, :] == row[:, None] + dy) & (col[None, :] == col[:, None] + dx)  # (i, j)
            values = tokens @ weight[:, :, ky, kx].T  # v^j = W^v_head x^j, (b, j, o)
            head_out, head_weights = attention(zeros, zeros, values, allowed)  # (b, i, o), (b, i, j)
            out = out + head_out
            heads.append(head_weights[0])
    if bias is not None:
        out = out + bias
    return out.transpose(1, 2).reshape(b, out_channels, height, width), torch.stack(heads)  # (b, o, H, W)
