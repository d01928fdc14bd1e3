"""Checks for lesson 08 (training a tiny Transformer stably: warmup, AdamW, clipping)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch

from ...models.training import warmup_schedule
from ._core import as_tensor, close, correct, hint


def learning_rates(answer: object, *, peak_lr: float, warmup_steps: int, total_steps: int,
                   steps: Sequence[int]) -> None:
    """Exercise 1: the learning rate at ``steps`` for linear warmup then cosine decay (one value per step)."""
    schedule = warmup_schedule(warmup_steps, total_steps, "cosine")
    expected = torch.tensor([peak_lr * schedule(s) for s in steps], dtype=torch.float64)
    got = as_tensor(answer, "your list of learning rates").double().flatten()
    if got.shape != expected.shape:
        hint(f"give one learning rate per step in {list(steps)}: {len(steps)} numbers, you gave {got.numel()}")
    if close(got, expected, atol=1e-5, rtol=1e-4):  # values copied from a 5-decimal printout still pass
        correct(f"warmup to {peak_lr:g} over {warmup_steps} steps, then a cosine down to 0 at step {total_steps}")
        return

    def cosine_after(step: int, start: int) -> float:
        return 0.5 * (1 + math.cos(math.pi * min(1.0, (step - start) / max(1, total_steps - start))))

    from_zero = [s / warmup_steps if s < warmup_steps else cosine_after(s, warmup_steps) for s in steps]
    whole_run = [(s + 1) / warmup_steps if s < warmup_steps else cosine_after(s, 0) for s in steps]
    factors = [schedule(s) for s in steps]
    for wrong, message in (
        ([peak_lr * f for f in from_zero], "during warmup step s gets (s + 1) / warmup_steps of the peak, so the "
                                           "very first step (s = 0) already moves the weights"),
        ([peak_lr * f for f in whole_run], "the cosine starts when the warmup ends: its progress p runs from 0 at "
                                           "step warmup_steps to 1 at step total_steps"),
        (factors, "these look like the schedule's factors; multiply them by the peak learning rate"),
    ):
        if close(got, torch.tensor(wrong, dtype=torch.float64), atol=1e-5, rtol=1e-4):
            hint(message)
    hint("compare each value with the two phases: a straight line up to the peak, then half a cosine down to 0")


def _adam_step(w: float, g: float, lr: float, eps: float) -> float:
    # Adam's first step: m_hat = g and sqrt(v_hat) = |g| after bias correction
    return w - lr * g / (abs(g) + eps)


def one_step(adamw: object, adam_l2: object, *, w: float, grad: float, lr: float, weight_decay: float,
             eps: float = 1e-8) -> None:
    """Exercise 2: one weight after the first step of AdamW and of Adam with an L2 penalty."""
    answers = []
    for value, name in ((adamw, "w_adamw"), (adam_l2, "w_adam_l2")):
        t = as_tensor(value, name)
        if t.numel() != 1:
            hint(f"{name} should be a single number (the weight after one step), got {t.numel()} numbers")
        answers.append(float(t))
    got_w, got_l2 = answers
    expected_w = _adam_step(w * (1 - lr * weight_decay), grad, lr, eps)
    expected_l2 = _adam_step(w, grad + weight_decay * w, lr, eps)

    def near(a: float, b: float) -> bool:
        return abs(a - b) <= 1e-6 + 1e-6 * abs(b)

    if near(got_w, expected_w) and near(got_l2, expected_l2):
        correct(f"AdamW moves w to {expected_w:.4f}, Adam + L2 to {expected_l2:.4f}: the same weight decay, "
                f"two different updates")
        return
    if near(got_w, expected_l2) and near(got_l2, expected_w):
        hint("the two answers are swapped: AdamW shrinks w directly, Adam + L2 adds weight_decay * w to the "
             "gradient")
    if not near(got_w, expected_w):
        if near(got_w, _adam_step(w, grad, lr, eps)):
            hint("your AdamW step has no weight decay: AdamW also multiplies w by (1 - lr * weight_decay)")
        if near(got_w, w - lr * weight_decay * w - lr * grad):
            hint("Adam does not step by lr * g: on the first step it divides g by sqrt(v_hat) = |g|, so each "
                 "weight moves by about lr in the direction of -g")
        hint("AdamW = decay, then Adam: w * (1 - lr * weight_decay), minus lr * m_hat / (sqrt(v_hat) + eps)")
    if near(got_l2, expected_w) or near(got_l2, _adam_step(w, grad, lr, eps) - lr * weight_decay * w):
        hint("in Adam + L2 the penalty joins the gradient first, g' = g + weight_decay * w, and then Adam "
             "divides g' by its own size: the decay is normalised away like any gradient")
    hint("Adam + L2: g' = g + weight_decay * w, then the first Adam step moves w by lr * g' / (|g'| + eps)")


def _call_clip(fn: object, grads: list[torch.Tensor], max_norm: float) -> list[torch.Tensor]:
    if not callable(fn):
        hint("pass your function itself, e.g. check.clip_by_total_norm(clip), not the result of calling it")
    try:
        result = fn([g.clone() for g in grads], max_norm)
    except NotImplementedError:
        hint("your function still raises NotImplementedError: replace the stub with your code")
    if isinstance(result, torch.Tensor) or not isinstance(result, (list, tuple)) or len(result) != len(grads):
        hint(f"return a list with one clipped tensor per gradient ({len(grads)} here)")
    return [as_tensor(r, "each clipped gradient") for r in result]


def clip_by_total_norm(fn: Callable[[list[torch.Tensor], float], list[torch.Tensor]]) -> None:
    """Exercise 3: ``fn(grads, max_norm)`` returns the gradients rescaled so their total norm is <= max_norm."""
    gen = torch.Generator().manual_seed(8)
    grads = [torch.randn(3, 4, generator=gen) * 2, torch.randn(5, generator=gen) * 0.1,
             torch.randn(2, 2, generator=gen)]
    total = float(torch.linalg.vector_norm(torch.cat([g.flatten() for g in grads])))
    for max_norm in (total / 4, total * 2):  # one call that must clip, one that must leave the gradients alone
        got = _call_clip(fn, grads, max_norm)
        scale = min(1.0, max_norm / (total + 1e-6))  # the formula of torch.nn.utils.clip_grad_norm_
        expected = [g * scale for g in grads]
        if all(close(a, b, atol=1e-5, rtol=1e-5) for a, b in zip(got, expected)):
            continue
        if any(a.shape != b.shape for a, b in zip(got, expected)):
            hint("each clipped gradient keeps its own shape; scale it, do not flatten or concatenate the result")
        per_tensor = [g * min(1.0, max_norm / (float(g.norm()) + 1e-6)) for g in grads]
        if all(close(a, b, atol=1e-5, rtol=1e-5) for a, b in zip(got, per_tensor)):
            hint("clip by the norm of all gradients together (as if concatenated into one vector), not each "
                 "tensor by its own norm: one scale for everything keeps the direction of the update")
        always = [g * max_norm / total for g in grads]
        if all(close(a, b, atol=1e-5, rtol=1e-5) for a, b in zip(got, always)):
            hint("clipping only ever scales down: when the total norm is already <= max_norm, leave the "
                 "gradients as they are")
        hint("compute the total norm sqrt(sum of all squared entries), then multiply every gradient by "
             "min(1, max_norm / total_norm)")
    correct("one scale, min(1, max_norm / total norm), for every gradient: the update keeps its direction")
