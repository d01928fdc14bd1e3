"""Logit soft-capping (Gemma 2): scores pass through c * tanh(s / c) before the softmax.

A score can grow without bound during training; the softmax then puts all of a row's weight on one key and its
gradient with respect to the other keys vanishes. Gemma 2 (Gemma Team 2024) caps the attention scores at c = 50 and
the output logits at c = 30 with a smooth function: c * tanh(s / c) is about s while |s| << c, never leaves
(-c, c), and its slope 1 - tanh^2(s / c) shrinks the gradient of a score as it nears the cap (the Hugging Face
Gemma 2 code divides by ``attn_logit_softcapping``, takes tanh and multiplies back, before the mask; read, not
copied).

Reference: :func:`attention_lab.reference.softcap`, the formula itself. How this differs and what that buys: it checks
its inputs, and for fp16/bf16 scores it computes in fp32 and casts back, so that s / c and the tanh do not lose the
digits a half-precision division would; the result equals the reference in fp64 (tests, values and gradients).
"""

from __future__ import annotations

import torch

from .._validation import LOW_PRECISION, check_number, check_tensor

__all__ = ["softcap"]


def softcap(scores: torch.Tensor, cap: float) -> torch.Tensor:
    """``cap * tanh(scores / cap)``: every score kept within [-cap, cap], small ones almost unchanged. A score of
    -inf becomes -cap, so cap the scores before masking them (as Gemma 2 does). ``scores`` is never modified.

    Shape: scores any shape -> the same shape.
    """
    fn = "softcap"
    check_tensor(fn, "scores", scores, floating=True)
    cap = check_number(fn, "cap", cap, low=0, low_open=True, hint="Gemma 2 uses cap=50.0 for attention scores")
    work = scores.float() if scores.dtype in LOW_PRECISION else scores
    return (torch.tanh(work / cap) * cap).to(scores.dtype)
