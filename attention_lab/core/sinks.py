"""Softmax with learned sink logits (注意力汇聚): one extra logit per head in the denominator, with no value behind it.

Softmax must hand out a total weight of 1, so a head that has nothing to read still reads something: trained models
park that weight on the first token, an "attention sink" (Xiao et al. 2024, *Efficient Streaming Language Models
with Attention Sinks*). gpt-oss (OpenAI 2025) gives each head a learned logit s_h instead:

    alpha'_{i,j} = exp(alpha_{i,j}) / (exp(s_h) + sum_j' exp(alpha_{i,j'}))

so a row's weights sum to less than 1, and the rest goes nowhere. A row that may attend to no key gives all its
weight to the sink: its output is 0 (as a fully masked row gives 0 everywhere in the package).

Reference: :func:`attention_lab.reference.attention_with_sinks`, which appends s_h as a column of the scores, takes
a softmax over j + 1 entries and drops that column again, as gpt-oss's reference ``sdpa`` in
``gpt_oss/torch/model.py`` does (read, not copied). How this differs and what that buys: the sink enters only the row
maximum and the denominator, so no ``(i, j + 1)`` copy of the scores is made, and the weights are a softmax of their
own that tests compare with the reference in fp64, values and gradients; fp16/bf16 scores are normalised in fp32,
as :func:`~attention_lab.masked_softmax` does.
"""

from __future__ import annotations

import math

import torch

from .._validation import LOW_PRECISION, check_qkv, check_scale, check_tensor, fail
from ._mask_checks import check_mask

__all__ = ["attention_with_sinks", "softmax_with_sinks"]


def _check_sinks(fn: str, scores: torch.Tensor, sink_logits: object) -> torch.Tensor:
    check_tensor(fn, "sink_logits", sink_logits, floating=True)
    if scores.dim() < 3:
        fail(fn, f"scores must have a heads axis, shape (..., h, i, j), got shape {tuple(scores.shape)}; add one "
                 f"with scores.unsqueeze(0)")
    heads = scores.shape[-3]
    if sink_logits.shape != (heads,):
        fail(fn, f"sink_logits must hold one logit per head, shape ({heads},) for scores of shape "
                 f"{tuple(scores.shape)}, got shape {tuple(sink_logits.shape)}; pass a tensor of {heads} numbers")
    if sink_logits.dtype != scores.dtype or sink_logits.device != scores.device:
        fail(fn, f"sink_logits must share the scores' dtype and device ({scores.dtype}, {scores.device}), got "
                 f"({sink_logits.dtype}, {sink_logits.device}); convert with sink_logits.to(scores)", TypeError)
    if not bool(torch.isfinite(sink_logits).all()):
        fail(fn, f"sink_logits must be finite, got {sink_logits.tolist()}; a sink of -inf is plain softmax: "
                 f"pass no sink instead")
    return sink_logits


def softmax_with_sinks(scores: torch.Tensor, sink_logits: torch.Tensor, mask: torch.Tensor | None = None
                       ) -> torch.Tensor:
    """Softmax over the keys with one extra logit per head, ``sink_logits[h]``, in the denominator only.

    Each row's weights sum to 1 - exp(s_h) / (exp(s_h) + sum_j exp(alpha_{i,j})), less than 1; a row with no
    allowed key gets zeros (all its weight goes to the sink). ``scores`` is never modified.

    Shape: scores ``(..., h, i, j)``, sink_logits ``(h,)``, mask bool broadcastable to scores (True = may attend)
        -> weights ``(..., h, i, j)``.
    """
    fn = "softmax_with_sinks"
    check_tensor(fn, "scores", scores, floating=True)
    sink = _check_sinks(fn, scores, sink_logits)[:, None, None]  # (h, 1, 1)
    work = scores.float() if scores.dtype in LOW_PRECISION else scores  # fp16/bf16 sums lose digits: fp32
    if mask is not None:
        check_mask(fn, mask, scores.shape, allow_float=False, like=scores)
        work = work.masked_fill(~mask, float("-inf"))  # out of place
    sink = sink.to(work.dtype)
    # the row maximum includes the sink, which is finite: no row is all -inf, so no 0/0
    row_max = torch.maximum(work.amax(dim=-1, keepdim=True), sink).detach()  # (..., h, i, 1)
    exp = torch.exp(work - row_max)  # (..., h, i, j)
    return (exp / (exp.sum(dim=-1, keepdim=True) + torch.exp(sink - row_max))).to(scores.dtype)


def attention_with_sinks(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, sink_logits: torch.Tensor,
                         mask: torch.Tensor | None = None, *, scale: float | None = None
                         ) -> tuple[torch.Tensor, torch.Tensor]:
    """Scaled dot-product attention whose softmax has a learned sink logit per head (gpt-oss); see the module.

    Shape: q ``(..., h, i, d)``, k ``(..., h, j, d)``, v ``(..., h, j, dv)``, sink_logits ``(h,)``, mask bool
        broadcastable to ``(..., h, i, j)`` -> output ``(..., h, i, dv)``, weights ``(..., h, i, j)``.
    """
    fn = "attention_with_sinks"
    check_qkv(fn, q, k, v)
    scale = check_scale(fn, scale)
    scores = q @ k.transpose(-2, -1) * (1.0 / math.sqrt(q.shape[-1]) if scale is None else scale)  # (..., h, i, j)
    if scores.dim() < 3:
        fail(fn, f"q and k must have a heads axis, shape (..., h, i, d), got q {tuple(q.shape)}; add one with "
                 f"q.unsqueeze(0)")
    _check_sinks(fn, scores, sink_logits)
    if mask is not None:
        check_mask(fn, mask, scores.shape, allow_float=False, like=scores)
    weights = softmax_with_sinks(scores, sink_logits, mask)  # (..., h, i, j)
    return weights @ v, weights  # (..., h, i, dv)
