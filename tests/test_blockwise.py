"""attention_lab.blockwise_attention: equal to dense attention (values and gradients) for every length, block size
and causal setting; several query chunks; broadcasting; low precision; memory linear in n; bad input."""

import pytest
import torch
import torch.nn.functional as F
from _tolerances import TOL

import attention_lab as al
import attention_lab.efficient.blockwise as blockwise_module

F64 = TOL[torch.float64]
F32 = TOL[torch.float32]


def qkv(*lead, i, j, d=5, dv=3, dtype=torch.float64, grad=False):
    tensors = (torch.randn(*lead, i, d, dtype=dtype), torch.randn(*lead, j, d, dtype=dtype),
               torch.randn(*lead, j, dv, dtype=dtype))
    return tuple(t.requires_grad_(grad) for t in tensors)


@pytest.fixture
def small_tiles(monkeypatch):
    """Force one query chunk per block, so that chunk boundaries are exercised on small inputs."""
    monkeypatch.setattr(blockwise_module, "TILE_ELEMENTS", 1)


@pytest.mark.parametrize("n", [97, 127, 129, 257, 1])
@pytest.mark.parametrize("block_size", [1, 16, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_equals_sdpa_for_every_length(n, block_size, causal):
    q, k, v = qkv(2, 3, i=n, j=n)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    got = al.blockwise_attention(q, k, v, block_size=block_size, causal=causal)
    torch.testing.assert_close(got, expected, **F64)


@pytest.mark.parametrize("i,j", [(5, 9), (9, 5), (1, 7), (7, 1), (33, 17)])
@pytest.mark.parametrize("causal", [False, True])
def test_queries_and_keys_of_different_lengths(i, j, causal, small_tiles):
    q, k, v = qkv(2, i=i, j=j)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=causal)  # causal aligned at the top left
    torch.testing.assert_close(al.blockwise_attention(q, k, v, block_size=4, causal=causal), expected, **F64)


@pytest.mark.parametrize("causal", [False, True])
def test_fp32_within_pytorch_tolerance(causal):
    q, k, v = qkv(1, 4, i=300, j=300, d=64, dv=64, dtype=torch.float32)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    torch.testing.assert_close(al.blockwise_attention(q, k, v, block_size=128, causal=causal), expected, **F32)


@pytest.mark.parametrize("causal", [False, True])
def test_many_query_chunks(causal, small_tiles):
    q, k, v = qkv(2, 3, i=70, j=70)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    torch.testing.assert_close(al.blockwise_attention(q, k, v, block_size=8, causal=causal), expected, **F64)


def test_batch_equals_seq_equals_heads_catches_transposes():
    q, k, v = qkv(3, 3, i=3, j=3, d=3, dv=3)
    torch.testing.assert_close(al.blockwise_attention(q, k, v, block_size=2),
                               F.scaled_dot_product_attention(q, k, v), **F64)


def test_leading_dimensions_broadcast_with_gradients():
    q = torch.randn(2, 3, 11, 4, dtype=torch.float64, requires_grad=True)
    k = torch.randn(1, 3, 13, 4, dtype=torch.float64, requires_grad=True)
    v = torch.randn(13, 6, dtype=torch.float64, requires_grad=True)
    out = al.blockwise_attention(q, k, v, block_size=5)
    expected = F.scaled_dot_product_attention(q, k, v.expand(1, 3, 13, 6))
    torch.testing.assert_close(out, expected, **F64)
    grad = torch.randn_like(out)
    ours = torch.autograd.grad(out, (q, k, v), grad)
    theirs = torch.autograd.grad(expected, (q, k, v), grad)
    for a, b in zip(ours, theirs):
        assert a.shape == b.shape
        torch.testing.assert_close(a, b, **F64)


@pytest.mark.parametrize("n", [1, 97, 129])
@pytest.mark.parametrize("causal", [False, True])
def test_gradients_equal_dense(n, causal, small_tiles):
    q, k, v = qkv(2, 2, i=n, j=n, grad=True)
    out = al.blockwise_attention(q, k, v, block_size=16, causal=causal)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    grad = torch.randn_like(out)
    for a, b in zip(torch.autograd.grad(out, (q, k, v), grad), torch.autograd.grad(expected, (q, k, v), grad)):
        torch.testing.assert_close(a, b, **F64)


@pytest.mark.parametrize("causal", [False, True])
def test_gradcheck_fp64(causal):
    q, k, v = qkv(2, i=7, j=6, d=3, dv=2, grad=True)
    assert torch.autograd.gradcheck(lambda *x: al.blockwise_attention(*x, block_size=3, causal=causal), (q, k, v),
                                    fast_mode=True)


def test_gradient_only_for_some_inputs():
    q, k, v = qkv(2, i=9, j=9)
    v.requires_grad_(True)
    out = al.blockwise_attention(q, k, v, block_size=4)
    (grad_v,) = torch.autograd.grad(out.sum(), (v,))
    (expected,) = torch.autograd.grad(F.scaled_dot_product_attention(q, k, v).sum(), (v,))
    torch.testing.assert_close(grad_v, expected, **F64)


def test_large_scores_stay_finite():
    q, k, v = qkv(2, i=40, j=40, dtype=torch.float32)
    q = q * 1e4
    out = al.blockwise_attention(q, k, v, block_size=8)
    assert torch.isfinite(out).all()
    expected = F.scaled_dot_product_attention(q.double(), k.double(), v.double()).float()
    torch.testing.assert_close(out, expected, **F32)


@pytest.mark.parametrize("step", [0.5, 5.0, 50.0])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_rising_scores_move_the_running_max(step, dtype):
    """Key block c is shifted by c * step along the queries' direction, so for half of the queries every block scores
    higher than the one before (by less than, about, and far more than the rescale margin), and for the other half
    lower: the running maximum moves in some rows and not in others. Values and gradients agree with fp64 dense
    attention: to fp64 tolerance in fp64, and in fp32 no worse than twice PyTorch's own fp32 error (scores reach
    several hundred there, so fp32 rounding of the scores alone costs about 1e-5).
    """
    q, k, v = qkv(2, i=24, j=64, dtype=dtype)
    q = q.abs() * torch.where(torch.arange(24) < 12, 1.0, -1.0).to(dtype)[:, None]  # (b, i, d)
    k = k + step * (torch.arange(64) // 8).to(dtype)[:, None]  # block c of 8 keys shifted by c * step
    weights = torch.randn(2, 24, 3, dtype=torch.float64)

    def value_and_grads(attention, *tensors):
        tensors = [t.detach().requires_grad_(True) for t in tensors]
        out = attention(*tensors)
        return [out.double(), *(g.double() for g in torch.autograd.grad((out.double() * weights).sum(), tensors))]

    ours = value_and_grads(lambda q, k, v: al.blockwise_attention(q, k, v, block_size=8), q, k, v)
    exact = value_and_grads(F.scaled_dot_product_attention, q.double(), k.double(), v.double())
    pytorch = value_and_grads(F.scaled_dot_product_attention, q, k, v)
    for got, want, theirs in zip(ours, exact, pytorch):
        if dtype == torch.float64:
            torch.testing.assert_close(got, want, **F64)
        else:
            assert (got - want).abs().max() <= 2 * (theirs - want).abs().max() + F32["atol"]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision(dtype):
    q, k, v = qkv(2, 2, i=50, j=50, d=8, dv=8, dtype=dtype)
    out = al.blockwise_attention(q, k, v, block_size=16, causal=True)
    assert out.dtype == dtype
    reference = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=True)
    naive = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # the same dtype, computed by PyTorch
    ours_error = (out.double() - reference).abs().max()
    naive_error = (naive.double() - reference).abs().max()
    assert ours_error <= 2 * naive_error + TOL[dtype]["atol"]


def test_inputs_not_modified_and_deterministic():
    q, k, v = qkv(2, i=20, j=20)
    copies = [t.clone() for t in (q, k, v)]
    first = al.blockwise_attention(q, k, v, block_size=6, causal=True)
    second = al.blockwise_attention(q, k, v, block_size=6, causal=True)
    assert torch.equal(first, second)
    for original, copy in zip((q, k, v), copies):
        assert torch.equal(original, copy)


def _forward_backward(q, k, v, attention):
    attention(q, k, v).sum().backward()


def test_forward_backward_memory_grows_linearly_and_beats_naive():
    from attention_lab.measure.memory import measure_peak_memory

    def blockwise(q, k, v):
        return al.blockwise_attention(q, k, v, block_size=64)

    def naive(q, k, v):
        return al.scaled_dot_product_attention(q, k, v)[0]

    peaks = {}
    for n in (512, 1024):
        q, k, v = qkv(1, 2, i=n, j=n, d=16, dv=16, dtype=torch.float32, grad=True)
        peaks[n] = measure_peak_memory(_forward_backward, q, k, v, blockwise).peak_bytes
    q, k, v = qkv(1, 2, i=1024, j=1024, d=16, dv=16, dtype=torch.float32, grad=True)
    naive_peak = measure_peak_memory(_forward_backward, q, k, v, naive).peak_bytes
    assert peaks[1024] < 2.5 * peaks[512]  # linear, not quadratic (which would be 4x)
    assert peaks[1024] * 10 < naive_peak


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize("block_size,error,match", [
    (0, ValueError, "block_size must be >= 1"),
    (-3, ValueError, "block_size must be >= 1"),
    (2.5, TypeError, "block_size must be an int"),
    (True, TypeError, "block_size must be an int"),
])
def test_bad_block_size(block_size, error, match):
    q, k, v = qkv(i=4, j=4)
    with pytest.raises(error, match=rf"blockwise_attention\(\): {match}"):
        al.blockwise_attention(q, k, v, block_size=block_size)


def test_bad_causal_flag():
    q, k, v = qkv(i=4, j=4)
    with pytest.raises(TypeError, match="causal must be True or False"):
        al.blockwise_attention(q, k, v, causal=1)


def test_mismatched_qkv():
    q, k, v = qkv(2, i=4, j=4)
    with pytest.raises(ValueError, match="same last dimension d"):
        al.blockwise_attention(q, k[..., :3], v)
    with pytest.raises(ValueError, match="same number of positions j"):
        al.blockwise_attention(q, k, v[:, :3])
    with pytest.raises(TypeError, match="share a dtype"):
        al.blockwise_attention(q, k.float(), v)
    with pytest.raises(TypeError, match="must be a torch.Tensor"):
        al.blockwise_attention(q, k.tolist(), v)
    assert al.blockwise_attention(q[:, :0], k, v).shape == (2, 0, v.shape[-1])  # no query: an empty output
