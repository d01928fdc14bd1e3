"""Answers to lesson 10's exercises (the efficient-attention family): causal linear attention whose state forgets,
as a loop (10/1a) and as attention with a decay matrix (10/1b), the bytes of a recurrent state (10/2), and the
causal linear attention that leaked the future, fixed (10/3)."""

import numpy as np
import torch
import torch.nn.functional as F

import attention_lab as al
from attention_lab.teaching.checks import lesson10

from . import GENERIC, Attempt


def phi(x):
    return F.elu(x) + 1


def stub(*args):
    raise NotImplementedError("write the body of this function, then run the check cell below")


# ---- 10/1a: decayed(q, k, v, gamma), the recurrence --------------------------------------------------------------

def loop(q, k, v, gamma, *, decay_s=None, decay_z=None, feature=phi, normalise=True, shrink_after=False):
    decay_s = gamma if decay_s is None else decay_s
    decay_z = gamma if decay_z is None else decay_z
    fq, fk = feature(q), feature(k)
    state = torch.zeros(*q.shape[:-2], q.shape[-1], v.shape[-1], dtype=v.dtype)
    norm = torch.zeros(*q.shape[:-2], q.shape[-1], dtype=v.dtype)
    out = []
    for t in range(q.shape[-2]):
        new_s, new_z = fk[..., t, :, None] * v[..., t, None, :], fk[..., t, :]
        if shrink_after:
            state, norm = decay_s * (state + new_s), decay_z * (norm + new_z)
        else:
            state, norm = decay_s * state + new_s, decay_z * norm + new_z
        top = (fq[..., t, :, None] * state).sum(-2)
        out.append(top / (fq[..., t, :] * norm).sum(-1, keepdim=True) if normalise else top)
    return torch.stack(out, dim=-2)


def loop_einsum(q, k, v, gamma):
    fq, fk = phi(q), phi(k)
    state = q.new_zeros(*q.shape[:-2], q.shape[-1], v.shape[-1])
    norm = q.new_zeros(*q.shape[:-2], q.shape[-1])
    out = []
    for t in range(q.shape[-2]):
        state = gamma * state + torch.einsum("...m,...v->...mv", fk[..., t, :], v[..., t, :])
        norm = gamma * norm + fk[..., t, :]
        out.append(torch.einsum("...m,...mv->...v", fq[..., t, :], state)
                   / torch.einsum("...m,...m->...", fq[..., t, :], norm)[..., None])
    return torch.stack(out, dim=-2)


def loop_list_of_rows(q, k, v, gamma):  # only the (n, d) case written out, then mapped over leading axes
    if q.dim() > 2:
        return torch.stack([loop_list_of_rows(a, b, c, gamma) for a, b, c in zip(q, k, v)])
    return loop(q, k, v, gamma)


def loop_float32_state(q, k, v, gamma):  # torch.zeros without dtype: promoted to float64 by the first update
    fq, fk = phi(q), phi(k)
    state, norm = torch.zeros(*q.shape[:-2], q.shape[-1], v.shape[-1]), torch.zeros(*q.shape[:-2], q.shape[-1])
    out = []
    for t in range(q.shape[-2]):
        state = gamma * state + fk[..., t, :, None] * v[..., t, None, :]
        norm = gamma * norm + fk[..., t, :]
        out.append((fq[..., t, :, None] * state).sum(-2) / (fq[..., t, :] * norm).sum(-1, keepdim=True))
    return torch.stack(out, dim=-2)


def loop_nan_at_start(q, k, v, gamma):  # divides by a normaliser it has not updated yet
    out = loop(q, k, v, gamma)
    out[..., 0, :] = out[..., 0, :] * 0 / 0.0
    return out


# ---- 10/1b: decayed_parallel(q, k, v, gamma), attention with a decay matrix --------------------------------------

def decay_matrix(n, gamma, dtype=torch.float64):
    steps = torch.arange(n)
    gap = steps[:, None] - steps[None, :]  # t - s
    return torch.where(gap >= 0, gamma ** gap.clamp(min=0).to(dtype), torch.zeros((), dtype=dtype))


def parallel(q, k, v, gamma):
    w = phi(q) @ phi(k).transpose(-2, -1) * decay_matrix(q.shape[-2], gamma)
    return w @ v / w.sum(-1, keepdim=True)


def parallel_tril(q, k, v, gamma):
    t = torch.arange(q.shape[-2], dtype=torch.float64)
    d = (gamma ** (t[:, None] - t[None, :])).tril()  # the upper triangle's gamma^(negative) masked away
    w = phi(q) @ phi(k).transpose(-2, -1) * d
    return w @ v / (w @ torch.ones_like(v[..., :1]))


def parallel_einsum_numpy(q, k, v, gamma):
    w = torch.einsum("...td,...sd,ts->...ts", phi(q), phi(k), decay_matrix(q.shape[-2], gamma))
    return (w @ v / w.sum(-1, keepdim=True)).numpy()


def parallel_upper(q, k, v, gamma):  # gamma^(t - s) kept above the diagonal
    t = torch.arange(q.shape[-2], dtype=torch.float64)
    w = phi(q) @ phi(k).transpose(-2, -1) * gamma ** (t[:, None] - t[None, :])
    return w @ v / w.sum(-1, keepdim=True)


def parallel_transposed(q, k, v, gamma):  # D[s, t] for D[t, s]: every query reads the future
    w = phi(q) @ phi(k).transpose(-2, -1) * decay_matrix(q.shape[-2], gamma).T
    return w @ v / w.sum(-1, keepdim=True)


def parallel_no_mask_no_decay_gap(q, k, v, gamma):  # gamma ** |t - s|: decays both ways, reads the future
    t = torch.arange(q.shape[-2], dtype=torch.float64)
    w = phi(q) @ phi(k).transpose(-2, -1) * gamma ** (t[:, None] - t[None, :]).abs()
    return w @ v / w.sum(-1, keepdim=True)


def parallel_gamma_to_t(q, k, v, gamma):  # gamma^t per row: the same for every key of a row, so it cancels
    t = torch.arange(q.shape[-2], dtype=torch.float64)
    w = (phi(q) @ phi(k).transpose(-2, -1)).tril() * (gamma ** t)[:, None]
    return w @ v / w.sum(-1, keepdim=True)


def parallel_gamma_to_s(q, k, v, gamma):  # gamma^s per key: older keys weigh more once rows are normalised
    t = torch.arange(q.shape[-2], dtype=torch.float64)
    w = (phi(q) @ phi(k).transpose(-2, -1)).tril() * (gamma ** t)[None, :]
    return w @ v / w.sum(-1, keepdim=True)


def parallel_unnormalised(q, k, v, gamma):
    return (phi(q) @ phi(k).transpose(-2, -1) * decay_matrix(q.shape[-2], gamma)) @ v


def parallel_softmax(q, k, v, gamma):  # softmax attention with decay: a different similarity
    w = (q @ k.transpose(-2, -1)).exp() * decay_matrix(q.shape[-2], gamma)
    return w @ v / w.sum(-1, keepdim=True)


def parallel_relu(q, k, v, gamma):
    w = torch.relu(q) @ torch.relu(k).transpose(-2, -1) * decay_matrix(q.shape[-2], gamma)
    return w @ v / w.sum(-1, keepdim=True)


def parallel_2d_only(q, k, v, gamma):  # .T works on (n, d) only: a 4-d q gets its axes reversed
    w = phi(q) @ phi(k).transpose(0, 1) * decay_matrix(q.shape[-2], gamma)
    return w @ v / w.sum(-1, keepdim=True)


def parallel_float32(q, k, v, gamma):
    q, k, v = q.float(), k.float(), v.float()
    w = phi(q) @ phi(k).transpose(-2, -1) * decay_matrix(q.shape[-2], gamma, q.dtype)
    return w @ v / w.sum(-1, keepdim=True)


def parallel_mixing_float32(q, k, v, gamma):  # v made float32 against float64 weights: matmul refuses
    w = phi(q) @ phi(k).transpose(-2, -1) * decay_matrix(q.shape[-2], gamma)
    return w @ v.float() / w.sum(-1, keepdim=True)


WRONG_DECAYED = [  # (form, label, answer, hint)
    ("10/1a", "no decay", lambda q, k, v, g: loop(q, k, v, g, decay_s=1.0, decay_z=1.0), "without forgetting"),
    ("10/1a", "only S decays", lambda q, k, v, g: loop(q, k, v, g, decay_z=1.0), "S forgets but z does not"),
    ("10/1a", "only z decays", lambda q, k, v, g: loop(q, k, v, g, decay_s=1.0), "z forgets but S does not"),
    ("10/1a", "decays by 1/gamma", lambda q, k, v, g: loop(q, k, v, 1 / g), "older keys weigh more"),
    ("10/1a", "not normalised", lambda q, k, v, g: loop(q, k, v, g, normalise=False), "not normalised"),
    ("10/1a", "phi = exp", lambda q, k, v, g: loop(q, k, v, g, feature=torch.exp), "not exp"),
    ("10/1a", "phi = relu", lambda q, k, v, g: loop(q, k, v, g, feature=torch.relu), "not relu"),
    ("10/1a", "phi = elu, without + 1", lambda q, k, v, g: loop(q, k, v, g, feature=F.elu), GENERIC),
    ("10/1a", "gamma squared", lambda q, k, v, g: loop(q, k, v, g * g), GENERIC),
    ("10/1a", "a NaN at position 0", loop_nan_at_start, "NaN or inf at positions 0"),
    ("10/1a", "loops over the first axis only", lambda q, k, v, g: loop(q, k, v, g) if q.dim() == 2 else q,
     "should have that shape"),
    ("10/1a", "returns a list", lambda q, k, v, g: list(loop(q, k, v, g).unbind(-2)), "should be a tensor|should have"),
    ("10/1a", "an error inside", lambda q, k, v, g: q @ v, "raised RuntimeError"),
    ("10/1a", "the stub", stub, "NotImplementedError"),
    ("10/1a", "no return", lambda q, k, v, g: None, "None"),
    ("10/1a", "the output, not the function", torch.zeros(7, 2), "define a function"),
    ("10/1b", "gamma^(t - s) above the diagonal too", parallel_upper, "zero above the diagonal"),
    ("10/1b", "the decay matrix transposed", parallel_transposed, "transposed"),
    ("10/1b", "gamma^|t - s|", parallel_no_mask_no_decay_gap, "keys from later positions"),
    ("10/1b", "gamma^t per row", parallel_gamma_to_t, "without forgetting"),
    ("10/1b", "gamma^s per key", parallel_gamma_to_s, "older keys weigh more"),
    ("10/1b", "not normalised", parallel_unnormalised, "not normalised"),
    ("10/1b", "softmax's exp(q . k)", parallel_softmax, GENERIC),
    ("10/1b", "relu features", parallel_relu, "not relu"),
    ("10/1b", ".T on a batch of heads", parallel_2d_only, "raised RuntimeError|should have that shape"),
    ("10/1b", "v made float32", parallel_mixing_float32, "float64"),
    ("10/1b", "the stub", stub, "NotImplementedError"),
]

# ---- 10/2: state_bytes(layers, heads, features, value_dim, bytes_per_number) -------------------------------------

RIGHT_STATE = [
    ("S plus z", lambda layers, heads, m, dv, size: layers * heads * (m * dv + m) * size),
    ("a float", lambda layers, heads, m, dv, size: float(layers * heads * m * (dv + 1) * size)),
    ("a tensor", lambda layers, heads, m, dv, size: torch.tensor(layers * heads * m * (dv + 1) * size)),
    ("numpy", lambda layers, heads, m, dv, size: np.int64(layers) * heads * m * (dv + 1) * size),
    ("from the tensors' numel", lambda layers, heads, m, dv, size:
        layers * heads * (torch.zeros(m, dv).numel() + torch.zeros(m).numel()) * size),
]

WRONG_STATE = [
    ("S only", lambda layers, heads, m, dv, size: layers * heads * m * dv * size, "normaliser z"),
    ("bits", lambda layers, heads, m, dv, size: 8 * layers * heads * m * (dv + 1) * size, "that is bits"),
    ("one layer", lambda layers, heads, m, dv, size: heads * m * (dv + 1) * size, "that is one layer"),
    ("one head", lambda layers, heads, m, dv, size: layers * m * (dv + 1) * size, "one head per layer"),
    ("z sized by dv", lambda layers, heads, m, dv, size: layers * heads * dv * (m + 1) * size,
     "one number per feature"),
    ("numbers, not bytes", lambda layers, heads, m, dv, size: layers * heads * m * (dv + 1), "counts numbers"),
    ("a KV cache of one position", lambda layers, heads, m, dv, size: 2 * layers * heads * m * dv * size,
     "KV cache of one position"),
    ("the example's number", lambda layers, heads, m, dv, size: 3194880, "same number when"),
    ("fp16 always", lambda layers, heads, m, dv, size: layers * heads * m * (dv + 1) * 2,
     "same number when bytes_per_number doubles"),
    ("features squared", lambda layers, heads, m, dv, size: layers * heads * m * (m + 1) * size,
     "same number when value_dim doubles"),
    ("(m + 1) (dv + 1)", lambda layers, heads, m, dv, size: layers * heads * (m + 1) * (dv + 1) * size, GENERIC),
    ("a string", lambda layers, heads, m, dv, size: f"{layers * heads * m * (dv + 1) * size} bytes", "whole number"),
    ("a fraction in MiB", lambda layers, heads, m, dv, size: layers * heads * m * (dv + 1) * size / 2**20,
     "whole number"),
    ("an error inside", lambda layers, heads, m, dv, size: layers / 0, "ZeroDivisionError"),
    ("the stub", stub, "NotImplementedError"),
    ("no return", lambda layers, heads, m, dv, size: None, "None"),
    ("the number, not a function", 3194880, "define a function"),
]

# ---- 10/3: causal_linear(q, k, v), the leak fixed ----------------------------------------------------------------


def causal_fixed(q, k, v):
    fq, fk = phi(q), phi(k)
    running = torch.cumsum(fk[..., :, :, None] * v[..., :, None, :], dim=-3)  # (..., n, m, dv)
    norms = torch.cumsum(fk, dim=-2)  # (..., n, m)
    return (fq[..., :, None] * running).sum(-2) / (fq * norms).sum(-1, keepdim=True)


def causal_quadratic(q, k, v):
    w = (phi(q) @ phi(k).transpose(-2, -1)).tril()
    return w @ v / w.sum(-1, keepdim=True)


def causal_loop(q, k, v):
    return loop(q, k, v, 1.0)


def causal_masked_fill(q, k, v):
    n = q.shape[-2]
    w = (phi(q) @ phi(k).transpose(-2, -1)).masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), 0.0)
    return (w @ v) / w.sum(-1, keepdim=True)


def still_leaking(q, k, v):  # the given function, unchanged
    fq, fk = phi(q), phi(k)
    running = torch.cumsum(fk[..., :, :, None] * v[..., :, None, :], dim=-3)
    total = fk.sum(dim=-2, keepdim=True)
    return (fq[..., :, None] * running).sum(-2) / (fq * total).sum(-1, keepdim=True)


def both_sums_total(q, k, v):  # "fixed" the other way: S summed over every position too
    fq, fk = phi(q), phi(k)
    running = (fk[..., :, :, None] * v[..., :, None, :]).sum(-3, keepdim=True)
    total = fk.sum(dim=-2, keepdim=True)
    return (fq[..., :, None] * running).sum(-2) / (fq * total).sum(-1, keepdim=True)


def reversed_cumsum(q, k, v):  # sums from the end: output t reads keys t .. n - 1
    flip = lambda x: x.flip(-2)
    return flip(causal_fixed(flip(q), flip(k), flip(v)))


def one_too_far(q, k, v):  # each running sum reaches one token past t (a cumsum shifted by one)
    fq, fk = phi(q), phi(k)
    running = torch.cumsum(fk[..., :, :, None] * v[..., :, None, :], dim=-3)  # (..., n, m, dv)
    norms = torch.cumsum(fk, dim=-2)  # (..., n, m)
    running = torch.cat([running[..., 1:, :, :], running[..., -1:, :, :]], dim=-3)
    norms = torch.cat([norms[..., 1:, :], norms[..., -1:, :]], dim=-2)
    return (fq[..., :, None] * running).sum(-2) / (fq * norms).sum(-1, keepdim=True)


def exclusive(q, k, v):  # keys before t, not t itself; position 0 given its own key so that it stays finite
    w = (phi(q) @ phi(k).transpose(-2, -1)).tril(-1)
    w[..., 0, 0] = (phi(q[..., 0, :]) * phi(k[..., 0, :])).sum(-1)
    return w @ v / w.sum(-1, keepdim=True)


def exclusive_nan(q, k, v):  # keys before t: position 0 divides 0 by 0
    w = (phi(q) @ phi(k).transpose(-2, -1)).tril(-1)
    return w @ v / w.sum(-1, keepdim=True)


def cumsum_over_features(q, k, v):  # the normaliser's cumsum along the wrong axis: no leak, wrong values
    fq, fk = phi(q), phi(k)
    running = torch.cumsum(fk[..., :, :, None] * v[..., :, None, :], dim=-3)
    norms = torch.cumsum(fk, dim=-1)
    return (fq[..., :, None] * running).sum(-2) / (fq * norms).sum(-1, keepdim=True)


def calls_the_library(q, k, v):
    return al.linear_attention(q, k, v, causal=True)


WRONG_CAUSAL = [
    ("the given function, unchanged", still_leaking, "still changes the output"),
    ("S summed over every position too", both_sums_total, "still changes the output"),
    ("sums from the end", reversed_cumsum, "still changes the output"),
    ("a running sum one token too far", one_too_far, "still changes the output"),
    ("keys before t only", exclusive, "its own key t"),
    ("keys before t, NaN at 0", exclusive_nan, "NaN or inf at positions 0"),
    ("z's cumsum over the features", cumsum_over_features, "no leak left"),
    ("the library's linear_attention", calls_the_library, "calls the library's linear_attention"),
    ("plus a constant", lambda q, k, v: causal_quadratic(q, k, v) + 0.1, "no leak left"),
    ("one position short", lambda q, k, v: causal_quadratic(q, k, v)[..., :-1, :], "should have that shape"),
    ("an error inside", lambda q, k, v: q.undefined(), "raised AttributeError"),
    ("the stub", stub, "NotImplementedError"),
    ("no return", lambda q, k, v: None, "None"),
    ("the leaky function's output", torch.zeros(7, 2), "define a function"),
]

ATTEMPTS = [
    *(Attempt("10/1a", label, lesson10.decayed_linear_attention, fn, right=True) for label, fn in [
        ("the loop", loop), ("einsum in the loop", loop_einsum), ("shrinks after adding", lambda q, k, v, g: loop(
            q, k, v, g, shrink_after=True)), ("(n, d) mapped over the batch", loop_list_of_rows),
        ("float32 zeros, promoted", loop_float32_state),
        ("returns numpy", lambda q, k, v, g: loop(q, k, v, g).numpy())]),
    *(Attempt("10/1b", label, lesson10.decayed_linear_attention, fn, right=True) for label, fn in [
        ("decay matrix with where", parallel), ("tril of gamma^(t - s)", parallel_tril),
        ("einsum, numpy", parallel_einsum_numpy), ("float32", parallel_float32)]),
    *(Attempt(form, label, lesson10.decayed_linear_attention, fn, hint=hint)
      for form, label, fn, hint in WRONG_DECAYED),
    *(Attempt("10/2", label, lesson10.recurrent_state_bytes, fn, right=True) for label, fn in RIGHT_STATE),
    *(Attempt("10/2", label, lesson10.recurrent_state_bytes, fn, hint=hint) for label, fn, hint in WRONG_STATE),
    *(Attempt("10/3", label, lesson10.fixed_causal_linear, fn, right=True) for label, fn in [
        ("both running sums", causal_fixed), ("the quadratic form, tril", causal_quadratic),
        ("the recurrence", causal_loop), ("masked_fill", causal_masked_fill),
        ("numpy", lambda q, k, v: causal_fixed(q, k, v).numpy())]),
    *(Attempt("10/3", label, lesson10.fixed_causal_linear, fn, hint=hint) for label, fn, hint in WRONG_CAUSAL),
]
