"""The gated delta rule (门控 delta 规则): linear attention whose fixed-size state overwrites instead of piling up.

Causal linear attention (:mod:`attention_lab.efficient.linear`, lesson 10) keeps a state S = sum_j k^j v^j^T (a
d x dv matrix) and reads b^t = S^T q^t: every write adds, so a key written twice returns the sum of its values,
and with more keys than d they interfere. The delta rule (Widrow and Hoff 1960; DeltaNet, Schlag et al. 2021;
parallelised by Yang et al. 2024, "Parallelizing Linear Transformers with the Delta Rule over Sequence Length")
first reads what S holds for k^t, S^T k^t, and writes only the difference towards v^t with a strength beta_t;
Gated DeltaNet (Yang, Kautz and Hatamizadeh 2025, "Gated Delta Networks: Improving Mamba2 with Delta Rule")
also decays the whole state by a gate alpha_t in (0, 1] before each write:

    S_t = alpha_t (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T,        b^t = S_t^T q^t.

With a unit-length key and beta = 1, k_t then reads back exactly v_t. Qwen3-Next (Gated DeltaNet) and Kimi
Linear (a variant with a decay per channel) put three such layers for every softmax-attention layer; their state is
d x dv numbers per head at every length, where a KV cache grows with the context (:func:`delta_rule_state_bytes`).

:func:`gated_delta_rule_recurrent` runs the update one position at a time (what decoding does).
:func:`gated_delta_rule` computes the same outputs in chunks of ``chunk_size`` positions: inside a chunk, with the
cumulative decays gamma_r = alpha_1 ... alpha_r and the state S_0 at the chunk's start, the written vectors
u_r = beta_r (v_r - gamma_r S_0^T k_r - sum_{s<r} (gamma_r / gamma_s)(k_r . k_s) u_s) solve one unit lower-triangular
system (the paper's UT transform), and then b^r = gamma_r S_0^T q_r + sum_{s<=r} (gamma_r / gamma_s)(q_r . k_s) u_s
and S_C = gamma_C S_0 + sum_s (gamma_C / gamma_s) k_s u_s^T: matrix products instead of a loop over positions.

Reference: :func:`attention_lab.reference.gated_delta_rule`, the update above in a loop (tested equal in fp64,
values and gradients, for every chunk size). How it differs and what that buys: the chunked form replaces n
sequential rank-one updates by n / chunk_size rounds of matrix products and one triangular solve each, the form
the papers' kernels use; the ratios gamma_r / gamma_s are taken as exp of differences of cumulative log-gates, so
they never overflow. Read, not copied: the naive recurrence of flash-linear-attention's ``gated_delta_rule``
(``fla/ops/gated_delta_rule/naive.py``: the same order, decay, read, write, then the output; it takes log alpha
and scales q by 1/sqrt(d) by default, where here alpha is given and the caller scales, as in the paper's formula).
"""

from __future__ import annotations

import torch

from .._validation import check_bool, check_positive_int, check_positive_ints, check_qkv, check_tensor, fail

__all__ = ["delta_rule_state_bytes", "gated_delta_rule", "gated_delta_rule_recurrent"]


def _check_gate(fn: str, name: str, gate: object, like: torch.Tensor, low: float, high: float,
                low_open: bool) -> torch.Tensor:
    """One gate per position, ``(..., n)`` broadcastable to the keys' ``(..., n)``, every value in its range."""
    check_tensor(fn, name, gate, min_dim=1, floating=True)
    if gate.shape[-1] != like.shape[-2]:
        fail(fn, f"{name} must have one value per position, shape (..., n) with n={like.shape[-2]}, got shape "
                 f"{tuple(gate.shape)}; pass {name} of shape {tuple(like.shape[:-1])}")
    try:
        torch.broadcast_shapes(gate.shape[:-1], like.shape[:-2])
    except RuntimeError:
        fail(fn, f"the leading dimensions of {name} {tuple(gate.shape)} do not broadcast with k {tuple(like.shape)}; "
             f"pass {name} of shape {tuple(like.shape[:-1])}")
    if gate.numel():
        lo, hi = (float(x) for x in torch.aminmax(gate.detach()))
        below = lo <= low if low_open else lo < low
        if below or hi > high or lo != lo:
            side = "(" if low_open else "["
            fail(fn, f"{name} must lie in {side}{low:g}, {high:g}], got values from {lo:.4g} to {hi:.4g}; make it "
                     f"with torch.sigmoid(...) (or exp of a negative log-gate for alpha)")
    return gate


def _checked(fn: str, q: object, k: object, v: object, beta: object, alpha: object, initial_state: object
             ) -> tuple[torch.Size, torch.Tensor | None]:
    check_qkv(fn, q, k, v)
    if q.shape[-2] != k.shape[-2]:
        fail(fn, f"the delta rule reads each query after its own key's write, so q and k need the same positions, "
                 f"got q {tuple(q.shape)} and k {tuple(k.shape)}")
    _check_gate(fn, "beta", beta, k, 0.0, 2.0, low_open=False)
    _check_gate(fn, "alpha", alpha, k, 0.0, 1.0, low_open=True)
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2], beta.shape[:-1], alpha.shape[:-1])
    if initial_state is not None:
        check_tensor(fn, "initial_state", initial_state, min_dim=2, floating=True)
        want = (*lead, k.shape[-1], v.shape[-1])
        if tuple(initial_state.shape) != want:
            fail(fn, f"initial_state must be the state S of shape (..., d, dv) = {want}, got "
                     f"{tuple(initial_state.shape)}; pass the state a previous call returned")
    return lead, initial_state


def gated_delta_rule_recurrent(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, beta: torch.Tensor,
                               alpha: torch.Tensor, *, initial_state: torch.Tensor | None = None
                               ) -> tuple[torch.Tensor, torch.Tensor]:
    """The gated delta rule one position at a time: S <- alpha_t (S - beta_t k_t (k_t^T S)) + beta_t k_t v_t^T,
    then b^t = S^T q^t. Returns the outputs and the last state (give it back as ``initial_state`` to go on).

    ``beta`` in [0, 2] (1 overwrites what k_t held; the papers use a sigmoid), ``alpha`` in (0, 1] (1: no decay).
    Keys are used as given: the papers L2-normalise q and k first, which keeps I - beta k k^T a contraction.

    Shape: q and k ``(..., n, d)``, v ``(..., n, dv)``, beta and alpha ``(..., n)``, initial_state
        ``(..., d, dv)`` -> output ``(..., n, dv)``, state ``(..., d, dv)``.
    """
    fn = "gated_delta_rule_recurrent"
    lead, initial_state = _checked(fn, q, k, v, beta, alpha, initial_state)
    state = v.new_zeros(*lead, k.shape[-1], v.shape[-1]) if initial_state is None else initial_state  # (..., d, dv)
    outputs = []
    for t in range(q.shape[-2]):
        k_t, v_t = k[..., t, :], v[..., t, :]  # (..., d), (..., dv)
        b_t, a_t = beta[..., t, None], alpha[..., t, None, None]  # (..., 1), (..., 1, 1)
        state = a_t * state  # decay first, as the paper's alpha_t (I - beta_t k k^T) S
        read = (k_t[..., :, None] * state).sum(dim=-2)  # what S holds for k_t: S^T k_t, (..., dv)
        state = state + k_t[..., :, None] * (b_t * (v_t - read))[..., None, :]  # + k_t u_t^T, (..., d, dv)
        outputs.append((q[..., t, :, None] * state).sum(dim=-2))  # S^T q_t, (..., dv)
    return torch.stack(outputs, dim=-2) if outputs else v.new_zeros(*lead, 0, v.shape[-1]), state


def gated_delta_rule(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, beta: torch.Tensor, alpha: torch.Tensor,
                     *, chunk_size: int = 64, initial_state: torch.Tensor | None = None,
                     return_state: bool = False) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """The gated delta rule in chunks: the outputs of :func:`gated_delta_rule_recurrent`, computed with matrix
    products inside each chunk of ``chunk_size`` positions and the state carried across chunks (module docstring).

    ``return_state=True`` also returns the last state. Equal to the recurrent form up to rounding for any
    ``chunk_size`` (1 is the recurrence itself; n is one parallel pass with an n x n triangular solve).

    Shape: q and k ``(..., n, d)``, v ``(..., n, dv)``, beta and alpha ``(..., n)``, initial_state
        ``(..., d, dv)`` -> output ``(..., n, dv)`` (and state ``(..., d, dv)``).
    """
    fn = "gated_delta_rule"
    lead, initial_state = _checked(fn, q, k, v, beta, alpha, initial_state)
    check_positive_int(fn, "chunk_size", chunk_size)
    check_bool(fn, "return_state", return_state)
    n, d, dv = q.shape[-2], q.shape[-1], v.shape[-1]
    q, k, v = q.expand(*lead, n, d), k.expand(*lead, n, d), v.expand(*lead, n, dv)  # (..., n, d|dv)
    beta, alpha = beta.expand(*lead, n), alpha.expand(*lead, n)  # (..., n)
    state = v.new_zeros(*lead, d, dv) if initial_state is None else initial_state  # S, (..., d, dv)
    outputs = []
    for start in range(0, n, chunk_size):
        part = slice(start, min(n, start + chunk_size))
        out, state = _chunk(q[..., part, :], k[..., part, :], v[..., part, :], beta[..., part], alpha[..., part],
                            state)
        outputs.append(out)
    output = torch.cat(outputs, dim=-2) if outputs else v.new_zeros(*lead, 0, dv)  # (..., n, dv)
    return (output, state) if return_state else output


def _chunk(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, beta: torch.Tensor, alpha: torch.Tensor,
           state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One chunk of C positions after the state S_0: its outputs ``(..., C, dv)`` and the state after it."""
    c = q.shape[-2]
    log_gamma = torch.log(alpha).cumsum(dim=-1)  # log(alpha_1 ... alpha_r), (..., C)
    earlier = torch.ones(c, c, dtype=torch.bool, device=q.device).tril()  # s <= r
    diff = log_gamma[..., :, None] - log_gamma[..., None, :]  # log(gamma_r / gamma_s), (..., C, C)
    decay = torch.exp(diff.masked_fill(~earlier, float("-inf")))  # gamma_r / gamma_s for s <= r, else 0
    gamma = log_gamma.exp()[..., None]  # (..., C, 1)
    kk = (k @ k.transpose(-2, -1)) * decay  # (gamma_r / gamma_s)(k_r . k_s), (..., C, C)
    system = torch.eye(c, dtype=q.dtype, device=q.device) + beta[..., :, None] * kk.tril(-1)  # I + A, (..., C, C)
    rhs = beta[..., :, None] * (v - gamma * (k @ state))  # beta_r (v_r - gamma_r S_0^T k_r), (..., C, dv)
    u = torch.linalg.solve_triangular(system, rhs, upper=False, unitriangular=True)  # written vectors, (..., C, dv)
    output = gamma * (q @ state) + ((q @ k.transpose(-2, -1)) * decay) @ u  # (..., C, dv)
    to_end = torch.exp(log_gamma[..., -1:] - log_gamma)[..., :, None]  # gamma_C / gamma_s, (..., C, 1)
    new_state = gamma[..., -1:, :] * state + k.transpose(-2, -1) @ (to_end * u)  # (..., d, dv)
    return output, new_state


def delta_rule_state_bytes(*, num_layers: int, num_heads: int, key_dim: int, value_dim: int, batch_size: int = 1,
                           bytes_per_value: int = 2) -> int:
    """Bytes of the delta-rule states of ``num_layers`` layers: one ``key_dim x value_dim`` matrix S per head and
    sequence, whatever the length (set against :func:`~attention_lab.kv_cache_bytes`, which grows with it).

    Shape: integers -> an integer number of bytes.
    """
    check_positive_ints("delta_rule_state_bytes", num_layers=num_layers, num_heads=num_heads, key_dim=key_dim,
                        value_dim=value_dim, batch_size=batch_size, bytes_per_value=bytes_per_value)
    return num_layers * num_heads * key_dim * value_dim * batch_size * bytes_per_value

