"""QK-norm: each head's queries and keys pass through RMSNorm before their dot products (OLMo 2, Qwen3, Gemma 3).

Without it, the attention scores q . k / sqrt(d) are free to grow with the weights: at a high learning rate they do,
the softmax saturates on one key per row, its gradient vanishes and training stalls or diverges ("attention logit
growth", Dehghani et al. 2023 for ViT-22B; Wortsman et al. 2023 reproduce it in small models and measure that
normalising q and k moves the learning rate at which training breaks). After RMSNorm each q and k has length
about sqrt(d) times its learned gain, so a score stays near sqrt(d) * gain_q * gain_k and can grow only through the
gains.

Reference: :func:`attention_lab.reference.qk_norm_attention` (RMSNorm written out, then softmax attention). How this
differs and what that buys: :func:`qk_norm` is ``torch.nn.functional.rms_norm`` on q and k (one fused call each), and
:class:`QKNorm` holds the two gains of shape ``(d,)`` that every head shares, as Qwen3's ``q_norm`` and ``k_norm``
over ``head_dim`` do (Hugging Face ``modeling_qwen3``, read, not copied; OLMo 2 normalises the whole projection,
all heads together, instead). Tested equal to the reference in fp64, values and gradients.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .._validation import check_number, check_positive_int, check_qk, check_tensor, fail

__all__ = ["QKNorm", "qk_norm"]


def qk_norm(q: torch.Tensor, k: torch.Tensor, q_weight: torch.Tensor, k_weight: torch.Tensor, *,
            eps: float = 1e-6) -> tuple[torch.Tensor, torch.Tensor]:
    """RMSNorm of every query and key over its d features: x / sqrt(mean(x^2) + eps) * weight.

    Shape: q ``(..., i, d)``, k ``(..., j, d)``, q_weight and k_weight ``(d,)`` -> q ``(..., i, d)``, k ``(..., j, d)``.
    """
    fn = "qk_norm"
    check_qk(fn, q, k)
    eps = check_number(fn, "eps", eps, low=0, low_open=True, hint="pass a small positive eps such as 1e-6")
    d = q.shape[-1]
    for name, weight in (("q_weight", q_weight), ("k_weight", k_weight)):
        check_tensor(fn, name, weight, floating=True)
        if weight.shape != (d,):
            fail(fn, f"{name} must have shape (d,) = ({d},), one gain per feature of a head, got shape "
                     f"{tuple(weight.shape)}; pass torch.ones({d}) for no gain")
    return F.rms_norm(q, (d,), q_weight, eps), F.rms_norm(k, (d,), k_weight, eps)


class QKNorm(nn.Module):
    """The learned gains of QK-norm (``q_weight``, ``k_weight``, each ``(head_dim,)``, starting at 1), shared by the
    heads; ``forward(q, k)`` returns them normalised with :func:`qk_norm`.

    Shape: q ``(b, h, i, d)``, k ``(b, h_kv, j, d)`` -> the same shapes.
    """

    def __init__(self, head_dim: int, *, eps: float = 1e-6) -> None:
        super().__init__()
        fn = "QKNorm"
        self.head_dim = check_positive_int(fn, "head_dim", head_dim)
        self.eps = check_number(fn, "eps", eps, low=0, low_open=True, hint="pass a small positive eps such as 1e-6")
        self.q_weight = nn.Parameter(torch.ones(head_dim))
        self.k_weight = nn.Parameter(torch.ones(head_dim))

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, eps={self.eps}"

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return qk_norm(q, k, self.q_weight, self.k_weight, eps=self.eps)
