"""Lesson 14's changes to softmax attention: sink logits (gpt-oss), soft-capping (Gemma 2), QK-norm, the output gate
(gated attention), the StreamingLLM cache; each against its plain form in attention_lab.reference, each property its
paper states, its bad inputs, and the model options that train with it."""

import math

import pytest
import torch
from _tolerances import TOL
from einops import rearrange

import attention_lab as al
from attention_lab import reference
from attention_lab.models.attention_choice import attention_spec
from attention_lab.models.transformer import TinyTransformer, TransformerConfig

F64 = TOL[torch.float64]


def qkv(b=2, h=3, i=5, j=7, d=5, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(b, h, i, d, generator=g, dtype=dtype), torch.randn(b, h, j, d, generator=g, dtype=dtype),
            torch.randn(b, h, j, d, generator=g, dtype=dtype))


# --- sink logits ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(2, 3, 5, 7, 5), (3, 3, 3, 3, 3), (1, 2, 1, 1, 4)])  # i != j, b == h == i, length 1
def test_sinks_equal_the_reference_values_and_gradients(shape):
    b, h, i, j, d = shape
    q, k, v = qkv(b, h, i, j, d)
    sinks = torch.linspace(-1.0, 2.0, h, dtype=torch.float64)
    mask = torch.rand(b, 1, i, j, generator=torch.Generator().manual_seed(1)) > 0.3
    ours, w = al.attention_with_sinks(q, k, v, sinks, mask)
    ref, w_ref = reference.attention_with_sinks(q, k, v, sinks, mask)
    torch.testing.assert_close(ours, ref, **F64)
    torch.testing.assert_close(w, w_ref, **F64)
    inputs = [t.clone().requires_grad_() for t in (q, k, v, sinks)]
    assert torch.autograd.gradcheck(lambda *t: al.attention_with_sinks(*t, mask)[0], inputs, fast_mode=True)


def test_sink_rows_sum_below_one_and_a_row_with_no_key_gives_zeros():
    q, k, v = qkv()
    sinks = torch.zeros(3, dtype=torch.float64)
    mask = torch.ones(5, 7, dtype=torch.bool)
    mask[2] = False  # query 2 may attend nowhere
    out, w = al.attention_with_sinks(q, k, v, sinks, mask)
    totals = w.sum(-1)
    assert (totals[..., [0, 1, 3, 4]] < 1).all() and (totals[..., [0, 1, 3, 4]] > 0).all()
    assert (out[:, :, 2] == 0).all() and (w[:, :, 2] == 0).all()
    # a very negative sink is plain softmax; the sink takes exactly exp(s) / (exp(s) + sum exp)
    plain, _ = al.attention_with_sinks(q, k, v, torch.full((3,), -1e4, dtype=torch.float64))
    torch.testing.assert_close(plain, al.scaled_dot_product_attention(q, k, v)[0], **F64)
    scores = q @ k.transpose(-2, -1) / math.sqrt(5)
    _, w = al.attention_with_sinks(q, k, v, sinks)
    torch.testing.assert_close(1 - w.sum(-1), 1 / (1 + scores.exp().sum(-1)), **F64)
    q.requires_grad_()
    al.attention_with_sinks(q, k, v, sinks, mask)[0].sum().backward()
    assert torch.isfinite(q.grad).all()


def test_sinks_stay_finite_for_large_scores_and_do_not_touch_their_inputs():
    q, k, v = qkv()
    q = q * 1e4
    before = [t.clone() for t in (q, k, v)]
    out, _ = al.attention_with_sinks(q, k, v, torch.tensor([0.0, 1e3, -5.0], dtype=torch.float64))
    assert torch.isfinite(out).all()
    for t, old in zip((q, k, v), before):
        assert torch.equal(t, old)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_sinks_in_half_precision_are_no_worse_than_twice_a_naive_same_dtype_version(dtype):
    q, k, v = qkv(dtype=torch.float64)
    sinks = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64)
    exact, _ = reference.attention_with_sinks(q, k, v, sinks)
    ours, _ = al.attention_with_sinks(q.to(dtype), k.to(dtype), v.to(dtype), sinks.to(dtype))
    naive, _ = reference.attention_with_sinks(q.to(dtype), k.to(dtype), v.to(dtype), sinks.to(dtype))
    assert ours.dtype == dtype
    assert (ours.double() - exact).abs().max() <= 2 * (naive.double() - exact).abs().max() + 1e-3


def test_sinks_bad_inputs():
    q, k, v = qkv()
    with pytest.raises(ValueError, match=r"^attention_with_sinks\(\): sink_logits must hold one logit per head, "
                                         r"shape \(3,\) .*got shape \(2,\); pass a tensor of 3 numbers"):
        al.attention_with_sinks(q, k, v, torch.zeros(2, dtype=torch.float64))
    with pytest.raises(TypeError, match=r"^softmax_with_sinks\(\): sink_logits must share the scores' dtype"):
        al.softmax_with_sinks(torch.zeros(1, 3, 2, 2), torch.zeros(3, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"^softmax_with_sinks\(\): scores must have a heads axis"):
        al.softmax_with_sinks(torch.zeros(2, 2), torch.zeros(2))
    with pytest.raises(ValueError, match=r"sink_logits must be finite, got \[-inf\]"):
        al.softmax_with_sinks(torch.zeros(1, 1, 2, 2), torch.tensor([float("-inf")]))
    with pytest.raises(TypeError, match=r"^attention_with_sinks\(\): mask must be bool"):
        al.attention_with_sinks(q, k, v, torch.zeros(3, dtype=torch.float64), torch.ones(5, 7, dtype=torch.float64))


# --- soft-capping ----------------------------------------------------------------------------------------------------

def test_softcap_is_bounded_about_the_identity_for_small_scores_and_equals_the_reference():
    scores = torch.tensor([-1e4, -60.0, -1.0, 0.0, 0.5, 49.0, 1e4, float("-inf")], dtype=torch.float64)
    capped = al.softcap(scores, 50.0)
    assert (capped.abs() <= 50).all() and capped[-1] == -50  # -inf too: cap first, then mask (as Gemma 2)
    assert (capped[1:-2].abs() < 50).all()  # strictly inside for scores that tanh does not round to 1
    small = torch.linspace(-0.5, 0.5, 11, dtype=torch.float64)
    assert ((al.softcap(small, 50.0) - small).abs() <= small.abs() ** 3 / (3 * 50.0**2) + 1e-15).all()  # tanh series
    torch.testing.assert_close(capped[:-1], reference.softcap(scores[:-1], 50.0), **F64)
    x = torch.randn(4, 6, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: al.softcap(t, 2.0), (x,))
    x = torch.tensor([0.0, 100.0], dtype=torch.float64, requires_grad=True)
    al.softcap(x, 50.0).sum().backward()  # the slope 1 - tanh^2(s / c): 1 at 0, 1 - tanh(2)^2 at s = 2c
    torch.testing.assert_close(x.grad, torch.tensor([1.0, 1 - math.tanh(2.0) ** 2], dtype=torch.float64), **F64)


def test_softcap_half_precision_and_bad_inputs():
    scores = torch.tensor([1.0, 30.0, 300.0])
    for dtype in (torch.float16, torch.bfloat16):
        torch.testing.assert_close(al.softcap(scores.to(dtype), 50.0).float(), al.softcap(scores, 50.0),
                                   **TOL[dtype])
    with pytest.raises(ValueError, match=r"^softcap\(\): cap must be a finite number > 0, got cap=0; Gemma 2"):
        al.softcap(scores, 0)
    with pytest.raises(TypeError, match=r"^softcap\(\): scores must have a floating dtype"):
        al.softcap(torch.tensor([1, 2]), 5.0)


# --- QK-norm ---------------------------------------------------------------------------------------------------------

def test_qk_norm_equals_the_reference_and_bounds_the_scores():
    q, k, v = qkv(d=5)
    gq, gk = torch.linspace(0.5, 1.5, 5, dtype=torch.float64), torch.linspace(2.0, 1.0, 5, dtype=torch.float64)
    nq, nk = al.qk_norm(q, k, gq, gk)
    ours = al.scaled_dot_product_attention(nq, nk, v)
    ref = reference.qk_norm_attention(q, k, v, gq, gk)
    for a, b in zip(ours, ref):
        torch.testing.assert_close(a, b, **F64)
    inputs = [t.clone().requires_grad_() for t in (q, k, gq, gk)]
    both = lambda *t: al.qk_norm(*t)[0].sum() + al.qk_norm(*t)[1].sum()
    assert torch.autograd.gradcheck(both, inputs, fast_mode=True)
    # with gains 1, every score q.k / sqrt(d) lies within sqrt(d) (Cauchy-Schwarz), however large q and k are
    ones = torch.ones(5, dtype=torch.float64)
    nq, nk = al.qk_norm(1e3 * q, k, ones, ones)
    assert (al.attention_scores(nq, nk).abs() <= math.sqrt(5) + 1e-9).all()


def test_qk_norm_bad_inputs():
    q, k, _ = qkv(d=4)
    with pytest.raises(ValueError, match=r"^qk_norm\(\): q_weight must have shape \(d,\) = \(4,\).*got shape \(5,\)"):
        al.qk_norm(q, k, torch.ones(5, dtype=torch.float64), torch.ones(4, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"^QKNorm\(\): eps must be a finite number > 0"):
        al.QKNorm(4, eps=0.0)


# --- the output gate -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("per_head", [False, True])
def test_output_gate_equals_the_reference(per_head):
    torch.manual_seed(0)
    gate = al.OutputGate(12, 3, per_head=per_head).double()
    x = torch.randn(2, 5, 12, dtype=torch.float64)
    heads = torch.randn(2, 3, 5, 4, dtype=torch.float64)
    scores = rearrange(gate.proj(x), "b i (h d) -> b h i d", h=3)  # (b, h, i, d or 1)
    torch.testing.assert_close(gate(x, heads), reference.gated_attention(heads, scores), **F64)
    out = gate(x, heads)
    assert (out.abs() <= heads.abs()).all()  # a sigmoid gate only shrinks


def test_output_gate_bad_inputs():
    with pytest.raises(ValueError, match=r"^gate_heads\(\): gate_scores must have the heads' shape \(2, 3, 5, 4\) or "
                                         r"end in 1"):
        al.gate_heads(torch.zeros(2, 3, 5, 4), torch.zeros(2, 3, 5, 2))
    with pytest.raises(ValueError, match=r"^OutputGate\(\): embed_dim must be divisible by num_heads"):
        al.OutputGate(10, 3)


# --- the StreamingLLM cache ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("sinks, window", [(1, 3), (4, 5), (0, 4), (2, 1)])
def test_sink_cache_decoding_equals_the_streaming_reference(sinks, window):
    torch.manual_seed(0)
    layer = al.GroupedQueryAttention(12, 2, 2, rope=False).double()
    x = torch.randn(2, 13, 12, dtype=torch.float64)
    cache = al.SinkKVCache(2, 2, sinks, window, 6, dtype=torch.float64)
    first = min(sinks + window, 3)
    steps = [layer(x[:, :first], cache=cache)[0]] + [layer(x[:, t:t + 1], cache=cache)[0] for t in range(first, 13)]
    q, k, v = (rearrange(p(x), "b n (h d) -> b h n d", h=2) for p in (layer.q_proj, layer.k_proj, layer.v_proj))
    heads, _ = reference.streaming_attention(q, k, v, sinks=sinks, window=window)
    expected = layer.out_proj(rearrange(heads, "b h n d -> b n (h d)"))
    torch.testing.assert_close(torch.cat(steps, dim=1), expected, **F64)
    assert len(cache) == sinks + window and cache.nbytes == 2 * 2 * 2 * (sinks + window) * 6 * 8
    assert sorted(cache.positions.tolist()) == list(range(sinks)) + list(range(13 - window, 13))


def test_sink_cache_restores_and_refuses_long_chunks_once_full():
    cache = al.SinkKVCache(1, 1, 1, 2, 2)
    cache.append(torch.zeros(1, 1, 3, 2), torch.zeros(1, 1, 3, 2))
    state = cache.snapshot()
    cache.append(torch.ones(1, 1, 1, 2), torch.ones(1, 1, 1, 2))
    cache.restore(state)
    assert cache.offset == 3 and (cache.keys == 0).all()
    with pytest.raises(ValueError, match=r"^SinkKVCache.append\(\): t must be 1 once the cache is full"):
        cache.append(torch.zeros(1, 1, 2, 2), torch.zeros(1, 1, 2, 2))
    with pytest.raises(ValueError, match=r"^SinkKVCache\(\): window must be"):
        al.SinkKVCache(1, 1, 1, 0, 2)


# --- the model's options ---------------------------------------------------------------------------------------------

def test_layer_options_equal_their_plain_forms():
    torch.manual_seed(0)
    layer = al.GroupedQueryAttention(12, 3, 3, rope=False, qk_norm=True, output_gate=True, sink_logits=True,
                                     softcap=2.0).double()
    with torch.no_grad():
        layer.sinks.copy_(torch.tensor([0.5, -1.0, 2.0]))
        layer.qk_norm.q_weight.mul_(1.5)
    x = torch.randn(2, 6, 12, dtype=torch.float64)
    q, k, v = (rearrange(p(x), "b n (h d) -> b h n d", h=3) for p in (layer.q_proj, layer.k_proj, layer.v_proj))
    q, k = reference.rms_norm(q, layer.qk_norm.q_weight), reference.rms_norm(k, layer.qk_norm.k_weight)
    scores = reference.softcap(q @ k.transpose(-2, -1) / 2.0, 2.0)  # d = 4
    scores = scores.masked_fill(~al.causal_mask(6), float("-inf"))
    sink = layer.sinks[:, None, None].expand(2, 3, 6, 1)
    weights = torch.softmax(torch.cat([scores, sink], dim=-1), dim=-1)[..., :-1]
    gate = rearrange(layer.gate.proj(x), "b i (h d) -> b h i d", h=3)
    heads = reference.gated_attention(weights @ v, gate)
    ours, w = layer(x, need_weights=True)
    torch.testing.assert_close(ours, layer.out_proj(rearrange(heads, "b h n d -> b n (h d)")), **F64)
    torch.testing.assert_close(w, weights, **F64)


def test_a_model_trains_with_every_option_and_its_cache_decodes_as_the_whole_sequence():
    spec = attention_spec("softmax", qk_norm=True, output_gate=True, sink_logits=True, softcap=30.0)
    torch.manual_seed(0)
    model = TinyTransformer(TransformerConfig(vocab_size=7, max_len=9, d_model=8, num_heads=2, num_layers=1,
                                              causal=True, attention=spec))
    tokens = torch.randint(0, 7, (2, 9))
    model(tokens).sum().backward()
    assert all(p.grad is not None for p in model.parameters())
    caches = model.new_caches(2, 9)
    steps = torch.cat([model(tokens[:, t:t + 1], caches=caches) for t in range(9)], dim=1)
    torch.testing.assert_close(steps, model(tokens), **TOL[torch.float32])
    with pytest.raises(TypeError, match=r"^attention_spec\(\): qk_norm must be True or False, got int 1"):
        attention_spec("softmax", qk_norm=1)
    with pytest.raises(ValueError, match=r"^attention_spec\(\): softcap must be a finite number > 0"):
        attention_spec("softmax", softcap=-1.0)
