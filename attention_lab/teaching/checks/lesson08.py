"""Checks for lesson 08 (training a tiny Transformer stably: warmup, LayerNorm placement, AdamW, clipping)."""

from __future__ import annotations

import math
from collections.abc import Callable
from types import SimpleNamespace

import torch

from ...i18n import msg
from ...models.transformer import TransformerBlock
from ._core import (
    NONE_HINT,
    as_tensor,
    call_learner,
    close,
    correct,
    fallback_hint,
    guard_errors,
    hint,
    learner_name,
    right_for_some_inputs,
)
from ._lesson08_mistakes import adam_l2, adamw, clip_mistake, pre_ln_mistake, schedule_mistake, step_mistake

_WARMUPS = (4, 10, 25)  # several warmup lengths: a hard-coded one fails
# (w, g, lr, λ): the lesson's example first; then one where only (λ/2) · w flips the sign of the combined gradient,
# one where the penalty does not flip it, one with a tiny λ (|g| and |g + λ · w| differ on all but none)
_STEP_CASES = ((0.8, -0.1, 0.1, 0.5), (0.8, -0.3, 0.1, 0.5), (-1.5, 0.4, 0.01, 0.1), (2.0, 0.3, 0.05, 0.01))


def _inverse_sqrt(step: int, warmup: int) -> float:
    return min((step + 1) / warmup, math.sqrt(warmup / (step + 1)))


def _factors(fn: object, warmup: int, steps: range) -> torch.Tensor:
    values = []
    name = learner_name(fn)
    for step in steps:
        try:
            value = fn(step, warmup)
        except ZeroDivisionError:
            hint(msg("{name} divides by zero at step {step}: steps are counted from 0 here, as in the lesson's "
                     "warmup, so count the step as s + 1 wherever it divides", name=name, step=step))
        except Exception:  # any other error: call_learner names it
            call_learner(fn, step, warmup)
        got = as_tensor(value, msg("what {name} returns", name=name)).double()
        if got.numel() != 1:
            hint(msg("{name}(step, warmup_steps) should return one number, got {count} numbers for step {step}",
                     name=name, count=got.numel(), step=step))
        values.append(float(got.flatten()[0]))
    return torch.tensor(values, dtype=torch.float64)


@guard_errors
def inverse_sqrt_schedule(fn: Callable[[int, int], float]) -> None:
    """Exercise 1: ``fn(step, warmup_steps)``: the lesson's linear warmup, then a decay like 1/sqrt(step + 1),
    joined without a jump (the original Transformer's schedule, as a factor of the peak learning rate)."""
    if not callable(fn):
        hint(msg("pass your function itself, e.g. check.inverse_sqrt_schedule(factor), not the result of calling "
                 "it"))
    results = []
    for warmup in _WARMUPS:
        steps = range(0, 4 * warmup + 7)
        got = _factors(fn, warmup, steps)
        expected = torch.tensor([_inverse_sqrt(s, warmup) for s in steps], dtype=torch.float64)
        results.append((warmup, steps, got, expected, close(got, expected, atol=1e-9, rtol=1e-6)))
    wrong = [result for result in results if not result[-1]]
    if not wrong:
        correct(msg("a straight line up to the peak, then 1 / sqrt(step) scaled to meet it: the schedule of "
                    "'Attention Is All You Need' (there the peak itself is set by d_model and the warmup length)"))
        return
    for warmup, steps, got, expected, _ in wrong:
        schedule_mistake(got, expected, warmup, steps)
    fine = [result[0] for result in results if result[-1]]
    if fine:
        hint(right_for_some_inputs(learner_name(fn), msg("warmup_steps={warmup}", warmup=fine[0]),
                                   msg("warmup_steps={warmup}", warmup=wrong[0][0])))
    warmup, _, got, expected, _ = wrong[0]
    if not close(got[:warmup], expected[:warmup], atol=1e-9, rtol=1e-6):
        fallback_hint(msg("the warmup part is not the lesson's straight line from 1 / warmup_steps at step 0 up to 1 "
                          "at the last warmup step"))
    fallback_hint(msg("with warmup_steps={warmup} your factor differs from the expected one after the warmup; it "
                      "should fall like one over the square root of the step and equal 1 where the warmup ends",
                      warmup=warmup))


def _step_pair(fn: object, case: tuple[float, float, float, float]) -> tuple[float, float]:
    name = learner_name(fn)
    result = call_learner(fn, *case)
    if result is None:
        hint(NONE_HINT)
    if isinstance(result, (str, bytes)) or not hasattr(result, "__len__") or len(result) != 2:
        hint(msg("{name} should return two numbers, (w_adamw, w_adam_l2): the weight after one AdamW step and after "
                 "one Adam + L2 step", name=name))
    pair = []
    for value, part in zip(result, ("w_adamw", "w_adam_l2")):
        t = as_tensor(value, msg("{part} of {name}", part=part, name=name))
        if t.numel() != 1:
            hint(msg("{part} should be a single number (the weight after one step), got {count} numbers",
                     part=part, count=t.numel()))
        pair.append(float(t))
    return pair[0], pair[1]


@guard_errors
def one_step(fn: Callable[..., tuple[float, float]]) -> None:
    """Exercise 2: ``fn(w, g, lr, weight_decay)`` (Adam's eps: 1e-8) returns one weight after the first step of
    AdamW and after the first step of Adam with an L2 penalty, as the pair ``(w_adamw, w_adam_l2)``; tried on
    several weights, gradients, learning rates and decays."""
    if not callable(fn):
        hint(msg("pass your function itself, e.g. check.one_step(first_step), not the result of calling it"))
    got = [_step_pair(fn, case) for case in _STEP_CASES]
    right = [(adamw(*case), adam_l2(*case)) for case in _STEP_CASES]

    def near(a: float, b: float) -> bool:
        return abs(a - b) <= 1e-6 + 1e-6 * abs(b)

    ok = [near(a, x) and near(b, y) for (a, b), (x, y) in zip(got, right)]
    if all(ok):
        (w, *_), (after_w, after_l2) = _STEP_CASES[0], right[0]
        correct(msg("on the exercise's numbers AdamW moves w from {w:g} to {adamw:.4f} and Adam + L2 to "
                    "{adam_l2:.4f}: the same weight decay, two different updates", w=w, adamw=after_w,
                    adam_l2=after_l2))
        return
    step_mistake(got, list(_STEP_CASES))
    name = learner_name(fn)
    if ok[0]:
        bad = _STEP_CASES[ok.index(False)]
        hint(right_for_some_inputs(name, msg("the exercise's numbers"),
                                   msg("w = {w:g}, g = {g:g}, lr = {lr:g}, λ = {wd:g}", w=bad[0], g=bad[1],
                                       lr=bad[2], wd=bad[3])))
    first = ok.index(False)
    if not near(got[first][0], right[first][0]):
        fallback_hint(msg("AdamW does two separate things in one step: it shrinks the weight by the fraction lr · λ, "
                          "and it takes Adam's usual step computed from the loss gradient alone"))
    fallback_hint(msg("in Adam + L2 the penalty's gradient λ · w is part of the gradient Adam sees; on the first step "
                      "Adam moves a weight by lr, against the sign of whatever gradient it sees"))


def _pre_ln_cases() -> list[tuple[TransformerBlock, torch.Tensor]]:
    gen = torch.Generator().manual_seed(8)
    cases = []
    for d_model, heads, batch, n in ((8, 2, 2, 5), (12, 3, 3, 4)):  # two sizes: nothing hard-coded passes
        with torch.random.fork_rng():
            torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=gen)))
            block = TransformerBlock(d_model, heads, 2 * d_model, "pre").eval()
            with torch.no_grad():  # LayerNorms that do more than standardise, so each one shows in the result
                for norm in (block.norm1, block.norm2):
                    norm.weight.uniform_(0.5, 1.5)
                    norm.bias.uniform_(-0.5, 0.5)
        cases.append((block, 2 * torch.randn(batch, n, d_model, generator=gen)))  # (b, i, e)
    return cases


def _call_block(fn: object, block: TransformerBlock, x: torch.Tensor) -> torch.Tensor:
    # Only the four parts: calling the whole block would answer the exercise without doing it.
    parts = SimpleNamespace(norm1=block.norm1, attn=block.attn, norm2=block.norm2, ff=block.ff)
    try:
        result = fn(parts, x)
    except TypeError as error:
        if "tuple" in str(error):
            hint(msg("block.attn(...) returns a pair (output, weights), like nn.MultiheadAttention: use its first "
                     "element"))
        if "not callable" in str(error):
            hint(msg("build the block from its four parts (block.norm1, block.attn, block.norm2, block.ff); the "
                     "check does not hand over the whole block to call"))
        raise
    except AttributeError as error:
        hint(msg("the block's parts are norm1, attn, norm2 and ff; {name} asked for something else ({error})",
                 name=learner_name(fn), error=error))
    if isinstance(result, (tuple, list)) and result and isinstance(result[0], torch.Tensor):
        result = result[0]  # (output, weights), the way TransformerBlock itself answers
    if result is None:
        hint(NONE_HINT)
    return as_tensor(result, msg("the output of {name}", name=learner_name(fn)))


@guard_errors
def pre_ln_block(fn: Callable[[TransformerBlock, torch.Tensor], torch.Tensor]) -> None:
    """Exercise 3: ``fn(block, x)`` computes one pre-LN block from its parts (``block.attn``, ``block.ff``,
    ``block.norm1``, ``block.norm2``; the check passes only these) and must equal
    ``TransformerBlock(..., norm="pre")``."""
    if not callable(fn):
        hint(msg("pass your function itself, e.g. check.pre_ln_block(pre_ln), not the result of calling it"))
    name = learner_name(fn)
    for block, x in _pre_ln_cases():
        before = x.clone()
        with torch.no_grad():
            got = call_learner(_call_block, fn, block, x, what=name)
            expected = block(x)[0]
            if not torch.equal(x, before):
                hint(msg("{name} changed x in place; the stream must stay as it came in, the block returns a new "
                         "tensor", name=name))
            if got.shape != expected.shape:
                hint(msg("a block returns one vector per token: for x of shape (b, i, e) = {shape} the same shape; "
                         "{name} returned shape {got}", shape=tuple(x.shape), name=name, got=tuple(got.shape)))
            if close(got, expected, atol=1e-5, rtol=1e-5):
                continue
            pre_ln_mistake(got, block, x)
        fallback_hint(msg("follow the stream x through the block: each sublayer reads a LayerNorm of the stream, and "
                          "its output is added to the stream"))
    correct(msg("x + Attention(LN1(x)), then + FFN(LN2(...)): the stream itself is never normalised inside the "
                "block, so the input reaches the top on a path without a LayerNorm"))


def _clip_cases() -> list[tuple[list[torch.Tensor], float, float]]:
    """(gradients, max_norm, their total norm): one set clipped and left alone, then a second set (other shapes,
    another count, another norm), so that no count, shape or norm of the first can be written in."""
    gen = torch.Generator().manual_seed(8)
    first = [torch.randn(3, 4, generator=gen) * 2, torch.randn(5, generator=gen) * 0.1,
             torch.randn(2, 2, generator=gen)]  # different shapes, as a model's parameters have
    second = [torch.randn(6, generator=gen) * 3, torch.randn(2, 3, generator=gen)]
    totals = [float(torch.linalg.vector_norm(torch.cat([g.flatten() for g in grads]))) for grads in (first, second)]
    return [(first, totals[0] / 4, totals[0]), (first, totals[0] * 2, totals[0]), (second, totals[1] / 3, totals[1])]


def _call_clip(fn: object, grads: list[torch.Tensor], max_norm: float) -> list[torch.Tensor]:
    try:
        result = fn([g.clone() for g in grads], max_norm)
    except RuntimeError as error:
        if any(words in str(error) for words in ("must match", "same number of dimensions", "equal size")):
            hint(msg("the gradients have different shapes, so they cannot be joined as they are: make each one a "
                     "flat vector first, or add up each tensor's sum of squares"))
        raise
    if result is None:
        hint(NONE_HINT)
    if isinstance(result, torch.Tensor) or not isinstance(result, (list, tuple)) or len(result) != len(grads):
        hint(msg("return a list with one clipped tensor per gradient ({count} here)", count=len(grads)))
    return [as_tensor(r, msg("each clipped gradient")) for r in result]


@guard_errors
def clip_by_total_norm(fn: Callable[[list[torch.Tensor], float], list[torch.Tensor]]) -> None:
    """Exercise 4: ``fn(grads, max_norm)`` returns the gradients rescaled so their total norm is <= max_norm."""
    if not callable(fn):
        hint(msg("pass your function itself, e.g. check.clip_by_total_norm(clip), not the result of calling it"))
    for grads, max_norm, total in _clip_cases():  # calls that must clip, and one that must leave the gradients alone
        got = call_learner(_call_clip, fn, grads, max_norm, what=learner_name(fn))
        scale = min(1.0, max_norm / (total + 1e-6))  # the formula of torch.nn.utils.clip_grad_norm_
        if all(close(a, g * scale, atol=1e-5, rtol=1e-5) for a, g in zip(got, grads)):
            continue
        if any(a.shape != b.shape for a, b in zip(got, grads)):
            hint(msg("each clipped gradient keeps its own shape; scale it, do not flatten or concatenate the "
                     "result"))
        clip_mistake(got, grads, max_norm, total)
        fallback_hint(msg("one number decides the scale for every gradient: the norm of all entries together, "
                          "compared with max_norm"))
    correct(msg("one scale, min(1, max_norm / total norm), for every gradient: the update keeps its direction"))
