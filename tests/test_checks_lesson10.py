"""Lesson 10 checks accept every right answer (loops, the quadratic form, float64, numpy) and reject the common
mistakes, each with its own hint; an error inside the learner's function becomes a hint."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from _check_helpers import accepts, rejects

from attention_lab.teaching.checks import lesson10 as check


def phi(x):
    return F.elu(x) + 1


# ---- exercise 1: decayed linear attention ----


def decayed_loop(q, k, v, gamma):
    fq, fk = phi(q), phi(k)
    state = torch.zeros(*q.shape[:-2], q.shape[-1], v.shape[-1], dtype=q.dtype)
    norm = torch.zeros(*q.shape[:-2], q.shape[-1], dtype=q.dtype)
    out = []
    for t in range(q.shape[-2]):
        state = gamma * state + fk[..., t, :, None] * v[..., t, None, :]
        norm = gamma * norm + fk[..., t, :]
        out.append((fq[..., t, :, None] * state).sum(-2) / (fq[..., t, :] * norm).sum(-1, keepdim=True))
    return torch.stack(out, dim=-2)


def decayed_quadratic(q, k, v, gamma):
    n = q.shape[-2]
    t = torch.arange(n)
    decay = (gamma ** (t[:, None] - t[None, :]).clamp(min=0).double()) * (t[:, None] >= t[None, :])
    w = phi(q) @ phi(k).transpose(-2, -1) * decay
    return w @ v / w.sum(-1, keepdim=True)


def decayed_after_adding(q, k, v, gamma):  # S = gamma (S + phi v): both sums carry one extra gamma, which cancels
    fq, fk = phi(q), phi(k)
    state = torch.zeros(*q.shape[:-2], q.shape[-1], v.shape[-1], dtype=q.dtype)
    norm = torch.zeros(*q.shape[:-2], q.shape[-1], dtype=q.dtype)
    out = []
    for t in range(q.shape[-2]):
        state = gamma * (state + torch.einsum("...m,...v->...mv", fk[..., t, :], v[..., t, :]))
        norm = gamma * (norm + fk[..., t, :])
        out.append(torch.einsum("...m,...mv->...v", fq[..., t, :], state) / (fq[..., t, :] * norm).sum(-1)[..., None])
    return torch.stack(out, dim=-2)


def decayed_numpy(q, k, v, gamma):
    return decayed_quadratic(q, k, v, gamma).numpy()


@pytest.mark.parametrize("answer", [decayed_loop, decayed_quadratic, decayed_after_adding, decayed_numpy])
def test_decayed_accepts(answer, capsys):
    accepts(capsys, check.decayed_linear_attention, answer)


def no_decay(q, k, v, gamma):
    return decayed_quadratic(q, k, v, 1.0)


def decay_state_only(q, k, v, gamma):
    n = q.shape[-2]
    t = torch.arange(n)
    lower = t[:, None] >= t[None, :]
    decay = gamma ** (t[:, None] - t[None, :]).clamp(min=0).double() * lower
    w = phi(q) @ phi(k).transpose(-2, -1)
    return (w * decay) @ v / (w * lower).sum(-1, keepdim=True)


def decay_norm_only(q, k, v, gamma):
    n = q.shape[-2]
    t = torch.arange(n)
    lower = t[:, None] >= t[None, :]
    decay = gamma ** (t[:, None] - t[None, :]).clamp(min=0).double() * lower
    w = phi(q) @ phi(k).transpose(-2, -1)
    return (w * lower) @ v / (w * decay).sum(-1, keepdim=True)


def mask_not_causal(q, k, v, gamma):  # the parallel form's gamma^(t - s) kept for s > t
    t = torch.arange(q.shape[-2])
    w = phi(q) @ phi(k).transpose(-2, -1) * gamma ** (t[:, None] - t[None, :]).double()
    return w @ v / w.sum(-1, keepdim=True)


def not_causal(q, k, v, gamma):
    n = q.shape[-2]
    t = torch.arange(n)
    decay = gamma ** (t[:, None] - t[None, :]).clamp(min=0).double()
    w = phi(q) @ phi(k).transpose(-2, -1) * decay
    return w @ v / w.sum(-1, keepdim=True)


def growing(q, k, v, gamma):
    return decayed_quadratic(q, k, v, 1 / gamma)


def hard_coded_axes(q, k, v, gamma):  # works for (n, d) inputs only
    return decayed_quadratic(q, k, v, gamma) if q.dim() == 2 else q.sum(1)


@pytest.mark.parametrize(("answer", "match"), [
    (no_decay, "without forgetting"),
    (decay_state_only, "S forgets but z does not"),
    (decay_norm_only, "z forgets but S does not"),
    (not_causal, "keys from later positions"),
    (mask_not_causal, "zero above the diagonal"),
    (growing, "older keys weigh more"),
    (hard_coded_axes, "should have that shape"),
    (lambda q, k, v, gamma: q @ v, "raised RuntimeError"),
    (lambda q, k, v, gamma: decayed_quadratic(q, k, v, gamma) * 1.01, "written out by hand"),
    (lambda q, k, v, gamma: "tensor", "should be a tensor"),
    (..., "still empty"),
    (None, "define a function"),
])
def test_decayed_rejects(answer, match):
    rejects(check.decayed_linear_attention, answer, match=match)


# ---- exercise 2: the recurrent state's bytes ----


@pytest.mark.parametrize("answer", [
    lambda layers, heads, m, dv, size: layers * heads * (m * dv + m) * size,
    lambda layers, heads, m, dv, size: float(layers * heads * m * (dv + 1) * size),
    lambda layers, heads, m, dv, size: torch.tensor(layers * heads * m * (dv + 1) * size),
    lambda layers, heads, m, dv, size: np.int64(layers * heads * m * (dv + 1) * size),
])
def test_state_bytes_accepts(answer, capsys):
    accepts(capsys, check.recurrent_state_bytes, answer)


@pytest.mark.parametrize(("answer", "match"), [
    (lambda layers, heads, m, dv, size: layers * heads * m * dv * size, "normaliser z"),
    (lambda layers, heads, m, dv, size: 8 * layers * heads * m * (dv + 1) * size, "that is bits"),
    (lambda layers, heads, m, dv, size: heads * m * (dv + 1) * size, "that is one layer"),
    (lambda layers, heads, m, dv, size: layers * m * (dv + 1) * size, "one head per layer"),
    (lambda layers, heads, m, dv, size: layers * heads * dv * (m + 1) * size, "one number per feature"),
    (lambda layers, heads, m, dv, size: 3194880, "same number when layers or heads"),  # right for one model only
    (lambda layers, heads, m, dv, size: "big", "whole number"),
    (lambda layers, heads, m, dv, size: layers / 0, "raised ZeroDivisionError"),
    (None, "define a function"),
])
def test_state_bytes_rejects(answer, match):
    rejects(check.recurrent_state_bytes, answer, match=match)


# ---- exercise 3: the causal linear attention that leaked ----


def causal_fixed(q, k, v):
    fq, fk = phi(q), phi(k)
    running = torch.cumsum(fk[..., :, None] * v[..., None, :], dim=-3)  # (..., n, m, dv)
    normaliser = torch.cumsum(fk, dim=-2)  # (..., n, m)
    return (fq[..., None] * running).sum(-2) / (fq * normaliser).sum(-1, keepdim=True)


def causal_quadratic(q, k, v):
    w = (phi(q) @ phi(k).transpose(-2, -1)).tril()
    return w @ v / w.sum(-1, keepdim=True)


@pytest.mark.parametrize("answer", [causal_fixed, causal_quadratic, lambda q, k, v: causal_fixed(q, k, v).numpy()])
def test_fixed_causal_accepts(answer, capsys):
    accepts(capsys, check.fixed_causal_linear, answer)


def still_leaking(q, k, v):
    fq, fk = phi(q), phi(k)
    running = torch.cumsum(fk[..., :, None] * v[..., None, :], dim=-3)
    total = fk.sum(dim=-2, keepdim=True)  # the bug: every key, future included
    return (fq[..., None] * running).sum(-2) / (fq * total).sum(-1, keepdim=True)


def exclusive(q, k, v):
    w = (phi(q) @ phi(k).transpose(-2, -1)).tril(-1)
    w[..., 0, 0] = 1.0  # position 0 would divide by zero otherwise
    return w @ v / w.sum(-1, keepdim=True)


@pytest.mark.parametrize(("answer", "match"), [
    (still_leaking, "changing the tokens after position 0 still changes the output"),
    (exclusive, "its own key t"),
    (lambda q, k, v: causal_quadratic(q, k, v) + 0.1, "no leak left, but the values differ"),
    (lambda q, k, v: causal_quadratic(q, k, v)[..., :-1, :], "should have that shape"),
    (lambda q, k, v: q.undefined(), "raised AttributeError"),
    (None, "define a function"),
])
def test_fixed_causal_rejects(answer, match):
    rejects(check.fixed_causal_linear, answer, match=match)


def test_the_parallel_form_is_named_by_its_own_name():
    def decayed_parallel(q, k, v, gamma):
        raise NotImplementedError

    rejects(check.decayed_linear_attention, decayed_parallel, match="your decayed_parallel still raises")


def test_a_nan_output_gets_its_own_hint_not_a_leak():
    """A NaN (0 / 0 at position 0) is not a leak: the leak test compares finite outputs only."""
    def nan_first(q, k, v):
        out = causal_fixed(q, k, v)
        out[..., 0, :] = float("nan")
        return out

    rejects(check.fixed_causal_linear, nan_first, match="NaN or inf at positions 0")


def test_a_leak_at_one_split_point_only_is_found():
    """Each running sum reaches one token past t: a single split point in the middle would show it, but so must the
    first ones, and the hint names the first split that leaks."""
    def one_too_far(q, k, v):
        fq, fk = phi(q), phi(k)
        running = torch.cumsum(fk[..., :, None] * v[..., None, :], dim=-3)
        norms = torch.cumsum(fk, dim=-2)
        running = torch.cat([running[..., 1:, :, :], running[..., -1:, :, :]], dim=-3)
        norms = torch.cat([norms[..., 1:, :], norms[..., -1:, :]], dim=-2)
        return (fq[..., None] * running).sum(-2) / (fq * norms).sum(-1, keepdim=True)

    rejects(check.fixed_causal_linear, one_too_far, match="after position 0 still changes")


def test_a_leak_only_past_the_middle_is_found():
    """Only the last position reads the future (a wrap-around): the split at n - 2 finds it."""
    def wraps(q, k, v):
        out = causal_fixed(q, k, v).clone()
        out[..., -2, :] = out[..., -2, :] + 0.01 * v[..., -1, :]
        return out

    rejects(check.fixed_causal_linear, wraps, match="still changes the output")


def test_the_library_call_is_refused():
    import attention_lab as al

    rejects(check.fixed_causal_linear, lambda q, k, v: al.linear_attention(q, k, v, causal=True),
            match="calls the library's linear_attention")


def test_the_state_check_prints_the_comparison_the_exercise_asks_for(capsys):
    """The answer cell no longer prints (a stub would raise there before the check): the check does, once right."""
    check.recurrent_state_bytes(lambda layers, heads, m, dv, size: layers * heads * m * (dv + 1) * size)
    printed = capsys.readouterr().out
    assert printed.startswith("Correct") and "3.05 MiB" in printed and "9.16 GiB" in printed


def test_hints_never_contain_code():
    for answer, exercise in ((no_decay, check.decayed_linear_attention), (still_leaking, check.fixed_causal_linear)):
        with pytest.raises(AssertionError) as error:
            exercise(answer)
        assert "torch." not in str(error.value) and "cumsum" not in str(error.value)
