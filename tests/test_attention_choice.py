"""TinyTransformer(attention=...): one model trains with every attention of the family; the default is unchanged."""

from __future__ import annotations

import pytest
import torch

from attention_lab import BlockLayout, MultiHeadAttention
from attention_lab.models.attention_choice import ATTENTIONS, attention_spec, build_attention
from attention_lab.models.tasks import Reversal
from attention_lab.models.training import train
from attention_lab.models.transformer import TinyTransformer

CAUSAL = [name for name in ATTENTIONS if name not in ("cluster", "linformer")]


def test_the_default_builds_the_same_model_as_before():
    torch.manual_seed(0)
    default = TinyTransformer(10, 16, 2, 2, max_len=8)
    torch.manual_seed(0)
    named = TinyTransformer(10, 16, 2, 2, max_len=8, attention="softmax")
    assert all(type(layer.attn) is MultiHeadAttention for layer in default.layers)
    for (name, a), (_, b) in zip(default.state_dict().items(), named.state_dict().items(), strict=True):
        assert torch.equal(a, b), name
    torch.manual_seed(0)
    TinyTransformer(10, 16, 2, 2, max_len=8)  # the same random draws: the stream continues at the same place
    state_after_default = torch.random.get_rng_state()
    torch.manual_seed(0)
    TinyTransformer(10, 16, 2, 2, max_len=8, attention="softmax")
    assert torch.equal(torch.random.get_rng_state(), state_after_default)


@pytest.mark.parametrize("name", ATTENTIONS)
def test_every_attention_trains_a_model(name):
    torch.manual_seed(0)
    task = Reversal(seq_len=8, n_symbols=5)
    model = TinyTransformer(task.vocab_size, 16, 2, 1, max_len=8, attention=name)
    history = train(model, task, steps=3, lr=1e-3, batch_size=4, progress=False)
    assert len(history.loss) == 3 and all(torch.isfinite(torch.tensor(history.loss)))
    assert all(p.grad is None or torch.isfinite(p.grad).all() for p in model.parameters())


@pytest.mark.parametrize("name", CAUSAL)
def test_causal_models_ignore_future_tokens(name):
    torch.manual_seed(0)
    model = TinyTransformer(12, 16, 2, 2, max_len=40, causal=True, attention=name).eval()
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
    model = TinyTransformer(10, 16, 2, 1, max_len=32, attention=attention_spec("block_sparse", layout=layout))
    assert model(torch.randint(0, 10, (1, 30))).shape == (1, 30, 10)
    short = TinyTransformer(10, 16, 2, 1, max_len=32, attention=attention_spec("topk", top_k=64))
    assert short(torch.randint(0, 10, (1, 5))).shape == (1, 5, 10)  # top_k above the length: every key


@pytest.mark.parametrize(("make", "error", "match"), [
    (lambda: TinyTransformer(10, 16, 2, 1, max_len=8, attention="flash"), ValueError,
     r"attention must be one of 'softmax', 'block_sparse', .* got 'flash'"),
    (lambda: TinyTransformer(10, 16, 2, 1, max_len=8, attention=3), TypeError, r"attention must be a name"),
    (lambda: TinyTransformer(10, 16, 2, 1, max_len=8, causal=True, attention="linformer"), ValueError,
     r"attention='linformer' has no causal form"),
    (lambda: TinyTransformer(10, 16, 2, 1, max_len=8, causal=True, attention="cluster"), ValueError,
     r"attention='cluster' has no causal form"),
    (lambda: attention_spec("linear", rank=3), TypeError, r"attention 'linear' takes the options \['feature_map'\]"),
    (lambda: attention_spec("performer", num_features=0), ValueError, r"num_features must be >= 1"),
    (lambda: attention_spec("tree"), ValueError, r"attention_spec\(\): name must be one of"),
    (lambda: TinyTransformer(10, 16, 2, 1, max_len=8, attention="linear")(
        torch.zeros(1, 8, dtype=torch.long), head_mask=torch.ones(1, 2, dtype=torch.bool)), ValueError,
     r"linear attention\(\): takes no mask other than the causal one"),
    (lambda: TinyTransformer(10, 16, 2, 1, max_len=8, attention="topk")(
        torch.zeros(1, 8, dtype=torch.long), return_attention=True), ValueError,
     r"return_attention=True needs attention='softmax'"),
    (lambda: build_attention("block_sparse", 16, 2, max_len=8)(torch.randn(1, 8, 16),
                                                                mask=torch.ones(8, 8, dtype=torch.bool)),
     ValueError, r"takes no mask other than the causal one"),
])
def test_bad_choices_get_clear_errors(make, error, match):
    with pytest.raises(error, match=match):
        make()
