"""Checks for lesson 08 (training a tiny Transformer stably: warmup, LayerNorm placement, AdamW, clipping)."""

from __future__ import annotations

import math
from collections.abc import Callable
from types import SimpleNamespace

import torch

from ...models.transformer import TransformerBlock
from ._core import as_tensor, call_learner, close, correct, guard_errors, hint

_WARMUPS = (4, 10, 25)  # several warmup lengths: a hard-coded one fails


def _inverse_sqrt(step: int, warmup: int) -> float:
    return min((step + 1) / warmup, math.sqrt(warmup / (step + 1)))


def _factors(fn: object, warmup: int, steps: range) -> torch.Tensor:
    values = []
    for step in steps:
        try:
            value = call_learner(fn, step, warmup, what=f"your function, called as factor({step}, {warmup}),")
        except AssertionError as error:
            if "ZeroDivisionError" in str(error):
                hint(f"your function divides by zero at step {step}: steps are counted from 0 here, as in the "
                     f"lesson's warmup, so count the step as s + 1 wherever it divides")
            raise
        got = as_tensor(value, f"factor({step}, {warmup})").double()
        if got.numel() != 1:
            hint(f"factor(step, warmup_steps) should return one number, got {got.numel()} numbers for step {step}")
        values.append(float(got.flatten()[0]))
    return torch.tensor(values, dtype=torch.float64)


def _schedule_mistake(got: torch.Tensor, expected: torch.Tensor, warmup: int, steps: range) -> None:
    """Name the mistake behind a wrong schedule (always raises)."""
    ramp, decay = slice(0, warmup), slice(warmup, None)

    def matches(formula: Callable[[int], float], part: slice) -> bool:
        wrong = torch.tensor([formula(s) for s in steps[part]], dtype=torch.float64)
        return close(got[part], wrong, atol=1e-9, rtol=1e-6)

    if not close(got[ramp], expected[ramp], atol=1e-9, rtol=1e-6):
        if matches(lambda s: s / warmup, ramp):
            hint("during the warmup step s gets (s + 1) / warmup_steps of the peak, as in the lesson: the very "
                 "first step (s = 0) already moves the weights, and the last warmup step reaches the peak")
        ratio = float(got[warmup - 1] / expected[warmup - 1])
        if abs(ratio - 1) > 1e-6 and close(got, ratio * expected, atol=1e-9, rtol=1e-6):
            hint("return the factor (1 at the peak), not a learning rate: the optimizer multiplies it by the "
                 "peak learning rate")
        hint("the warmup part is not the lesson's straight line from 1 / warmup_steps at step 0 up to 1 at the "
             "last warmup step")
    if matches(lambda s: 1.0, decay):
        hint("after the warmup the factor must fall, like one over the square root of the step")
    if matches(lambda s: 1 / math.sqrt(s + 1), decay):
        hint("your decay jumps down where the warmup ends: scale it so that it continues from the peak "
             "(factor 1) instead of restarting at 1 / sqrt(step)")
    if matches(lambda s: math.sqrt(warmup / s), decay):
        hint("count the step as the warmup does (s + 1): then both parts give exactly 1 at the last warmup "
             "step and the curve has no kink of one step")
    if matches(lambda s: warmup / (s + 1), decay):
        hint("your decay falls like 1 / step; the original Transformer's falls more slowly, like one over "
             "the square root of the step")
    hint(f"with warmup_steps={warmup} your factor differs from the expected one after the warmup; it should "
         f"fall like one over the square root of the step and equal 1 where the warmup ends")


@guard_errors
def inverse_sqrt_schedule(fn: Callable[[int, int], float]) -> None:
    """Exercise 1: ``fn(step, warmup_steps)``: the lesson's linear warmup, then a decay like 1/sqrt(step + 1),
    joined without a jump (the original Transformer's schedule, as a factor of the peak learning rate)."""
    if not callable(fn):
        hint("pass your function itself, e.g. check.inverse_sqrt_schedule(factor), not the result of calling it")
    for warmup in _WARMUPS:
        steps = range(0, 4 * warmup + 7)
        got = _factors(fn, warmup, steps)
        expected = torch.tensor([_inverse_sqrt(s, warmup) for s in steps], dtype=torch.float64)
        if not close(got, expected, atol=1e-9, rtol=1e-6):
            _schedule_mistake(got, expected, warmup, steps)
    correct("a straight line up to the peak, then 1 / sqrt(step) scaled to meet it: the schedule of 'Attention Is "
            "All You Need' (there the peak itself is set by d_model and the warmup length)")


def _adam_step(w: float, g: float, lr: float, eps: float) -> float:
    # Adam's first step: m_hat = g and sqrt(v_hat) = |g| after bias correction
    return w - lr * g / (abs(g) + eps)


@guard_errors
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
        hint("the two answers are swapped: AdamW shrinks the weight directly, Adam + L2 adds the penalty's "
             "gradient to the loss gradient")
    if not near(got_w, expected_w):
        if near(got_w, _adam_step(w, grad, lr, eps)):
            hint("your AdamW step has no weight decay: besides Adam's step, AdamW shrinks w by the fraction lr · λ")
        if near(got_w, w - lr * weight_decay * w - lr * grad):
            hint("Adam does not step by lr times the gradient: on the first step it divides the gradient by its own "
                 "size, so each weight moves by about lr, against the sign of its gradient")
        hint("AdamW does two separate things in one step: it shrinks the weight by the fraction lr · λ, and it "
             "takes Adam's usual step computed from the loss gradient alone")
    if near(got_l2, expected_w) or near(got_l2, _adam_step(w, grad, lr, eps) - lr * weight_decay * w):
        hint("in Adam + L2 the penalty joins the gradient first, and only then does Adam divide by the size of "
             "that combined gradient: the decay is normalised away like any gradient")
    hint("in Adam + L2 the penalty's gradient λ · w is part of the gradient Adam sees; on the first step Adam "
         "moves a weight by lr, against the sign of whatever gradient it sees")


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


def _pre_ln_mistakes(block: TransformerBlock, x: torch.Tensor) -> list[tuple[torch.Tensor, str]]:
    attn = lambda h: block.attn(h)[0]
    n1, n2, ff = block.norm1, block.norm2, block.ff
    after_attention = x + attn(n1(x))
    normalised_stream = n1(x) + attn(n1(x))
    return [
        (n2(normalised_stream) + ff(n2(normalised_stream)),
         "the residual path carries the normalised x: in pre-LN a LayerNorm's output goes only into its sublayer, "
         "and the stream itself is added back as it was, never normalised inside the block"),
        (n2(n1(x + attn(x)) + ff(n1(x + attn(x)))),
         "that is post-LN: LayerNorm after each residual sum; pre-LN normalises the input of each sublayer"),
        (after_attention + ff(n1(after_attention)),
         "each sublayer has its own LayerNorm: the one before the feed-forward network is the block's second"),
        (ff(n2(after_attention)), "the feed-forward sublayer has a residual connection too: add its input back"),
        (attn(n1(x)) + ff(n2(attn(n1(x)))), "attention's output is added to x (a residual connection); it does "
                                            "not replace it"),
        (x + attn(n1(x)) + ff(n2(x)), "the feed-forward network reads the stream after attention has been added "
                                      "to it, not the block's input"),
        (n2(after_attention + ff(n2(after_attention))),
         "a pre-LN block leaves its output unnormalised (the model has one final LayerNorm after the last block)"),
    ]


def _call_block(fn: object, block: TransformerBlock, x: torch.Tensor) -> torch.Tensor:
    # Only the four parts: calling the whole block would answer the exercise without doing it.
    parts = SimpleNamespace(norm1=block.norm1, attn=block.attn, norm2=block.norm2, ff=block.ff)
    try:
        result = fn(parts, x)
    except TypeError as error:
        if "tuple" in str(error):
            hint("block.attn(...) returns a pair (output, weights), like nn.MultiheadAttention: use its first "
                 "element")
        if "not callable" in str(error):
            hint("build the block from its four parts (block.norm1, block.attn, block.norm2, block.ff); the "
                 "check does not hand over the whole block to call")
        raise
    except AttributeError as error:
        hint(f"the block's parts are norm1, attn, norm2 and ff; your function asked for something else "
             f"({error})")
    if isinstance(result, (tuple, list)) and result and isinstance(result[0], torch.Tensor):
        result = result[0]  # (output, weights), the way TransformerBlock itself answers
    return as_tensor(result, "your block's output")


@guard_errors
def pre_ln_block(fn: Callable[[TransformerBlock, torch.Tensor], torch.Tensor]) -> None:
    """Exercise 3: ``fn(block, x)`` computes one pre-LN block from its parts (``block.attn``, ``block.ff``,
    ``block.norm1``, ``block.norm2``; the check passes only these) and must equal
    ``TransformerBlock(..., norm="pre")``."""
    if not callable(fn):
        hint("pass your function itself, e.g. check.pre_ln_block(pre_ln), not the result of calling it")
    for block, x in _pre_ln_cases():
        before = x.clone()
        with torch.no_grad():
            got = call_learner(_call_block, fn, block, x, what="your pre-LN block")
            expected = block(x)[0]
            if not torch.equal(x, before):
                hint("your function changed x in place; the stream must stay as it came in, the block returns a new "
                     "tensor")
            if got.shape != expected.shape:
                hint(f"a block returns one vector per token, shape (b, i, e) = {tuple(expected.shape)}; yours has "
                     f"shape {tuple(got.shape)}")
            if close(got, expected, atol=1e-5, rtol=1e-5):
                continue
            for wrong, message in _pre_ln_mistakes(block, x):
                if close(got, wrong, atol=1e-5, rtol=1e-5):
                    hint(message)
        hint("follow the stream x through the block: each sublayer reads a LayerNorm of the stream, and its output "
             "is added to the stream")
    correct("x + Attention(LN1(x)), then + FFN(LN2(...)): the stream itself is never normalised inside the block, "
            "so the input reaches the top on a path without a LayerNorm")


def _clip_cases() -> tuple[list[torch.Tensor], float]:
    gen = torch.Generator().manual_seed(8)
    grads = [torch.randn(3, 4, generator=gen) * 2, torch.randn(5, generator=gen) * 0.1,
             torch.randn(2, 2, generator=gen)]  # different shapes, as a model's parameters have
    return grads, float(torch.linalg.vector_norm(torch.cat([g.flatten() for g in grads])))


def _call_clip(fn: object, grads: list[torch.Tensor], max_norm: float) -> list[torch.Tensor]:
    try:
        result = fn([g.clone() for g in grads], max_norm)
    except NotImplementedError:
        hint("your function still raises NotImplementedError: replace the stub with your code")
    except RuntimeError as error:
        if any(words in str(error) for words in ("must match", "same number of dimensions", "equal size")):
            hint("the gradients have different shapes, so they cannot be joined as they are: make each one a flat "
                 "vector first, or add up each tensor's sum of squares")
        raise
    if isinstance(result, torch.Tensor) or not isinstance(result, (list, tuple)) or len(result) != len(grads):
        hint(f"return a list with one clipped tensor per gradient ({len(grads)} here)")
    return [as_tensor(r, "each clipped gradient") for r in result]


@guard_errors
def clip_by_total_norm(fn: Callable[[list[torch.Tensor], float], list[torch.Tensor]]) -> None:
    """Exercise 4: ``fn(grads, max_norm)`` returns the gradients rescaled so their total norm is <= max_norm."""
    if not callable(fn):
        hint("pass your function itself, e.g. check.clip_by_total_norm(clip), not the result of calling it")
    grads, total = _clip_cases()
    for max_norm in (total / 4, total * 2):  # one call that must clip, one that must leave the gradients alone
        got = call_learner(_call_clip, fn, grads, max_norm, what="your clip function")
        scale = min(1.0, max_norm / (total + 1e-6))  # the formula of torch.nn.utils.clip_grad_norm_
        expected = [g * scale for g in grads]
        if all(close(a, b, atol=1e-5, rtol=1e-5) for a, b in zip(got, expected)):
            continue
        if any(a.shape != b.shape for a, b in zip(got, expected)):
            hint("each clipped gradient keeps its own shape; scale it, do not flatten or concatenate the result")
        per_tensor = [g * min(1.0, max_norm / (float(g.norm()) + 1e-6)) for g in grads]
        if all(close(a, b, atol=1e-5, rtol=1e-5) for a, b in zip(got, per_tensor)):
            hint("that is the bug of the given version: each tensor clipped by its own norm changes the direction of "
                 "the update; measure the norm of all gradients together, as if they were one long vector")
        always = [g * max_norm / total for g in grads]
        if all(close(a, b, atol=1e-5, rtol=1e-5) for a, b in zip(got, always)):
            hint("clipping only ever scales down: when the total norm is already <= max_norm, leave the "
                 "gradients as they are")
        squared = [g * min(1.0, max_norm / (total**2 + 1e-6)) for g in grads]
        if all(close(a, b, atol=1e-5, rtol=1e-5) for a, b in zip(got, squared)):
            hint("the total norm is the square root of the sum of all squared entries; you divided by the sum itself")
        hint("one number decides the scale for every gradient: the norm of all entries together, compared with "
             "max_norm")
    correct("one scale, min(1, max_norm / total norm), for every gradient: the update keeps its direction")
