"""Checks for lesson 10 (the efficient-attention family: linear attention with decay, the size of a recurrent
state, a causal linear attention that leaks the future)."""

from __future__ import annotations

import numbers

import torch
import torch.nn.functional as F

from ...efficient.linear import linear_attention
from ._core import call_learner, close, correct, guard_errors, hint

_SHAPES = ((7, 3, 2), (2, 3, 11, 4, 5))  # (n, d, dv) and (b, h, n, d, dv): a hard-coded axis fails one of them


def _inputs(shape: tuple[int, ...], seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    *lead, n, d, dv = shape
    q = torch.randn(*lead, n, d, generator=g, dtype=torch.float64)
    k = torch.randn(*lead, n, d, generator=g, dtype=torch.float64)
    v = torch.randn(*lead, n, dv, generator=g, dtype=torch.float64)
    return q, k, v


def _phi(x: torch.Tensor) -> torch.Tensor:
    return F.elu(x) + 1


def _decayed(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, gamma: float, *, state_decay: float | None = None,
             norm_decay: float | None = None, causal: bool = True) -> torch.Tensor:
    """Quadratic form: weight gamma^(t - s) phi(q^t) . phi(k^s) for s <= t, rows normalised (the expected value,
    and with other decays for S and z, the results of common mistakes)."""
    n = q.shape[-2]
    t = torch.arange(n, dtype=torch.float64)
    gap = (t[:, None] - t[None, :]).clamp(min=0)  # t - s, (n, n)
    similarity = _phi(q) @ _phi(k).transpose(-2, -1)  # (..., n, n)
    allowed = torch.ones(n, n, dtype=torch.bool).tril() if causal else torch.ones(n, n, dtype=torch.bool)
    s_weights = similarity * (gamma if state_decay is None else state_decay) ** gap * allowed
    z_weights = similarity * (gamma if norm_decay is None else norm_decay) ** gap * allowed
    return (s_weights @ v) / z_weights.sum(dim=-1, keepdim=True)


def _decayed_unmasked(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, gamma: float) -> torch.Tensor:
    """The parallel form with gamma^(t - s) for every s, later keys included (a mask that forgot causality)."""
    t = torch.arange(q.shape[-2], dtype=torch.float64)
    weights = _phi(q) @ _phi(k).transpose(-2, -1) * gamma ** (t[:, None] - t[None, :])  # (..., n, n)
    return (weights @ v) / weights.sum(dim=-1, keepdim=True)


def _as_output(got: object, expected: torch.Tensor) -> torch.Tensor:
    if not isinstance(got, torch.Tensor):
        try:
            got = torch.as_tensor(got)
        except (TypeError, ValueError, RuntimeError):
            hint(f"your function should return a tensor of shape (..., n, dv), got {type(got).__name__}")
    if got.shape != expected.shape:
        hint(f"with v of shape {tuple(expected.shape)} the output should have that shape too (one output of dv "
             f"numbers per position), got {tuple(got.shape)}; work on the last two axes only, so that any leading "
             f"(batch, head) axes pass through")
    return got.detach().double()


@guard_errors
def decayed_linear_attention(answer: object) -> None:
    """Exercise 1: ``decayed(q, k, v, gamma)``, causal linear attention (phi = elu + 1) whose state forgets:
    S_t = gamma S_{t-1} + phi(k^t) v^t^T, z_t = gamma z_{t-1} + phi(k^t), b^t = phi(q^t)^T S_t / phi(q^t)^T z_t.
    """
    if answer is None or answer is Ellipsis or not callable(answer):
        hint("define a function decayed(q, k, v, gamma) and pass the function itself")
    for index, shape in enumerate(_SHAPES):
        for gamma in (0.9, 0.5):
            q, k, v = _inputs(shape, seed=10 * index + int(gamma * 10))
            expected = _decayed(q, k, v, gamma)
            got = _as_output(call_learner(answer, q.clone(), k.clone(), v.clone(), gamma, what="your decayed"),
                             expected)
            if close(got, expected, atol=1e-6, rtol=1e-6):
                continue
            if close(got, linear_attention(q, k, v, causal=True)):
                hint("that is linear attention without forgetting: multiply the state by gamma before adding each "
                     "new key, so a key s steps back counts gamma^s times less")
            if close(got, _decayed(q, k, v, gamma, norm_decay=1.0)):
                hint("S forgets but z does not: the normaliser must forget at the same rate as the state, or the "
                     "weights of each output no longer sum to 1")
            if close(got, _decayed(q, k, v, gamma, state_decay=1.0)):
                hint("z forgets but S does not: decay both sums by gamma at every step")
            if close(got, _decayed(q, k, v, gamma, causal=False)):
                hint("every position reads keys from later positions: a causal state holds only keys 0..t when "
                     "output t is computed")
            if close(got, _decayed_unmasked(q, k, v, gamma)):
                hint("later keys get weight gamma^(t - s), above 1 for s > t, instead of 0: the decay matrix must "
                     "also be causal, zero above the diagonal")
            if close(got, _decayed(q, k, v, 1.0 / gamma)):
                hint("older keys weigh more than newer ones: a key s steps back should count gamma^s, with gamma < 1")
            hint("compare your output with the recurrence on a sequence of 2 or 3 positions written out by hand: "
                 "which weight does each earlier key get?")
    correct("S and z both forget by gamma each step: key s weighs gamma^(t - s) phi(q^t) . phi(k^s) in output t, a "
            "causal attention whose recent past counts most (the idea behind RetNet and gated linear attention)")


def _state(layers: int, heads: int, features: int, value_dim: int, size: int) -> int:
    return layers * heads * features * (value_dim + 1) * size


@guard_errors
def recurrent_state_bytes(answer: object) -> None:
    """Exercise 2: ``state_bytes(layers, heads, features, value_dim, bytes_per_number)``: the bytes of every head's
    recurrent state (S, m x dv, and z, m) in every layer, for one sequence."""
    if answer is None or answer is Ellipsis or not callable(answer):
        hint("define a function state_bytes(layers, heads, features, value_dim, bytes_per_number) and pass the "
             "function itself")
    configs = ((24, 16, 64, 64, 2), (2, 2, 64, 16, 4), (6, 8, 256, 32, 4), (1, 1, 3, 5, 8))
    for layers, heads, m, dv, size in configs:
        got = call_learner(answer, layers, heads, m, dv, size, what="your state_bytes")
        if isinstance(got, torch.Tensor) and got.numel() == 1:
            got = got.item()
        if isinstance(got, bool) or not isinstance(got, numbers.Real):
            hint(f"state_bytes should return one number of bytes, got {type(got).__name__}")
        expected = _state(layers, heads, m, dv, size)
        if abs(float(got) - expected) < 0.5:
            continue
        if abs(float(got) - layers * heads * m * dv * size) < 0.5:
            hint("you counted the state S; each head also keeps the normaliser z, one more number per feature")
        if abs(float(got) - 8 * expected) < 0.5:
            hint("that is bits: a float16 number takes 2 bytes, float32 4, float64 8")
        if abs(float(got) - heads * m * (dv + 1) * size) < 0.5:
            hint("that is one layer: every layer keeps its own state")
        if abs(float(got) - layers * m * (dv + 1) * size) < 0.5:
            hint("that is one head per layer: every head keeps its own state")
        if abs(float(got) - _state(layers, heads, dv, m, size)) < 0.5:
            hint("z has one number per feature (m of them), not one per value dimension")
        hint("count the numbers of one head (S is features x value_dim, z has features entries), then multiply by "
             "heads, layers and the bytes of one number")
    correct("m (dv + 1) numbers per head and layer, whatever the length of the sequence: the state never grows")


def _leaks(fn: object, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, t: int) -> bool:
    """Do outputs 0..t change when positions after t change?"""
    later = [x.clone() for x in (q, k, v)]
    for x in later:
        x[..., t + 1:, :] = x[..., t + 1:, :] * -2.0 + 1.0
    before = call_learner(fn, q.clone(), k.clone(), v.clone(), what="your causal_linear")
    after = call_learner(fn, *later, what="your causal_linear")
    return not torch.allclose(torch.as_tensor(before)[..., : t + 1, :].double(),
                              torch.as_tensor(after)[..., : t + 1, :].double(), atol=1e-9, rtol=1e-9)


@guard_errors
def fixed_causal_linear(answer: object) -> None:
    """Exercise 3: ``causal_linear(q, k, v)``, the given causal linear attention with its leak of the future fixed."""
    if answer is None or answer is Ellipsis or not callable(answer):
        hint("define a function causal_linear(q, k, v) and pass the function itself")
    for index, shape in enumerate(_SHAPES):
        q, k, v = _inputs(shape, seed=100 + index)
        expected = linear_attention(q, k, v, causal=True)
        got = _as_output(call_learner(answer, q.clone(), k.clone(), v.clone(), what="your causal_linear"), expected)
        if close(got, expected, atol=1e-6, rtol=1e-6):
            continue
        n = q.shape[-2]
        if _leaks(answer, q, k, v, n // 2):
            hint("changing a later token still changes earlier outputs: some sum in your function still runs over "
                 "every position; each running sum may hold keys 0..t only")
        exclusive = linear_attention(q[..., 1:, :], k[..., :-1, :], v[..., :-1, :], causal=True)
        if close(got[..., 1:, :], exclusive):
            hint("query t must also see its own key t: the running sums include position t")
        hint("no leak left, but the values differ: compare with linear_attention(q, k, v, causal=True) row by row")
    correct("both running sums, S and z, now stop at position t: no output reads a later token")
