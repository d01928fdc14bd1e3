"""SelfAttention against nn.MultiheadAttention / SDPA and an fp64 reference; order (permutation equivariance
and how positions break it), causality (the leak test), masks of every shape; sinusoidal_positions."""

import math

import pytest
import torch
import torch.nn.functional as F
from _tolerances import TOL
from torch import nn

import attention_lab as al
from attention_lab import reference as plain

F64 = TOL[torch.float64]


def layer(e, dtype=torch.float64, bias=True):
    torch.manual_seed(0)
    return al.SelfAttention(e, bias=bias).to(dtype)


def reference(module, x, mask=None):
    """The layer written out in fp64 from its weights: W^q, W^k, W^v are the three row blocks of qkv."""
    e = module.embed_dim
    w = module.qkv.weight.double()
    bias = module.qkv.bias.double() if module.qkv.bias is not None else torch.zeros(3 * e, dtype=torch.float64)
    x = x.double()
    q, k, v = (x @ w[s * e:(s + 1) * e].T + bias[s * e:(s + 1) * e] for s in range(3))  # (b, n, e)
    return plain.attention(q, k, v, mask)  # scaled by 1/sqrt(e): one head of size e


def as_torch_mha(module):
    """nn.MultiheadAttention with one head, the same Q/K/V weights and an identity output projection."""
    e = module.embed_dim
    has_bias = module.qkv.bias is not None
    mha = nn.MultiheadAttention(e, 1, bias=has_bias, batch_first=True, dtype=module.qkv.weight.dtype).eval()
    with torch.no_grad():
        mha.in_proj_weight.copy_(module.qkv.weight)
        if has_bias:
            mha.in_proj_bias.copy_(module.qkv.bias)
            mha.out_proj.bias.zero_()
        mha.out_proj.weight.copy_(torch.eye(e))
    return mha


SHAPES = [(1, 1, 1), (2, 5, 3), (3, 3, 3), (2, 7, 8), (1, 13, 5)]  # (b, n, e): odd e, b == n == e, n = 1


@pytest.mark.parametrize("b,n,e", SHAPES)
@pytest.mark.parametrize("bias", [True, False])
def test_matches_multiheadattention_with_one_head(b, n, e, bias):
    module = layer(e, bias=bias)
    x = torch.randn(b, n, e, dtype=torch.float64)
    out, weights = module(x, need_weights=True)
    with torch.no_grad():
        expected, expected_w = as_torch_mha(module)(x, x, x, need_weights=True)
    torch.testing.assert_close(out, expected, **F64)
    torch.testing.assert_close(weights, expected_w, **F64)
    ref_out, ref_w = reference(module, x)
    torch.testing.assert_close(out, ref_out, **F64)
    torch.testing.assert_close(weights, ref_w, **F64)


def test_fp32_matches_sdpa():
    module = layer(6, torch.float32)
    x = torch.randn(2, 9, 6)
    q, k, v = module.qkv(x).chunk(3, dim=-1)
    out, weights = module(x)
    assert weights is None
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v), **TOL[torch.float32])


def test_is_a_proper_module():
    module = al.SelfAttention(4, bias=False)
    assert [name for name, _ in module.named_parameters()] == ["qkv.weight"]
    assert module.qkv.weight.shape == (12, 4)
    assert "embed_dim=4, bias=False" in repr(module)
    assert sum(p.numel() for p in al.SelfAttention(4).parameters()) == 3 * 4 * 4 + 3 * 4


def test_project_splits_one_product_in_three():
    module = layer(5)
    x = torch.randn(2, 3, 5, dtype=torch.float64)
    q, k, v = module.project(x)
    w, bias = module.qkv.weight, module.qkv.bias
    torch.testing.assert_close(k, x @ w[5:10].T + bias[5:10], **F64)
    assert q.shape == k.shape == v.shape == (2, 3, 5)


# ---------------------------------------------------------------- order


def test_permuting_tokens_permutes_outputs():
    module = layer(8)
    x = torch.randn(2, 6, 8, dtype=torch.float64)
    perm = torch.tensor([3, 0, 5, 1, 4, 2])
    out, _ = module(x)
    out_perm, _ = module(x[:, perm])
    torch.testing.assert_close(out_perm, out[:, perm], **F64)


def test_positions_break_permutation_equivariance():
    module = layer(8)
    x = torch.randn(2, 6, 8, dtype=torch.float64)
    pe = al.sinusoidal_positions(6, 8, dtype=torch.float64)
    perm = torch.tensor([3, 0, 5, 1, 4, 2])
    out, _ = module(x + pe)
    out_perm, _ = module(x[:, perm] + pe)
    assert (out_perm - out[:, perm]).abs().max() > 1e-3


# ---------------------------------------------------------------- masks and the leak test


def test_causal_mask_does_not_leak_and_flipped_polarity_does():
    module = layer(8)
    n, t = 7, 4
    x = torch.randn(1, n, 8, dtype=torch.float64)
    x2 = x.clone()
    x2[0, t] += 5.0  # change one future token
    good = al.causal_mask(n)
    diff = (module(x, good)[0] - module(x2, good)[0]).abs().amax(-1)[0]  # (n,)
    assert torch.all(diff[:t] == 0) and torch.all(diff[t:] > 0)
    bad = ~good  # polarity flipped: True read as "ignore"
    diff = (module(x, bad)[0] - module(x2, bad)[0]).abs().amax(-1)[0]
    assert torch.any(diff[:t] > 1e-3)


def test_causal_mask_gradient_never_reaches_the_past_from_the_future():
    module = layer(4)
    x = torch.randn(1, 5, 4, dtype=torch.float64, requires_grad=True)
    out, _ = module(x, al.causal_mask(5))
    out[0, 2].sum().backward()  # output 2 may depend on tokens 0, 1, 2 only
    assert torch.all(x.grad[0, 3:] == 0) and torch.all(x.grad[0, :3].abs().sum(-1) > 0)


def mask_shapes(b, n):
    causal = al.causal_mask(n)
    pad = al.padding_mask([n, n - 2])
    full = causal & pad[:, None, :]  # (b, i, j)
    return [
        (causal, causal.expand(b, n, n)),  # (i, j)
        (full, full),  # (b, i, j)
        (full[:, None], full),  # (b, 1, i, j)
        (al.as_key_mask(pad), pad[:, None, :].expand(b, n, n)),  # (b, 1, 1, j)
        (pad[:, None, :], pad[:, None, :].expand(b, n, n)),  # (b, 1, j)
    ]


@pytest.mark.parametrize("index", range(5))
def test_every_mask_shape(index):
    module = layer(6)
    x = torch.randn(2, 5, 6, dtype=torch.float64)
    mask, dense = mask_shapes(2, 5)[index]
    out, weights = module(x, mask, need_weights=True)
    ref_out, ref_w = reference(module, x, dense)
    torch.testing.assert_close(out, ref_out, **F64)
    torch.testing.assert_close(weights, ref_w, **F64)
    assert weights.shape == (2, 5, 5)


def test_mask_converted_for_multiheadattention_agrees():
    module = layer(6)
    x = torch.randn(2, 5, 6, dtype=torch.float64)
    pad = al.padding_mask([5, 3])
    with torch.no_grad():
        expected, _ = as_torch_mha(module)(x, x, x, key_padding_mask=al.to_torch_padding_mask(pad),
                                           attn_mask=al.to_torch_attn_mask(al.causal_mask(5)))
    torch.testing.assert_close(module(x, al.combine_masks(al.causal_mask(5), al.as_key_mask(pad)))[0], expected,
                               **F64)


def test_additive_float_mask_gives_the_same_output():
    module = layer(6)
    x = torch.randn(2, 5, 6, dtype=torch.float64)
    m = al.sliding_window_mask(5, 2)
    torch.testing.assert_close(module(x, al.to_additive_mask(m, torch.float64))[0], module(x, m)[0], **F64)


def test_fully_padded_sequence_gives_zeros_not_nan_with_finite_gradients():
    module = layer(4)
    x = torch.randn(2, 3, 4, dtype=torch.float64, requires_grad=True)
    out, weights = module(x, al.as_key_mask(al.padding_mask([3, 0])), need_weights=True)
    assert torch.all(out[1] == 0) and torch.all(weights[1] == 0)
    out.sum().backward()
    assert torch.isfinite(x.grad).all() and torch.isfinite(module.qkv.weight.grad).all()
    assert torch.all(x.grad[1] == 0)


def test_gradients_equal_the_reference_written_out_from_the_weights():
    module = layer(3)
    x = torch.randn(2, 4, 3, dtype=torch.float64)
    mask = al.causal_mask(4)
    weighting = torch.linspace(-1, 1, 2 * 4 * 3, dtype=torch.float64).reshape(2, 4, 3)
    grads = []
    for attend in (lambda x: module(x, mask)[0], lambda x: reference(module, x, mask)[0]):
        module.zero_grad()
        inputs = x.clone().requires_grad_()
        (attend(inputs) * weighting).sum().backward()
        grads.append([inputs.grad, module.qkv.weight.grad.clone(), module.qkv.bias.grad.clone()])
    torch.testing.assert_close(grads[0], grads[1], **F64)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_with_a_mask(dtype):
    module64 = layer(8)
    module = layer(8, dtype)
    x = torch.randn(2, 6, 8, dtype=torch.float64)
    m = al.causal_mask(6)
    out = module(x.to(dtype), m)[0]
    assert out.dtype == dtype and torch.isfinite(out).all()
    ref = reference(module64, x, m.expand(2, 6, 6))[0]
    naive_error = (reference(module, x.to(dtype), m.expand(2, 6, 6))[0] - ref).abs().max()  # weights rounded only
    assert (out.double() - ref).abs().max() <= max(2 * naive_error, TOL[dtype]["atol"] * 10)


def test_inputs_not_modified_and_deterministic():
    module = layer(4)
    x = torch.randn(2, 3, 4, dtype=torch.float64)
    m = al.causal_mask(3)
    x0, m0 = x.clone(), m.clone()
    a, _ = module(x, m)
    b, _ = module(x, m)
    assert torch.equal(a, b) and torch.equal(x, x0) and torch.equal(m, m0)
    torch.manual_seed(3)
    w1 = al.SelfAttention(4).qkv.weight
    torch.manual_seed(3)
    assert torch.equal(w1, al.SelfAttention(4).qkv.weight)


@pytest.mark.parametrize("make,error,match", [
    (lambda: al.SelfAttention(0), ValueError, "SelfAttention\\(\\): embed_dim must be >= 1, got embed_dim=0"),
    (lambda: al.SelfAttention(4.0), TypeError, "embed_dim must be an int"),
    (lambda: al.SelfAttention(4, bias=1), TypeError, "bias must be True or False"),
])
def test_bad_construction(make, error, match):
    with pytest.raises(error, match=match):
        make()


@pytest.mark.parametrize("x,mask,error,match", [
    (torch.randn(3, 4), None, ValueError, "x must have shape \\(b, n, e\\).*got shape \\(3, 4\\).*unsqueeze"),
    (torch.randn(1, 3, 5), None, ValueError, "e=4 features.*got shape \\(1, 3, 5\\)"),
    (torch.randn(1, 3, 4, dtype=torch.float64), None, TypeError, "dtype torch.float32, got torch.float64"),
    (torch.ones(1, 3, 4, dtype=torch.long), None, TypeError, "floating dtype"),
    (torch.randn(2, 3, 4), torch.ones(2, 2, 3, 3, dtype=torch.bool), ValueError,
     "mask must have shape.*got shape \\(2, 2, 3, 3\\).*head axis of size 1"),
    (torch.randn(2, 3, 4), torch.ones(3, 3, 3, dtype=torch.bool), ValueError, "does not broadcast"),
    (torch.randn(2, 3, 4), torch.ones(3, 3, dtype=torch.long), TypeError, "bool"),
])
def test_bad_forward_input(x, mask, error, match):
    with pytest.raises(error, match="SelfAttention.forward\\(\\)|scaled_dot_product_attention\\(\\)"):
        al.SelfAttention(4)(x, mask)
    with pytest.raises(error, match=match):
        al.SelfAttention(4)(x, mask)


# ---------------------------------------------------------------- sinusoidal_positions


@pytest.mark.parametrize("n,d", [(1, 1), (5, 4), (7, 5), (50, 16), (3, 1)])
def test_positions_match_the_formula(n, d):
    pe = al.sinusoidal_positions(n, d, dtype=torch.float64)
    assert pe.shape == (n, d) and pe.dtype == torch.float64
    for p in range(n):
        for c in range(d):
            angle = p / 10000 ** ((c - c % 2) / d)
            expected = math.sin(angle) if c % 2 == 0 else math.cos(angle)
            assert abs(float(pe[p, c]) - expected) < 1e-12, (p, c)


def test_positions_properties():
    pe = al.sinusoidal_positions(64, 16, dtype=torch.float64)
    assert torch.equal(pe[0], torch.tensor([0.0, 1.0] * 8, dtype=torch.float64))
    assert pe.abs().max() <= 1.0
    # each sin/cos pair is a unit vector, so every position vector has squared norm d / 2
    torch.testing.assert_close(pe.square().sum(-1), torch.full((64,), 8.0, dtype=torch.float64), **F64)
    # PE[p] . PE[p + k] depends on the offset k only
    dots = torch.stack([(pe[p] * pe[p + 5]).sum() for p in range(50)])
    torch.testing.assert_close(dots, dots[:1].expand(50), **F64)
    # distinct positions get distinct vectors
    assert torch.cdist(pe, pe).add(torch.eye(64, dtype=torch.float64)).min() > 0.01
    assert al.sinusoidal_positions(4, 6).dtype == torch.float32
    assert al.sinusoidal_positions(4, 6, device="cpu").device.type == "cpu"
    torch.testing.assert_close(al.sinusoidal_positions(30, 6, base=100.0, dtype=torch.float64)[:, 2],
                               torch.sin(torch.arange(30, dtype=torch.float64) / 100 ** (2 / 6)), **F64)


@pytest.mark.parametrize("kwargs,error,match", [
    (dict(n=0, d=4), ValueError, "n must be >= 1, got n=0"),
    (dict(n=4, d=0), ValueError, "d must be >= 1, got d=0"),
    (dict(n=4.0, d=4), TypeError, "n must be an int"),
    (dict(n=4, d=4, base=1.0), ValueError, "base must be a finite number > 1, got base=1.0"),
    (dict(n=4, d=4, dtype=torch.int64), TypeError, "dtype must be a floating torch.dtype"),
])
def test_positions_bad_input(kwargs, error, match):
    with pytest.raises(error, match="sinusoidal_positions\\(\\): " + match):
        al.sinusoidal_positions(**kwargs)
