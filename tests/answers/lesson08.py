"""Answers to lesson 08's exercises (training stability): the inverse-square-root schedule, one AdamW and one
Adam + L2 step, a pre-LN block from its parts, clipping by the total norm."""

import math

import numpy as np
import torch

from attention_lab.teaching.checks import lesson08

from . import GENERIC, Attempt


def stub(*args):
    raise NotImplementedError("replace this line with your answer, then run the check cell below")


def no_return(*args):
    args[0]


# ---- 08/1: factor(step, warmup_steps) ---------------------------------------------------------------------------

def factor_min(step, warmup_steps):  # the lesson's solution
    ramp = (step + 1) / warmup_steps
    return min(ramp, 1 / math.sqrt(ramp))


def factor_branches(step, warmup_steps):
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    return math.sqrt(warmup_steps / (step + 1))


def factor_paper(step, warmup_steps):  # "Attention Is All You Need", step counted from 1, scaled to peak 1
    s = step + 1
    return math.sqrt(warmup_steps) * min(s ** -0.5, s * warmup_steps ** -1.5)


def factor_float32_tensor(step, warmup_steps):
    s = torch.tensor(step + 1.0)
    return torch.minimum(s / warmup_steps, (warmup_steps / s).sqrt())


def factor_numpy(step, warmup_steps):
    return np.minimum((step + 1) / warmup_steps, np.sqrt(warmup_steps / (step + 1)))


def factor_list_of_one(step, warmup_steps):
    return [factor_min(step, warmup_steps)]


def factor_paper_unscaled(step, warmup_steps):  # the paper's formula without the peak scaled to 1
    s = step + 1
    return min(s ** -0.5, s * warmup_steps ** -1.5)


def factor_as_lr(step, warmup_steps):
    return 0.01 * factor_min(step, warmup_steps)


def factor_ramp_from_zero(step, warmup_steps):
    return step / warmup_steps if step < warmup_steps else math.sqrt(warmup_steps / (step + 1))


def factor_integer_ramp(step, warmup_steps):
    return (step + 1) // warmup_steps if step < warmup_steps else math.sqrt(warmup_steps / (step + 1))


def factor_join_late(step, warmup_steps):  # "<=": the step after the warmup still on the line
    return (step + 1) / warmup_steps if step <= warmup_steps else math.sqrt(warmup_steps / (step + 1))


def factor_no_decay(step, warmup_steps):
    return min((step + 1) / warmup_steps, 1.0)


def factor_restart(step, warmup_steps):
    return (step + 1) / warmup_steps if step < warmup_steps else 1 / math.sqrt(step + 1)


def factor_kink(step, warmup_steps):
    return (step + 1) / warmup_steps if step < warmup_steps else math.sqrt(warmup_steps / step)


def factor_one_over_step(step, warmup_steps):
    return (step + 1) / warmup_steps if step < warmup_steps else warmup_steps / (step + 1)


def factor_fourth_root(step, warmup_steps):
    return (step + 1) / warmup_steps if step < warmup_steps else (warmup_steps / (step + 1)) ** 0.25


def factor_hard_coded(step, warmup_steps):  # the lesson's example warmup written in
    return min((step + 1) / 10, math.sqrt(10 / (step + 1)))


def factor_zero_division(step, warmup_steps):
    return min(step / warmup_steps, math.sqrt(warmup_steps / step))


def factor_two_numbers(step, warmup_steps):
    return [(step + 1) / warmup_steps, math.sqrt(warmup_steps / (step + 1))]


def factor_cosine(step, warmup_steps):  # the lesson's own cosine, over 4 warmups
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    return 0.5 * (1 + math.cos(math.pi * (step - warmup_steps) / (3 * warmup_steps)))


def factor_one_argument(step):
    return step


# ---- 08/2: first_step(w, g, lr, weight_decay, eps=1e-8) -> (w_adamw, w_adam_l2) ---------------------------------

def step_right(w, g, lr, weight_decay, eps=1e-8):  # the lesson's solution
    w_adamw = w * (1 - lr * weight_decay) - lr * g / (abs(g) + eps)
    g_l2 = g + weight_decay * w
    return w_adamw, w - lr * g_l2 / (abs(g_l2) + eps)


def step_sign(w, g, lr, weight_decay, eps=1e-8):
    return w - lr * weight_decay * w - lr * math.copysign(1, g), w - lr * math.copysign(1, g + weight_decay * w)


def step_torch_optim(w, g, lr, weight_decay, eps=1e-8):
    results = []
    for optimizer in (torch.optim.AdamW, torch.optim.Adam):
        weight = torch.nn.Parameter(torch.tensor([w]))
        opt = optimizer([weight], lr=lr, weight_decay=weight_decay, eps=eps)
        weight.grad = torch.tensor([g])
        opt.step()
        results.append(weight.item())
    return tuple(results)


def step_moments(w, g, lr, weight_decay, eps=1e-8):  # Adam written out with its moments and bias correction
    def adam(w, grad):
        m, v = 0.1 * grad, 0.001 * grad**2
        m_hat, v_hat = m / (1 - 0.9), v / (1 - 0.999)
        return w - lr * m_hat / (math.sqrt(v_hat) + eps)
    return adam(w * (1 - lr * weight_decay), g), adam(w, g + weight_decay * w)


def step_tensors(w, g, lr, weight_decay, eps=1e-8):
    return tuple(torch.tensor([x], dtype=torch.float64) for x in step_right(w, g, lr, weight_decay, eps))


def step_numpy_list(w, g, lr, weight_decay, eps=1e-8):
    return list(np.array(step_right(w, g, lr, weight_decay, eps)))


def wrong_step(adamw=None, l2=None):
    """A first_step whose AdamW part, or Adam + L2 part, is replaced by a wrong formula of (w, g, lr, wd)."""
    def fn(w, g, lr, weight_decay, eps=1e-8):
        right_w, right_l2 = step_right(w, g, lr, weight_decay, eps)
        return (adamw(w, g, lr, weight_decay) if adamw else right_w, l2(w, g, lr, weight_decay) if l2 else right_l2)
    return fn


def adam(w, grad, lr):
    return w - lr * grad / (abs(grad) + 1e-8)


def step_swapped(w, g, lr, weight_decay, eps=1e-8):
    return step_right(w, g, lr, weight_decay, eps)[::-1]


def step_example_numbers(w, g, lr, weight_decay, eps=1e-8):  # the exercise's answers written in
    return 0.86, 0.7


def step_one_number(w, g, lr, weight_decay, eps=1e-8):
    return step_right(w, g, lr, weight_decay, eps)[0]


WRONG_STEPS = [
    ("AdamW without its decay", wrong_step(adamw=lambda w, g, lr, wd: adam(w, g, lr)), "has no weight decay"),
    ("AdamW as SGD", wrong_step(adamw=lambda w, g, lr, wd: w * (1 - lr * wd) - lr * g), "not step by lr times"),
    ("AdamW shrinks by λ", wrong_step(adamw=lambda w, g, lr, wd: adam(w * (1 - wd), g, lr)), "not by λ"),
    ("AdamW decays after the step", wrong_step(adamw=lambda w, g, lr, wd: adam(w, g, lr) * (1 - lr * wd)),
     "started the step with"),
    ("AdamW without bias correction", wrong_step(adamw=lambda w, g, lr, wd: w * (1 - lr * wd) - lr * 0.1 * g / (
        math.sqrt(0.001) * abs(g))), "bias correction"),
    ("Adam + L2 divided by |g|", wrong_step(l2=lambda w, g, lr, wd: w - lr * (g + wd * w) / abs(g)),
     "combined gradient g \\+ λ · w, not the loss gradient alone"),
    ("Adam + L2 as AdamW", wrong_step(l2=lambda w, g, lr, wd: adam(w * (1 - lr * wd), g, lr)), "gives AdamW's"),
    ("Adam + L2 decays after Adam", wrong_step(l2=lambda w, g, lr, wd: adam(w, g, lr) - lr * wd * w),
     "gives AdamW's"),
    ("Adam + L2 with λ/2", wrong_step(l2=lambda w, g, lr, wd: adam(w, g + wd * w / 2, lr)), "not \\(λ/2\\)"),
    ("Adam + L2 penalty subtracted", wrong_step(l2=lambda w, g, lr, wd: adam(w, g - wd * w, lr)), "not subtracted"),
    ("Adam + L2 as SGD", wrong_step(l2=lambda w, g, lr, wd: w - lr * (g + wd * w)), "not step by lr times"),
    ("Adam + L2 without bias correction", wrong_step(l2=lambda w, g, lr, wd: w - lr * 0.1 * (g + wd * w) / (
        math.sqrt(0.001) * abs(g + wd * w))), "bias correction"),
    ("swapped", step_swapped, "swapped"),
    ("the example's numbers", step_example_numbers, "right for the exercise's numbers but not"),
    ("AdamW with the loss gradient's square", wrong_step(adamw=lambda w, g, lr, wd: w * (1 - lr * wd) - lr * g / g**2),
     "AdamW does two separate things"),
    ("Adam + L2 moves by lr · λ", wrong_step(l2=lambda w, g, lr, wd: w - lr * wd), "penalty's gradient λ · w is part"),
    ("one number", step_one_number, "two numbers"),
    ("no return", no_return, "is None"),
    ("the stub", stub, "NotImplementedError"),
    ("three arguments", lambda w, g, lr: (w, w), "raised TypeError"),
]

# ---- 08/3: pre_ln(block, x) -------------------------------------------------------------------------------------


def pre_ln_right(block, x):  # the lesson's solution
    after_attention = x + block.attn(block.norm1(x))[0]
    return after_attention + block.ff(block.norm2(after_attention))


def pre_ln_in_steps(block, x):
    h = block.norm1(x)
    attended, _ = block.attn(h)
    x = x + attended
    return x + block.ff(block.norm2(x))


def pre_ln_pair(block, x):
    return pre_ln_right(block, x), None


def pre_ln_numpy(block, x):
    return pre_ln_right(block, x).detach().numpy()


def pre_ln_in_place_copy(block, x):
    x = x.clone()
    x += block.attn(block.norm1(x))[0]
    x += block.ff(block.norm2(x))
    return x


def colleague(block, x):  # the lesson's buggy version
    x = block.norm1(x)
    x = x + block.attn(x)[0]
    x = block.norm2(x)
    return x + block.ff(x)


def pre_ln_post(block, x):
    h = block.norm1(x + block.attn(x)[0])
    return block.norm2(h + block.ff(h))


def pre_ln_post_one_norm(block, x):
    h = block.norm2(x + block.attn(x)[0])
    return block.norm2(h + block.ff(h))


def pre_ln_norm1_twice(block, x):
    h = x + block.attn(block.norm1(x))[0]
    return h + block.ff(block.norm1(h))


def pre_ln_norms_swapped(block, x):
    h = x + block.attn(block.norm2(x))[0]
    return h + block.ff(block.norm1(h))


def pre_ln_attention_unnormalised(block, x):
    h = x + block.attn(x)[0]
    return h + block.ff(block.norm2(h))


def pre_ln_ff_unnormalised(block, x):
    h = x + block.attn(block.norm1(x))[0]
    return h + block.ff(h)


def pre_ln_no_ff_residual(block, x):
    return block.ff(block.norm2(x + block.attn(block.norm1(x))[0]))


def pre_ln_no_attention_residual(block, x):
    h = block.attn(block.norm1(x))[0]
    return h + block.ff(block.norm2(h))


def pre_ln_ff_reads_input(block, x):
    return x + block.attn(block.norm1(x))[0] + block.ff(block.norm2(x))


def pre_ln_output_normalised(block, x):
    return block.norm2(pre_ln_right(block, x))


def pre_ln_half(block, x):
    return x + block.attn(block.norm1(x))[0]


def pre_ln_in_place(block, x):
    x += block.attn(block.norm1(x))[0]
    x += block.ff(block.norm2(x))
    return x


def pre_ln_whole_block(block, x):
    return block(x)[0]


def pre_ln_tuple_attention(block, x):
    h = x + block.attn(block.norm1(x))
    return h + block.ff(block.norm2(h))


def pre_ln_wrong_part(block, x):
    return x + block.self_attn(block.norm1(x))[0]


def pre_ln_scaled(block, x):
    return 0.5 * pre_ln_right(block, x)


def pre_ln_one_vector_per_sequence(block, x):
    return pre_ln_right(block, x).mean(dim=1)


# ---- 08/4: clip(grads, max_norm) --------------------------------------------------------------------------------

def clip_right(grads, max_norm):  # the lesson's solution
    total = torch.sqrt(sum((g**2).sum() for g in grads))
    scale = min(1.0, max_norm / (float(total) + 1e-6))
    return [g * scale for g in grads]


def clip_flat_cat(grads, max_norm):
    total = torch.cat([g.flatten() for g in grads]).norm()
    return [g * min(1.0, max_norm / (float(total) + 1e-6)) for g in grads]


def clip_vector_norm(grads, max_norm):
    total = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
    return [g * torch.clamp(max_norm / (total + 1e-6), max=1.0) for g in grads]


def clip_no_epsilon(grads, max_norm):
    total = math.sqrt(sum(float((g**2).sum()) for g in grads))
    return [g * min(1.0, max_norm / total) for g in grads]


def clip_in_place(grads, max_norm):
    total = math.sqrt(sum(float((g**2).sum()) for g in grads))
    for g in grads:
        g.mul_(min(1.0, max_norm / (total + 1e-6)))
    return grads


def clip_if(grads, max_norm):
    total = math.sqrt(sum(float(g.pow(2).sum()) for g in grads))
    if total > max_norm:
        return [g * max_norm / (total + 1e-6) for g in grads]
    return list(grads)


def clip_tuple(grads, max_norm):
    return tuple(clip_right(grads, max_norm))


def clip_each(grads, max_norm):  # the lesson's buggy version
    return [g * min(1.0, max_norm / (float(g.norm()) + 1e-6)) for g in grads]


def clip_always(grads, max_norm):
    total = math.sqrt(sum(float((g**2).sum()) for g in grads))
    return [g * max_norm / total for g in grads]


def clip_squared(grads, max_norm):
    total = sum(float((g**2).sum()) for g in grads)
    return [g * min(1.0, max_norm / (total + 1e-6)) for g in grads]


def clip_sum_of_norms(grads, max_norm):
    total = sum(float(g.norm()) for g in grads)
    return [g * min(1.0, max_norm / (total + 1e-6)) for g in grads]


def clip_upside_down(grads, max_norm):
    total = math.sqrt(sum(float((g**2).sum()) for g in grads))
    return [g * max(1.0, total / max_norm) for g in grads]


def clip_unchanged(grads, max_norm):
    return list(grads)


def clip_by_value(grads, max_norm):
    return [g.clamp(-max_norm, max_norm) for g in grads]


def clip_flattened(grads, max_norm):
    return [g.flatten() for g in clip_right(grads, max_norm)]


def clip_cat_unflattened(grads, max_norm):
    total = torch.cat(grads).norm()
    return [g * min(1.0, max_norm / float(total)) for g in grads]


def clip_stacked(grads, max_norm):
    total = torch.stack(grads).norm()
    return [g * min(1.0, max_norm / float(total)) for g in grads]


def clip_half(grads, max_norm):
    return [g * 0.5 for g in grads]


def clip_first_only(grads, max_norm):
    return clip_right(grads, max_norm)[0]


def clip_mean_norm(grads, max_norm):
    total = torch.cat([g.flatten() for g in grads]).pow(2).mean().sqrt()
    return [g * min(1.0, max_norm / float(total)) for g in grads]


def clip_scale_only(grads, max_norm):
    total = math.sqrt(sum(float((g**2).sum()) for g in grads))
    return min(1.0, max_norm / total)


def clip_no_return(grads, max_norm):
    clip_in_place(grads, max_norm)


def _schedule(label, fn, *, right=False, hint=None):
    return Attempt("08/1", label, lesson08.inverse_sqrt_schedule, fn, right=right, hint=hint)


def _step(label, fn, *, right=False, hint=None):
    return Attempt("08/2", label, lesson08.one_step, fn, right=right, hint=hint)


def _block(label, fn, *, right=False, hint=None):
    return Attempt("08/3", label, lesson08.pre_ln_block, fn, right=right, hint=hint)


def _clip(label, fn, *, right=False, hint=None):
    return Attempt("08/4", label, lesson08.clip_by_total_norm, fn, right=right, hint=hint)


ATTEMPTS = [
    _schedule("min of the ramp and its inverse root", factor_min, right=True),
    _schedule("two branches", factor_branches, right=True),
    _schedule("the paper's formula, scaled to 1", factor_paper, right=True),
    _schedule("a float32 tensor", factor_float32_tensor, right=True),
    _schedule("numpy", factor_numpy, right=True),
    _schedule("a list of one number", factor_list_of_one, right=True),
    _schedule("the paper's formula unscaled", factor_paper_unscaled, hint="not 1, at the last warmup step"),
    _schedule("a learning rate", factor_as_lr, hint="not a learning rate"),
    _schedule("ramp from 0", factor_ramp_from_zero, hint="very first step"),
    _schedule("integer division", factor_integer_ramp, hint="rounds down"),
    _schedule("joined one step late", factor_join_late, hint="still on the warmup line"),
    _schedule("no decay", factor_no_decay, hint="must fall"),
    _schedule("decay restarts", factor_restart, hint="jumps down"),
    _schedule("decay from step s", factor_kink, hint="count the step as the warmup does"),
    _schedule("1 / step", factor_one_over_step, hint="falls like 1 / step"),
    _schedule("fourth root", factor_fourth_root, hint="fourth root"),
    _schedule("warmup 10 written in", factor_hard_coded, hint="right for warmup_steps=10 but not"),
    _schedule("the lesson's cosine", factor_cosine, hint=GENERIC),
    _schedule("constant", lambda step, warmup_steps: 0.5, hint="not the lesson's straight line"),
    _schedule("divides by zero", factor_zero_division, hint="divides by zero at step 0"),
    _schedule("two numbers", factor_two_numbers, hint="one number"),
    _schedule("no return", no_return, hint="is None"),
    _schedule("one argument", factor_one_argument, hint="raised TypeError"),
    _schedule("the stub", stub, hint="NotImplementedError"),
    _schedule("a number, not the function", 0.5, hint="function itself"),
    _step("the lesson's solution", step_right, right=True),
    _step("signs", step_sign, right=True),
    _step("PyTorch's optimizers", step_torch_optim, right=True),
    _step("moments and bias correction", step_moments, right=True),
    _step("tensors", step_tensors, right=True),
    _step("a numpy list", step_numpy_list, right=True),
    *(_step(label, fn, hint=hint) for label, fn, hint in WRONG_STEPS),
    _step("the numbers, not a function", (0.86, 0.7), hint="function itself"),
    _block("the lesson's solution", pre_ln_right, right=True),
    _block("in steps", pre_ln_in_steps, right=True),
    _block("returns (output, weights)", pre_ln_pair, right=True),
    _block("numpy", pre_ln_numpy, right=True),
    _block("in place on a copy", pre_ln_in_place_copy, right=True),
    _block("the colleague's version", colleague, hint="carries the normalised x"),
    _block("post-LN", pre_ln_post, hint="that is post-LN"),
    _block("post-LN with one norm", pre_ln_post_one_norm, hint="that is post-LN"),
    _block("norm1 twice", pre_ln_norm1_twice, hint="its own LayerNorm"),
    _block("norms swapped", pre_ln_norms_swapped, hint="swapped"),
    _block("attention unnormalised", pre_ln_attention_unnormalised, hint="attention reads the stream without"),
    _block("feed-forward unnormalised", pre_ln_ff_unnormalised, hint="feed-forward network reads the stream without"),
    _block("no feed-forward residual", pre_ln_no_ff_residual, hint="residual connection too"),
    _block("no attention residual", pre_ln_no_attention_residual, hint="does not replace it"),
    _block("feed-forward reads the input", pre_ln_ff_reads_input, hint="not the block's input"),
    _block("output normalised", pre_ln_output_normalised, hint="leaves its output unnormalised"),
    _block("attention half only", pre_ln_half, hint="only the attention half"),
    _block("in place on x", pre_ln_in_place, hint="changed x in place"),
    _block("the whole block", pre_ln_whole_block, hint="four parts"),
    _block("attention's pair added", pre_ln_tuple_attention, hint="returns a pair"),
    _block("a part that is not there", pre_ln_wrong_part, hint="parts are norm1, attn, norm2 and ff"),
    _block("scaled", pre_ln_scaled, hint=GENERIC),
    _block("one vector per sequence", pre_ln_one_vector_per_sequence, hint="for x of shape"),
    _block("no return", no_return, hint="is None"),
    _block("the stub", stub, hint="NotImplementedError"),
    _clip("the lesson's solution", clip_right, right=True),
    _clip("flattened and joined", clip_flat_cat, right=True),
    _clip("norm of norms", clip_vector_norm, right=True),
    _clip("no epsilon", clip_no_epsilon, right=True),
    _clip("in place, returned", clip_in_place, right=True),
    _clip("an if", clip_if, right=True),
    _clip("a tuple", clip_tuple, right=True),
    _clip("the lesson's buggy version", clip_each, hint="bug of the given version"),
    _clip("always scaled", clip_always, hint="only ever scales down"),
    _clip("sum of squares", clip_squared, hint="you divided by the sum itself"),
    _clip("sum of norms", clip_sum_of_norms, hint="not the sum of the tensors' norms"),
    _clip("upside down", clip_upside_down, hint="upside down"),
    _clip("unchanged", clip_unchanged, hint="returns the gradients unchanged"),
    _clip("by value", clip_by_value, hint="clipping by value"),
    _clip("flattened result", clip_flattened, hint="keeps its own shape"),
    _clip("joined without flattening", clip_cat_unflattened, hint="different shapes"),
    _clip("stacked", clip_stacked, hint="different shapes"),
    _clip("halved", clip_half, hint=GENERIC),
    _clip("root mean square", clip_mean_norm, hint="returns the gradients unchanged"),
    _clip("the first gradient only", clip_first_only, hint="one clipped tensor per gradient"),
    _clip("the scale only", clip_scale_only, hint="one clipped tensor per gradient"),
    _clip("in place, no return", clip_no_return, hint="is None"),
    _clip("the stub", stub, hint="NotImplementedError"),
    _clip("a list, not a function", [torch.ones(2)], hint="function itself"),
]
