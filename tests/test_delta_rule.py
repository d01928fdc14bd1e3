"""The gated delta rule: chunked form against the recurrence and the plain loop (values, gradients, states), the
properties the papers state, and bad inputs."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from _tolerances import TOL

import attention_lab as al
from attention_lab import reference


def _inputs(lead=(2, 3), n=13, d=5, dv=4, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(*lead, n, d, generator=g, dtype=dtype)
    k = F.normalize(torch.randn(*lead, n, d, generator=g, dtype=dtype), dim=-1)  # unit keys, as the papers use
    v = torch.randn(*lead, n, dv, generator=g, dtype=dtype)
    beta = torch.rand(*lead, n, generator=g, dtype=dtype)
    alpha = 0.5 + 0.5 * torch.rand(*lead, n, generator=g, dtype=dtype)
    return q, k, v, beta, alpha


@pytest.mark.parametrize("chunk_size", [1, 3, 4, 13, 64])
def test_chunked_equals_the_recurrence_and_the_plain_loop(chunk_size):
    q, k, v, beta, alpha = _inputs()
    plain = reference.gated_delta_rule(q, k, v, beta, alpha)
    recurrent, state = al.gated_delta_rule_recurrent(q, k, v, beta, alpha)
    chunked, chunk_state = al.gated_delta_rule(q, k, v, beta, alpha, chunk_size=chunk_size, return_state=True)
    torch.testing.assert_close(recurrent, plain, **TOL[torch.float64])
    torch.testing.assert_close(chunked, plain, **TOL[torch.float64])
    torch.testing.assert_close(chunk_state, state, **TOL[torch.float64])


def test_gradients_match_the_plain_loop_and_gradcheck():
    q, k, v, beta, alpha = (x.requires_grad_() for x in _inputs(lead=(1, 2), n=7, d=3, dv=2))
    fast = al.gated_delta_rule(q, k, v, beta, alpha, chunk_size=3)
    plain = reference.gated_delta_rule(q, k, v, beta, alpha)
    weights = torch.randn_like(fast)
    got = torch.autograd.grad((fast * weights).sum(), (q, k, v, beta, alpha))
    want = torch.autograd.grad((plain * weights).sum(), (q, k, v, beta, alpha))
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, **TOL[torch.float64])
    small = tuple(x.detach()[:, :1, :4].clone().requires_grad_() for x in (q, k, v))
    gates = tuple(x.detach()[:, :1, :4].clone().requires_grad_() for x in (beta, alpha))
    assert torch.autograd.gradcheck(lambda *a: al.gated_delta_rule(*a, chunk_size=3), (*small, *gates), fast_mode=True)


def test_a_state_carries_over_between_calls():
    q, k, v, beta, alpha = _inputs(n=11)
    whole = al.gated_delta_rule(q, k, v, beta, alpha, chunk_size=4)
    first, state = al.gated_delta_rule(q[..., :6, :], k[..., :6, :], v[..., :6, :], beta[..., :6], alpha[..., :6],
                                       return_state=True)
    second, _ = al.gated_delta_rule_recurrent(q[..., 6:, :], k[..., 6:, :], v[..., 6:, :], beta[..., 6:],
                                              alpha[..., 6:], initial_state=state)
    torch.testing.assert_close(torch.cat([first, second], dim=-2), whole, **TOL[torch.float64])


def test_a_unit_key_written_with_beta_one_reads_back_its_latest_value():
    """The delta rule overwrites: key k written with v1, then v2 (beta = 1, alpha = 1), reads v2; linear attention's
    running sum reads v1 + v2."""
    k1 = torch.tensor([[0.6, 0.8, 0.0]], dtype=torch.float64)
    k = torch.cat([k1, k1, k1])  # written twice, then queried with itself
    v = torch.tensor([[1.0, 2.0], [5.0, -1.0], [0.0, 0.0]], dtype=torch.float64)
    out = al.gated_delta_rule(k, k, v, torch.tensor([1.0, 1.0, 0.0], dtype=torch.float64),
                              torch.ones(3, dtype=torch.float64))
    torch.testing.assert_close(out[2], v[1])
    summed = (k1.T @ v[:1] + k1.T @ v[1:2]).T @ k1[0]  # S = sum k v^T, read with k
    assert not torch.allclose(summed, v[1])


def test_without_erasing_and_decay_it_is_unnormalised_linear_attention():
    """beta only scales the write when the keys are orthogonal to everything before: with alpha = 1 and mutually
    orthogonal keys, the output is sum_{j<=i} beta_j (q_i . k_j) v_j."""
    k = torch.eye(4, dtype=torch.float64)
    q = torch.randn(4, 4, dtype=torch.float64)
    v = torch.randn(4, 3, dtype=torch.float64)
    beta = torch.tensor([0.3, 1.0, 0.5, 0.9], dtype=torch.float64)
    out = al.gated_delta_rule(q, k, v, beta, torch.ones(4, dtype=torch.float64), chunk_size=2)
    weights = (q @ k.T).tril() * beta
    torch.testing.assert_close(out, weights @ v)


def test_decay_scales_the_old_state():
    q, k, v, beta, alpha = _inputs(lead=(), n=6)
    _, state = al.gated_delta_rule_recurrent(q, k, v, beta, alpha)
    zero = torch.zeros(1, dtype=torch.float64)
    _, decayed = al.gated_delta_rule_recurrent(q[:1], k[:1], v[:1], zero, torch.full((1,), 0.25,
                                               dtype=torch.float64), initial_state=state)
    torch.testing.assert_close(decayed, 0.25 * state)


def test_shapes_length_one_broadcast_and_float32():
    q, k, v, beta, alpha = _inputs(lead=(3, 3), n=1, d=3, dv=3)  # b == h == d: a transpose would not show by shape
    assert al.gated_delta_rule(q, k, v, beta, alpha).shape == (3, 3, 1, 3)
    q, k, v, beta, alpha = _inputs(lead=(2, 2), n=97, d=5, dv=3, dtype=torch.float32)
    fast = al.gated_delta_rule(q, k, v, beta, alpha, chunk_size=16)
    plain = reference.gated_delta_rule(*(x.double() for x in (q, k, v, beta, alpha)))
    naive = reference.gated_delta_rule(q, k, v, beta, alpha)
    assert (fast.double() - plain).abs().max() <= 2 * (naive.double() - plain).abs().max() + 1e-6
    shared_gate = al.gated_delta_rule(q, k, v, beta[:1], alpha[:1])  # (1, h, n) broadcast over the batch
    assert shared_gate.shape == (2, 2, 97, 3)


def test_inputs_are_not_modified_and_results_are_deterministic():
    inputs = _inputs()
    copies = [x.clone() for x in inputs]
    first = al.gated_delta_rule(*inputs)
    assert torch.equal(first, al.gated_delta_rule(*inputs))
    for x, c in zip(inputs, copies):
        assert torch.equal(x, c)


def test_state_bytes_do_not_grow_with_the_context():
    assert al.delta_rule_state_bytes(num_layers=3, num_heads=4, key_dim=8, value_dim=16, batch_size=2,
                                     bytes_per_value=4) == 3 * 4 * 8 * 16 * 2 * 4
    q, k, v, beta, alpha = _inputs(lead=(1, 4), d=8, dv=16, dtype=torch.float32)
    _, state = al.gated_delta_rule(q, k, v, beta, alpha, return_state=True)
    assert state.nbytes == al.delta_rule_state_bytes(num_layers=1, num_heads=4, key_dim=8, value_dim=16,
                                                     bytes_per_value=4)


@pytest.mark.parametrize("change, match", [
    (dict(beta=-0.1), r"gated_delta_rule\(\): beta must lie in \[0, 2\]"),
    (dict(alpha=0.0), r"alpha must lie in \(0, 1\]"),
    (dict(alpha=1.5), r"alpha must lie in \(0, 1\]"),
    (dict(beta_shape=(2, 3, 12)), r"beta must have one value per position"),
    (dict(k_len=12), r"the same positions"),
    (dict(state=(2, 3, 4, 4)), r"initial_state must be the state S of shape"),
    (dict(chunk_size=0), r"chunk_size must be >= 1"),
])
def test_bad_inputs_are_refused_with_the_function_and_a_fix(change, match):
    q, k, v, beta, alpha = _inputs()
    if "beta" in change:
        beta = beta.clone().fill_(change["beta"])
    if "alpha" in change:
        alpha = alpha.clone().fill_(change["alpha"])
    if "beta_shape" in change:
        beta = torch.rand(change["beta_shape"], dtype=torch.float64)
    if "k_len" in change:
        k, v = k[..., :change["k_len"], :], v[..., :change["k_len"], :]
    options = {}
    if "state" in change:
        options["initial_state"] = torch.zeros(change["state"], dtype=torch.float64)
    if "chunk_size" in change:
        options["chunk_size"] = change["chunk_size"]
    with pytest.raises(ValueError, match=match):
        al.gated_delta_rule(q, k, v, beta, alpha, **options)


def test_non_tensors_and_integer_gates_are_type_errors():
    q, k, v, beta, alpha = _inputs()
    with pytest.raises(TypeError, match="gated_delta_rule_recurrent"):
        al.gated_delta_rule_recurrent(q, k, v, [0.5] * 13, alpha)
    with pytest.raises(TypeError, match="floating dtype"):
        al.gated_delta_rule(q, k, v, beta, torch.ones(2, 3, 13, dtype=torch.long))
