"""Gated attention: each head's output is multiplied by a sigmoid gate computed from the token itself.

"Gated Attention for Large Language Models: Non-linearity, Sparsity, and Attention-Sink-Free" (Qiu et al. 2025),
used in Qwen3-Next: after scaled dot-product attention, Y' = Y * sigmoid(X W_g), with X the layer's input at the
query's position. A head that has nothing to add can close its gate instead of parking its softmax weight on the
first token, and the paper measures far less weight on the first token with the gate (and steadier training).
Qwen3-Next's query projection emits the gate beside the queries (Hugging Face ``modeling_qwen3_next``, read, not
copied); here it is a projection of its own, which computes the same thing.

Reference: :func:`attention_lab.reference.gated_attention`, ``heads * sigmoid(gate_scores)``. How this differs and
what that buys: :class:`OutputGate` holds the projection W_g, elementwise (one gate per feature, e -> e, the paper's
best) or per head (e -> h, h numbers per token), and checks what it is given; equal to the reference in fp64.
"""

from __future__ import annotations

import torch
from einops import rearrange
from torch import nn

from .._validation import check_bool, check_heads_divide, check_positive_ints, check_tensor, fail

__all__ = ["OutputGate", "gate_heads"]


def gate_heads(heads: torch.Tensor, gate_scores: torch.Tensor) -> torch.Tensor:
    """``heads * sigmoid(gate_scores)``: a gate in (0, 1) on each head's output, per feature or per head.

    Shape: heads ``(b, h, i, d)``, gate_scores ``(b, h, i, d)`` or ``(b, h, i, 1)`` -> ``(b, h, i, d)``.
    """
    fn = "gate_heads"
    check_tensor(fn, "heads", heads, min_dim=2, floating=True)
    check_tensor(fn, "gate_scores", gate_scores, min_dim=2, floating=True)
    if gate_scores.shape[:-1] != heads.shape[:-1] or gate_scores.shape[-1] not in (1, heads.shape[-1]):
        fail(fn, f"gate_scores must have the heads' shape {tuple(heads.shape)} or end in 1 (one gate per head), got "
                 f"shape {tuple(gate_scores.shape)}; compute one score per feature or per head")
    return heads * torch.sigmoid(gate_scores)


class OutputGate(nn.Module):
    """The gate's projection W_g (``proj``, an ``nn.Linear`` e -> e, or e -> h with ``per_head=True``);
    ``forward(x, heads)`` gates the heads with the scores of x.

    Shape: x ``(b, i, e)``, heads ``(b, h, i, d)`` -> ``(b, h, i, d)``.
    """

    def __init__(self, embed_dim: int, num_heads: int, *, per_head: bool = False) -> None:
        super().__init__()
        fn = "OutputGate"
        check_positive_ints(fn, embed_dim=embed_dim, num_heads=num_heads)
        check_heads_divide(fn, "embed_dim", embed_dim, num_heads)
        self.per_head = check_bool(fn, "per_head", per_head)
        self.num_heads = num_heads
        self.proj = nn.Linear(embed_dim, num_heads if per_head else embed_dim)

    def extra_repr(self) -> str:
        return f"num_heads={self.num_heads}, per_head={self.per_head}"

    def forward(self, x: torch.Tensor, heads: torch.Tensor) -> torch.Tensor:
        scores = rearrange(self.proj(x), "b i (h d) -> b h i d", h=self.num_heads)  # (b, h, i, d or 1)
        return gate_heads(heads, scores)
