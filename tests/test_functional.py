"""attention_scores, masked_softmax and scaled_dot_product_attention against PyTorch and an fp64 reference."""


import pytest
import torch
import torch.nn.functional as F
from _tolerances import TOL

import attention_lab as al
from attention_lab import reference


def fp64_reference(q, k, v, mask=None):
    """The plain attention of attention_lab.reference, in fp64: the fast path is checked against it."""
    return reference.attention(q.double(), k.double(), v.double(), mask)


def rand(*shape, dtype=torch.float32):
    return torch.randn(*shape, dtype=dtype)


SHAPES = [
    # (batch dims, i, j, d, dv)
    ((), 1, 1, 1, 1),
    ((), 5, 7, 3, 2),  # i != j, odd d
    ((2,), 4, 9, 5, 6),
    ((3, 3), 3, 3, 3, 3),  # batch == heads == seq == d: a transposed axis would still "fit"
    ((2, 4), 1, 13, 8, 8),  # one query
    ((2, 4), 13, 1, 8, 8),  # one key
]


@pytest.mark.parametrize("batch,i,j,d,dv", SHAPES)
def test_matches_pytorch_sdpa_fp32(batch, i, j, d, dv):
    q, k, v = rand(*batch, i, d), rand(*batch, j, d), rand(*batch, j, dv)
    out, weights = al.scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v), **TOL[torch.float32])
    assert weights.shape == (*batch, i, j)
    torch.testing.assert_close(weights.sum(-1), torch.ones(*batch, i))


@pytest.mark.parametrize("batch,i,j,d,dv", SHAPES)
def test_matches_fp64_reference(batch, i, j, d, dv):
    q, k, v = (rand(*batch, n, m, dtype=torch.float64) for n, m in ((i, d), (j, d), (j, dv)))
    out, weights = al.scaled_dot_product_attention(q, k, v)
    ref_out, ref_w = fp64_reference(q, k, v)
    torch.testing.assert_close(out, ref_out, **TOL[torch.float64])
    torch.testing.assert_close(weights, ref_w, **TOL[torch.float64])


def test_custom_scale():
    q, k, v = rand(2, 5, 4), rand(2, 6, 4), rand(2, 6, 3)
    out, _ = al.scaled_dot_product_attention(q, k, v, scale=0.3)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, scale=0.3), **TOL[torch.float32])
    torch.testing.assert_close(al.attention_scores(q, k, scale=0.3), q @ k.transpose(-2, -1) * 0.3)


def test_default_scale_is_one_over_sqrt_d():
    q, k = rand(3, 16), rand(5, 16)
    torch.testing.assert_close(al.attention_scores(q, k), q @ k.T / 4.0)


MASK_SHAPES = [(5, 7), (1, 7), (5, 1), (4, 5, 7), (4, 1, 7), (1, 5, 7), (2, 4, 5, 7), (2, 1, 1, 7), (1, 4, 5, 1)]


@pytest.mark.parametrize("mask_shape", MASK_SHAPES)
def test_bool_masks_of_every_broadcastable_shape(mask_shape):
    q, k, v = rand(2, 4, 5, 3), rand(2, 4, 7, 3), rand(2, 4, 7, 6)
    mask = torch.rand(mask_shape) > 0.4
    mask[..., 0] = True  # keep every row non-empty so SDPA is defined everywhere
    out, weights = al.scaled_dot_product_attention(q, k, v, mask)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask), **TOL[torch.float32])
    assert torch.all(weights.masked_select(~mask.expand_as(weights)) == 0)


def test_float_mask_is_added_to_scores():
    q, k, v = rand(2, 5, 3), rand(2, 7, 3), rand(2, 7, 6)
    bias = torch.randn(5, 7)
    out, _ = al.scaled_dot_product_attention(q, k, v, bias)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=bias), **TOL[torch.float32])


def test_fully_masked_rows_give_zeros_and_finite_gradients():
    q, k, v = (rand(2, n, 4, dtype=torch.float64).requires_grad_() for n in (3, 5, 5))
    mask = torch.ones(2, 3, 5, dtype=torch.bool)
    mask[0, 1] = False
    mask[1] = False
    out, weights = al.scaled_dot_product_attention(q, k, v, mask)
    assert torch.all(out[0, 1] == 0) and torch.all(out[1] == 0)
    assert torch.all(weights[0, 1] == 0) and torch.all(weights[1] == 0)
    assert torch.isfinite(out).all()
    out.sum().backward()
    for t in (q, k, v):
        assert torch.isfinite(t.grad).all()
    ref_out, _ = fp64_reference(q.detach(), k.detach(), v.detach(), mask)
    torch.testing.assert_close(out.detach(), ref_out, **TOL[torch.float64])


def test_fully_masked_rows_with_additive_minus_inf():
    q, k, v = rand(3, 4), rand(5, 4), rand(5, 2)
    additive = torch.zeros(3, 5)
    additive[1] = float("-inf")
    out, weights = al.scaled_dot_product_attention(q, k, v, additive)
    assert torch.all(out[1] == 0) and torch.all(weights[1] == 0)


def test_masked_softmax_is_stable_for_huge_scores():
    scores = torch.tensor([[1e4, 0.0, -1e4], [3e4, 3e4, 3e4]])
    w = al.masked_softmax(scores)
    assert torch.isfinite(w).all()
    torch.testing.assert_close(w, torch.softmax(scores.double(), -1).float())


def test_masked_softmax_dim_and_mask():
    scores = torch.randn(4, 6)
    mask = torch.rand(4, 6) > 0.5
    mask[:, 0] = True
    torch.testing.assert_close(al.masked_softmax(scores, dim=0), torch.softmax(scores, 0))
    expected = torch.softmax(scores.masked_fill(~mask, float("-inf")), -1)
    torch.testing.assert_close(al.masked_softmax(scores, mask), expected)


def test_inputs_are_never_modified():
    q, k, v = rand(2, 3, 4), rand(2, 5, 4), rand(2, 5, 4)
    scores = torch.randn(2, 3, 5)
    mask = torch.rand(2, 3, 5) > 0.5
    copies = [t.clone() for t in (q, k, v, scores, mask)]
    al.scaled_dot_product_attention(q, k, v, mask)
    al.masked_softmax(scores, mask)
    for before, after in zip(copies, (q, k, v, scores, mask)):
        assert torch.equal(before, after)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_no_worse_than_twice_naive(dtype):
    """Our low-precision error against fp64 stays within 2x that of a naive same-dtype implementation."""
    q, k, v = rand(2, 4, 33, 16), rand(2, 4, 41, 16), rand(2, 4, 41, 16)
    mask = torch.rand(33, 41) > 0.3
    mask[:, 0] = True
    ref, _ = fp64_reference(q, k, v, mask)
    ours, _ = al.scaled_dot_product_attention(q.to(dtype), k.to(dtype), v.to(dtype), mask)
    qs, ks, vs = q.to(dtype), k.to(dtype), v.to(dtype)
    naive_scores = (qs @ ks.transpose(-2, -1) / 4.0).masked_fill(~mask, float("-inf"))
    naive = torch.softmax(naive_scores, -1) @ vs
    assert ours.dtype == dtype
    err_ours = (ours.double() - ref).abs().max().item()
    err_naive = (naive.double() - ref).abs().max().item()
    assert err_ours <= 2 * err_naive + TOL[dtype]["atol"]
    torch.testing.assert_close(ours.double(), ref, atol=10 * TOL[dtype]["atol"], rtol=TOL[dtype]["rtol"])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_fully_masked_row(dtype):
    q, k, v = (rand(3, 4).to(dtype), rand(5, 4).to(dtype), rand(5, 4).to(dtype))
    mask = torch.ones(3, 5, dtype=torch.bool)
    mask[2] = False
    out, _ = al.scaled_dot_product_attention(q, k, v, mask)
    assert torch.isfinite(out).all() and torch.all(out[2] == 0)


def gradients(fn, *inputs):
    """fn's output and the gradients of a fixed random weighting of it with respect to each input (fp64)."""
    inputs = [x.detach().requires_grad_() for x in inputs]
    out = fn(*inputs)
    weighting = torch.randn(out.shape, dtype=out.dtype, generator=torch.Generator().manual_seed(3))
    (out * weighting).sum().backward()
    return out.detach(), [x.grad for x in inputs]


def test_gradients_equal_pytorch_sdpa_with_the_same_mask():
    q, k, v = (rand(2, n, 3, dtype=torch.float64) for n in (4, 5, 5))
    mask = torch.rand(4, 5) > 0.3
    mask[:, 0] = True
    ours = gradients(lambda a, b, c: al.scaled_dot_product_attention(a, b, c, mask)[0], q, k, v)
    theirs = gradients(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, attn_mask=mask), q, k, v)
    torch.testing.assert_close(ours, theirs, **TOL[torch.float64])


def test_gradients_of_non_contiguous_inputs_equal_those_of_their_contiguous_copies():
    base = rand(3, 6, 2, 5, dtype=torch.float64)
    q = base[..., 0, :].transpose(0, 1)  # (6, 3, 5) strided view
    k = rand(6, 5, 4, dtype=torch.float64).transpose(1, 2)  # (6, 4, 5)
    v = rand(6, 4, 7, dtype=torch.float64)[..., ::2]  # (6, 4, 4)
    assert not (q.is_contiguous() and k.is_contiguous() and v.is_contiguous())
    attend = lambda a, b, c: al.scaled_dot_product_attention(a, b, c)[0]
    strided = gradients(attend, q, k, v)
    torch.testing.assert_close(strided, gradients(attend, *(t.contiguous() for t in (q, k, v))), rtol=0, atol=0)
    torch.testing.assert_close(strided, gradients(F.scaled_dot_product_attention, q, k, v), **TOL[torch.float64])


def test_masked_softmax_gradients_equal_softmax_over_the_allowed_keys_and_are_zero_in_an_empty_row():
    mask = torch.tensor([[1, 1, 0, 1], [0, 0, 0, 0], [1, 1, 0, 0]], dtype=torch.bool)
    kept = [0, 2]  # the rows with at least one allowed key
    scores, weighting = rand(3, 4, dtype=torch.float64).requires_grad_(), rand(3, 4, dtype=torch.float64)
    out = al.masked_softmax(scores, mask)
    (out * weighting).sum().backward()
    plain = scores.detach()[kept].requires_grad_()  # PyTorch's softmax over the allowed keys of the same rows
    (plain.masked_fill(~mask[kept], float("-inf")).softmax(-1) * weighting[kept]).sum().backward()
    torch.testing.assert_close(scores.grad[kept], plain.grad, **TOL[torch.float64])
    assert torch.all(out[1] == 0) and torch.all(scores.grad[1] == 0) and torch.isfinite(scores.grad).all()
    assert (scores.grad[kept].abs().sum(-1) > 0).all()  # the comparison is not between two zeros


def test_dropout_reproducible_under_seed():
    q, k, v = rand(2, 6, 4), rand(2, 6, 4), rand(2, 6, 4)
    al.seed_everything(7)
    a, wa = al.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    al.seed_everything(7)
    b, wb = al.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    torch.testing.assert_close(a, b)
    assert (wa == 0).any(), "dropout at p=0.5 on 72 weights zeroes some"
    torch.testing.assert_close(a, wa @ v)  # the returned weights are the ones applied
    c, _ = al.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    assert not torch.allclose(a, c)


# ---- bad input: each error names the function, what it expected and what it got ----

def test_wrong_rank():
    with pytest.raises(ValueError, match=r"scaled_dot_product_attention\(\): q must have at least 2 dim.*\(5,\)"):
        al.scaled_dot_product_attention(rand(5), rand(3, 5), rand(3, 5))


def test_last_dims_of_q_and_k_differ():
    with pytest.raises(ValueError, match=r"same last dimension d.*d=4.*d=5"):
        al.scaled_dot_product_attention(rand(3, 4), rand(3, 5), rand(3, 5))


def test_k_and_v_lengths_differ():
    with pytest.raises(ValueError, match=r"k and v must have the same number of positions j.*j=6.*j=7"):
        al.scaled_dot_product_attention(rand(3, 4), rand(6, 4), rand(7, 4))


def test_dtype_mismatch():
    with pytest.raises(TypeError, match=r"q and k must share a dtype.*float32.*float64"):
        al.attention_scores(rand(3, 4), rand(3, 4, dtype=torch.float64))


def test_device_mismatch():
    meta = torch.empty(3, 4, device="meta")
    with pytest.raises(ValueError, match=r"one device.*cpu.*meta"):
        al.attention_scores(rand(3, 4), meta)


def test_integer_inputs():
    with pytest.raises(TypeError, match=r"q must have a floating dtype, got torch.int64"):
        al.attention_scores(torch.ones(3, 4, dtype=torch.long), torch.ones(3, 4, dtype=torch.long))


def test_mask_not_broadcastable():
    with pytest.raises(ValueError, match=r"mask must broadcast to the scores' shape \(3, 6\) \(..., i, j\), got "
                                         r"shape \(4, 6\)"):
        al.scaled_dot_product_attention(rand(3, 4), rand(6, 4), rand(6, 4), torch.ones(4, 6, dtype=torch.bool))


def test_mask_larger_than_scores():
    with pytest.raises(ValueError, match=r"does not broadcast"):
        al.masked_softmax(rand(3, 6), torch.ones(2, 3, 6, dtype=torch.bool))


@pytest.mark.parametrize("dtype", [torch.int64, torch.uint8, torch.int32])
def test_integer_mask_is_refused(dtype):
    with pytest.raises(TypeError, match=r"mask must be bool \(True = may attend\), got dtype torch\.\w+; .*mask\.bool"):
        al.scaled_dot_product_attention(rand(3, 4), rand(6, 4), rand(6, 4), torch.ones(3, 6, dtype=dtype))


def test_float_mask_refused_by_masked_softmax():
    with pytest.raises(TypeError, match=r"masked_softmax\(\): mask must be bool"):
        al.masked_softmax(rand(3, 6), torch.zeros(3, 6))


@pytest.mark.parametrize("scale", [0, -1.0, float("nan"), float("inf")])
def test_bad_scale(scale):
    with pytest.raises(ValueError, match=r"attention_scores\(\): scale must be a finite number > 0, got scale="):
        al.attention_scores(rand(3, 4), rand(3, 4), scale=scale)


def test_scale_of_wrong_type():
    with pytest.raises(TypeError, match=r"scale must be a positive float or None, got str"):
        al.attention_scores(rand(3, 4), rand(3, 4), scale="0.5")


@pytest.mark.parametrize("p", [-0.1, 1.0, 2])
def test_bad_dropout(p):
    with pytest.raises(ValueError, match=r"dropout_p must be a finite number in \[0, 1\)"):
        al.scaled_dot_product_attention(rand(3, 4), rand(3, 4), rand(3, 4), dropout_p=p)


def test_not_a_tensor():
    with pytest.raises(TypeError, match=r"q must be a torch.Tensor, got list"):
        al.attention_scores([[1.0]], rand(1, 1))


def test_bad_softmax_dim():
    with pytest.raises(ValueError, match=r"dim must be in \[-2, 1\].*dim=2"):
        al.masked_softmax(rand(3, 4), dim=2)


def test_forward_without_grad_holds_two_score_sized_buffers():
    """Scores plus weights, nothing more: measured exactly with the lesson-06 meter."""
    from attention_lab.measure.memory import measure_peak_memory

    b, h, n, d = 1, 4, 256, 16
    q, k, v = rand(b, h, n, d), rand(b, h, n, d), rand(b, h, n, d)
    matrix = b * h * n * n * 4
    with torch.no_grad():
        peak = measure_peak_memory(al.scaled_dot_product_attention, q, k, v).peak_bytes
    output = b * h * n * d * 4
    row_stats = 4 * b * h * n * 4  # row maxima, sums and their temporaries: (b, h, i, 1) each
    assert 2 * matrix + output <= peak <= 2 * matrix + output + row_stats
