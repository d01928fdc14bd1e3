"""MultiHeadAttention against nn.MultiheadAttention and an fp64 loop over heads; from_torch/to_torch; errors."""

import math

import pytest
import torch
from _tolerances import TOL
from torch import nn

import attention_lab as al
from attention_lab import MultiHeadAttention, reference
from attention_lab.core import mask_conventions as C
from attention_lab.core import masks as M

F32 = TOL[torch.float32]
F64 = TOL[torch.float64]


def loop_over_heads(mha, query, key, value, mask=None):
    """The definition, one head at a time in fp64: slice each head's rows of W^q, W^k, W^v, attend with the plain
    attention of attention_lab.reference, concatenate.

    A query with no allowed key gets 0 (then the output bias)."""
    q_w, k_w, v_w, o_w = (p.weight.double() for p in (mha.q_proj, mha.k_proj, mha.v_proj, mha.out_proj))
    biases = [p.bias.double() if p.bias is not None else None for p in
              (mha.q_proj, mha.k_proj, mha.v_proj, mha.out_proj)]
    query, key, value = query.double(), key.double(), value.double()
    b, n_i, n_j, d = query.shape[0], query.shape[1], key.shape[1], mha.head_dim
    if mask is not None:
        mask = mask.expand(b, mha.num_heads, n_i, n_j)
    heads, all_weights = [], []
    for head in range(mha.num_heads):
        rows = slice(head * d, (head + 1) * d)
        q = query @ q_w[rows].T + (biases[0][rows] if biases[0] is not None else 0)  # (b, i, d)
        k = key @ k_w[rows].T + (biases[1][rows] if biases[1] is not None else 0)  # (b, j, d)
        v = value @ v_w[rows].T + (biases[2][rows] if biases[2] is not None else 0)  # (b, j, d)
        out, weights = reference.attention(q, k, v, None if mask is None else mask[:, head])  # (b, i, d), (b, i, j)
        heads.append(out)
        all_weights.append(weights)
    out = torch.cat(heads, dim=-1) @ o_w.T + (biases[3] if biases[3] is not None else 0)  # (b, i, e)
    return out, torch.stack(all_weights, dim=1)  # (b, i, e), (b, h, i, j)


def torch_call(module, query, key, value, *, attn_mask=None, key_padding_mask=None):
    """nn.MultiheadAttention with per-head weights, batch_first or not; returns batch-first tensors."""
    flip = (lambda t: t) if module.batch_first else (lambda t: t.transpose(0, 1))
    out, weights = module(flip(query), flip(key), flip(value), attn_mask=attn_mask,
                          key_padding_mask=key_padding_mask, need_weights=True, average_attn_weights=False)
    return flip(out), weights


# (batch, i, j, embed_dim, heads); j None means self-attention with j = i.
GRID = [
    (1, 1, None, 4, 1),  # one token
    (2, 5, None, 12, 3),
    (3, 3, None, 12, 3),  # b == n == h: a swapped axis would still "fit"
    (2, 4, 7, 15, 3),  # cross-attention, i != j, odd head size d = 5
    (2, 6, 1, 8, 4),  # a single key
    (1, 9, 5, 16, 8),
]


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("b,i,j,e,h", GRID)
@pytest.mark.parametrize("need_weights", [False, True])
def test_matches_nn_multiheadattention(b, i, j, e, h, bias, batch_first, need_weights):
    reference = nn.MultiheadAttention(e, h, bias=bias, batch_first=batch_first).eval()
    ours = MultiHeadAttention.from_torch(reference)
    query = torch.randn(b, i, e)
    key = query if j is None else torch.randn(b, j, e)
    value = query if j is None else torch.randn(b, j, e)
    out, weights = ours(query, None if j is None else key, None if j is None else value,
                        need_weights=need_weights)
    ref_out, ref_weights = torch_call(reference, query, key, value)
    torch.testing.assert_close(out, ref_out, **F32)
    if need_weights:
        assert weights.shape == (b, h, i, key.shape[1])
        torch.testing.assert_close(weights, ref_weights, **F32)
    else:
        assert weights is None


def _random_mask(shape):
    mask = torch.rand(shape) > 0.4
    mask[..., 0] = True  # every query keeps one key, so PyTorch (NaN on empty rows) stays comparable
    return mask


@pytest.mark.parametrize("kind", ["causal", "padding", "per_head", "per_batch"])
@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("batch_first", [True, False])
def test_masks_match_nn_multiheadattention(kind, need_weights, batch_first):
    b, i, j, e, h = 2, 5, 7, 12, 3
    reference = nn.MultiheadAttention(e, h, batch_first=batch_first).eval()
    ours = MultiHeadAttention.from_torch(reference)
    query, kv = torch.randn(b, i, e), torch.randn(b, j, e)
    torch_kwargs = {}
    if kind == "causal":
        mask = M.causal_mask(i, j)  # (i, j)
        torch_kwargs["attn_mask"] = C.to_torch_attn_mask(mask)
    elif kind == "padding":
        keys = M.padding_mask([7, 3])  # (b, j)
        mask = M.as_key_mask(keys)  # (b, 1, 1, j)
        torch_kwargs["key_padding_mask"] = C.to_torch_padding_mask(keys)
    elif kind == "per_head":
        mask = _random_mask((b, h, i, j))
        torch_kwargs["attn_mask"] = C.to_torch_attn_mask(mask, num_heads=h)
    else:
        mask = _random_mask((b, 1, i, j))
        torch_kwargs["attn_mask"] = C.to_torch_attn_mask(mask, num_heads=h)
    out, weights = ours(query, kv, mask=mask, need_weights=need_weights)
    ref_out, ref_weights = torch_call(reference, query, kv, kv, **torch_kwargs)
    torch.testing.assert_close(out, ref_out, **F32)
    if need_weights:
        torch.testing.assert_close(weights, ref_weights, **F32)


@pytest.mark.parametrize("mask_shape", [(), (7,), (5, 7), (1, 7), (3, 5, 7), (2, 1, 1, 7), (2, 1, 5, 7),
                                        (1, 3, 5, 7), (2, 3, 5, 7)])
def test_every_broadcastable_mask_shape_against_loop(mask_shape):
    ours = MultiHeadAttention(12, 3).double()
    query, kv = torch.randn(2, 5, 12, dtype=torch.float64), torch.randn(2, 7, 12, dtype=torch.float64)
    mask = torch.rand(mask_shape) > 0.5
    ref_out, ref_weights = loop_over_heads(ours, query, kv, kv, mask)
    for need_weights in (False, True):
        out, weights = ours(query, kv, mask=mask, need_weights=need_weights)
        torch.testing.assert_close(out, ref_out, **F64)
    torch.testing.assert_close(weights, ref_weights, **F64)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("b,i,j,e,h", GRID)
def test_equals_loop_over_heads_fp64(b, i, j, e, h, bias):
    ours = MultiHeadAttention(e, h, bias=bias).double()
    if bias:  # non-zero biases, so a misplaced bias shows
        with torch.no_grad():
            for p in (ours.q_proj, ours.k_proj, ours.v_proj, ours.out_proj):
                p.bias.normal_()
    query = torch.randn(b, i, e, dtype=torch.float64)
    kv = query if j is None else torch.randn(b, j, e, dtype=torch.float64)
    ref_out, ref_weights = loop_over_heads(ours, query, kv, kv)
    out, _ = ours(query, kv)
    out_w, weights = ours(query, kv, need_weights=True)
    torch.testing.assert_close(out, ref_out, **F64)
    torch.testing.assert_close(out_w, ref_out, **F64)
    torch.testing.assert_close(weights, ref_weights, **F64)


def test_both_paths_agree_and_weights_sum_to_one():
    ours = MultiHeadAttention(32, 4)
    x = torch.randn(3, 11, 32)
    mask = M.causal_mask(11)
    fast, none = ours(x, mask=mask)
    slow, weights = ours(x, mask=mask, need_weights=True)
    assert none is None
    torch.testing.assert_close(fast, slow, **F32)
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 4, 11))
    assert (weights.masked_select(~mask) == 0).all()


def test_defaults_key_is_query_and_value_is_key():
    ours = MultiHeadAttention(8, 2)
    x, kv = torch.randn(2, 4, 8), torch.randn(2, 6, 8)
    torch.testing.assert_close(ours(x)[0], ours(x, x, x)[0])
    torch.testing.assert_close(ours(x, kv)[0], ours(x, kv, kv)[0])


@pytest.mark.parametrize("need_weights", [False, True])
def test_fully_masked_rows_give_zero_attention_and_finite_gradients(need_weights):
    ours = MultiHeadAttention(8, 2)
    with torch.no_grad():
        ours.out_proj.bias.normal_()
    x = torch.randn(2, 4, 8, requires_grad=True)
    mask = torch.ones(2, 1, 4, 4, dtype=torch.bool)
    mask[0, :, 1] = False  # query 1 of sequence 0 may attend to nothing
    mask[1] = False  # sequence 1 is fully masked
    out, weights = ours(x, mask=mask, need_weights=need_weights)
    assert torch.isfinite(out).all()
    bias = ours.out_proj.bias.detach()
    torch.testing.assert_close(out[0, 1].detach(), bias)  # no attention: only the output bias is left
    torch.testing.assert_close(out[1].detach(), bias.expand(4, 8))
    if need_weights:
        assert (weights[0, :, 1] == 0).all() and (weights[1] == 0).all()
    out.sum().backward()
    assert torch.isfinite(x.grad).all()
    assert all(torch.isfinite(p.grad).all() for p in ours.parameters())


def test_both_paths_give_the_same_gradients_fp64():
    # need_weights=False runs SDPA inside, need_weights=True the explicit softmax: one layer, one set of gradients
    ours = MultiHeadAttention(6, 2).double()
    query, kv = torch.randn(2, 3, 6, dtype=torch.float64), torch.randn(2, 4, 6, dtype=torch.float64)
    mask = torch.tensor([True, True, False, True])  # (j,)
    grads = []
    for need_weights in (False, True):
        ours.zero_grad()
        q, k = query.clone().requires_grad_(), kv.clone().requires_grad_()
        out = ours(q, k, mask=mask, need_weights=need_weights)[0]  # (b, i, e)
        (out * torch.linspace(-1, 1, out.numel(), dtype=torch.float64).reshape(out.shape)).sum().backward()
        grads.append([q.grad, k.grad, *(p.grad.clone() for p in ours.parameters())])
    torch.testing.assert_close(grads[0], grads[1], **TOL[torch.float64])
    assert torch.all(grads[0][1][:, 2] == 0) and grads[0][1][:, 3].abs().sum() > 0  # the masked key gets nothing


def test_parameter_gradients_match_nn_multiheadattention():
    reference = nn.MultiheadAttention(12, 3, batch_first=True)
    ours = MultiHeadAttention.from_torch(reference)
    query, kv = torch.randn(2, 5, 12), torch.randn(2, 7, 12)
    target = torch.randn(2, 5, 12)
    ((ours(query, kv)[0] - target) ** 2).sum().backward()
    ((reference(query, kv, kv, need_weights=False)[0] - target) ** 2).sum().backward()
    packed = torch.cat([ours.q_proj.weight.grad, ours.k_proj.weight.grad, ours.v_proj.weight.grad])
    torch.testing.assert_close(packed, reference.in_proj_weight.grad, atol=1e-5, rtol=1e-5)
    packed_bias = torch.cat([ours.q_proj.bias.grad, ours.k_proj.bias.grad, ours.v_proj.bias.grad])
    torch.testing.assert_close(packed_bias, reference.in_proj_bias.grad, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ours.out_proj.weight.grad, reference.out_proj.weight.grad, atol=1e-5, rtol=1e-5)


def test_large_inputs_stay_finite_and_paths_agree():
    ours = MultiHeadAttention(16, 4).double()
    x = 1e3 * torch.randn(2, 6, 16, dtype=torch.float64)  # scores of order 1e5
    fast, _ = ours(x)
    slow, _ = ours(x, need_weights=True)
    ref, _ = loop_over_heads(ours, x, x, x)
    assert torch.isfinite(fast).all() and torch.isfinite(slow).all()
    torch.testing.assert_close(fast, ref, atol=1e-6, rtol=1e-7)
    torch.testing.assert_close(slow, ref, atol=1e-6, rtol=1e-7)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("need_weights", [False, True])
def test_low_precision_no_worse_than_twice_naive(dtype, need_weights):
    ours = MultiHeadAttention(32, 4)
    x = torch.randn(2, 16, 32)
    mask = M.causal_mask(16)
    ref, _ = loop_over_heads(ours, x, x, x, mask)
    low = ours.to(dtype)
    out, weights = low(x.to(dtype), mask=mask, need_weights=need_weights)
    assert out.dtype == dtype and (weights is None or weights.dtype == dtype)
    # The naive same-dtype computation: the loop over heads with every tensor rounded to dtype.
    naive = _naive_loop_in(low, x.to(dtype), mask)
    err = (out.double() - ref).abs().max()
    naive_err = (naive.double() - ref).abs().max()
    assert err <= 2 * naive_err + 1e-3, f"error {err:.2e} vs naive {naive_err:.2e}"


def _naive_loop_in(mha, x, mask):
    d, dtype = mha.head_dim, x.dtype
    heads = []
    for head in range(mha.num_heads):
        rows = slice(head * d, (head + 1) * d)
        q, k, v = (x @ p.weight[rows].T + p.bias[rows] for p in (mha.q_proj, mha.k_proj, mha.v_proj))
        scores = (q @ k.transpose(1, 2)) / math.sqrt(d)  # (b, i, j) in dtype
        scores = scores.masked_fill(~mask, float("-inf"))
        heads.append(torch.softmax(scores, dim=-1).to(dtype) @ v)
    return torch.cat(heads, dim=-1) @ mha.out_proj.weight.T + mha.out_proj.bias


def test_deterministic_and_inputs_untouched():
    ours = MultiHeadAttention(8, 2)
    x, kv = torch.randn(2, 3, 8), torch.randn(2, 5, 8)
    mask = M.causal_mask(3, 5)
    copies = [t.clone() for t in (x, kv, mask)]
    first = ours(x, kv, mask=mask, need_weights=True)
    second = ours(x, kv, mask=mask, need_weights=True)
    assert torch.equal(first[0], second[0]) and torch.equal(first[1], second[1])
    assert torch.equal(ours(x, kv, mask=mask)[0], ours(x, kv, mask=mask)[0])
    for before, after in zip(copies, (x, kv, mask), strict=True):
        assert torch.equal(before, after)


# ---- from_torch / to_torch ----

@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("batch_first", [True, False])
def test_round_trip_keeps_weights(bias, batch_first):
    reference = nn.MultiheadAttention(12, 4, bias=bias, batch_first=batch_first)
    ours = MultiHeadAttention.from_torch(reference)
    assert ours.training and ours.bias == bias and ours.num_heads == 4 and ours.head_dim == 3
    back = ours.to_torch(batch_first=batch_first)
    assert back.batch_first == batch_first and back.training
    for name, param in reference.state_dict().items():
        assert torch.equal(back.state_dict()[name], param), name
    torch.testing.assert_close(ours.q_proj.weight, reference.in_proj_weight[:12], atol=0, rtol=0)
    torch.testing.assert_close(ours.v_proj.weight, reference.in_proj_weight[24:], atol=0, rtol=0)


def test_to_torch_matches_ours_with_converted_mask():
    ours = MultiHeadAttention(16, 4).eval()
    x = torch.randn(2, 6, 16)
    keys = M.padding_mask([6, 4])
    mask = M.combine_masks(M.causal_mask(6), M.as_key_mask(keys))  # (b, 1, i, j)
    theirs = ours.to_torch()
    ref, _ = theirs(x, x, x, attn_mask=C.to_torch_attn_mask(mask, num_heads=4), need_weights=False)
    torch.testing.assert_close(ours(x, mask=mask)[0], ref, **F32)


def test_from_torch_follows_dtype_and_mode():
    reference = nn.MultiheadAttention(8, 2, dtype=torch.float64).eval()
    ours = MultiHeadAttention.from_torch(reference)
    assert ours.q_proj.weight.dtype == torch.float64 and not ours.training
    assert ours.to_torch().in_proj_weight.dtype == torch.float64


def test_from_torch_rejects_what_it_cannot_copy():
    with pytest.raises(ValueError, match=r"from_torch\(\): expected kdim == vdim == embed_dim, got "
                                         r"embed_dim=8, kdim=6, vdim=8"):
        MultiHeadAttention.from_torch(nn.MultiheadAttention(8, 2, kdim=6))
    with pytest.raises(ValueError, match=r"vdim=5"):
        MultiHeadAttention.from_torch(nn.MultiheadAttention(8, 2, vdim=5))
    with pytest.raises(ValueError, match=r"expected add_bias_kv=False"):
        MultiHeadAttention.from_torch(nn.MultiheadAttention(8, 2, add_bias_kv=True))
    with pytest.raises(ValueError, match=r"expected add_zero_attn=False"):
        MultiHeadAttention.from_torch(nn.MultiheadAttention(8, 2, add_zero_attn=True))
    with pytest.raises(TypeError, match=r"expected a torch.nn.MultiheadAttention, got Linear"):
        MultiHeadAttention.from_torch(nn.Linear(8, 8))
    # kdim/vdim equal to embed_dim are the packed layout and are fine
    MultiHeadAttention.from_torch(nn.MultiheadAttention(8, 2, kdim=8, vdim=8))


# ---- bad input ----

def test_embed_dim_not_divisible_lists_valid_heads():
    expected = r"embed_dim=10 and num_heads=4; choose num_heads from the divisors of 10: \[1, 2, 5, 10\]"
    with pytest.raises(ValueError, match=expected):
        MultiHeadAttention(10, 4)
    with pytest.raises(ValueError, match=r"num_heads must be >= 1, got num_heads=0"):
        MultiHeadAttention(8, 0)
    with pytest.raises(TypeError, match=r"embed_dim must be an int, got float"):
        MultiHeadAttention(8.0, 2)
    with pytest.raises(TypeError, match=r"bias must be True or False"):
        MultiHeadAttention(8, 2, bias=1)


def test_bad_inputs_get_clear_errors():
    ours = MultiHeadAttention(8, 2)
    x = torch.randn(2, 3, 8)
    with pytest.raises(ValueError, match=r"query must have e=8 features .* got shape \(2, 3, 6\) with e=6"):
        ours(torch.randn(2, 3, 6))
    with pytest.raises(ValueError, match=r"key must have e=8 features"):
        ours(x, torch.randn(2, 5, 4))
    with pytest.raises(ValueError, match=r"key and value must have the same number of positions j, got key "
                                         r"\(2, 5, 8\) \(j=5\) and value \(2, 4, 8\) \(j=4\)"):
        ours(x, torch.randn(2, 5, 8), torch.randn(2, 4, 8))
    with pytest.raises(ValueError, match=r"same batch size b, got 2, 1 and 1"):
        ours(x, torch.randn(1, 5, 8))
    with pytest.raises(ValueError, match=r"query must have shape \(b, n, e\).*unsqueeze\(0\)"):
        ours(torch.randn(3, 8))
    with pytest.raises(TypeError, match=r"query must have the module's dtype torch.float32, got torch.float64"):
        ours(x.double())
    with pytest.raises(TypeError, match=r"query must be a torch.Tensor, got list"):
        ours([[1.0] * 8])
    with pytest.raises(TypeError, match=r"query must have a floating dtype"):
        ours(torch.ones(2, 3, 8, dtype=torch.long))


def test_bad_masks_get_clear_errors():
    ours = MultiHeadAttention(8, 2)
    x = torch.randn(2, 3, 8)
    with pytest.raises(ValueError, match=r"mask must broadcast to the scores' shape \(2, 2, 3, 3\) \(..., i, j\), "
                                         r"got shape \(3, 4\)"):
        ours(x, mask=torch.ones(3, 4, dtype=torch.bool))
    with pytest.raises(TypeError, match=r"mask must be bool \(True = may attend\), got dtype torch.int64"):
        ours(x, mask=torch.ones(3, 3, dtype=torch.long))
    with pytest.raises(TypeError, match=r"mask must be bool"):
        ours(x, mask=torch.zeros(3, 3))


def test_exported_names():
    assert "MultiHeadAttention" in al.__all__ and al.MultiHeadAttention is MultiHeadAttention
