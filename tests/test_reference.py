"""Every fast path against its plain version in attention_lab.reference, values and gradients in fp64:
blockwise_attention against reference.blockwise_attention, scaled_dot_product_attention and MultiHeadAttention
(both paths) against reference.attention. (block_sparse_attention against reference.block_sparse_attention, every
layout: tests/test_block_sparse.py and tests/test_layouts.py.) The references themselves agree with each other and
with PyTorch."""

import pytest
import torch
import torch.nn.functional as F
from _tolerances import TOL
from einops import rearrange

import attention_lab as al
from attention_lab import reference

F64 = TOL[torch.float64]


def qkv(*lead, i, j, d=5, dv=3):
    return tuple(torch.randn(*lead, n, width, dtype=torch.float64, requires_grad=True)
                 for n, width in ((i, d), (j, d), (j, dv)))


def assert_same_values_and_gradients(fast, plain, inputs):
    torch.testing.assert_close(fast, plain, **F64)
    grad = torch.randn_like(fast)
    for a, b in zip(torch.autograd.grad(fast, inputs, grad), torch.autograd.grad(plain, inputs, grad)):
        torch.testing.assert_close(a, b, **F64)


@pytest.mark.parametrize("n", [1, 97, 127, 129])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("block_size", [16, 128])
def test_blockwise_equals_its_reference(n, causal, block_size):
    q, k, v = qkv(2, 3, i=n, j=n)
    fast = al.blockwise_attention(q, k, v, block_size=block_size, causal=causal)
    plain = reference.blockwise_attention(q, k, v, block_size=block_size, causal=causal)
    assert_same_values_and_gradients(fast, plain, (q, k, v))


@pytest.mark.parametrize("i,j", [(7, 30), (30, 7)])
def test_blockwise_equals_its_reference_for_different_lengths(i, j):
    q, k, v = qkv(2, i=i, j=j)
    for causal in (False, True):
        fast = al.blockwise_attention(q, k, v, block_size=4, causal=causal)
        plain = reference.blockwise_attention(q, k, v, block_size=4, causal=causal)
        assert_same_values_and_gradients(fast, plain, (q, k, v))


@pytest.mark.parametrize("n", [1, 97, 129])
@pytest.mark.parametrize("causal", [False, True])
def test_the_blockwise_reference_is_plain_attention(n, causal):
    """The reference's loop over key blocks (running m, l, acc) gives plain attention, which gives PyTorch's."""
    q, k, v = qkv(2, i=n, j=n)
    mask = torch.ones(n, n, dtype=torch.bool).tril() if causal else None
    plain = reference.attention(q, k, v, mask)[0]
    torch.testing.assert_close(reference.blockwise_attention(q, k, v, block_size=16, causal=causal), plain, **F64)
    torch.testing.assert_close(plain, F.scaled_dot_product_attention(q, k, v, is_causal=causal), **F64)


@pytest.mark.parametrize("lead,i,j", [((), 5, 7), ((2, 3), 9, 9), ((3, 3), 3, 3), ((2,), 1, 13)])
@pytest.mark.parametrize("masked", [False, True])
def test_scaled_dot_product_attention_equals_the_reference(lead, i, j, masked):
    q, k, v = qkv(*lead, i=i, j=j)
    mask = None
    if masked:
        mask = torch.rand(i, j) > 0.4
        mask[0] = False  # a query with no allowed key: zeros on both sides
    out, weights = al.scaled_dot_product_attention(q, k, v, mask)
    plain_out, plain_weights = reference.attention(q, k, v, mask)
    torch.testing.assert_close(weights, plain_weights, **F64)
    assert_same_values_and_gradients(out, plain_out, (q, k, v))


@pytest.mark.parametrize("need_weights", [False, True])
def test_multihead_equals_the_reference_per_head(need_weights):
    mha = al.MultiHeadAttention(12, 3).double()
    query = torch.randn(2, 6, 12, dtype=torch.float64, requires_grad=True)
    memory = torch.randn(2, 9, 12, dtype=torch.float64, requires_grad=True)
    mask = torch.rand(2, 1, 6, 9) > 0.3
    out, _ = mha(query, memory, mask=mask, need_weights=need_weights)

    def split(x, proj):  # W x for every head: (b, n, e) -> (b, h, n, d)
        return rearrange(proj(x), "b n (h d) -> b h n d", h=3)

    heads, _ = reference.attention(split(query, mha.q_proj), split(memory, mha.k_proj), split(memory, mha.v_proj),
                                   mask)  # (b, h, i, d)
    plain = mha.out_proj(rearrange(heads, "b h i d -> b i (h d)"))
    assert_same_values_and_gradients(out, plain, (query, memory, *mha.parameters()))
