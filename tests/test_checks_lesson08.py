"""Lesson 08 checks accept the right answers and reject common mistakes with their hint."""

from __future__ import annotations

import math

import pytest
import torch
from _check_helpers import rejects

from attention_lab.teaching.checks import lesson08 as check

SCHEDULE = dict(peak_lr=0.05, warmup_steps=10, total_steps=100, steps=[0, 4, 9, 10, 55, 99])


def right_lrs():
    out = []
    for s in SCHEDULE["steps"]:
        if s < 10:
            out.append(0.05 * (s + 1) / 10)
        else:
            out.append(0.05 * 0.5 * (1 + math.cos(math.pi * (s - 10) / 90)))
    return out


@pytest.mark.parametrize("convert", [list, torch.tensor, tuple])
def test_learning_rates_accepts(convert, capsys):
    check.learning_rates(convert(right_lrs()), **SCHEDULE)
    assert capsys.readouterr().out.startswith("Correct:")


def test_learning_rates_rejects():
    lrs = right_lrs()
    from_zero = [0.05 * s / 10 if s < 10 else lr for s, lr in zip(SCHEDULE["steps"], lrs)]
    rejects(check.learning_rates, from_zero, **SCHEDULE, match="very first step")
    whole = [lr if s < 10 else 0.05 * 0.5 * (1 + math.cos(math.pi * s / 100)) for s, lr in zip(SCHEDULE["steps"], lrs)]
    rejects(check.learning_rates, whole, **SCHEDULE, match="cosine starts when the warmup ends")
    rejects(check.learning_rates, [lr / 0.05 for lr in lrs], **SCHEDULE, match="multiply them by the peak")
    rejects(check.learning_rates, lrs[:3], **SCHEDULE, match="one learning rate per step")
    rejects(check.learning_rates, [0.05] * 6, **SCHEDULE, match="two phases")
    rejects(check.learning_rates, None, **SCHEDULE, match="still empty")


STEP = dict(w=0.8, grad=-0.2, lr=0.1, weight_decay=0.5)


def right_step():
    w, g, lr, wd = 0.8, -0.2, 0.1, 0.5
    adamw = w * (1 - lr * wd) - lr * g / (abs(g) + 1e-8)
    g2 = g + wd * w
    return adamw, w - lr * g2 / (abs(g2) + 1e-8)


def test_one_step_accepts(capsys):
    adamw, l2 = right_step()
    check.one_step(adamw, l2, **STEP)
    check.one_step(torch.tensor(adamw), torch.tensor([l2]), **STEP)
    assert capsys.readouterr().out.count("Correct:") == 2


def test_one_step_agrees_with_pytorch(capsys):
    results = []
    for cls in (torch.optim.AdamW, torch.optim.Adam):
        w = torch.nn.Parameter(torch.tensor([0.8]))
        opt = cls([w], lr=0.1, weight_decay=0.5)
        w.grad = torch.tensor([-0.2])
        opt.step()
        results.append(w.item())
    check.one_step(*results, **STEP)
    assert capsys.readouterr().out.startswith("Correct:")


def test_one_step_rejects():
    adamw, l2 = right_step()
    rejects(check.one_step, l2, adamw, **STEP, match="swapped")
    plain = 0.8 + 0.1  # Adam without decay: w - lr * sign(g)
    rejects(check.one_step, plain, l2, **STEP, match="has no weight decay")
    rejects(check.one_step, 0.8 - 0.1 * 0.5 * 0.8 + 0.1 * 0.2, l2, **STEP, match="divides g by sqrt")
    rejects(check.one_step, adamw, plain - 0.1 * 0.5 * 0.8, **STEP, match="joins the gradient first")
    rejects(check.one_step, adamw, 0.0, **STEP, match="Adam \\+ L2: g'")
    rejects(check.one_step, [1.0, 2.0], l2, **STEP, match="single number")


def clip_right(grads, max_norm):
    total = torch.linalg.vector_norm(torch.cat([g.flatten() for g in grads]))
    return [g * min(1.0, max_norm / (float(total) + 1e-6)) for g in grads]


def test_clip_accepts_the_formula_and_pytorchs_clip(capsys):
    check.clip_by_total_norm(clip_right)

    def with_torch(grads, max_norm):
        params = [torch.nn.Parameter(torch.zeros_like(g)) for g in grads]
        for p, g in zip(params, grads):
            p.grad = g
        torch.nn.utils.clip_grad_norm_(params, max_norm)
        return [p.grad for p in params]

    check.clip_by_total_norm(with_torch)
    assert capsys.readouterr().out.count("Correct:") == 2


def test_clip_rejects():
    def per_tensor(grads, max_norm):
        return [g * min(1.0, max_norm / (float(g.norm()) + 1e-6)) for g in grads]

    def always(grads, max_norm):
        total = torch.linalg.vector_norm(torch.cat([g.flatten() for g in grads]))
        return [g * max_norm / total for g in grads]

    def flat(grads, max_norm):
        return [g.flatten() for g in clip_right(grads, max_norm)]

    def stub(grads, max_norm):
        raise NotImplementedError

    rejects(check.clip_by_total_norm, per_tensor, match="all gradients together")
    rejects(check.clip_by_total_norm, always, match="only ever scales down")
    rejects(check.clip_by_total_norm, flat, match="keeps its own shape")
    rejects(check.clip_by_total_norm, stub, match="NotImplementedError")
    rejects(check.clip_by_total_norm, lambda grads, m: grads[0], match="one clipped tensor per gradient")
    rejects(check.clip_by_total_norm, clip_right([torch.ones(2)], 1.0), match="function itself")


def test_learning_rates_accepts_values_rounded_to_five_decimals(capsys):
    import math

    from attention_lab.teaching.checks import lesson08

    peak, warm, total, steps = 0.05, 20, 60, [0, 10, 19, 20, 40, 59]
    exact = [peak * (s + 1) / warm if s < warm else peak * 0.5 * (1 + math.cos(math.pi * (s - warm) / (total - warm)))
             for s in steps]
    lesson08.learning_rates([round(x, 5) for x in exact], peak_lr=peak, warmup_steps=warm, total_steps=total,
                            steps=steps)
    assert capsys.readouterr().out.startswith("Correct")
