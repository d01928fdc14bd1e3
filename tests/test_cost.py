"""attention_lab.measure.cost: the bytes of each tensor of one attention call and its FLOPs, by arithmetic, against
hand counts and PyTorch's own FLOP counter."""

from __future__ import annotations

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from attention_lab.measure.cost import AttentionMemory, attention_flops, attention_memory_bytes

FLOAT32 = 4


# ---- attention_memory_bytes ----


@pytest.mark.parametrize(("dtype", "item"), [(torch.float32, 4), (torch.float16, 2), (torch.bfloat16, 2),
                                             (torch.float64, 8)])
def test_attention_memory_bytes_matches_hand_arithmetic(dtype, item):
    m = attention_memory_bytes(6, 10, head_dim=3, num_heads=2, batch=5, dtype=dtype)
    assert m.q == 5 * 2 * 6 * 3 * item
    assert m.k == m.v == 5 * 2 * 10 * 3 * item
    assert m.scores == m.weights == 5 * 2 * 6 * 10 * item
    assert m.output == 5 * 2 * 6 * 3 * item
    assert m.qkv == m.q + m.k + m.v
    assert m.total == m.qkv + m.scores + m.weights + m.output
    assert m.naive_peak == m.scores + m.weights + m.output


def test_the_numbers_lesson_06_quotes():
    assert attention_memory_bytes(2048, head_dim=64).weights == 16 * 2**20  # one n x n float32 matrix at n = 2048
    assert attention_memory_bytes(512, head_dim=64).weights // FLOAT32 == 262_144  # 512^2 similarity scores
    assert attention_memory_bytes(100, head_dim=8).qkv == 3 * 100 * 8 * FLOAT32  # 3 * n * d values per head


def test_attention_memory_defaults_to_square_and_prints_a_table():
    m = attention_memory_bytes(4, head_dim=2)
    assert m == attention_memory_bytes(4, 4, head_dim=2)
    assert isinstance(m, AttentionMemory)
    assert m.as_dict() == {"q": 32, "k": 32, "v": 32, "scores": 64, "weights": 64, "output": 32}
    assert "weights: 64 B" in str(m)


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"n_queries": 0, "head_dim": 4}, ValueError, r"attention_memory_bytes\(\): n_queries must be >= 1"),
    ({"n_queries": -3, "head_dim": 4}, ValueError, "n_queries must be >= 1"),
    ({"n_queries": 4, "n_keys": 0, "head_dim": 4}, ValueError, "n_keys must be >= 1"),
    ({"n_queries": 4, "head_dim": 0}, ValueError, "head_dim must be >= 1"),
    ({"n_queries": 4, "head_dim": 4, "num_heads": 0}, ValueError, "num_heads must be >= 1"),
    ({"n_queries": 4, "head_dim": 4, "batch": 0}, ValueError, "batch must be >= 1"),
    ({"n_queries": 4.0, "head_dim": 4}, TypeError, "n_queries must be an int"),
    ({"n_queries": 4, "head_dim": 4, "dtype": "float32"}, TypeError, "dtype must be a torch.dtype"),
])
def test_attention_memory_bytes_rejects_bad_input(kwargs, error, match):
    with pytest.raises(error, match=match):
        attention_memory_bytes(**kwargs)


# ---- attention_flops ----


def test_attention_flops_by_hand():
    assert attention_flops(512, head_dim=64) == 2 * (2 * 512 * 512 * 64)  # Q K^T and weights @ V
    assert attention_flops(3, 5, head_dim=7, num_heads=2, batch=4) == 4 * 4 * 2 * 3 * 5 * 7


def test_attention_flops_is_what_pytorchs_counter_counts_for_a_naive_forward():
    q, k, v = torch.randn(2, 3, 6, 8), torch.randn(2, 3, 10, 8), torch.randn(2, 3, 10, 8)  # (b, h, i|j, d)
    with FlopCounterMode(display=False) as counter:
        (q @ k.transpose(-2, -1) * 8**-0.5).softmax(dim=-1) @ v
    assert counter.get_total_flops() == attention_flops(6, 10, head_dim=8, num_heads=3, batch=2)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"n_queries": 0, "head_dim": 4}, "n_queries must be >= 1"),
    ({"n_queries": 4, "n_keys": -1, "head_dim": 4}, "n_keys must be >= 1"),
    ({"n_queries": 4, "head_dim": 4, "num_heads": 0}, "num_heads must be >= 1"),
])
def test_attention_flops_rejects_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=r"attention_flops\(\): " + match):
        attention_flops(**kwargs)
