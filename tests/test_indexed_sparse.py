"""The lightning indexer and attention over the keys it picks: against the plain forms (values, gradients), the
properties DeepSeek's paper states (top_k = j is dense attention; causal selection never reads later keys), the
distillation loss, the work count, and bad inputs."""

from __future__ import annotations

import pytest
import torch
from _tolerances import TOL

import attention_lab as al
from attention_lab import reference


def _indexer_inputs(b=2, heads=3, i=7, j=7, d=4, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(b, heads, i, d, generator=g, dtype=dtype), torch.randn(b, j, d, generator=g, dtype=dtype),
            torch.randn(b, heads, i, generator=g, dtype=dtype))


def _qkv(b=2, h=3, n=7, d=5, dv=3, dtype=torch.float64, seed=1):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(b, h, n, d, generator=g, dtype=dtype), torch.randn(b, h, n, d, generator=g, dtype=dtype),
            torch.randn(b, h, n, dv, generator=g, dtype=dtype))


def test_index_scores_equal_the_formula_values_and_gradients():
    q_index, k_index, weights = (x.requires_grad_() for x in _indexer_inputs(i=5, j=9))
    fast = al.lightning_index_scores(q_index, k_index, weights)
    plain = reference.lightning_index_scores(q_index, k_index, weights)
    torch.testing.assert_close(fast, plain, **TOL[torch.float64])
    one = (weights[0, 1, 2] * torch.relu(q_index[0, 1, 2] @ k_index[0, 4]) + weights[0, 0, 2] * torch.relu(
        q_index[0, 0, 2] @ k_index[0, 4]) + weights[0, 2, 2] * torch.relu(q_index[0, 2, 2] @ k_index[0, 4]))
    torch.testing.assert_close(fast[0, 2, 4], one)
    upstream = torch.randn_like(fast)
    got = torch.autograd.grad((fast * upstream).sum(), (q_index, k_index, weights))
    want = torch.autograd.grad((plain * upstream).sum(), (q_index, k_index, weights))
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, **TOL[torch.float64])


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("top_k", [1, 3, 7])
def test_sparse_attention_equals_the_plain_form(causal, top_k):
    q, k, v = (x.requires_grad_() for x in _qkv())
    scores = al.lightning_index_scores(*_indexer_inputs(), causal=causal)
    fast = al.indexed_sparse_attention(q, k, v, scores, top_k=top_k, causal=causal)
    plain, weights = reference.indexed_sparse_attention(q, k, v, scores, top_k=top_k, causal=causal)
    torch.testing.assert_close(fast, plain, **TOL[torch.float64])
    upstream = torch.randn_like(fast)
    got = torch.autograd.grad((fast * upstream).sum(), (q, k, v))
    want = torch.autograd.grad((plain * upstream).sum(), (q, k, v))
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, **TOL[torch.float64])
    kept = (weights > 0).sum(-1)  # every head reads the same keys
    assert bool((kept == kept[:, :1]).all())
    if causal:
        assert bool((weights.triu(1) == 0).all())


def test_top_k_of_every_key_is_dense_attention():
    q, k, v = _qkv(n=9)
    scores = al.lightning_index_scores(*_indexer_inputs(i=9, j=9))
    dense = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(al.indexed_sparse_attention(q, k, v, scores, top_k=9), dense, **TOL[torch.float64])
    causal = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(al.indexed_sparse_attention(q, k, v, al.lightning_index_scores(
        *_indexer_inputs(i=9, j=9), causal=True), top_k=9, causal=True), causal, **TOL[torch.float64])


def test_the_indexer_layer_and_its_distillation_loss():
    torch.manual_seed(0)
    indexer = al.LightningIndexer(8, 2, 3, causal=True).double()
    x = torch.randn(2, 6, 8, dtype=torch.float64)
    scores = indexer(x)
    assert scores.shape == (2, 6, 6) and bool(torch.isinf(scores.triu(1)[..., 0, 1:]).all())
    q_index = indexer.q_proj(x).unflatten(-1, (2, 3)).transpose(1, 2)
    by_hand = reference.lightning_index_scores(q_index, indexer.k_proj(x), indexer.w_proj(x).transpose(1, 2))
    torch.testing.assert_close(scores.tril(), by_hand.tril())
    weights = torch.softmax(torch.randn(2, 4, 6, 6, dtype=torch.float64).masked_fill(
        ~al.causal_mask(6), float("-inf")), dim=-1)
    loss = al.indexer_distillation_loss(scores, weights)
    p = weights.sum(1) / 4
    kl = (p * (p.clamp_min(1e-300).log() - torch.log_softmax(scores, -1))).where(p > 0, 0.0).sum(-1).mean()
    torch.testing.assert_close(loss, kl)
    loss.backward()
    assert indexer.q_proj.weight.grad is not None and bool(torch.isfinite(indexer.q_proj.weight.grad).all())
    matching = al.indexer_distillation_loss(torch.log(p).masked_fill(p == 0, float("-inf")), weights)
    assert abs(float(matching)) < 1e-12  # scores whose softmax is p: no divergence


def test_the_work_count():
    indexer, sparse, dense = al.indexed_attention_flops(256, 256, top_k=32, num_heads=2, head_dim=8, index_heads=2,
                                                        index_dim=4)
    assert dense == reference.attention_flops(*_qkv(b=1, h=2, n=256, d=8, dv=8))
    assert sparse * 8 == dense and indexer == 2 * 256 * 256 * 8


@pytest.mark.parametrize("call, error, match", [
    (lambda q, k, v, s: al.indexed_sparse_attention(q, k, v, s, top_k=0), ValueError, "top_k must be >= 1"),
    (lambda q, k, v, s: al.indexed_sparse_attention(q, k, v, s, top_k=8), ValueError, "at most the number of keys"),
    (lambda q, k, v, s: al.indexed_sparse_attention(q[0], k[0], v[0], s, top_k=2), ValueError,
     r"indexed_sparse_attention\(\): q must be \(b, h, i, d\)"),
    (lambda q, k, v, s: al.lightning_index_scores(q, k[..., :2], v[..., 0]), ValueError, "same last dimension"),
    (lambda q, k, v, s: al.indexed_sparse_attention(q, k, v, s.long(), top_k=2), TypeError, "floating dtype"),
    (lambda q, k, v, s: al.indexer_distillation_loss(s, s), ValueError, "at least 4 dimensions"),
])
def test_bad_inputs(call, error, match):
    q, k, v = _qkv()
    scores = al.lightning_index_scores(*_indexer_inputs())
    with pytest.raises(error, match=match):
        call(q, k, v, scores)
