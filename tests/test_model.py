"""TinyTransformer (shapes, masks, pre/post/none LayerNorm against PyTorch, head ablation)."""

import pytest
import torch
from _tolerances import TOL
from torch import nn

from attention_lab.models.transformer import TinyTransformer, TransformerConfig


def model(norm="pre", causal=False, layers=2, heads=2, d_model=12, vocab=7, max_len=9, seed=0):
    torch.manual_seed(seed)
    return TinyTransformer(TransformerConfig(vocab_size=vocab, max_len=max_len, d_model=d_model, num_heads=heads,
                                             num_layers=layers, norm=norm, causal=causal)).eval()


def tokens(b=3, n=6, vocab=7, seed=1):
    return torch.randint(0, vocab, (b, n), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("norm", ["pre", "post", "none"])
@pytest.mark.parametrize("causal", [False, True])
def test_shapes_and_attention_rows(norm, causal):
    m = model(norm, causal, layers=3, heads=3)
    x = tokens(b=3, n=5)  # b == h == layers: a wrong axis order would still "fit"
    logits, attention = m(x, return_attention=True)
    assert logits.shape == (3, 5, 7)
    assert attention.shape == (3, 3, 3, 5, 5)  # (layers, b, h, i, j)
    torch.testing.assert_close(attention.sum(-1), torch.ones(3, 3, 3, 5))
    torch.testing.assert_close(m(x), logits)  # the weights path and the fast path agree
    one = m(tokens(b=1, n=1))
    assert one.shape == (1, 1, 7)


def test_causal_output_at_t_ignores_later_tokens():
    m = model(causal=True)
    x = tokens(b=2, n=8)
    changed = x.clone()
    changed[:, 5:] = (changed[:, 5:] + 1) % 7
    out, out_changed = m(x), m(changed)
    torch.testing.assert_close(out[:, :5], out_changed[:, :5])
    assert not torch.allclose(out[:, 5:], out_changed[:, 5:])
    _, attention = m(x, return_attention=True)
    future = torch.ones(8, 8, dtype=torch.bool).triu(1)
    assert (attention[..., future] == 0).all()


def test_an_encoder_sees_the_whole_sequence():
    m = model(causal=False)
    x = tokens(b=2, n=8)
    changed = x.clone()
    changed[:, -1] = (changed[:, -1] + 1) % 7
    assert not torch.allclose(m(x)[:, 0], m(changed)[:, 0])


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_one_block_equals_pytorchs_transformer_encoder_layer(norm):
    m = model(norm, layers=1, heads=3, d_model=12)
    block = m.layers[0]
    ref = nn.TransformerEncoderLayer(12, 3, dim_feedforward=48, dropout=0.0, activation="gelu", batch_first=True,
                                     norm_first=norm == "pre").eval()
    with torch.no_grad():
        ref.self_attn = block.attn.to_torch()
        ref.linear1.load_state_dict(block.ff[0].state_dict())
        ref.linear2.load_state_dict(block.ff[2].state_dict())
        ref.norm1.load_state_dict(block.norm1.state_dict())
        ref.norm2.load_state_dict(block.norm2.state_dict())
        for ln in (block.norm1, block.norm2):  # non-trivial LayerNorm parameters, so misplacing one shows
            ln.weight.uniform_(0.5, 1.5)
            ln.bias.uniform_(-0.5, 0.5)
        ref.norm1.load_state_dict(block.norm1.state_dict())
        ref.norm2.load_state_dict(block.norm2.state_dict())
    x = torch.randn(4, 5, 12)
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    torch.testing.assert_close(block(x)[0], ref(x), **TOL[torch.float32])
    torch.testing.assert_close(block(x, causal)[0], ref(x, src_mask=~causal), **TOL[torch.float32])


def test_norm_switch_changes_where_layernorm_sits():
    pre, post, none = model("pre"), model("post"), model("none")
    assert isinstance(pre.final_norm, nn.LayerNorm) and isinstance(post.final_norm, nn.Identity)
    assert not any(isinstance(m, nn.LayerNorm) for m in none.modules())
    post.load_state_dict(pre.state_dict(), strict=False)  # same parameters (but final_norm), other wiring
    x = tokens()
    assert not torch.allclose(pre(x), post(x))
    outputs = {}
    hook = post.layers[0].register_forward_hook(lambda mod, args, out: outputs.update(post=out[0]))
    pre.layers[0].register_forward_hook(lambda mod, args, out: outputs.update(pre=out[0]))
    pre(x), post(x)
    hook.remove()
    # post-LN ends each block with LayerNorm (unit gain, zero bias at init): every token is normalised
    torch.testing.assert_close(outputs["post"].mean(-1), torch.zeros(3, 6), atol=1e-5, rtol=0)
    torch.testing.assert_close(outputs["post"].var(-1, unbiased=False), torch.ones(3, 6), atol=1e-3, rtol=0)
    assert outputs["pre"].mean(-1).abs().max() > 1e-2  # pre-LN leaves the residual stream as it is


def test_head_mask_equals_zeroing_that_heads_slice_of_the_output_projection():
    m = model(layers=2, heads=3, d_model=12)
    x = tokens()
    keep_all = torch.ones(2, 3, dtype=torch.bool)
    torch.testing.assert_close(m(x, head_mask=keep_all), m(x))
    head_mask = keep_all.clone()
    head_mask[1, 2] = False
    ablated = m(x, head_mask=head_mask)
    reference = model(layers=2, heads=3, d_model=12)
    with torch.no_grad():
        reference.layers[1].attn.out_proj.weight[:, 8:12] = 0  # head 2 owns features 8..11 of e = h*d
    torch.testing.assert_close(ablated, reference(x), **TOL[torch.float32])
    _, attention = m(x, return_attention=True, head_mask=head_mask)
    assert (attention[1, :, 2] == 0).all() and (attention[0] > 0).all()
    causal = model(causal=True, heads=3, d_model=12)
    torch.testing.assert_close(causal(x, head_mask=keep_all), causal(x))


def test_same_seed_same_model():
    x = tokens()
    torch.testing.assert_close(model(seed=3)(x), model(seed=3)(x), rtol=0, atol=0)
    assert not torch.allclose(model(seed=3)(x), model(seed=4)(x))


def test_every_parameter_gets_a_gradient():
    m = model("post", causal=True)
    m(tokens()).sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in m.parameters())


def test_bad_inputs_get_clear_errors():
    sizes = dict(vocab_size=5, max_len=4, d_model=8, num_heads=2, num_layers=1)
    with pytest.raises(ValueError, match=r"TransformerConfig\(\): norm must be one of 'pre', 'post', 'none', "
                                         r"got norm='middle'"):
        TransformerConfig(**sizes, norm="middle")
    with pytest.raises(ValueError, match=r"d_model must be divisible by num_heads"):
        TransformerConfig(**{**sizes, "d_model": 10, "num_heads": 3})
    with pytest.raises(ValueError, match=r"num_layers must be >= 1"):
        TransformerConfig(**{**sizes, "num_layers": 0})
    with pytest.raises(TypeError, match=r"max_len must be an int"):
        TransformerConfig(**{**sizes, "max_len": None})
    with pytest.raises(TypeError, match=r"causal must be True or False"):
        TransformerConfig(**sizes, causal="yes")
    with pytest.raises(TypeError, match=r"d_ff must be an int"):
        TransformerConfig(**sizes, d_ff=16.0)
    with pytest.raises(TypeError, match=r"missing 1 required keyword-only argument: 'num_layers'"):
        TransformerConfig(vocab_size=5, max_len=4, d_model=8, num_heads=2)
    m = model()
    with pytest.raises(TypeError, match=r"TinyTransformer.forward\(\): tokens must be integer ids"):
        m(torch.zeros(2, 3))
    with pytest.raises(ValueError, match=r"tokens must have shape \(b, i\), got shape \(3,\)"):
        m(torch.zeros(3, dtype=torch.long))
    with pytest.raises(ValueError, match=r"1 to max_len=9 positions, got 10"):
        m(torch.zeros(1, 10, dtype=torch.long))
    with pytest.raises(ValueError, match=r"tokens must hold ids in \[0, vocab_size=7\), got ids from 0 to 7"):
        m(torch.tensor([[0, 7]]))
    with pytest.raises(ValueError, match=r"head_mask must be a bool tensor of shape \(layers, h\) = \(2, 2\)"):
        m(tokens(), head_mask=torch.ones(2, 3, dtype=torch.bool))
