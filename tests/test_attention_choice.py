"""TransformerConfig(attention=...): one model trains with every attention of the family; softmax is the default."""

from __future__ import annotations

import pytest
import torch
from _tolerances import TOL

from attention_lab import BlockLayout, GroupedQueryAttention
from attention_lab.models.attention_choice import (
    ATTENTION_TABLE,
    ATTENTIONS,
    CAUSAL_ATTENTIONS,
    attention_spec,
    build_attention,
)
from attention_lab.models.tasks import Reversal
from attention_lab.models.training import train
from attention_lab.models.transformer import TinyTransformer, TransformerConfig

SIZES = dict(vocab_size=10, max_len=8, d_model=16, num_heads=2, num_layers=2)


def test_the_default_is_plain_multihead_attention_and_naming_it_draws_the_same_weights():
    torch.manual_seed(0)
    default = TinyTransformer(TransformerConfig(**SIZES))
    torch.manual_seed(0)
    named = TinyTransformer(TransformerConfig(**SIZES, attention="softmax"))
    assert all(type(layer.attn) is GroupedQueryAttention and layer.attn.num_kv_heads == 2 and not layer.attn.rope
               and not layer.attn.causal for layer in default.layers)
    assert default.config == named.config and default.config.attention == attention_spec("softmax")
    for (name, a), (_, b) in zip(default.state_dict().items(), named.state_dict().items(), strict=True):
        assert torch.equal(a, b), name
    torch.manual_seed(0)
    TinyTransformer(TransformerConfig(**SIZES))  # the same random draws: the stream continues at the same place
    state_after_default = torch.random.get_rng_state()
    torch.manual_seed(0)
    TinyTransformer(TransformerConfig(**SIZES, attention="softmax"))
    assert torch.equal(torch.random.get_rng_state(), state_after_default)


def test_softmax_options_pick_the_layer_and_the_position_embedding():
    plain = TinyTransformer(TransformerConfig(**SIZES, causal=True))
    rope = TinyTransformer(TransformerConfig(**SIZES, causal=True, attention=attention_spec("softmax",
                                                                                            positions="rope")))
    grouped = TinyTransformer(TransformerConfig(**SIZES, causal=True, attention=attention_spec("softmax",
                                                                                               num_kv_heads=1)))
    assert plain.position_embedding is not None and plain.layers[0].attn.causal and not plain.layers[0].attn.rope
    assert rope.position_embedding is None and rope.layers[0].attn.rope and rope.config.num_kv_heads == 2
    assert grouped.position_embedding is not None and grouped.layers[0].attn.num_kv_heads == 1
    assert not grouped.layers[0].attn.rope and grouped.config.positions == "learned"
    assert "num_kv_heads=1" in repr(grouped) and "positions='rope'" in repr(rope)


def test_the_causal_attentions_are_every_attention_but_those_without_a_causal_form():
    assert set(CAUSAL_ATTENTIONS) == set(ATTENTIONS) - {"cluster", "linformer"}


@pytest.mark.parametrize("name", ATTENTIONS)
def test_every_attention_trains_a_model(name):
    torch.manual_seed(0)
    task = Reversal(seq_len=8, n_symbols=5)
    model = TinyTransformer(TransformerConfig(vocab_size=task.vocab_size, max_len=8, d_model=16, num_heads=2,
                                              num_layers=1, attention=name))
    history = train(model, task, steps=3, lr=1e-3, batch_size=4, progress=False)
    assert len(history.loss) == 3 and all(torch.isfinite(torch.tensor(history.loss)))
    assert all(p.grad is None or torch.isfinite(p.grad).all() for p in model.parameters())


@pytest.mark.parametrize("name", CAUSAL_ATTENTIONS)
def test_causal_models_ignore_future_tokens(name):
    torch.manual_seed(0)
    model = TinyTransformer(TransformerConfig(vocab_size=12, max_len=40, d_model=16, num_heads=2, num_layers=2,
                                              causal=True, attention=name)).eval()
    tokens = torch.randint(0, 12, (2, 40))
    changed = tokens.clone()
    changed[:, 25:] = (changed[:, 25:] + 1) % 12
    with torch.no_grad():
        before, after = model(tokens), model(changed)
    torch.testing.assert_close(after[:, :25], before[:, :25], atol=1e-6, rtol=1e-6)
    assert not torch.allclose(after[:, 25:], before[:, 25:])


def test_options_reach_the_attention():
    spec = attention_spec("performer", num_features=16, seed=2)
    assert spec.options["num_features"] == 16 and str(spec) == "performer"
    layout = BlockLayout.sliding_window(4) | BlockLayout.global_blocks(4, [0])
    model = TinyTransformer(TransformerConfig(vocab_size=10, max_len=32, d_model=16, num_heads=2, num_layers=1,
                                              attention=attention_spec("block_sparse", layout=layout)))
    assert model(torch.randint(0, 10, (1, 30))).shape == (1, 30, 10)
    short = TinyTransformer(TransformerConfig(vocab_size=10, max_len=32, d_model=16, num_heads=2, num_layers=1,
                                              attention=attention_spec("topk", top_k=64)))
    assert short(torch.randint(0, 10, (1, 5))).shape == (1, 5, 10)  # top_k above the length: every key


@pytest.mark.parametrize(("make", "error", "match"), [
    (lambda: TinyTransformer(TransformerConfig(vocab_size=10, max_len=8, d_model=16, num_heads=2, num_layers=1,
                                               attention="flash")), ValueError,
     r"attention must be one of 'softmax', 'block_sparse', .* got 'flash'"),
    (lambda: TinyTransformer(TransformerConfig(vocab_size=10, max_len=8, d_model=16, num_heads=2, num_layers=1,
                                               attention=3)), TypeError, r"attention must be a name"),
    (lambda: TinyTransformer(TransformerConfig(vocab_size=10, max_len=8, d_model=16, num_heads=2, num_layers=1,
                                               causal=True, attention="linformer")), ValueError,
     r"attention='linformer' has no causal form"),
    (lambda: TinyTransformer(TransformerConfig(vocab_size=10, max_len=8, d_model=16, num_heads=2, num_layers=1,
                                               causal=True, attention="cluster")), ValueError,
     r"attention='cluster' has no causal form"),
    (lambda: attention_spec("linear", rank=3), TypeError,
     r"options must be among those attention 'linear' takes, \['feature_map'\]"),
    (lambda: attention_spec("performer", num_features=0), ValueError, r"num_features must be >= 1"),
    (lambda: attention_spec("tree"), ValueError, r"attention_spec\(\): name must be one of"),
    (lambda: TinyTransformer(TransformerConfig(vocab_size=10, max_len=8, d_model=16, num_heads=2, num_layers=1,
                                               attention="linear"))(
        torch.zeros(1, 8, dtype=torch.long), head_mask=torch.ones(1, 2, dtype=torch.bool)), ValueError,
     r"TinyTransformer.forward\(\): attention='linear' takes no mask, so no head_mask"),
    (lambda: TinyTransformer(TransformerConfig(vocab_size=10, max_len=8, d_model=16, num_heads=2, num_layers=1,
                                               attention="topk"))(
        torch.zeros(1, 8, dtype=torch.long), return_attention=True), ValueError,
     r"TinyTransformer.forward\(\): attention='topk' computes no i x j weights.*needs attention='softmax'"),
    (lambda: build_attention("block_sparse", 16, 2, max_len=8)(torch.randn(1, 8, 16),
                                                                mask=torch.ones(8, 8, dtype=torch.bool)),
     ValueError, r"HeadwiseAttention.forward\(\): attention='block_sparse' takes no mask"),
    (lambda: attention_spec("block_sparse", layout="window"), TypeError,
     r"attention_spec\(\): layout must be a BlockLayout, got str"),
])
def test_bad_choices_get_clear_errors(make, error, match):
    with pytest.raises(error, match=match):
        make()


def _model(name: str, **config: object) -> TinyTransformer:
    torch.manual_seed(0)
    sizes = dict(vocab_size=11, max_len=12, d_model=16, num_heads=2, num_layers=2,
                 causal=ATTENTION_TABLE[name].not_causal is None) | config
    return TinyTransformer(TransformerConfig(**sizes, attention=name)).double().eval()


@pytest.mark.parametrize("name", ATTENTIONS)
def test_every_entry_of_the_table_runs_decodes_and_refuses_what_it_does_not_support(name):
    entry, model = ATTENTION_TABLE[name], _model(name)
    tokens = torch.randint(0, 11, (2, 12), generator=torch.Generator().manual_seed(1))
    assert all(layer.attn.causal == model.config.causal for layer in model.layers)
    with torch.no_grad():
        full = model(tokens)  # (b, i, vocab)
        assert full.shape == (2, 12, 11)
        head_mask = torch.ones(2, 2, dtype=torch.bool)
        if entry.mask:
            torch.testing.assert_close(model(tokens, head_mask=head_mask), full, **TOL[torch.float64])
        else:
            with pytest.raises(ValueError, match=rf"TinyTransformer.forward\(\): attention='{name}' takes no mask"):
                model(tokens, head_mask=head_mask)
            with pytest.raises(ValueError, match=r"takes no mask"):  # the module itself says so too
                model.layers[0].attn(torch.randn(2, 12, 16, dtype=torch.float64), mask=torch.ones(12, 12).bool())
        if entry.weights:
            assert model(tokens, return_attention=True)[1].shape == (2, 2, 2, 12, 12)  # (layers, b, h, i, j)
        else:
            with pytest.raises(ValueError, match=rf"attention='{name}' computes no i x j weights"):
                model(tokens, return_attention=True)
        if entry.cache is None:
            with pytest.raises(ValueError, match=r"TinyTransformer.new_caches\(\): the model must keep a cache .*, got "
                                                 r"(attention=|an encoder)"):
                model.new_caches(2, 12)
            return
        caches = model.new_caches(2, 12)
        steps = [model(tokens[:, a:b], caches=caches) for a, b in [(0, 5), (5, 6), (6, 7), (7, 12)]]
        torch.testing.assert_close(torch.cat(steps, dim=1), full, **TOL[torch.float64])


@pytest.mark.parametrize("name", CAUSAL_ATTENTIONS)
def test_every_decoder_generates_past_max_len_with_or_without_its_cache(name):
    model = _model(name)
    prompt = torch.randint(0, 11, (2, 4), generator=torch.Generator().manual_seed(2))
    tokens = model.generate(prompt, 11)  # 15 positions, max_len 12: the context slides
    assert tokens.shape == (2, 15) and torch.equal(tokens[:, :4], prompt)
    assert torch.equal(model.generate(prompt, 11, use_cache=False), tokens)
    with torch.no_grad():  # the last token: the most likely one after the last max_len tokens
        assert torch.equal(model(tokens[:, -13:-1])[:, -1].argmax(-1), tokens[:, -1])
