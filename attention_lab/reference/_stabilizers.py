"""The plain math of lesson 14's changes to softmax attention: sink logits, soft-capping, QK-norm, the output gate,
and the StreamingLLM cache (the package's ``attention_lab.reference``)."""

from __future__ import annotations

import math

import torch

__all__ = ["attention_with_sinks", "softcap", "rms_norm", "qk_norm_attention", "gated_attention",
           "streaming_attention"]


def attention_with_sinks(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, sink_logits: torch.Tensor,
                         mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Softmax attention whose denominator has one more term per head, exp(s_h), a learned logit with no value:
    alpha'_{i,j} = exp(alpha_{i,j}) / (exp(s_h) + sum_j' exp(alpha_{i,j'})) (gpt-oss).

    Shape: q ``(..., h, i, d)``, k ``(..., h, j, d)``, v ``(..., h, j, dv)``, sink_logits ``(h,)``, mask bool
    broadcastable to ``(..., h, i, j)`` -> output ``(..., h, i, dv)``, weights ``(..., h, i, j)`` (rows sum to < 1).
    """
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # alpha_{i,j}, (..., h, i, j)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    sink = sink_logits[:, None, None].expand(*scores.shape[:-1], 1)  # one more column per row, (..., h, i, 1)
    weights = torch.softmax(torch.cat([scores, sink], dim=-1), dim=-1)[..., :-1]  # drop the sink's column
    return weights @ v, weights


def softcap(scores: torch.Tensor, cap: float) -> torch.Tensor:
    """Gemma 2's soft-capping: cap * tanh(scores / cap), between -cap and cap, about the identity for |s| << cap.

    Shape: any -> the same.
    """
    return cap * torch.tanh(scores / cap)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """x / sqrt(mean(x^2) + eps) * weight over the last axis (RMSNorm, Zhang and Sennrich 2019).

    Shape: x ``(..., d)``, weight ``(d,)`` -> ``(..., d)``.
    """
    return x / torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * weight


def qk_norm_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, q_weight: torch.Tensor,
                      k_weight: torch.Tensor, mask: torch.Tensor | None = None, eps: float = 1e-6
                      ) -> tuple[torch.Tensor, torch.Tensor]:
    """Softmax attention after RMSNorm of each head's queries and keys (QK-norm: OLMo 2, Qwen3, Gemma 3).

    Shape: q ``(..., i, d)``, k ``(..., j, d)``, v ``(..., j, dv)``, q_weight and k_weight ``(d,)``
    -> output ``(..., i, dv)``, weights ``(..., i, j)``.
    """
    q, k = rms_norm(q, q_weight, eps), rms_norm(k, k_weight, eps)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., i, j)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)  # a row with no key: zeros
    return weights @ v, weights


def gated_attention(heads: torch.Tensor, gate_scores: torch.Tensor) -> torch.Tensor:
    """Each head's attention output times a sigmoid gate computed from the token itself: Y' = Y * sigmoid(X W_g)
    (Qiu et al. 2025, the gate after SDPA; Qwen3-Next).

    Shape: heads ``(b, h, i, d)``, gate_scores ``(b, h, i, d)`` (one gate per feature) or ``(b, h, i, 1)`` (per
    head) -> ``(b, h, i, d)``.
    """
    return heads * torch.sigmoid(gate_scores)


def streaming_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, sinks: int, window: int
                        ) -> tuple[torch.Tensor, torch.Tensor]:
    """Causal attention that sees the first ``sinks`` positions and the last ``window`` ones (StreamingLLM's cache,
    Xiao et al. 2024): query i sees key j when j <= i and (j < sinks or j > i - window).

    Shape: q ``(..., i, d)``, k ``(..., j, d)``, v ``(..., j, dv)`` (i = j) -> ``(..., i, dv)``, ``(..., i, j)``.
    """
    i = torch.arange(q.shape[-2], device=q.device)[:, None]  # (i, 1)
    j = torch.arange(k.shape[-2], device=q.device)[None, :]  # (1, j)
    seen = (j <= i) & ((j < sinks) | (j > i - window))  # (i, j)
    scores = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).masked_fill(~seen, float("-inf"))  # (..., i, j)
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights
