"""The self-attention layer (自注意力层) as an ``nn.Module``: one head, one fused projection for Q, K and V.

Lee's notation: every input vector a^i is projected three times, q^i = W^q a^i, k^i = W^k a^i,
v^i = W^v a^i; in matrix form Q = W^q I, K = W^k I, V = W^v I with the inputs I as columns. Here the three
weight matrices are stacked into one ``nn.Linear(e, 3e)`` (one matrix product instead of three) whose output
is split in three. The layer then computes b^i = sum_j alpha'_{i,j} v^j with
alpha'_{i,j} = softmax_j(q^i . k^j / sqrt(e)). There is no output projection: that arrives with several heads
(lesson 05, :class:`attention_lab.MultiHeadAttention`).
"""

from __future__ import annotations

import torch
from torch import nn

from .._validation import check_bool, check_positive_int, check_sequence_input, check_tensor, fail
from .functional import scaled_dot_product_attention

__all__ = ["SelfAttention"]


class SelfAttention(nn.Module):
    """Single-head self-attention with a fused Q/K/V projection ``qkv = nn.Linear(e, 3 * e, bias=bias)``.

    ``forward(x, mask=None, need_weights=False)`` returns ``(output, weights)``, ``weights`` being ``None``
    unless asked for. Scores are scaled by ``1/sqrt(e)`` (one head: the head dimension is ``e``).

    ``mask`` is bool, True = may attend (build it with :mod:`attention_lab.core.masks`), in any of the shapes
    ``(i, j)`` (same for every sequence: causal, sliding window, a graph's adjacency), ``(b, i, j)``, or
    the 4-D shapes of the multi-head world with a head axis of 1: ``(b, 1, i, j)`` and the key mask
    ``(b, 1, 1, j)`` from :func:`attention_lab.as_key_mask`. A float mask is added to the scores
    (0 keeps, -inf removes). A query with no allowed key outputs zeros, never NaN; an empty sequence (n = 0)
    gives an empty output.

    Shape: x ``(b, n, e)``, mask broadcastable to ``(b, i, j)`` (or ``(b, 1, i, j)``)
        -> output ``(b, i, e)``, weights ``(b, i, j)`` or ``None`` (``i = j = n``).
    """

    def __init__(self, embed_dim: int, *, bias: bool = True) -> None:
        super().__init__()
        fn = "SelfAttention"
        check_positive_int(fn, "embed_dim", embed_dim)
        check_bool(fn, "bias", bias)
        self.embed_dim = embed_dim
        self.qkv = nn.Linear(embed_dim, 3 * embed_dim, bias=bias)

    def extra_repr(self) -> str:
        return f"embed_dim={self.embed_dim}, bias={self.qkv.bias is not None}"

    def project(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The queries, keys and values of every token: one matrix product, split in three.

        Shape: x ``(b, n, e)`` -> q, k, v ``(b, n, e)`` each.
        """
        self._check_input(x)
        q, k, v = self.qkv(x).chunk(3, dim=-1)  # 3 x (b, n, e): columns [0:e] are W^q, [e:2e] W^k, [2e:3e] W^v
        return q, k, v

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None,
                need_weights: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Attend from every token of ``x`` to every token of ``x``; see the class docstring.

        Shape: x ``(b, n, e)``, mask broadcastable to ``(b, i, j)`` -> output ``(b, i, e)``,
            weights ``(b, i, j)`` or ``None``.
        """
        check_bool("SelfAttention.forward", "need_weights", need_weights)
        q, k, v = self.project(x)  # (b, n, e) each
        if mask is not None:
            mask = self._as_4d(mask, x)
        # A head axis of size 1 lets every mask shape of the library broadcast: (i, j), (b, 1, i, j), (b, 1, 1, j).
        out, weights = scaled_dot_product_attention(q[:, None], k[:, None], v[:, None], mask)  # (b, 1, i, e)
        return out[:, 0], (weights[:, 0] if need_weights else None)  # (b, i, e), (b, i, j)

    def _check_input(self, x: object) -> None:
        check_sequence_input("SelfAttention.forward", "x", x, self.qkv.weight)

    @staticmethod
    def _as_4d(mask: object, x: torch.Tensor) -> torch.Tensor:
        fn = "SelfAttention.forward"
        check_tensor(fn, "mask", mask)
        b, n, _ = x.shape
        if mask.dim() in (2, 3):
            return mask[..., None, :, :] if mask.dim() == 3 else mask  # (b, 1, i, j) or (i, j)
        if mask.dim() == 4 and mask.shape[1] == 1:
            return mask
        fail(fn, f"mask must have shape (i, j), (b, i, j), (b, 1, i, j) or (b, 1, 1, j) with b={b}, "
                 f"i=j={n}, got shape {tuple(mask.shape)}; this layer has one head, so a 4-D mask needs "
                 f"a head axis of size 1")
