"""Generating with TinyTransformer: the same tokens and logits with and without a cache, the default model unchanged,
the cache-size formula and the FLOP counter checked against what the library allocates and computes."""

import pytest
import torch
from _tolerances import TOL
from torch import nn

import attention_lab as al
from attention_lab import reference
from attention_lab.core.masks import causal_mask
from attention_lab.measure.memory import measure_peak_memory
from attention_lab.models.attention_choice import attention_spec
from attention_lab.models.generate import decode, next_token_timers
from attention_lab.models.tasks import PointerLookup, Repeat, Reversal, make_generator
from attention_lab.models.training import train
from attention_lab.models.transformer import TinyTransformer, TransformerConfig


class DefaultModelWrittenOut(nn.Module):
    """The default TinyTransformer (learned positions, multi-head attention) written out from its parts."""

    def __init__(self, vocab, d, h, layers, max_len, norm, causal):
        super().__init__()
        self.causal, self.norm = causal, norm
        self.token_embedding = nn.Embedding(vocab, d)
        self.position_embedding = nn.Embedding(max_len, d)
        self.layers = nn.ModuleList()
        for _ in range(layers):
            block = nn.Module()
            block.attn = al.MultiHeadAttention(d, h)
            block.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
            block.norm1, block.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.layers.append(block)
        self.final_norm = nn.LayerNorm(d) if norm == "pre" else nn.Identity()
        self.head = nn.Linear(d, vocab)

    def forward(self, tokens):
        n = tokens.shape[1]
        x = self.token_embedding(tokens) + self.position_embedding(torch.arange(n))
        mask = causal_mask(n) if self.causal else None
        for block in self.layers:
            if self.norm == "pre":
                x = x + block.attn(block.norm1(x), mask=mask)[0]
                x = x + block.ff(block.norm2(x))
            else:
                x = block.norm1(x + block.attn(x, mask=mask)[0])
                x = block.norm2(x + block.ff(x))
        return self.head(self.final_norm(x))


@pytest.mark.parametrize("task, norm, causal", [(Reversal(seq_len=8), "pre", False),
                                                (Reversal(seq_len=8), "post", False),
                                                (PointerLookup(seq_len=8), "pre", True)])
def test_the_default_model_draws_the_same_weights_and_trains_to_the_same_losses(task, norm, causal):
    torch.manual_seed(3)
    written_out = DefaultModelWrittenOut(task.vocab_size, 32, 2, 2, 8, norm, causal)
    torch.manual_seed(3)
    now = TinyTransformer(TransformerConfig(vocab_size=task.vocab_size, max_len=8, d_model=32, num_heads=2,
                                            num_layers=2, norm=norm, causal=causal))
    assert [name for name, _ in now.named_parameters()] == [name for name, _ in written_out.named_parameters()]
    for a, b in zip(now.parameters(), written_out.parameters(), strict=True):
        assert torch.equal(a, b)
    options = dict(steps=15, lr=0.01, warmup_steps=3, batch_size=16, seed=1, progress=False)
    assert train(now, task, **options).loss == train(written_out, task, **options).loss


SOFTMAX_OPTIONS = [dict(), dict(positions="rope"), dict(num_kv_heads=2), dict(positions="rope", num_kv_heads=1)]


@pytest.mark.parametrize("options", SOFTMAX_OPTIONS,
                         ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()) or "default")
def test_generate_with_and_without_the_cache_gives_the_same_tokens_and_logits(options):
    torch.manual_seed(0)
    model = TinyTransformer(TransformerConfig(vocab_size=13, max_len=40, d_model=32, num_heads=4, num_layers=2,
                                              causal=True, attention=attention_spec("softmax", **options))).eval()
    prompt = torch.randint(0, 13, (3, 6))
    recomputed = decode(model, prompt, 25, cache="none")
    for cache in ("preallocated", "concat"):
        cached = decode(model, prompt, 25, cache=cache)
        assert torch.equal(cached.tokens, recomputed.tokens)
        torch.testing.assert_close(cached.logits, recomputed.logits, **TOL[torch.float32])
    tokens = model.generate(prompt, 25)
    assert torch.equal(tokens, recomputed.tokens) and torch.equal(tokens[:, :6], prompt)
    assert torch.equal(model.generate(prompt, 25, use_cache=False), tokens)
    assert torch.equal(model.generate(prompt[1], 4), tokens[1, :10])  # one sequence, shape (n,)
    assert torch.equal(model.generate(prompt, 0), prompt)


def test_each_step_of_decoding_is_the_full_forward_at_the_last_position():
    torch.manual_seed(1)
    model = TinyTransformer(TransformerConfig(vocab_size=11, max_len=20, d_model=16, num_heads=2, num_layers=2,
                                              causal=True,
                                              attention=attention_spec("softmax", positions="rope"))).eval()
    out = decode(model, torch.tensor([[3, 1, 4]]), 6)
    with torch.no_grad():
        for step in range(6):
            full = model(out.tokens[:, :3 + step])[:, -1]
            torch.testing.assert_close(out.logits[:, step], full, **TOL[torch.float32])
            assert out.tokens[0, 3 + step] == full.argmax(-1)


def test_a_sliding_cache_wider_than_the_sequence_changes_nothing_and_a_narrow_one_runs_past_max_len():
    torch.manual_seed(2)
    model = TinyTransformer(TransformerConfig(vocab_size=11, max_len=16, d_model=16, num_heads=2, num_layers=2,
                                              causal=True,
                                              attention=attention_spec("softmax", positions="rope"))).eval()
    prompt = torch.randint(0, 11, (2, 5))
    wide = decode(model, prompt, 10, cache="sliding", window=15)
    assert torch.equal(wide.tokens, decode(model, prompt, 10).tokens)
    long = decode(model, prompt, 60, cache="sliding", window=4)  # 65 positions with a 16-row max_len: rope has no table
    assert long.tokens.shape == (2, 65)


def test_the_repeat_task_is_the_token_k_positions_back_and_a_trained_model_writes_it():
    task = Repeat(seq_len=8)
    tokens, targets = task.sample(5, generator=make_generator(0))
    assert torch.equal(targets[:, 4:], tokens[:, :4]) and (targets[:, :4] == -100).all()
    assert (tokens[:, 4] == task.n_symbols).all() and torch.equal(tokens[:, 5:], tokens[:, :3])
    torch.manual_seed(0)
    model = TinyTransformer(TransformerConfig(vocab_size=task.vocab_size, max_len=8, d_model=32, num_heads=4,
                                              num_layers=2, causal=True,
                                              attention=attention_spec("softmax", positions="rope")))
    train(model, task, steps=100, lr=0.01, warmup_steps=10, schedule="cosine", batch_size=32, progress=False)
    copied = model.generate(tokens[:, :5], 4)[:, 5:]
    assert torch.equal(copied, tokens[:, :4])
    with pytest.raises(ValueError, match=r"seq_len must be even.*got seq_len=7; use 8"):
        Repeat(seq_len=7)


def test_kv_cache_bytes_is_what_the_caches_allocate_to_the_byte():
    assert al.kv_cache_bytes(num_layers=32, num_kv_heads=8, head_dim=128, seq_len=8192) == 2**30  # Llama-3-8B
    model = TinyTransformer(TransformerConfig(vocab_size=11, max_len=64, d_model=48, num_heads=6, num_layers=3,
                                              causal=True, attention=attention_spec("softmax", num_kv_heads=2)))
    measured = measure_peak_memory(model.new_caches, 5, 37)
    formula = al.kv_cache_bytes(num_layers=3, num_kv_heads=2, head_dim=8, seq_len=37, batch_size=5, bytes_per_value=4)
    assert measured.retained_bytes == measured.peak_bytes == formula == sum(c.nbytes for c in measured.result)
    sliding = sum(c.nbytes for c in model.new_caches(5, 1, kind="sliding", window=9))
    assert sliding == al.kv_cache_bytes(num_layers=3, num_kv_heads=2, head_dim=8, seq_len=9, batch_size=5,
                                        bytes_per_value=4)
    mla = al.MultiHeadLatentAttention(48, 6, 10)
    assert mla.new_cache(5, 37).nbytes == al.kv_cache_bytes(num_layers=1, num_kv_heads=6, head_dim=8, seq_len=37,
                                                             batch_size=5, bytes_per_value=4, latent_dim=10)


@pytest.mark.parametrize("config", [
    dict(num_layers=32, num_kv_heads=8, head_dim=128, seq_len=8192),  # Llama-3-8B
    dict(num_layers=3, num_kv_heads=2, head_dim=8, seq_len=37, batch_size=5),
    dict(num_layers=2, num_kv_heads=6, head_dim=8, seq_len=37, batch_size=5, latent_dim=10),
])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32, torch.float64, torch.float8_e4m3fn])
def test_kv_cache_bytes_equals_the_reference_count_from_tensors(config, dtype):
    ours = al.kv_cache_bytes(**config, bytes_per_value=dtype.itemsize)
    assert ours == reference.kv_cache_bytes(**config, dtype=dtype)


@pytest.mark.parametrize("shapes", [[(2, 3, 5, 4)] * 3, [(1, 2, 7, 8), (1, 2, 3, 8), (1, 2, 3, 5)],
                                    [(4, 9, 6), (4, 1, 6), (4, 1, 6)]], ids=["i=j", "i!=j, dv!=d", "one key"])
def test_count_flops_of_attention_equals_the_reference_count(shapes):
    q, k, v = (torch.randn(shape) for shape in shapes)
    expected = reference.attention_flops(q, k, v)
    assert al.count_flops(torch.nn.functional.scaled_dot_product_attention, q, k, v) == expected
    assert al.count_flops(reference.attention, q, k, v) == expected  # the written-out math, matmul by matmul


def test_count_flops_counts_the_cpu_attention_kernel():
    q = k = v = torch.randn(2, 3, 5, 4)
    assert al.count_flops(torch.nn.functional.scaled_dot_product_attention, q, k, v) == 2 * (2 * 2 * 3 * 5 * 5 * 4)
    torch.manual_seed(0)
    model = TinyTransformer(TransformerConfig(vocab_size=11, max_len=8, d_model=16, num_heads=2, num_layers=1,
                                              causal=True,
                                              attention=attention_spec("softmax", positions="rope",
                                                                       num_kv_heads=1))).eval()
    tokens = torch.randint(0, 11, (1, 8))
    e, e_kv, n = 16, 8, 8
    projections = 2 * n * (e * e + 2 * e * e_kv + e * e) + 2 * n * 2 * e * 4 * e + 2 * n * e * 11
    with torch.no_grad():
        assert al.count_flops(model, tokens) == projections + 4 * n * n * e


def test_next_token_timers_repeat_the_same_step_and_agree():
    torch.manual_seed(0)
    model = TinyTransformer(TransformerConfig(vocab_size=11, max_len=32, d_model=16, num_heads=2, num_layers=2,
                                              causal=True,
                                              attention=attention_spec("softmax", positions="rope"))).eval()
    timers = next_token_timers(model, 20, batch_size=2)
    full = timers["recompute"]()[:, -1]
    for name in ("pre-allocated cache", "concatenated cache"):
        first, second = timers[name](), timers[name]()
        torch.testing.assert_close(first[:, -1], full, **TOL[torch.float32])
        torch.testing.assert_close(second, first, rtol=0, atol=0)


@pytest.mark.parametrize("kind", ["preallocated", "concat"])
def test_a_cached_forward_continues_after_the_cached_positions(kind):
    torch.manual_seed(0)
    model = TinyTransformer(TransformerConfig(vocab_size=11, max_len=12, d_model=16, num_heads=2, num_layers=2,
                                              causal=True)).eval()
    tokens = torch.randint(0, 11, (2, 12))
    caches = model.new_caches(2, 12, kind=kind)
    with torch.no_grad():
        parts = [model(tokens[:, a:b], caches=caches) for a, b in [(0, 5), (5, 6), (6, 12)]]
        torch.testing.assert_close(torch.cat(parts, dim=1), model(tokens), **TOL[torch.float32])


def _held(caches):
    """What each cache holds now, copied: its offset and the keys and values it holds (or linear attention's S, z)."""
    if isinstance(caches[0], al.LinearAttentionState):
        return [(cache.offset, [cache.state.clone(), cache.z.clone()]) for cache in caches]
    return [(cache.offset, [cache.keys[:, :, :len(cache)].clone(), cache.values[:, :, :len(cache)].clone()])
            for cache in caches]


@pytest.mark.parametrize("attention, kind", [("softmax", "preallocated"), ("softmax", "sliding"),
                                             (attention_spec("softmax", positions="rope"), "concat"),
                                             ("linear", "preallocated")])
def test_a_cached_forward_that_fails_at_a_later_layer_leaves_every_cache_as_it_was(attention, kind):
    torch.manual_seed(0)
    model = TinyTransformer(TransformerConfig(vocab_size=11, max_len=16, d_model=16, num_heads=2, num_layers=2,
                                              causal=True, attention=attention)).double().eval()
    tokens = torch.randint(0, 11, (1, 9))
    window = dict(window=4) if kind == "sliding" else {}
    caches = model.new_caches(1, 16, kind=kind, **window)
    other = model.new_caches(2, 16, kind=kind, **window)  # layer 1 gets a cache of another batch size
    with torch.no_grad():
        model(tokens[:, :6], caches=caches)
        model(tokens[:, :6].expand(2, -1), caches=other)
        before = _held(caches)
        with pytest.raises((ValueError, TypeError)):
            model(tokens[:, 6:7], caches=[caches[0], other[1]])  # layer 0 appends, then layer 1 refuses
        after = _held(caches)
        for (offset, tensors), (offset_now, tensors_now) in zip(before, after, strict=True):
            assert offset == offset_now and all(torch.equal(a, b) for a, b in zip(tensors, tensors_now, strict=True))
        steps = [model(tokens[:, a:b], caches=caches) for a, b in [(6, 7), (7, 9)]]
    fresh = model.new_caches(1, 16, kind=kind, **window)
    with torch.no_grad():
        expected = [model(tokens[:, a:b], caches=fresh) for a, b in [(0, 6), (6, 7), (7, 9)]][1:]
    torch.testing.assert_close(torch.cat(steps, dim=1), torch.cat(expected, dim=1), rtol=0, atol=0)


def test_model_options_and_bad_generation_inputs_get_clear_errors():
    sizes = dict(vocab_size=10, max_len=8, d_model=16, num_heads=4, num_layers=1)
    with pytest.raises(ValueError, match=r"attention_spec\(\): positions must be one of 'learned', 'rope', got "
                                         r"positions='sinusoidal'"):
        attention_spec("softmax", positions="sinusoidal")
    with pytest.raises(ValueError, match=r"TransformerConfig\(\): num_heads must be a multiple of num_kv_heads .*, got "
                                         r"num_heads=4 and num_kv_heads=3; choose num_kv_heads from the divisors of 4: "
                                         r"\[1, 2, 4\]"):
        TransformerConfig(**sizes, attention=attention_spec("softmax", num_kv_heads=3))
    with pytest.raises(ValueError, match=r"d_model / num_heads must be even, got d_model=12 and num_heads=4"):
        TransformerConfig(**{**sizes, "d_model": 12}, attention=attention_spec("softmax", positions="rope"))
    with pytest.raises(TypeError, match=r"num_kv_heads must be an int, got float 2.0"):
        attention_spec("softmax", num_kv_heads=2.0)
    with pytest.raises(TypeError, match=r"options must be among those attention 'linear' takes, \['feature_map'\], got "
                                        r"\['positions'\]; "):
        attention_spec("linear", positions="rope")  # rotary positions and shared heads belong to softmax attention
    with pytest.raises(TypeError, match=r"TinyTransformer\(\): expected a TransformerConfig, got int"):
        TinyTransformer(10)
    encoder = TinyTransformer(TransformerConfig(vocab_size=10, max_len=8, d_model=16, num_heads=4, num_layers=1))
    with pytest.raises(ValueError, match=r"TinyTransformer.generate\(\): the model must be a decoder, built with "
                                         r"causal=True"):
        encoder.generate(torch.tensor([[1, 2]]), 3)
    with pytest.raises(ValueError, match=r"TinyTransformer.new_caches\(\): the model must keep a cache .*, got an "
                                         r"encoder \(causal=False\); "):
        encoder.new_caches(1, 8)
    with pytest.raises(ValueError, match=r"TinyTransformer.forward\(\): the model must keep a cache .*, got an "
                                         r"encoder \(causal=False\); "):
        encoder(torch.tensor([[1, 2]]), caches=[al.KVCache(1, 4, 8, 4)])
    with pytest.raises(ValueError, match=r"GroupedQueryAttention.forward\(\): cache must be None for an encoder's "
                                         r"attention .*, got a cache with causal=False; "):
        encoder.layers[0].attn(torch.randn(1, 2, 16), cache=al.KVCache(1, 4, 8, 4))
    model = TinyTransformer(TransformerConfig(vocab_size=10, max_len=8, d_model=16, num_heads=4, num_layers=1,
                                              causal=True))
    ones = torch.ones(1, 3, dtype=torch.long)
    assert model.generate(torch.ones(1, 5, dtype=torch.long), 5).shape == (1, 10)  # past max_len: the context slides
    with pytest.raises(ValueError, match=r"TinyTransformer.generate\(\): prompt must hold ids in \[0, "
                                         r"vocab_size=10\), got ids from 1 to 10"):
        model.generate(torch.tensor([[1, 10]]), 2)
    with pytest.raises(ValueError, match=r"^decode\(\): prompt must hold ids in \[0, vocab_size=10\), got ids from -1"):
        decode(model, torch.tensor([-1, 2]), 2)
    with pytest.raises(ValueError, match=r"prompt must hold token ids \(torch.long\) of shape \(b, n\) or \(n,\).*got "
                                         r"dtype torch.float32"):
        model.generate(torch.ones(1, 3), 2)
    with pytest.raises(ValueError, match=r"max_new_tokens must be >= 0, got max_new_tokens=-1"):
        model.generate(ones, -1)
    with pytest.raises(TypeError, match=r"use_cache must be True or False, got str 'yes'"):
        model.generate(ones, 2, use_cache="yes")
    with pytest.raises(TypeError, match=r"TinyTransformer.forward\(\): return_attention must be True or False, got "
                                        r"str 'yes'"):
        model(ones, return_attention="yes")
    with pytest.raises(ValueError, match=r"cache must be one of 'none', 'preallocated', 'concat', 'sliding', got "
                                         r"cache='ring'"):
        decode(model, ones, 2, cache="ring")
    for options in (dict(cache="sliding"), dict(window=3)):
        with pytest.raises(ValueError, match=r"^decode\(\): window= is needed with cache='sliding' and only then"):
            decode(model, ones, 2, **options)
    caches = model.new_caches(1, 8)
    with pytest.raises(TypeError, match=r"caches must be a list of one cache per layer \(1\), got 2; make them with "
                                        r"model.new_caches"):
        model(ones, caches=caches * 2)
    with pytest.raises(ValueError, match=r"a cached forward takes no head_mask"):
        model(ones, caches=caches, head_mask=torch.ones(1, 4, dtype=torch.bool))
    model(torch.ones(1, 6, dtype=torch.long), caches=caches)
    with pytest.raises(ValueError, match=r"TinyTransformer.forward\(\): after 6 cached positions, 3 tokens would reach "
                                         r"position 8, past the learned positions 0..7"):
        model(ones, caches=caches)
    assert caches[0].offset == 6
    with pytest.raises(ValueError, match=r"TinyTransformer.new_caches\(\): max_len must be at most the model's "
                                         r"max_len=8 \(its learned positions end there\), got max_len=9"):
        model.new_caches(1, 9)
    with pytest.raises(ValueError, match=r"GroupedQueryAttention.new_cache\(\): window= is needed with kind='sliding'"):
        model.new_caches(1, 8, kind="sliding")
    for name, value in (("num_layers", 0), ("seq_len", -1)):
        config = dict(num_layers=2, num_kv_heads=2, head_dim=4, seq_len=8) | {name: value}
        with pytest.raises(ValueError, match=rf"kv_cache_bytes\(\): {name} must be >= 1, got {name}={value}"):
            al.kv_cache_bytes(**config)
    with pytest.raises(TypeError, match=r"latent_dim must be an int, got float 0.5"):
        al.kv_cache_bytes(num_layers=2, num_kv_heads=2, head_dim=4, seq_len=8, latent_dim=0.5)
    with pytest.raises(TypeError, match=r"count_flops\(\): fn must be callable, got Tensor"):
        al.count_flops(torch.ones(1))


def test_a_model_whose_attention_keeps_no_cache_decodes_by_recomputation():
    prompt = torch.randint(0, 11, (1, 5), generator=torch.Generator().manual_seed(0))
    torch.manual_seed(0)
    model = TinyTransformer(TransformerConfig(vocab_size=11, max_len=32, d_model=32, num_heads=4, num_layers=2,
                                              causal=True, attention=attention_spec("performer", num_features=16)))
    assert torch.equal(model.generate(prompt, 3), model.generate(prompt, 3, use_cache=False))
    with pytest.raises(ValueError, match=r"^decode\(\): attention='performer' keeps no cache, got "
                                         r"cache='preallocated'; decode it with cache='none'"):
        decode(model, prompt, 3)
    with pytest.raises(ValueError, match=r"TinyTransformer.forward\(\): the model must keep a cache .*, got "
                                         r"attention='performer'; "):
        model(prompt, caches=[None, None])


def test_linear_attention_decodes_with_a_state_of_constant_size():
    torch.manual_seed(0)
    model = TinyTransformer(TransformerConfig(vocab_size=11, max_len=40, d_model=16, num_heads=2, num_layers=2,
                                              causal=True, attention="linear")).eval()
    prompt = torch.randint(0, 11, (2, 5), generator=torch.Generator().manual_seed(1))
    cached, recomputed = decode(model, prompt, 20), decode(model, prompt, 20, cache="none")
    assert torch.equal(cached.tokens, recomputed.tokens)
    torch.testing.assert_close(cached.logits, recomputed.logits, **TOL[torch.float32])
    caches = model.new_caches(2, 40)
    sizes = []
    with torch.no_grad():
        for a, b in [(0, 5), (5, 6), (6, 30)]:
            model(cached.tokens[:, a:b], caches=caches)
            sizes.append(sum(cache.nbytes for cache in caches))
    assert len(set(sizes)) == 1 and sizes[0] == 2 * 2 * 2 * 8 * (8 + 1) * 4  # layers, b, h, m (dv + 1), fp32
