"""Interleaved local and global layers: the pattern, its KV-cache bytes against the plain count, and a stack of
local and global layers in the tiny Transformer (training forward, decoding with each layer's cache)."""

from __future__ import annotations

import pytest
import torch

import attention_lab as al
from attention_lab import reference
from attention_lab.models.transformer import TinyTransformer, TransformerConfig


def test_the_pattern_puts_one_global_layer_after_each_group_of_local_ones():
    windows = al.interleaved_windows(12, window=1024, local_per_global=5)
    assert al.layer_pattern(windows) == "LLLLLG" * 2
    assert [w for w in windows if w is not None] == [1024] * 10
    assert al.layer_pattern(al.interleaved_windows(5, window=4, local_per_global=1)) == "LGLGL"
    assert al.interleaved_windows(3, window=4, local_per_global=0) == (None, None, None)


@pytest.mark.parametrize("seq_len", [1, 100, 1024, 1025, 131072])
@pytest.mark.parametrize("dtype, bytes_per_value", [(torch.bfloat16, 2), (torch.float32, 4), (torch.float64, 8)])
def test_cache_bytes_equal_the_plain_count(seq_len, dtype, bytes_per_value):
    windows = al.interleaved_windows(62, window=1024, local_per_global=5)
    fast = al.interleaved_kv_cache_bytes(windows, num_kv_heads=16, head_dim=128, seq_len=seq_len, batch_size=3,
                                         bytes_per_value=bytes_per_value)
    plain = reference.interleaved_kv_cache_bytes(windows, num_kv_heads=16, head_dim=128, seq_len=seq_len,
                                                 batch_size=3, dtype=dtype)
    assert fast == plain


def test_cache_bytes_by_hand():
    """Local layers stop growing at their window; global ones keep growing; all-global is kv_cache_bytes."""
    windows = (4, 4, None)
    per_position = 2 * 2 * 3 * 2  # K and V, 2 kv heads, head_dim 3, 2 bytes
    assert al.interleaved_kv_cache_bytes(windows, num_kv_heads=2, head_dim=3, seq_len=3) == 3 * 3 * per_position
    assert al.interleaved_kv_cache_bytes(windows, num_kv_heads=2, head_dim=3, seq_len=10) == (4 + 4 + 10) * per_position
    assert al.interleaved_kv_cache_bytes((None,) * 4, num_kv_heads=2, head_dim=3, seq_len=10) == al.kv_cache_bytes(
        num_layers=4, num_kv_heads=2, head_dim=3, seq_len=10)


def test_a_local_layer_sees_only_its_window():
    torch.manual_seed(0)
    layer = al.GroupedQueryAttention(8, 2, 2, rope=False, causal=True, window=3).double()
    x = torch.randn(2, 9, 8, dtype=torch.float64)
    _, weights = layer(x, need_weights=True)
    band = al.sliding_window_mask(9, 3, causal=True)
    assert bool((weights[..., ~band] == 0).all()) and bool((weights[..., band] > 0).all())
    encoder = al.GroupedQueryAttention(8, 2, 2, rope=False, causal=False, window=2).double()
    _, weights = encoder(x, need_weights=True)
    assert torch.equal(weights[0, 0] > 0, al.sliding_window_mask(9, 2))


def test_an_interleaved_decoder_decodes_with_its_caches_as_the_whole_sequence():
    torch.manual_seed(0)
    windows = al.interleaved_windows(3, window=3, local_per_global=2)
    config = TransformerConfig(vocab_size=11, max_len=16, d_model=8, num_heads=2, num_layers=3, causal=True,
                               windows=windows)
    model = TinyTransformer(config).double().eval()
    tokens = torch.randint(0, 11, (2, 10))
    whole = model(tokens)
    caches = model.new_caches(2, 16)
    assert [getattr(c, "window", None) for c in caches] == [3, 3, None]
    stepped = torch.cat([model(tokens[:, :4], caches=caches)] + [model(tokens[:, t:t + 1], caches=caches)
                                                               for t in range(4, 10)], dim=1)
    torch.testing.assert_close(stepped, whole)
    global_only = TinyTransformer(TransformerConfig(vocab_size=11, max_len=16, d_model=8, num_heads=2, num_layers=3,
                                                    causal=True)).double()
    global_only.load_state_dict(model.state_dict())
    assert not torch.allclose(global_only(tokens), whole)  # the windows change what the model computes


def test_windows_are_checked_where_they_are_given():
    with pytest.raises(TypeError, match=r"TransformerConfig\(\): windows must be a tuple of one window per layer"):
        TransformerConfig(vocab_size=5, max_len=8, d_model=8, num_heads=2, num_layers=2, windows=(4,))
    with pytest.raises(ValueError, match="windows applies to attention='softmax' only"):
        TransformerConfig(vocab_size=5, max_len=8, d_model=8, num_heads=2, num_layers=1, windows=(4,),
                          attention="linear")
    with pytest.raises(ValueError, match=r"windows\[...\] must be >= 1"):
        TransformerConfig(vocab_size=5, max_len=8, d_model=8, num_heads=2, num_layers=1, windows=(0,))
    with pytest.raises(ValueError, match=r"GroupedQueryAttention\(\): window must be >= 1"):
        al.GroupedQueryAttention(8, 2, 2, window=0)
    layer = al.GroupedQueryAttention(8, 2, 2, window=4)
    with pytest.raises(ValueError, match="the layer's own window 4"):
        layer.new_cache(1, 8, kind="sliding", window=2)
    with pytest.raises(ValueError, match="needs a SlidingWindowKVCache of that window"):
        layer(torch.randn(1, 2, 8), cache=al.GroupedQueryAttention(8, 2, 2).new_cache(1, 8))
    with pytest.raises(ValueError, match=r"interleaved_windows\(\): local_per_global must be >= 0"):
        al.interleaved_windows(4, window=2, local_per_global=-1)
    with pytest.raises(TypeError, match=r"interleaved_kv_cache_bytes\(\): windows must be a non-empty sequence"):
        al.interleaved_kv_cache_bytes("LLG", num_kv_heads=1, head_dim=1, seq_len=1)
