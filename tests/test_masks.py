"""attention_lab.core.masks and .mask_conventions: every builder and converter against PyTorch (SDPA,
nn.MultiheadAttention) and the definition; fully padded sequences give zeros (outputs and gradients); the causal mask
does not leak."""

import pytest
import torch
import torch.nn.functional as F
from _tolerances import TOL
from torch import nn

import attention_lab as al
from attention_lab.core import mask_conventions as C

F64 = TOL[torch.float64]
F32 = TOL[torch.float32]


def qkv(b, h, i, j, d=5, dtype=torch.float64):
    return (torch.randn(b, h, i, d, dtype=dtype), torch.randn(b, h, j, d, dtype=dtype),
            torch.randn(b, h, j, d, dtype=dtype))


def mha_by_hand(mha, x, mask):
    """nn.MultiheadAttention's computation written out with our bool mask (True = may attend)."""
    b, n, e = x.shape
    h = mha.num_heads
    q, k, v = F.linear(x, mha.in_proj_weight, mha.in_proj_bias).chunk(3, dim=-1)  # 3 x (b, n, e)
    q, k, v = (t.reshape(b, n, h, e // h).transpose(1, 2) for t in (q, k, v))  # (b, h, n, d)
    out, _ = al.scaled_dot_product_attention(q, k, v, mask)  # (b, h, n, d)
    return mha.out_proj(out.transpose(1, 2).reshape(b, n, e))  # (b, n, e)


# ---------------------------------------------------------------- causal_mask


@pytest.mark.parametrize("i,j", [(1, 1), (4, 4), (3, 7), (7, 3), (1, 5), (5, 1), (3, 3)])
def test_causal_mask_matches_sdpa_is_causal(i, j):
    q, k, v = qkv(2, 3, i, j)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(F.scaled_dot_product_attention(q, k, v, attn_mask=al.causal_mask(i, j)),
                               expected, **F64)
    out, _ = al.scaled_dot_product_attention(q, k, v, al.causal_mask(i, j))
    torch.testing.assert_close(out, expected, **F64)


def test_causal_mask_is_the_definition_j_le_i():
    m = al.causal_mask(4, 6)
    assert m.dtype == torch.bool and m.shape == (4, 6)
    for i in range(4):
        for j in range(6):
            assert bool(m[i, j]) == (j <= i)
    torch.testing.assert_close(al.causal_mask(5), torch.ones(5, 5, dtype=torch.bool).tril())


def test_causal_mask_device_argument():
    assert al.causal_mask(3, device="cpu").device.type == "cpu"
    assert al.causal_mask(3, device=torch.device("meta")).device.type == "meta"


@pytest.mark.parametrize("args,match", [((0,), "n_queries must be >= 1, got n_queries=0"),
                                        ((-2,), "n_queries=-2"), ((3, 0), "n_keys must be >= 1, got n_keys=0")])
def test_causal_mask_bad_sizes(args, match):
    with pytest.raises(ValueError, match=match):
        al.causal_mask(*args)


@pytest.mark.parametrize("bad", [3.0, True, "3"])
def test_causal_mask_refuses_non_int(bad):
    with pytest.raises(TypeError, match="causal_mask\\(\\): n_queries must be an int"):
        al.causal_mask(bad)


def test_expand_mask_is_a_view_not_a_copy():
    m = al.causal_mask(5, 7)
    big = al.expand_mask(m, 3, 4)
    assert big.shape == (3, 4, 5, 7)
    assert big.data_ptr() == m.data_ptr()
    assert big.stride()[:2] == (0, 0)
    assert big.untyped_storage().nbytes() == m.numel()  # 35 bytes, not 3 * 4 * 35
    assert torch.equal(big[2, 3], m)


def test_expand_mask_bad_input():
    with pytest.raises(ValueError, match="expand_mask\\(\\): mask must be 2-D.*got a 3-D tensor of shape "
                                         "\\(1, 2, 2\\)"):
        al.expand_mask(torch.ones(1, 2, 2, dtype=torch.bool), 2, 2)
    with pytest.raises(ValueError, match="batch must be >= 1, got batch=0"):
        al.expand_mask(al.causal_mask(2), 0, 2)
    with pytest.raises(TypeError, match="bool"):
        al.expand_mask(torch.ones(2, 2), 1, 1)


# ---------------------------------------------------------------- the leak test


def outputs_of(x, mask, w):
    q, k, v = (x @ wi for wi in w)  # (b, n, d) each
    return al.scaled_dot_product_attention(q, k, v, mask)[0]


def test_causal_mask_does_not_leak_and_flipped_polarity_does():
    torch.manual_seed(1)
    n, e = 6, 4
    w = [torch.randn(e, e, dtype=torch.float64) for _ in range(3)]
    x = torch.randn(1, n, e, dtype=torch.float64)
    future = 4
    x2 = x.clone()
    x2[0, future] += 10.0  # change one future token

    good = al.causal_mask(n)
    changed = (outputs_of(x, good, w) - outputs_of(x2, good, w)).abs().amax(-1)[0]  # (n,)
    assert torch.all(changed[:future] == 0), "a past output changed when a future token changed"
    assert torch.all(changed[future:] > 0)

    flipped = ~good  # True read as "ignore": the classic polarity bug
    leaked = (outputs_of(x, flipped, w) - outputs_of(x2, flipped, w)).abs().amax(-1)[0]
    assert torch.any(leaked[:future] > 1e-3), "the flipped mask should let the future leak into the past"


# ---------------------------------------------------------------- padding_mask / as_key_mask


def test_padding_mask_values():
    m = al.padding_mask([3, 0, 1])
    assert m.dtype == torch.bool
    assert m.tolist() == [[True, True, True], [False, False, False], [True, False, False]]
    m = al.padding_mask(torch.tensor([2, 1]), max_len=4)
    assert m.tolist() == [[True, True, False, False], [True, False, False, False]]
    assert al.padding_mask(torch.tensor([], dtype=torch.long)).shape == (0, 0)
    assert al.padding_mask([0, 0], max_len=0).shape == (2, 0)


def test_padding_mask_follows_lengths_device_and_keeps_input():
    lengths = torch.tensor([1, 2], device=al.device())
    assert al.padding_mask(lengths, max_len=3).device == lengths.device
    lengths = torch.tensor([3, 1], dtype=torch.int32)
    al.padding_mask(lengths)
    assert lengths.tolist() == [3, 1]


@pytest.mark.parametrize("lengths,max_len,match", [
    ([2, -1], None, "lengths must be >= 0, got lengths=\\[2, -1\\]"),
    (torch.tensor([2, -3]), 4, "lengths=\\[2, -3\\]"),
    ([2, 5], 3, "every length must be <= max_len=3, got lengths=\\[2, 5\\]"),
    ([2.0, 1.0], None, "whole numbers of tokens \\(ints\\), got \\[2.0, 1.0\\]"),
    (torch.tensor([2.0, 1.0]), None, "integer tensor.*torch.float32.*\\[2.0, 1.0\\]"),
    (torch.tensor([True, False]), None, "integer tensor.*torch.bool"),
    (torch.tensor([[1, 2]]), None, "1-D.*got shape \\(1, 2\\)"),
    ([1, 2], -1, "max_len must be >= 0, got max_len=-1"),
])
def test_padding_mask_bad_input(lengths, max_len, match):
    with pytest.raises(ValueError, match="padding_mask\\(\\): .*" + match):
        al.padding_mask(lengths, max_len)


def test_as_key_mask_shape_view_and_errors():
    pad = al.padding_mask([2, 3])
    key = al.as_key_mask(pad)
    assert key.shape == (2, 1, 1, 3) and key.data_ptr() == pad.data_ptr()
    with pytest.raises(ValueError, match="as_key_mask\\(\\): mask must be 2-D \\(b, j\\).*3-D tensor of shape "
                                         "\\(2, 1, 3\\)"):
        al.as_key_mask(pad[:, None])
    with pytest.raises(TypeError, match="bool"):
        al.as_key_mask(pad.long())


@pytest.mark.parametrize("attention", ["library", "sdpa"])
def test_padded_batch_equals_each_sequence_alone(attention):
    lengths = [5, 2, 4]
    b, h, n, d = 3, 2, 5, 4
    q, k, v = qkv(b, h, n, n, d)
    mask = al.as_key_mask(al.padding_mask(lengths))  # (b, 1, 1, j)

    def attend(q, k, v, mask=None):
        if attention == "sdpa":
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return al.scaled_dot_product_attention(q, k, v, mask)[0]

    batched = attend(q, k, v, mask)
    for s, length in enumerate(lengths):
        alone = attend(q[s:s + 1, :, :length], k[s:s + 1, :, :length], v[s:s + 1, :, :length])
        torch.testing.assert_close(batched[s:s + 1, :, :length], alone, **F64)


def test_fully_padded_sequence_gives_zeros_in_outputs_and_gradients():
    lengths = [3, 0, 2]
    q, k, v = (t.requires_grad_() for t in qkv(3, 2, 3, 3, 4))
    mask = al.combine_masks(al.causal_mask(3), al.as_key_mask(al.padding_mask(lengths)))  # (b, 1, i, j)
    assert mask.shape == (3, 1, 3, 3)
    out, weights = al.scaled_dot_product_attention(q, k, v, mask)
    assert torch.isfinite(out).all() and torch.isfinite(weights).all()
    assert torch.all(out[1] == 0) and torch.all(weights[1] == 0)
    out.square().sum().backward()
    for t in (q, k, v):
        assert torch.isfinite(t.grad).all()
    assert torch.all(q.grad[1] == 0) and torch.all(k.grad[1] == 0) and torch.all(v.grad[1] == 0)
    sdpa = F.scaled_dot_product_attention(q.detach(), k.detach(), v.detach(), attn_mask=mask)
    torch.testing.assert_close(out.detach(), sdpa, **F64)


def test_gradients_with_a_padding_mask_equal_pytorch_sdpas_and_skip_the_padded_keys():
    mask = al.as_key_mask(al.padding_mask([2, 4]))  # (b, 1, 1, j): sequence 0 has two padded keys
    grads = []
    for attend in (lambda q, k, v: al.scaled_dot_product_attention(q, k, v, mask)[0],
                   lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mask)):
        torch.manual_seed(0)
        q, k, v = (t.requires_grad_() for t in qkv(2, 1, 3, 4, 3))
        (attend(q, k, v) * torch.linspace(-1, 1, 9, dtype=torch.float64).reshape(1, 1, 3, 3)).sum().backward()
        grads.append([q.grad, k.grad, v.grad])
    torch.testing.assert_close(grads[0], grads[1], **F64)
    k_grad, v_grad = grads[0][1:]
    assert torch.all(k_grad[0, :, 2:] == 0) and torch.all(v_grad[0, :, 2:] == 0)  # padded keys learn nothing
    assert k_grad[1, :, 2:].abs().sum() > 0


# ---------------------------------------------------------------- sliding_window_mask


@pytest.mark.parametrize("n", [1, 2, 5, 9])
@pytest.mark.parametrize("window", [1, 2, 3, 4, 12])
def test_sliding_window_keys_per_row(n, window):
    m = al.sliding_window_mask(n, window)
    mc = al.sliding_window_mask(n, window, causal=True)
    assert m.shape == mc.shape == (n, n) and m.dtype == torch.bool
    for i in range(n):
        expected = min(i, window - 1) + 1 + min(n - 1 - i, window - 1)
        assert int(m[i].sum()) == expected, f"row {i}"
        assert int(mc[i].sum()) == min(i + 1, window), f"causal row {i}"
        for j in range(n):
            assert bool(m[i, j]) == (abs(i - j) < window)
            assert bool(mc[i, j]) == (i - window < j <= i)
    assert torch.equal(mc, m & al.causal_mask(n))


def test_sliding_window_interior_counts_and_extremes():
    assert al.sliding_window_mask(20, 3)[10].sum() == 5  # 2 * window - 1
    assert al.sliding_window_mask(20, 3, causal=True)[10].sum() == 3  # window
    assert torch.equal(al.sliding_window_mask(4, 1), torch.eye(4, dtype=torch.bool))
    assert al.sliding_window_mask(4, 4).all()
    assert torch.equal(al.sliding_window_mask(4, 9, causal=True), al.causal_mask(4))


def test_sliding_window_is_a_convolutions_receptive_field():
    n, window = 9, 3
    kernel = 2 * window - 1
    conv = nn.Conv1d(1, 1, kernel, padding=window - 1, bias=False).double()
    with torch.no_grad():
        conv.weight.fill_(1.0)
    jac = torch.autograd.functional.jacobian(lambda x: conv(x[None, None])[0, 0],
                                             torch.randn(n, dtype=torch.float64))  # (i, j)
    assert torch.equal(jac != 0, al.sliding_window_mask(n, window))


def test_sliding_window_with_sdpa():
    q, k, v = qkv(2, 2, 7, 7)
    m = al.sliding_window_mask(7, 2, causal=True)
    torch.testing.assert_close(al.scaled_dot_product_attention(q, k, v, m)[0],
                               F.scaled_dot_product_attention(q, k, v, attn_mask=m), **F64)


@pytest.mark.parametrize("args,error,match", [
    ((5, 0), ValueError, "window must be >= 1, got window=0"),
    ((5, -2), ValueError, "window=-2"),
    ((0, 2), ValueError, "n must be >= 1, got n=0"),
    ((5, 2.5), TypeError, "window must be an int, got float 2.5"),
])
def test_sliding_window_bad_input(args, error, match):
    with pytest.raises(error, match="sliding_window_mask\\(\\): .*" + match):
        al.sliding_window_mask(*args)


# ---------------------------------------------------------------- converters against nn.MultiheadAttention


@pytest.fixture
def mha():
    module = nn.MultiheadAttention(8, 2, batch_first=True, dtype=torch.float64).eval()
    return module


def test_from_torch_padding_mask_matches_multiheadattention(mha):
    x = torch.randn(3, 5, 8, dtype=torch.float64)
    key_padding_mask = torch.tensor([[False] * 5, [False, False, True, True, True], [False] * 4 + [True]])
    ours = C.from_torch_padding_mask(key_padding_mask)
    assert torch.equal(ours, al.padding_mask([5, 2, 4]))
    with torch.no_grad():
        expected, _ = mha(x, x, x, key_padding_mask=key_padding_mask, need_weights=False)
        torch.testing.assert_close(mha_by_hand(mha, x, al.as_key_mask(ours)), expected, **F64)
        # and back: our padding mask drives PyTorch's module
        got, _ = mha(x, x, x, key_padding_mask=C.to_torch_padding_mask(ours), need_weights=False)
    torch.testing.assert_close(got, expected, **F64)


def test_from_torch_attn_mask_2d_and_3d_match_multiheadattention(mha):
    x = torch.randn(2, 4, 8, dtype=torch.float64)
    torch_causal = torch.ones(4, 4, dtype=torch.bool).triu(1)  # True = NOT allowed
    assert torch.equal(C.from_torch_attn_mask(torch_causal), al.causal_mask(4))
    per_head = torch.rand(2 * 2, 4, 4) > 0.5  # (b*h, i, j)
    per_head[..., 0] = False  # keep every row non-empty (MHA gives NaN for empty rows)
    ours = C.from_torch_attn_mask(per_head, num_heads=2)
    assert ours.shape == (2, 2, 4, 4)
    assert torch.equal(ours[1, 0], ~per_head[2])  # batch-major: row b*h + h'
    assert C.from_torch_attn_mask(per_head).shape == (4, 4, 4)
    with torch.no_grad():
        expected, _ = mha(x, x, x, attn_mask=per_head, need_weights=False)
        torch.testing.assert_close(mha_by_hand(mha, x, ours), expected, **F64)
        got, _ = mha(x, x, x, attn_mask=C.to_torch_attn_mask(ours, num_heads=2), need_weights=False)
        torch.testing.assert_close(got, expected, **F64)
        causal_expected, _ = mha(x, x, x, attn_mask=torch_causal, need_weights=False)
        got, _ = mha(x, x, x, attn_mask=C.to_torch_attn_mask(al.causal_mask(4)), need_weights=False)
    torch.testing.assert_close(got, causal_expected, **F64)


def test_to_torch_attn_mask_broadcasts_a_head_axis_of_one():
    m = al.combine_masks(al.causal_mask(3), al.as_key_mask(al.padding_mask([3, 2])))  # (b, 1, i, j)
    folded = C.to_torch_attn_mask(m, num_heads=4)
    assert folded.shape == (8, 3, 3)
    assert torch.equal(C.from_torch_attn_mask(folded, num_heads=4), m.expand(2, 4, 3, 3))


def test_float_torch_masks_are_additive(mha):
    additive = C.to_additive_mask(al.causal_mask(4), torch.float64)
    assert torch.equal(C.from_torch_attn_mask(additive), al.causal_mask(4))
    kpm = torch.tensor([[0.0, 0.0, float("-inf")]])
    assert C.from_torch_padding_mask(kpm).tolist() == [[True, True, False]]


@pytest.mark.parametrize("fn,arg,num_heads,match", [
    (C.from_torch_attn_mask, torch.zeros(1, 1, 2, 2, dtype=torch.bool), None, "2-D or 3-D.*4-D tensor"),
    (C.from_torch_attn_mask, torch.zeros(5, 2, 2, dtype=torch.bool), 2, "multiple of num_heads=2.*\\(5, 2, 2\\)"),
    (C.to_torch_attn_mask, torch.zeros(2, 2, 2, dtype=torch.bool), None, "2-D or 4-D.*3-D tensor"),
    (C.to_torch_attn_mask, torch.zeros(1, 1, 2, 2, dtype=torch.bool), None, "needs num_heads"),
    (C.to_torch_attn_mask, torch.zeros(1, 3, 2, 2, dtype=torch.bool), 2, "head dimension must be 1 or num_heads=2"),
    (C.from_torch_padding_mask, torch.zeros(2, 1, 3, dtype=torch.bool), None, "1-D or 2-D.*3-D tensor"),
    (C.to_torch_padding_mask, torch.zeros(2, 1, 3, dtype=torch.bool), None, "1-D or 2-D.*3-D tensor"),
])
def test_converters_refuse_wrong_dimensions(fn, arg, num_heads, match):
    with pytest.raises(ValueError, match=fn.__name__ + "\\(\\): .*" + match):
        fn(arg) if num_heads is None else fn(arg, num_heads=num_heads)


def test_converters_refuse_integer_torch_masks():
    with pytest.raises(TypeError, match="from_torch_padding_mask\\(\\): key_padding_mask must be a bool"):
        C.from_torch_padding_mask(torch.zeros(2, 3, dtype=torch.long))


# ---------------------------------------------------------------- additive and 0/1 masks


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16])
def test_to_additive_mask_values_and_sdpa(dtype):
    m = al.sliding_window_mask(5, 2, causal=True)
    add = C.to_additive_mask(m, dtype)
    assert add.dtype == dtype
    assert torch.all(add[m] == 0) and torch.all(add[~m] == float("-inf"))
    q, k, v = (t.to(dtype) for t in qkv(1, 2, 5, 5))
    torch.testing.assert_close(F.scaled_dot_product_attention(q, k, v, attn_mask=add),
                               F.scaled_dot_product_attention(q, k, v, attn_mask=m), **TOL[dtype])
    torch.testing.assert_close(al.scaled_dot_product_attention(q, k, v, add)[0],
                               al.scaled_dot_product_attention(q, k, v, m)[0], **TOL[dtype])


def test_minus_1e9_overflows_in_fp16_while_minus_inf_works():
    scores = torch.zeros(3, dtype=torch.float16)
    with pytest.raises(RuntimeError, match="overflow"):
        scores.masked_fill(torch.tensor([True, False, False]), -1e9)
    assert C.to_additive_mask(torch.tensor([False, True, True]), torch.float16)[0] == float("-inf")


def test_to_additive_mask_bad_dtype():
    with pytest.raises(TypeError, match="to_additive_mask\\(\\): dtype must be a floating torch.dtype"):
        C.to_additive_mask(al.causal_mask(2), torch.int64)


def test_from_additive_mask_round_trip_and_refuses_other_values():
    m = al.causal_mask(3, 5)
    assert torch.equal(C.from_additive_mask(C.to_additive_mask(m)), m)
    with pytest.raises(ValueError, match="from_additive_mask\\(\\): .*only 0.0 and -inf.*-1000000000.0"):
        C.from_additive_mask(torch.tensor([0.0, -1e9]))
    with pytest.raises(TypeError, match="floating"):
        C.from_additive_mask(torch.tensor([0, 1]))


@pytest.mark.parametrize("dtype", [torch.long, torch.int32, torch.float32, torch.uint8, torch.bool])
def test_from_keep_ones_matches_masked_fill_style(dtype):
    keep = (torch.rand(2, 1, 4, 6) > 0.4)
    keep[..., 0] = True  # no empty rows: with -1e9 an empty row is uniform, not zero
    old_style = keep.to(dtype)
    ours = C.from_keep_ones(old_style)
    assert ours.dtype == torch.bool and torch.equal(ours, keep)
    q, k, v = qkv(2, 3, 4, 6)
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    tutorial = torch.softmax(scores.masked_fill(old_style == 0, -1e9), dim=-1) @ v
    torch.testing.assert_close(al.scaled_dot_product_attention(q, k, v, ours)[0], tutorial, **F64)


def test_from_keep_ones_refuses_other_values():
    with pytest.raises(ValueError, match="from_keep_ones\\(\\): expected a 0/1 mask.*\\[0, 2\\]"):
        C.from_keep_ones(torch.tensor([0, 2]))
    with pytest.raises(ValueError, match="from_additive_mask"):
        C.from_keep_ones(torch.tensor([0.0, float("-inf")]))


def test_converters_never_modify_their_input():
    m = al.causal_mask(4)
    before = m.clone()
    for fn in (C.to_torch_padding_mask, C.to_torch_attn_mask, C.to_additive_mask, C.from_keep_ones):
        out = fn(m)
        assert out.data_ptr() != m.data_ptr()
    assert torch.equal(m, before)


# ---------------------------------------------------------------- combine_masks


def test_combine_masks():
    assert al.combine_masks() is None and al.combine_masks(None) is None
    c, p = al.causal_mask(3), al.as_key_mask(al.padding_mask([1, 3]))
    both = al.combine_masks(c, None, p)
    assert both.shape == (2, 1, 3, 3)
    assert torch.equal(both, c & p)
    with pytest.raises(ValueError, match="combine_masks\\(\\): masks must broadcast together, got shapes "
                                         "\\[\\(3, 3\\), \\(4, 4\\)\\]; "):
        al.combine_masks(c, al.causal_mask(4))
    with pytest.raises(TypeError, match="masks\\[1\\] must be a bool"):
        al.combine_masks(c, c.float())
