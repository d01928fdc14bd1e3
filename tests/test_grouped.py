"""GroupedQueryAttention and MultiHeadLatentAttention: equal to their plain versions and to PyTorch, and decoding with
a cache (pre-allocated, concatenated, sliding) equals attention over the whole sequence."""

import pytest
import torch
import torch.nn.functional as F
from _tolerances import TOL
from einops import rearrange

import attention_lab as al
from attention_lab import reference


def project(layer, x, offset=0):
    """q (b, h, n, d) and k, v (b, h_kv, n, d) of the layer, rotated for positions offset, offset + 1, ..."""
    q = rearrange(layer.q_proj(x), "b n (h d) -> b h n d", h=layer.num_heads)
    k = rearrange(layer.k_proj(x), "b n (h d) -> b h n d", h=layer.num_kv_heads)
    v = rearrange(layer.v_proj(x), "b n (h d) -> b h n d", h=layer.num_kv_heads)
    if layer.rope:
        positions = torch.arange(offset, offset + x.shape[1])
        q, k = reference.rope(q, positions), reference.rope(k, positions)
    return q, k, v


def finish(layer, heads):
    return layer.out_proj(rearrange(heads, "b h n d -> b n (h d)"))


@pytest.mark.parametrize("num_heads, num_kv_heads", [(4, 4), (4, 2), (4, 1), (6, 3)])
@pytest.mark.parametrize("rope", [True, False])
def test_equals_repeated_kv_heads_with_pytorch_sdpa_and_enable_gqa(num_heads, num_kv_heads, rope):
    layer = al.GroupedQueryAttention(24, num_heads, num_kv_heads, rope=rope, bias=True)
    x = torch.randn(3, 7, 24)
    q, k, v = project(layer, x)
    group = num_heads // num_kv_heads
    repeated = F.scaled_dot_product_attention(q, k.repeat_interleave(group, 1), v.repeat_interleave(group, 1),
                                              is_causal=True)
    native = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    ours, _ = layer(x)
    torch.testing.assert_close(ours, finish(layer, repeated), **TOL[torch.float32])
    torch.testing.assert_close(ours, finish(layer, native), **TOL[torch.float32])


def test_equals_the_plain_version_in_fp64_values_and_gradients():
    layer = al.GroupedQueryAttention(16, 4, 2).double()
    x = torch.randn(2, 5, 16, dtype=torch.float64, requires_grad=True)

    def plain(x):
        q, k, v = project(layer, x)
        return finish(layer, reference.grouped_query_attention(q, k, v, torch.ones(5, 5, dtype=torch.bool).tril()))

    torch.testing.assert_close(layer(x)[0], plain(x), **TOL[torch.float64])
    assert torch.autograd.gradcheck(lambda x: layer(x)[0], (x[:1, :4].detach().requires_grad_(),))
    grad = torch.randn(2, 5, 16, dtype=torch.float64)
    ours = torch.autograd.grad(layer(x)[0], x, grad)[0]
    theirs = torch.autograd.grad(plain(x), x, grad)[0]
    torch.testing.assert_close(ours, theirs, **TOL[torch.float64])


def test_query_head_i_reads_kv_head_i_over_group_size():
    layer = al.GroupedQueryAttention(16, 4, 2, rope=False).double()
    x = torch.randn(1, 3, 16, dtype=torch.float64)
    q, k, v = project(layer, x)
    _, weights = layer(x, need_weights=True)  # (b, h, i, j)
    for head in range(4):
        _, expected = reference.attention(q[:, head], k[:, head // 2], v[:, head // 2],
                                          torch.ones(3, 3, dtype=torch.bool).tril())
        torch.testing.assert_close(weights[:, head], expected, **TOL[torch.float64])


@pytest.mark.parametrize("make_cache", [
    lambda layer, b: layer.new_cache(b, 12),
    lambda layer, b: al.ConcatKVCache(b, layer.num_kv_heads, layer.head_dim),
    lambda layer, b: al.SlidingWindowKVCache(b, layer.num_kv_heads, 12, layer.head_dim),  # never wraps
], ids=["preallocated", "concat", "sliding-wide"])
@pytest.mark.parametrize("chunks", [[1] * 10, [4, 1, 1, 3, 1], [10]])
def test_decoding_with_a_cache_equals_the_full_causal_forward(make_cache, chunks):
    layer = al.GroupedQueryAttention(32, 4, 2)
    x = torch.randn(2, 10, 32)
    cache = make_cache(layer, 2)
    pieces, start = [], 0
    for t in chunks:
        pieces.append(layer(x[:, start:start + t], cache=cache)[0])
        start += t
    torch.testing.assert_close(torch.cat(pieces, dim=1), layer(x)[0], **TOL[torch.float32])
    assert cache.offset == 10


@pytest.mark.parametrize("window", [1, 3, 4])
@pytest.mark.parametrize("chunks", [[1] * 11, [5, 1, 2, 3], [11]])
def test_a_sliding_cache_gives_sliding_window_attention(window, chunks):
    layer = al.GroupedQueryAttention(16, 4, 2).double()
    x = torch.randn(2, 11, 16, dtype=torch.float64)
    cache = al.SlidingWindowKVCache(2, 2, window, 4, dtype=torch.float64)
    pieces, start = [], 0
    for t in chunks:
        pieces.append(layer(x[:, start:start + t], cache=cache)[0])
        start += t
    q, k, v = project(layer, x)
    expected = reference.sliding_window_attention(q, k.repeat_interleave(2, 1), v.repeat_interleave(2, 1),
                                                  window=window)
    torch.testing.assert_close(torch.cat(pieces, dim=1), finish(layer, expected), **TOL[torch.float64])
    assert cache.nbytes == 2 * 2 * 2 * window * 4 * 8


def test_plain_multihead_attention_is_the_h_kv_equals_h_case_and_decodes_with_a_cache():
    mha = al.MultiHeadAttention(16, 4)
    state = torch.random.get_rng_state()
    layer = al.GroupedQueryAttention.from_multihead(mha)
    assert torch.equal(torch.random.get_rng_state(), state)  # copied weights: nothing drawn from the caller's stream
    assert (layer.num_kv_heads, layer.rope, layer.causal) == (4, False, True)
    for (name, a), (_, b) in zip(layer.state_dict().items(), mha.state_dict().items(), strict=True):
        assert torch.equal(a, b), name
    x = torch.randn(2, 6, 16)
    full, _ = mha(x, mask=al.causal_mask(6))
    torch.testing.assert_close(layer(x)[0], full, **TOL[torch.float32])
    theirs, _ = layer.to_torch()(x, x, x, attn_mask=~al.causal_mask(6))  # PyTorch's mask: True = may NOT attend
    torch.testing.assert_close(theirs, full, **TOL[torch.float32])
    cache = layer.new_cache(2, 6)
    pieces = [layer(x[:, t:t + 1], cache=cache)[0] for t in range(6)]
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, **TOL[torch.float32])
    encoder = al.GroupedQueryAttention.from_multihead(mha, causal=False)
    keep = torch.tensor([True, False, True, True])[:, None, None]  # (h, 1, 1): head 1 switched off
    torch.testing.assert_close(encoder(x, mask=keep)[0], mha(x, mask=keep)[0], **TOL[torch.float32])
    torch.testing.assert_close(layer(x, mask=keep)[0], mha(x, mask=keep & al.causal_mask(6))[0], **TOL[torch.float32])
    with pytest.raises(ValueError, match=r"GroupedQueryAttention.to_torch\(\): nn.MultiheadAttention has a key/value "
                                         r"head per query head and no rotary positions, got num_kv_heads=2"):
        al.GroupedQueryAttention(16, 4, 2).to_torch()


@pytest.mark.parametrize("kind, cache_type", [("preallocated", al.KVCache), ("concat", al.ConcatKVCache),
                                              ("sliding", al.SlidingWindowKVCache)])
def test_new_cache_builds_each_kind_for_the_layer(kind, cache_type):
    layer = al.GroupedQueryAttention(16, 4, 2).double()
    cache = layer.new_cache(3, 8, kind=kind, **({"window": 4} if kind == "sliding" else {}))
    assert type(cache) is cache_type and cache.dtype == torch.float64 and cache.num_kv_heads == 2
    assert (cache.batch_size, cache.head_dim) == (3, 4)


def test_batch_equal_to_sequence_equal_to_heads_catches_transposes():
    layer = al.GroupedQueryAttention(16, 4, 4).double()
    x = torch.randn(4, 4, 16, dtype=torch.float64)
    q, k, v = project(layer, x)
    expected = finish(layer, reference.grouped_query_attention(q, k, v, torch.ones(4, 4, dtype=torch.bool).tril()))
    torch.testing.assert_close(layer(x)[0], expected, **TOL[torch.float64])


def test_latent_attention_equals_its_plain_version_and_decodes_with_its_cache():
    mla = al.MultiHeadLatentAttention(24, 4, 5).double()
    x = torch.randn(2, 9, 24, dtype=torch.float64, requires_grad=True)

    def plain(x):
        q = rearrange(mla.q_proj(x), "b n (h d) -> b h n d", h=4)
        heads = reference.latent_attention(q, mla.kv_down(x), mla.k_up.weight, mla.v_up.weight,
                                           torch.ones(9, 9, dtype=torch.bool).tril())
        return mla.out_proj(rearrange(heads, "b h n d -> b n (h d)"))

    torch.testing.assert_close(mla(x), plain(x), **TOL[torch.float64])
    assert torch.autograd.gradcheck(lambda x: mla(x), (x[:1, :4].detach().requires_grad_(),))
    cache = mla.new_cache(2, 9)
    with torch.no_grad():
        pieces = [mla(x[:, s:e], cache=cache) for s, e in [(0, 4), (4, 5), (5, 6), (6, 9)]]
        torch.testing.assert_close(torch.cat(pieces, dim=1), mla(x), **TOL[torch.float64])
    assert cache.nbytes == 2 * 9 * 5 * 8 and len(cache) == 9


def test_the_latent_cache_is_smaller_than_a_multihead_cache_by_2hd_over_latent_dim():
    mla = al.MultiHeadLatentAttention(64, 8, 16)
    gqa = al.GroupedQueryAttention(64, 8, 8)
    assert gqa.new_cache(1, 100).nbytes / mla.new_cache(1, 100).nbytes == 2 * 64 / 16


def test_inputs_are_not_changed_and_dtypes_follow_the_layer():
    layer = al.GroupedQueryAttention(16, 4, 1).to(torch.float64)
    x = torch.randn(1, 3, 16, dtype=torch.float64)
    before = x.clone()
    assert layer(x)[0].dtype == torch.float64 and torch.equal(x, before)


def test_bad_inputs_name_both_values_and_the_valid_choices():
    with pytest.raises(ValueError, match=r"GroupedQueryAttention\(\): num_heads must be a multiple of num_kv_heads.*"
                                         r"got num_heads=8 and num_kv_heads=3; choose num_kv_heads from the divisors "
                                         r"of 8: \[1, 2, 4, 8\]"):
        al.GroupedQueryAttention(32, 8, 3)
    with pytest.raises(ValueError, match=r"head_dim = embed_dim / num_heads must be even, got head_dim=3 "
                                         r"\(embed_dim=12, num_heads=4\).*or pass rope=False"):
        al.GroupedQueryAttention(12, 4, 2)
    al.GroupedQueryAttention(12, 4, 2, rope=False)  # an odd head_dim is fine without rotary positions
    with pytest.raises(ValueError, match=r"embed_dim must be divisible by num_heads, got embed_dim=10 and "
                                         r"num_heads=4; choose num_heads from the divisors of 10: \[1, 2, 5, 10\]"):
        al.GroupedQueryAttention(10, 4, 2)
    with pytest.raises(TypeError, match=r"rope must be True or False, got int 1"):
        al.GroupedQueryAttention(16, 4, 2, rope=1)
    layer = al.GroupedQueryAttention(16, 4, 2)
    x = torch.randn(2, 3, 16)
    with pytest.raises(ValueError, match=r"the cache does not match the layer and input: \(batch_size, num_kv_heads, "
                                         r"head_dim\) is \(2, 4, 4\) for the cache and \(2, 2, 4\) for the layer"):
        layer(x, cache=al.KVCache(2, 4, 8, 4))
    with pytest.raises(ValueError, match=r"is \(1, 2, 4\) for the cache and \(2, 2, 4\) for the layer and x; build "
                                         r"the cache with new_cache\(batch_size=2, max_len=...\)"):
        layer(x, cache=al.KVCache(1, 2, 8, 4))
    with pytest.raises(TypeError, match=r"cache must be one of KVCache, ConcatKVCache, SlidingWindowKVCache, "
                                        r"SinkKVCache \(or None\), got dict"):
        layer(x, cache={})
    with pytest.raises(ValueError, match=r"x must have shape \(b, n, e\) with e=16.*got shape \(3, 16\)"):
        layer(torch.randn(3, 16))
    with pytest.raises(TypeError, match=r"x must have the module's dtype torch.float32"):
        layer(x.double())
    with pytest.raises(ValueError, match=r"GroupedQueryAttention.forward\(\): mask and need_weights apply only "
                                         r"without a cache"):
        layer(x, cache=layer.new_cache(2, 4), need_weights=True)
    with pytest.raises(TypeError, match=r"GroupedQueryAttention.forward\(\): need_weights must be True or False, got "
                                        r"str 'yes'"):
        layer(x, need_weights="yes")
    with pytest.raises(TypeError, match=r"GroupedQueryAttention\(\): causal must be True or False, got str 'y'"):
        al.GroupedQueryAttention(16, 4, 2, causal="y")
    with pytest.raises(ValueError, match=r"GroupedQueryAttention.new_cache\(\): window= is needed with kind='sliding' "
                                         r"and only then, got kind='preallocated' and window=3"):
        layer.new_cache(2, 4, window=3)
    with pytest.raises(ValueError, match=r"GroupedQueryAttention.new_cache\(\): the layer must be causal to keep a "
                                         r"cache .*, got causal=False; "):
        al.GroupedQueryAttention(16, 4, 2, causal=False).new_cache(2, 4)
    with pytest.raises(ValueError, match=r"^GroupedQueryAttention.forward\(\): the cache must have room for t=3 more "
                                         r"positions, got a cache holding 2 of max_len=4"):
        cache = layer.new_cache(2, 4)
        layer(x[:, :2], cache=cache)
        layer(x, cache=cache)
    mla = al.MultiHeadLatentAttention(16, 4, 6)
    with pytest.raises(ValueError, match=r"\(batch_size, latent_dim\) is \(1, 6\) for the cache and \(2, 6\)"):
        mla(x, cache=mla.new_cache(1, 8))
    with pytest.raises(TypeError, match=r"cache must be a LatentCache from new_cache\(batch_size, max_len\), got "
                                        r"KVCache"):
        mla(x, cache=al.KVCache(2, 4, 8, 4))
