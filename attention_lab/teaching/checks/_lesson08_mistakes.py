"""What the common wrong answers of lesson 08's exercises compute, each with the hint that names its mistake: the
checks in :mod:`lesson08` call these once an answer is known to be wrong (each raises the hint it finds, or returns
and leaves the check's general hint to the caller)."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from ...i18n import Message, msg
from ._core import close, hint

# ---- exercise 1: the schedule ----------------------------------------------------------------------------------


def schedule_mistake(got: torch.Tensor, expected: torch.Tensor, warmup: int, steps: range) -> None:
    """Name the mistake behind a wrong schedule for one warmup length, if it is a known one (a wrong warmup part
    first: the decay's mistakes are looked for only after a right warmup)."""
    ramp, decay = slice(0, warmup), slice(warmup, None)

    def matches(formula: Callable[[int], float], part: slice) -> bool:
        wrong = torch.tensor([formula(s) for s in steps[part]], dtype=torch.float64)
        return close(got[part], wrong, atol=1e-9, rtol=1e-6)

    peak = float(got[warmup - 1])
    if abs(peak / float(expected[warmup - 1]) - 1) > 1e-6 and close(got, peak * expected, atol=1e-9, rtol=1e-6):
        hint(msg("your factor has the right shape but is {peak:.4g}, not 1, at the last warmup step: return the "
                 "factor (1 at the peak), not a learning rate; the optimizer multiplies it by the peak learning rate",
                 peak=peak))
    if not close(got[ramp], expected[ramp], atol=1e-9, rtol=1e-6):
        if matches(lambda s: s / warmup, ramp):
            hint(msg("during the warmup step s gets (s + 1) / warmup_steps of the peak, as in the lesson: the very "
                     "first step (s = 0) already moves the weights, and the last warmup step reaches the peak"))
        if matches(lambda s: (s + 1) // warmup, ramp):
            hint(msg("your warmup rounds down to whole numbers, so it stays at 0 until its last step: divide "
                     "without rounding"))
        return
    if got[warmup] > 1 + 1e-9 and matches(lambda s: (s + 1) / warmup, slice(warmup, warmup + 1)):
        hint(msg("at step warmup_steps your factor is still on the warmup line and above 1: the warmup's last step "
                 "is warmup_steps - 1 (steps count from 0), and the decay starts at the step after it"))
    if matches(lambda s: 1.0, decay):
        hint(msg("after the warmup the factor must fall, like one over the square root of the step"))
    if matches(lambda s: 1 / math.sqrt(s + 1), decay):
        hint(msg("your decay jumps down where the warmup ends: scale it so that it continues from the peak "
                 "(factor 1) instead of restarting at 1 / sqrt(step)"))
    if matches(lambda s: math.sqrt(warmup / s), decay):
        hint(msg("count the step as the warmup does (s + 1): then both parts give exactly 1 at the last warmup "
                 "step and the curve has no kink of one step"))
    if matches(lambda s: warmup / (s + 1), decay):
        hint(msg("your decay falls like 1 / step; the original Transformer's falls more slowly, like one over "
                 "the square root of the step"))
    if matches(lambda s: (warmup / (s + 1)) ** 0.25, decay):
        hint(msg("your decay falls like one over the fourth root of the step, too slowly: it should fall like one "
                 "over the square root"))


# ---- exercise 2: one AdamW step and one Adam + L2 step -----------------------------------------------------------

def adam_first_step(w: float, grad: float, lr: float, eps: float = 1e-8, corrected: bool = True) -> float:
    """w after Adam's first step on gradient ``grad``: m_hat = g and sqrt(v_hat) = |g| after bias correction (the
    raw moments, with PyTorch's betas 0.9 and 0.999, are 0.1 g and 0.001 g²)."""
    m, root_v = (grad, abs(grad)) if corrected else (0.1 * grad, math.sqrt(0.001) * abs(grad))
    return w - lr * m / (root_v + eps)


def adamw(w: float, grad: float, lr: float, weight_decay: float, eps: float = 1e-8) -> float:
    return adam_first_step(w * (1 - lr * weight_decay), grad, lr, eps)


def adam_l2(w: float, grad: float, lr: float, weight_decay: float, eps: float = 1e-8) -> float:
    return adam_first_step(w, grad + weight_decay * w, lr, eps)


def _adamw_mistakes(w: float, g: float, lr: float, wd: float, eps: float) -> list[tuple[float, Message]]:
    step = adam_first_step(0.0, g, lr, eps)  # Adam's own move, -lr · g / |g|
    return [
        (w + step, msg("your AdamW step has no weight decay: besides Adam's step, AdamW shrinks w by the fraction "
                       "lr · λ")),
        (w * (1 - lr * wd) - lr * g, msg("Adam does not step by lr times the gradient: on the first step it divides "
                                         "the gradient by its own size, so each weight moves by about lr, against "
                                         "the sign of its gradient")),
        (w * (1 - wd) + step, msg("AdamW shrinks the weight by the fraction lr · λ per step, not by λ: the decay is "
                                  "scaled by the learning rate too")),
        ((w + step) * (1 - lr * wd), msg("AdamW shrinks the weight it started the step with (by lr · λ · w), not the "
                                         "weight after Adam's step")),
        (adam_first_step(w * (1 - lr * wd), g, lr, eps, corrected=False),
         msg("on the first step Adam's bias correction makes m_hat = g and sqrt(v_hat) = |g| (as the exercise says); "
             "without it the raw moments move the weight by less than lr")),
    ]


def _adam_l2_mistakes(w: float, g: float, lr: float, wd: float, eps: float) -> list[tuple[float, Message]]:
    combined = g + wd * w
    return [
        (w - lr * combined / (abs(g) + eps),
         msg("Adam divides the gradient it sees by that gradient's own size: in Adam + L2 that is the combined "
             "gradient g + λ · w, not the loss gradient alone")),
        (adam_first_step(w, g + wd * w / 2, lr, eps),
         msg("the penalty (λ/2) · w² has the gradient λ · w, not (λ/2) · w")),
        (adam_first_step(w, g - wd * w, lr, eps),
         msg("the penalty's gradient λ · w points away from zero, so it is added to the loss gradient, not "
             "subtracted")),
        (w - lr * combined, msg("Adam does not step by lr times the gradient: on the first step it divides the "
                                "gradient by its own size, so each weight moves by about lr, against the sign of "
                                "its gradient")),
        (adam_first_step(w, combined, lr, eps, corrected=False),
         msg("on the first step Adam's bias correction makes m_hat = g and sqrt(v_hat) = |g| (as the exercise says); "
             "without it the raw moments move the weight by less than lr")),
    ]


def step_mistake(got: list[tuple[float, float]], cases: list[tuple[float, float, float, float]],
                 eps: float = 1e-8) -> None:
    """Name the mistake behind wrong (AdamW, Adam + L2) pairs: a mistake is named only when the answer gives that
    mistake's numbers on every case where the right answer differs from it."""
    right = [(adamw(*case, eps), adam_l2(*case, eps)) for case in cases]

    def near(a: float, b: float) -> bool:
        return abs(a - b) <= 1e-6 + 1e-6 * abs(b)

    def everywhere(part: int, wrong: list[float]) -> bool:
        return (any(not near(x, r[part]) for x, r in zip(wrong, right))
                and all(near(g[part], x) for g, x in zip(got, wrong)))

    if all(near(g[0], r[1]) and near(g[1], r[0]) for g, r in zip(got, right)):
        hint(msg("the two answers are swapped: AdamW shrinks the weight directly, Adam + L2 adds the penalty's "
                 "gradient to the loss gradient"))
    if everywhere(1, [r[0] for r in right]):
        hint(msg("your Adam + L2 gives AdamW's weight: in Adam + L2 the penalty's gradient λ · w joins the loss "
                 "gradient before Adam divides by the size of what it sees"))
    for part, mistakes in ((0, _adamw_mistakes), (1, _adam_l2_mistakes)):
        if all(near(g[part], r[part]) for g, r in zip(got, right)):
            continue
        per_case = [mistakes(*case, eps) for case in cases]
        for index, (_, message) in enumerate(per_case[0]):
            if everywhere(part, [listed[index][0] for listed in per_case]):
                hint(message)


# ---- exercise 3: the pre-LN block --------------------------------------------------------------------------------

def pre_ln_mistake(got: torch.Tensor, block: torch.nn.Module, x: torch.Tensor) -> None:
    """Name the mistake behind a wrong pre-LN block (``block`` has norm1, attn, norm2, ff), if it is a known one."""
    def attn(h: torch.Tensor) -> torch.Tensor:
        return block.attn(h)[0]

    n1, n2, ff = block.norm1, block.norm2, block.ff
    after_attention = x + attn(n1(x))
    normalised_stream = n1(x) + attn(n1(x))
    mistakes = [
        (n2(normalised_stream) + ff(n2(normalised_stream)),
         msg("the residual path carries the normalised x: in pre-LN a LayerNorm's output goes only into its "
             "sublayer, and the stream itself is added back as it was, never normalised inside the block")),
        (n2(n1(x + attn(x)) + ff(n1(x + attn(x)))),
         msg("that is post-LN: LayerNorm after each residual sum; pre-LN normalises the input of each sublayer")),
        (n2((h := n2(x + attn(x))) + ff(h)),
         msg("that is post-LN: LayerNorm after each residual sum; pre-LN normalises the input of each sublayer")),
        (after_attention + ff(n1(after_attention)),
         msg("each sublayer has its own LayerNorm: the one before the feed-forward network is the block's second")),
        ((h2 := x + attn(n2(x))) + ff(n1(h2)),
         msg("the two LayerNorms are swapped: the first belongs to attention, the second to the feed-forward "
             "network")),
        (x + attn(x) + ff(n2(x + attn(x))),
         msg("attention reads the stream without its LayerNorm: in pre-LN each sublayer reads a normalised copy")),
        (after_attention + ff(after_attention),
         msg("the feed-forward network reads the stream without its LayerNorm: in pre-LN each sublayer reads a "
             "normalised copy")),
        (ff(n2(after_attention)), msg("the feed-forward sublayer has a residual connection too: add its input "
                                      "back")),
        (attn(n1(x)) + ff(n2(attn(n1(x)))), msg("attention's output is added to x (a residual connection); it does "
                                                "not replace it")),
        (x + attn(n1(x)) + ff(n2(x)), msg("the feed-forward network reads the stream after attention has been added "
                                          "to it, not the block's input")),
        (n2(after_attention + ff(n2(after_attention))),
         msg("a pre-LN block leaves its output unnormalised (the model has one final LayerNorm after the last "
             "block)")),
        (after_attention, msg("that is only the attention half: the block goes on with the feed-forward sublayer, "
                              "with its own LayerNorm and residual connection")),
    ]
    for wrong, message in mistakes:
        if close(got, wrong, atol=1e-5, rtol=1e-5):
            hint(message)


# ---- exercise 4: clipping ------------------------------------------------------------------------------------------

def clip_mistake(got: list[torch.Tensor], grads: list[torch.Tensor], max_norm: float, total: float) -> None:
    """Name the mistake behind wrongly clipped gradients (``total``: their true total norm), if it is a known one."""
    def scaled(scales: list[float]) -> bool:
        return all(close(a, g * s, atol=1e-5, rtol=1e-5) for a, g, s in zip(got, grads, scales))

    norms = [float(g.norm()) for g in grads]
    if scaled([min(1.0, max_norm / (n + 1e-6)) for n in norms]):
        hint(msg("that is the bug of the given version: each tensor clipped by its own norm changes the direction "
                 "of the update; measure the norm of all gradients together, as if they were one long vector"))
    if scaled([max_norm / total] * len(grads)):
        hint(msg("clipping only ever scales down: when the total norm is already <= max_norm, leave the gradients "
                 "as they are"))
    if scaled([min(1.0, max_norm / (total**2 + 1e-6))] * len(grads)):
        hint(msg("the total norm is the square root of the sum of all squared entries; you divided by the sum "
                 "itself"))
    if scaled([min(1.0, max_norm / (sum(norms) + 1e-6))] * len(grads)):
        hint(msg("the total norm is not the sum of the tensors' norms: it is the norm of all entries together, the "
                 "square root of the sum of every squared entry"))
    if max_norm < total and scaled([1.0] * len(grads)):
        hint(msg("your function returns the gradients unchanged, though their total norm {total:.3g} is above "
                 "max_norm = {max_norm:.3g}: then all of them must be scaled down, by one factor", total=total,
                 max_norm=max_norm))
    if scaled([total / max_norm] * len(grads)) or scaled([max(1.0, total / max_norm)] * len(grads)):
        hint(msg("your scale is upside down: clipping multiplies by max_norm / total norm, a factor below 1 when "
                 "the gradients are too large"))
    if all(close(a, g.clamp(-max_norm, max_norm), atol=1e-5, rtol=1e-5) for a, g in zip(got, grads)):
        hint(msg("that clips each entry to [-max_norm, max_norm] (clipping by value): clipping by norm scales all "
                 "entries by one number, so the update keeps its direction"))
