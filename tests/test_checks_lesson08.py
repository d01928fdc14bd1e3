"""Lesson 08 checks: what tests/answers/lesson08.py does not show on its own. (That corpus gives every common mistake
of exercise 2 with the hint it must get, so it proves that the check's cases tell each mistake apart from the right
answer and from each other.) On the exercise's numbers Adam + L2 normalised by |g| no longer equals the right
answer, the check's expected steps are PyTorch's optimizers', a hard-coded answer fails, hints name the learner's
function and describe the idea, not the code, and the untouched student copy meets a one-line hint at every check."""

from __future__ import annotations

import math

import pytest
import torch
from _check_helpers import accepts, hint_in, rejects

from attention_lab.teaching.checks import lesson08 as check


def hint_of(fn, *args, **kwargs) -> str:
    with pytest.raises(AssertionError, match="^Not yet: ") as error:
        fn(*args, **kwargs)
    return str(error.value)


def first_step(w, g, lr, weight_decay, eps=1e-8):
    w_adamw = w * (1 - lr * weight_decay) - lr * g / (abs(g) + eps)
    g_l2 = g + weight_decay * w
    return w_adamw, w - lr * g_l2 / (abs(g_l2) + eps)


EXAMPLE = (0.8, -0.1, 0.1, 0.5)  # the exercise's numbers: w, g, lr, λ


def test_the_exercise_example_tells_adam_l2_over_g_from_the_right_answer():
    """Issue 20: on the old example (w 0.8, g -0.2, λ 0.5) |g| = |g + λw|, so dividing by |g| passed."""
    w, g, lr, wd = EXAMPLE
    assert abs(g) != abs(g + wd * w)
    by_g = w - lr * (g + wd * w) / abs(g)
    assert abs(by_g - first_step(*EXAMPLE)[1]) > 0.1

    def divided_by_g(w, g, lr, weight_decay, eps=1e-8):
        return first_step(w, g, lr, weight_decay)[0], w - lr * (g + weight_decay * w) / (abs(g) + eps)

    def divided_by_g_on_the_example_only(w, g, lr, weight_decay, eps=1e-8):
        on_example = (w, g, lr, weight_decay) == EXAMPLE  # right everywhere else: only the example can tell
        return divided_by_g(w, g, lr, weight_decay, eps) if on_example else first_step(w, g, lr, weight_decay, eps)

    rejects(check.one_step, divided_by_g, match="combined gradient")
    rejects(check.one_step, divided_by_g_on_the_example_only, match="penalty's gradient λ · w is part")


def test_one_step_agrees_with_pytorchs_optimizers(capsys):
    """The check's expected steps, on every case it tries, are what torch.optim.AdamW and Adam do (float64)."""
    def optimizers_step(w, g, lr, weight_decay, eps=1e-8):
        after = []
        for optimizer in (torch.optim.AdamW, torch.optim.Adam):
            weight = torch.nn.Parameter(torch.tensor([w], dtype=torch.float64))
            opt = optimizer([weight], lr=lr, weight_decay=weight_decay, eps=eps)
            weight.grad = torch.tensor([g], dtype=torch.float64)
            opt.step()
            after.append(weight.item())
        return tuple(after)

    assert optimizers_step(*EXAMPLE) == pytest.approx(first_step(*EXAMPLE), abs=1e-9)
    accepts(capsys, check.one_step, optimizers_step)
    accepts(capsys, check.one_step, first_step)


def test_one_step_success_answers_the_direction_question_only_after_a_right_answer(capsys):
    check.one_step(first_step)
    out = capsys.readouterr().out
    assert "0.8600" in out and "0.7000" in out
    assert "0.8600" not in hint_of(check.one_step, lambda w, g, lr, wd, eps=1e-8: (w, w))


def test_a_schedule_right_for_one_warmup_only_is_told_so():
    def hard_coded(step, warmup_steps):
        return min((step + 1) / 10, math.sqrt(10 / (step + 1)))

    rejects(check.inverse_sqrt_schedule, hard_coded, match="right for warmup_steps=10 but not for warmup_steps=4")


def test_hints_name_the_learners_function():
    def factor(step, warmup_steps):
        return step / warmup_steps / 0

    def pre_ln(block, x):
        x += block.attn(block.norm1(x))[0]
        return x

    def clip(grads, max_norm):
        raise NotImplementedError

    assert "your factor divides by zero" in hint_of(check.inverse_sqrt_schedule, factor)
    assert "your pre_ln changed x in place" in hint_of(check.pre_ln_block, pre_ln)
    assert "your clip still raises NotImplementedError" in hint_of(check.clip_by_total_norm, clip)

    def first_step(w, g, lr):  # an argument short
        return w, w

    assert "your first_step raised TypeError" in hint_of(check.one_step, first_step)
    assert "your function raised TypeError" in hint_of(check.one_step, lambda w, g, lr: (w, w))  # no name of its own


def test_an_error_in_the_schedule_is_named_once_with_the_call():
    def factor(step, warmup_steps):
        return [1.0][step]  # IndexError from step 1 on

    text = hint_of(check.inverse_sqrt_schedule, factor)
    assert text.startswith("Not yet: your factor raised IndexError (list index out of range) when the check called "
                           "it with the arguments 1, ")
    text = hint_in("zh-CN", check.inverse_sqrt_schedule, factor)
    assert text.count("调用") <= 2 and "检查调用你的 factor 时" in text


def test_fallbacks_describe_the_idea_not_the_code():
    messages = [hint_of(check.clip_by_total_norm, lambda g, m: [x * 0.5 for x in g]),
                hint_of(check.pre_ln_block, lambda b, x: x),
                hint_of(check.one_step, lambda w, g, lr, wd, eps=1e-8: (0.0, 0.0)),
                hint_of(check.inverse_sqrt_schedule, lambda s, w: 0.5)]
    for message in messages:
        for code in ("torch.", ".norm(", "sqrt(", "block.", "[0]", "flatten", "sum(", "abs(", "eps=", "m_hat"):
            assert code not in message, (code, message)
