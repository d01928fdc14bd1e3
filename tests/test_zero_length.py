"""No keys (j = 0) and empty sequences (n = 0) on every attention path: zeros or an empty output, as PyTorch's SDPA
gives, never an error or NaN, and gradients that flow."""

import pytest
import torch
import torch.nn.functional as F

import attention_lab as al
from attention_lab import reference


def qkv(i, j, *, lead=(2, 3), d=4, dv=5, dtype=torch.float64):
    return tuple(torch.randn(*lead, n, width, dtype=dtype, requires_grad=True)
                 for n, width in ((i, d), (j, d), (j, dv)))


# Each path as (q, k, v) -> output; the paths that need i = j are marked.
PATHS = {
    "scaled_dot_product_attention": lambda q, k, v: al.scaled_dot_product_attention(q, k, v)[0],
    "reference.attention": lambda q, k, v: reference.attention(q, k, v)[0],
    "blockwise_attention": lambda q, k, v: al.blockwise_attention(q, k, v, block_size=2),
    "blockwise_attention causal": lambda q, k, v: al.blockwise_attention(q, k, v, block_size=2, causal=True),
    "reference.blockwise_attention": lambda q, k, v: reference.blockwise_attention(q, k, v, block_size=2),
}
SELF_PATHS = {
    "block_sparse_attention": lambda q, k, v: al.block_sparse_attention(q, k, v, al.BlockLayout.local(2)),
    "reference.block_sparse_attention": lambda q, k, v: reference.block_sparse_attention(
        q, k, v, al.BlockLayout.local(2)),
}


@pytest.mark.parametrize("name", PATHS)
@pytest.mark.parametrize("i,j", [(3, 0), (0, 3), (0, 0)])
def test_no_keys_or_no_queries_give_zeros_like_sdpa(name, i, j):
    q, k, v = qkv(i, j)
    out = PATHS[name](q, k, v)
    expected = F.scaled_dot_product_attention(q, k, v)
    assert out.shape == expected.shape == (2, 3, i, 5)
    torch.testing.assert_close(out, torch.zeros_like(expected), atol=0, rtol=0)
    if name == "reference.blockwise_attention" and j == 0:
        return  # the plain loop visits no block, so its zeros are a constant: values only
    out.sum().backward()  # the graph stays connected: every input gets a gradient of its own shape
    assert q.grad.shape == q.shape and k.grad.shape == k.shape and v.grad.shape == v.shape
    assert not q.grad.any()


@pytest.mark.parametrize("name", SELF_PATHS)
def test_empty_sequence_gives_empty_output(name):
    q, k, v = qkv(0, 0)
    out = SELF_PATHS[name](q, k, v)
    assert out.shape == (2, 3, 0, 5)
    out.sum().backward()
    assert q.grad.shape == q.shape


def test_masked_softmax_over_no_keys_is_empty():
    scores = torch.randn(3, 0, requires_grad=True)
    weights = al.masked_softmax(scores, torch.ones(3, 0, dtype=torch.bool))
    assert weights.shape == (3, 0)
    weights.sum().backward()
    assert scores.grad.shape == (3, 0)
    assert al.masked_softmax(torch.randn(0, 4), dim=0).shape == (0, 4)  # the softmax axis may be any dim


def test_scaled_dot_product_attention_weights_over_no_keys():
    q, k, v = qkv(3, 0)
    out, weights = al.scaled_dot_product_attention(q, k, v, torch.ones(3, 0, dtype=torch.bool))
    assert weights.shape == (2, 3, 3, 0) and not out.any()


def test_self_attention_of_an_empty_sequence():
    layer = al.SelfAttention(6).double()
    x = torch.randn(2, 0, 6, dtype=torch.float64)
    out, weights = layer(x, need_weights=True)
    assert out.shape == (2, 0, 6) and weights.shape == (2, 0, 0)
    assert layer(x)[0].shape == (2, 0, 6)


@pytest.mark.parametrize("i", [0, 3])
def test_multihead_without_keys_agrees_on_both_paths(i):
    """need_weights=True (the library's SDPA) and False (PyTorch's) give the same output: the attention gives 0,
    so every query's output is the output projection's bias, as for a query whose keys are all masked."""
    mha = al.MultiHeadAttention(8, 2).double()
    with torch.no_grad():
        mha.out_proj.bias.uniform_(-1, 1)  # a nonzero bias, so that 'only the bias' is visible
    query, key = torch.randn(2, i, 8, dtype=torch.float64), torch.randn(2, 0, 8, dtype=torch.float64)
    fast, none = mha(query, key)
    plain, weights = mha(query, key, need_weights=True)
    assert none is None and weights.shape == (2, 2, i, 0)
    torch.testing.assert_close(fast, plain, atol=0, rtol=0)
    torch.testing.assert_close(plain, mha.out_proj.bias.expand(2, i, 8))


def test_fully_padded_sequence_of_length_zero_through_attention():
    """padding_mask([0], max_len=0) is a (1, 0) mask: fed to every layer, it gives empty or bias-only outputs."""
    key_mask = al.as_key_mask(al.padding_mask([0], max_len=0))  # (1, 1, 1, 0)
    assert key_mask.shape == (1, 1, 1, 0)
    x = torch.randn(1, 0, 8, dtype=torch.float64)
    layer = al.SelfAttention(8).double()
    assert layer(x, mask=key_mask, need_weights=True)[0].shape == (1, 0, 8)
    mha = al.MultiHeadAttention(8, 2).double()
    for need_weights in (False, True):
        assert mha(x, mask=key_mask, need_weights=need_weights)[0].shape == (1, 0, 8)
        # queries from another sequence, no keys: each output is the output projection's bias
        out = mha(torch.randn(1, 3, 8, dtype=torch.float64), x, mask=key_mask, need_weights=need_weights)[0]
        torch.testing.assert_close(out, mha.out_proj.bias.expand(1, 3, 8))
    q = torch.randn(1, 2, 3, 4, dtype=torch.float64)
    k = v = torch.randn(1, 2, 0, 4, dtype=torch.float64)
    out, weights = al.scaled_dot_product_attention(q, k, v, key_mask)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=key_mask))
    assert not out.any() and weights.shape == (1, 2, 3, 0)


def test_layout_of_an_empty_sequence():
    for layout in (al.BlockLayout.local(4), al.BlockLayout.causal(4) | al.BlockLayout.global_blocks(4, [0]),
                   al.BlockLayout.random(4, 2, seed=0)):
        assert layout.n_blocks(0) == 0
        assert layout.to_dense(0).shape == (0, 0) and layout.block_mask(0).shape == (0, 0)
