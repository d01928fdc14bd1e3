"""Lesson 08 checks accept every correct form of an answer, name each common mistake in its own hint (in words,
never the code), and turn an error inside the learner's code into a hint."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from _check_helpers import accepts, rejects

from attention_lab.models.transformer import TransformerBlock
from attention_lab.teaching.checks import lesson08 as check

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def hint_of(fn, *args, **kwargs) -> str:
    with pytest.raises(AssertionError, match="^Not yet: ") as error:
        fn(*args, **kwargs)
    return str(error.value)


# --- exercise 1: warmup, then 1 / sqrt(step) ---------------------------------------------------------------------

def factor_branches(step, warmup):
    if step < warmup:
        return (step + 1) / warmup
    return math.sqrt(warmup / (step + 1))


@pytest.mark.parametrize("fn", [
    factor_branches,
    lambda s, w: min((s + 1) / w, math.sqrt(w / (s + 1))),
    lambda s, w: min((s + 1) / w, ((s + 1) / w) ** -0.5),
    lambda s, w: torch.tensor(min((s + 1) / w, (w / (s + 1)) ** 0.5)),  # a 0-d tensor
    lambda s, w: np.minimum((s + 1) / w, np.sqrt(w / (s + 1))),  # numpy
    lambda s, w: torch.tensor([(s + 1) / w, (w / (s + 1)) ** 0.5], dtype=torch.float32).min(),  # float32
])
def test_inverse_sqrt_accepts_every_correct_form(fn, capsys):
    accepts(capsys, check.inverse_sqrt_schedule, fn)


def test_inverse_sqrt_names_each_mistake():
    rejects(check.inverse_sqrt_schedule, lambda s, w: min(s / w, math.sqrt(w / (s + 1))), match="very first step")
    rejects(check.inverse_sqrt_schedule, lambda s, w: 0.05 * factor_branches(s, w), match="not a learning rate")
    rejects(check.inverse_sqrt_schedule, lambda s, w: min((s + 1) / w, 1.0), match="must fall")
    rejects(check.inverse_sqrt_schedule, lambda s, w: (s + 1) / w if s < w else 1 / math.sqrt(s + 1),
            match="jumps down where the warmup ends")
    rejects(check.inverse_sqrt_schedule, lambda s, w: (s + 1) / w if s < w else math.sqrt(w / s),
            match="count the step as the warmup does")
    rejects(check.inverse_sqrt_schedule, lambda s, w: (s + 1) / w if s < w else w / (s + 1),
            match="falls like 1 / step")
    rejects(check.inverse_sqrt_schedule, lambda s, w: (s + 1) / w if s < w else 0.5, match="differs from the expected")
    rejects(check.inverse_sqrt_schedule, lambda s, w: 0.5, match="not the lesson's straight line")
    hard_coded = lambda s, w: min((s + 1) / 10, math.sqrt(10 / (s + 1)))  # right for warmup_steps=10 only
    rejects(check.inverse_sqrt_schedule, hard_coded, match="straight line|differs")


def test_inverse_sqrt_turns_errors_into_hints():
    rejects(check.inverse_sqrt_schedule, lambda s, w: min((s + 1) / w, math.sqrt(w / s)), match="divides by zero")
    rejects(check.inverse_sqrt_schedule, lambda s, w: [1.0, 2.0], match="one number")
    rejects(check.inverse_sqrt_schedule, lambda s, w: None, match="is None")
    rejects(check.inverse_sqrt_schedule, lambda s: s, match="raised TypeError")

    def stub(step, warmup):
        raise NotImplementedError("replace this line with your answer")

    rejects(check.inverse_sqrt_schedule, stub, match="NotImplementedError")
    rejects(check.inverse_sqrt_schedule, 0.5, match="function itself")


# --- exercise 2: one AdamW step and one Adam + L2 step by hand ------------------------------------------------------

STEP = dict(w=0.8, grad=-0.2, lr=0.1, weight_decay=0.5)


def right_step():
    w, g, lr, wd = 0.8, -0.2, 0.1, 0.5
    adamw = w * (1 - lr * wd) - lr * g / (abs(g) + 1e-8)
    g2 = g + wd * w
    return adamw, w - lr * g2 / (abs(g2) + 1e-8)


def test_one_step_accepts_numbers_tensors_numpy(capsys):
    adamw, l2 = right_step()
    accepts(capsys, check.one_step, adamw, l2, **STEP)
    accepts(capsys, check.one_step, torch.tensor(adamw), torch.tensor([l2]), **STEP)
    accepts(capsys, check.one_step, np.float32(adamw), np.array([l2]), **STEP)


def test_one_step_agrees_with_pytorch(capsys):
    results = []
    for cls in (torch.optim.AdamW, torch.optim.Adam):
        w = torch.nn.Parameter(torch.tensor([0.8]))
        opt = cls([w], lr=0.1, weight_decay=0.5)
        w.grad = torch.tensor([-0.2])
        opt.step()
        results.append(w.item())
    accepts(capsys, check.one_step, *results, **STEP)


def test_one_step_names_each_mistake():
    adamw, l2 = right_step()
    plain = 0.8 + 0.1  # Adam without decay: w - lr * sign(g)
    rejects(check.one_step, l2, adamw, **STEP, match="swapped")
    rejects(check.one_step, plain, l2, **STEP, match="has no weight decay")
    rejects(check.one_step, 0.8 - 0.1 * 0.5 * 0.8 + 0.1 * 0.2, l2, **STEP, match="divides the gradient by its own")
    rejects(check.one_step, adamw, plain - 0.1 * 0.5 * 0.8, **STEP, match="joins the gradient first")
    rejects(check.one_step, adamw, adamw, **STEP, match="joins the gradient first")
    rejects(check.one_step, [1.0, 2.0], l2, **STEP, match="single number")
    rejects(check.one_step, None, l2, **STEP, match="is None")
    rejects(check.one_step, "0.86", l2, **STEP, match="should be a tensor")
    rejects(check.one_step, 0.86 + 1j, l2, **STEP, match="could not be checked: .*raised RuntimeError")


def test_one_step_fallbacks_describe_the_idea_not_the_code():
    adamw, l2 = right_step()
    for message in (hint_of(check.one_step, 0.0, l2, **STEP), hint_of(check.one_step, adamw, 0.0, **STEP)):
        for code in ("w *", "(1 -", "m_hat", "sqrt(v_hat)", "eps", "+ weight_decay * w", "/ (|g"):
            assert code not in message, (code, message)


# --- exercise 3: the pre-LN block -----------------------------------------------------------------------------------

def pre_ln(block, x):
    after_attention = x + block.attn(block.norm1(x))[0]
    return after_attention + block.ff(block.norm2(after_attention))


def colleague(block, x):  # the lesson's buggy version: the stream itself is normalised
    x = block.norm1(x)
    x = x + block.attn(x)[0]
    x = block.norm2(x)
    return x + block.ff(x)


def pre_ln_returning_a_pair(block, x):  # (output, weights), the way TransformerBlock itself answers
    return pre_ln(block, x), None


@pytest.mark.parametrize("fn", [
    pre_ln,
    pre_ln_returning_a_pair,
    lambda block, x: pre_ln(block, x.double().float()).double(),  # float64
    lambda block, x: pre_ln(block, x).detach().numpy(),  # numpy
])
def test_pre_ln_accepts_every_correct_form(fn, capsys):
    accepts(capsys, check.pre_ln_block, fn)


def test_pre_ln_names_each_mistake():
    n1 = lambda b, x: b.norm1(x)
    att = lambda b, x: b.attn(x)[0]
    rejects(check.pre_ln_block, colleague, match="carries the normalised x")

    def post_ln(b, x):
        h = b.norm1(x + att(b, x))
        return b.norm2(h + b.ff(h))

    rejects(check.pre_ln_block, post_ln, match="that is post-LN")
    rejects(check.pre_ln_block, lambda b, x: (h := x + att(b, n1(b, x))) + b.ff(b.norm1(h)), match="its own LayerNorm")
    rejects(check.pre_ln_block, lambda b, x: b.ff(b.norm2(x + att(b, n1(b, x)))), match="residual connection too")
    rejects(check.pre_ln_block, lambda b, x: (h := att(b, n1(b, x))) + b.ff(b.norm2(h)), match="does not replace it")
    rejects(check.pre_ln_block, lambda b, x: x + att(b, n1(b, x)) + b.ff(b.norm2(x)), match="after attention")
    rejects(check.pre_ln_block, lambda b, x: b.norm2(pre_ln(b, x)), match="leaves its output unnormalised")
    rejects(check.pre_ln_block, lambda b, x: x, match="follow the stream")
    rejects(check.pre_ln_block, lambda b, x: pre_ln(b, x)[:, 0], match="one vector per token")


def test_pre_ln_turns_errors_into_hints():
    rejects(check.pre_ln_block, lambda b, x: x + b.attn(b.norm1(x)), match="returns a pair")
    rejects(check.pre_ln_block, lambda b, x: b(x)[0], match="from its four parts")  # the whole block: not handed over
    rejects(check.pre_ln_block, lambda b, x: x + b.self_attn(x)[0], match="parts are norm1, attn, norm2 and ff")
    rejects(check.pre_ln_block, lambda b, x: x @ torch.ones(5, 5), match="raised RuntimeError")

    def in_place(b, x):
        x += b.attn(b.norm1(x))[0]
        return x + b.ff(b.norm2(x))

    rejects(check.pre_ln_block, in_place, match="changed x in place")
    block, x = TransformerBlock(8, 2, 16, "pre").eval(), torch.randn(2, 5, 8)  # (b, i, e)
    rejects(check.pre_ln_block, pre_ln(block, x), match="function itself")


def test_pre_ln_tries_more_than_one_size():
    def right_for_one_size(block, x):  # e.g. a LayerNorm written by hand for e = 8
        return pre_ln(block, x) if x.shape[-1] == 8 else x

    rejects(check.pre_ln_block, right_for_one_size, match="follow the stream")


# --- exercise 4: clip by the total norm -------------------------------------------------------------------------

def clip_right(grads, max_norm):
    total = torch.linalg.vector_norm(torch.cat([g.flatten() for g in grads]))
    return [g * min(1.0, max_norm / (float(total) + 1e-6)) for g in grads]


def clip_torch(grads, max_norm):
    params = [torch.nn.Parameter(torch.zeros_like(g)) for g in grads]
    for p, g in zip(params, grads):
        p.grad = g
    torch.nn.utils.clip_grad_norm_(params, max_norm)
    return [p.grad for p in params]


def clip_sum_of_squares(grads, max_norm):
    total = math.sqrt(sum(float((g**2).sum()) for g in grads))
    scale = min(1.0, max_norm / (total + 1e-6))
    return tuple(g.numpy() * scale for g in grads)  # a tuple of numpy arrays


@pytest.mark.parametrize("fn", [clip_right, clip_torch, clip_sum_of_squares])
def test_clip_accepts_every_correct_form(fn, capsys):
    accepts(capsys, check.clip_by_total_norm, fn)


def test_clip_names_each_mistake():
    def per_tensor(grads, max_norm):  # the lesson's buggy version
        return [g * min(1.0, max_norm / (float(g.norm()) + 1e-6)) for g in grads]

    def always(grads, max_norm):
        total = torch.linalg.vector_norm(torch.cat([g.flatten() for g in grads]))
        return [g * max_norm / total for g in grads]

    def squared(grads, max_norm):
        total = sum(float((g**2).sum()) for g in grads)
        return [g * min(1.0, max_norm / (total + 1e-6)) for g in grads]

    rejects(check.clip_by_total_norm, per_tensor, match="bug of the given version")
    rejects(check.clip_by_total_norm, always, match="only ever scales down")
    rejects(check.clip_by_total_norm, squared, match="square root of the sum")
    rejects(check.clip_by_total_norm, lambda g, m: [x.flatten() for x in clip_right(g, m)], match="own shape")
    rejects(check.clip_by_total_norm, lambda g, m: [x * 0.5 for x in g], match="one number decides")
    rejects(check.clip_by_total_norm, lambda grads, m: grads[0], match="one clipped tensor per gradient")


def test_clip_turns_errors_into_hints():
    def cat_without_flatten(grads, max_norm):
        total = torch.linalg.vector_norm(torch.cat(grads))
        return [g * min(1.0, max_norm / float(total)) for g in grads]

    def stub(grads, max_norm):
        raise NotImplementedError

    rejects(check.clip_by_total_norm, cat_without_flatten, match="different shapes.*flat vector")
    rejects(check.clip_by_total_norm, stub, match="NotImplementedError")
    rejects(check.clip_by_total_norm, lambda grads, m: [g / 0 for g in grads.values()], match="raised AttributeError")
    rejects(check.clip_by_total_norm, clip_right([torch.ones(2)], 1.0), match="function itself")


# --- every check (that each is guarded: tests/test_checks_guarded.py) -----------------------------------------------

def test_the_stub_of_every_function_exercise_gets_a_hint_not_a_traceback():
    def stub(*args):
        raise NotImplementedError("replace this line with your answer, then run the check cell below")

    for exercise in (check.inverse_sqrt_schedule, check.pre_ln_block, check.clip_by_total_norm):
        rejects(exercise, stub, match="NotImplementedError")


def test_clip_joining_unflattened_gradients_any_way_gets_a_hint():
    def stacked(grads, max_norm):  # torch.stack needs equal shapes too
        total = torch.stack(grads).norm()
        return [g * min(1.0, max_norm / float(total)) for g in grads]

    def cat_2d_only(grads, max_norm):  # the 2-d gradients joined along rows: same number of axes, other widths
        total = torch.cat([g for g in grads if g.dim() == 2]).norm()
        return [g * min(1.0, max_norm / float(total)) for g in grads]

    rejects(check.clip_by_total_norm, stacked, match="different shapes.*flat vector")
    rejects(check.clip_by_total_norm, cat_2d_only, match="different shapes.*flat vector")


def test_clip_and_pre_ln_fallbacks_describe_the_idea_not_the_code():
    for message in (hint_of(check.clip_by_total_norm, lambda g, m: [x * 0.5 for x in g]),
                    hint_of(check.pre_ln_block, lambda b, x: x)):
        for code in ("torch.", ".norm(", "sqrt(", "block.", "[0]", "flatten", "sum("):
            assert code not in message, (code, message)
