"""Window conventions of other libraries mapped to ours (docs/conventions.md), one test per mapping.

Each expected mask below is built from the other library's own definition, written out here independently of
attention_lab: Longformer's diagonals, flash-attn's key range, TensorFlow's band_part behind OpenAI's 'local'
mode. Ours: ``sliding_window_mask(n, w)`` lets query i see key j exactly when |i - j| < w.
"""

import pytest
import torch

from attention_lab import BlockLayout, causal_mask, sliding_window_mask

LENGTHS_AND_WINDOWS = [(1, 1), (6, 1), (9, 2), (9, 3), (16, 5), (7, 7), (5, 9)]


def longformer_mask(n: int, one_sided: int, *, autoregressive: bool = False) -> torch.Tensor:
    """Longformer (Beltagy et al. 2020; allenai/longformer's diagonaled_mm): with window w "attentions on each side
    of the word", query i scores the diagonals i - w .. i + w (only i - w .. i when autoregressive); a diagonal
    entry that falls outside the sequence is invalid."""
    mask = torch.zeros(n, n, dtype=torch.bool)
    upper = 0 if autoregressive else one_sided
    for offset in range(-one_sided, upper + 1):  # key j = i + offset
        if abs(offset) < n:
            mask |= torch.diagflat(torch.ones(n - abs(offset), dtype=torch.bool), offset)
    return mask


def flash_attn_mask(n_q: int, n_k: int, left: int, right: int) -> torch.Tensor:
    """flash-attn's ``window_size=(left, right)``: query i attends to the keys between
    i + n_k - n_q - left and i + n_k - n_q + right inclusive (-1 = no limit on that side)."""
    i = torch.arange(n_q)[:, None]
    j = torch.arange(n_k)[None, :]
    shift = n_k - n_q
    low = j >= i + shift - left if left >= 0 else torch.ones_like(j, dtype=torch.bool)
    high = j <= i + shift + right if right >= 0 else torch.ones_like(j, dtype=torch.bool)
    return low & high


def band_part(rows: int, cols: int, num_lower: int, num_upper: int) -> torch.Tensor:
    """TensorFlow's ``matrix_band_part(ones, num_lower, num_upper)``: entry (m, c) is kept when
    (num_lower < 0 or m - c <= num_lower) and (num_upper < 0 or c - m <= num_upper)."""
    m = torch.arange(rows)[:, None]
    c = torch.arange(cols)[None, :]
    return ((num_lower < 0) | (m - c <= num_lower)) & ((num_upper < 0) | (c - m <= num_upper))


def openai_local_mask(n: int, bandwidth: int) -> torch.Tensor:
    """OpenAI sparse_attention's ``get_attn_mask(n, 'local', local_attn_ctx=bandwidth)``: a lower band of
    ``min(n - 1, bandwidth - 1)`` diagonals below the main one, none above."""
    return band_part(n, n, min(n - 1, bandwidth - 1), 0)


@pytest.mark.parametrize("n,w", LENGTHS_AND_WINDOWS)
def test_longformer_one_sided_window_is_w_minus_one(n, w):
    assert torch.equal(sliding_window_mask(n, w), longformer_mask(n, w - 1))
    assert torch.equal(sliding_window_mask(n, w, causal=True), longformer_mask(n, w - 1, autoregressive=True))
    # Hugging Face's LongformerConfig.attention_window counts both sides: one_sided = attention_window // 2.
    attention_window = 2 * (w - 1)
    assert torch.equal(sliding_window_mask(n, w), longformer_mask(n, attention_window // 2))


@pytest.mark.parametrize("n,w", LENGTHS_AND_WINDOWS)
def test_flash_attn_window_size_is_w_minus_one_on_each_side(n, w):
    assert torch.equal(sliding_window_mask(n, w), flash_attn_mask(n, n, w - 1, w - 1))
    assert torch.equal(sliding_window_mask(n, w, causal=True), flash_attn_mask(n, n, w - 1, 0))
    assert torch.equal(causal_mask(n), flash_attn_mask(n, n, -1, 0))  # (-1, 0): causal, no window


@pytest.mark.parametrize("n,w", LENGTHS_AND_WINDOWS)
def test_openai_local_bandwidth_is_w_causal(n, w):
    assert torch.equal(sliding_window_mask(n, w, causal=True), openai_local_mask(n, w))


@pytest.mark.parametrize("n", [1, 5, 12, 17])
@pytest.mark.parametrize("neighbours", [0, 1, 3])
def test_block_sliding_window_equals_element_window_only_at_block_size_one(n, neighbours):
    layout = BlockLayout.sliding_window(1, neighbours=neighbours)
    assert torch.equal(layout.to_dense(n), sliding_window_mask(n, neighbours + 1))
    causal = BlockLayout.sliding_window(1, neighbours=neighbours, causal=True)
    assert torch.equal(causal.to_dense(n), sliding_window_mask(n, neighbours + 1, causal=True))


@pytest.mark.parametrize("block_size", [2, 3, 8])
@pytest.mark.parametrize("neighbours", [0, 1, 2])
def test_block_sliding_window_reach_depends_on_the_position_in_the_block(block_size, neighbours):
    """With blocks of b > 1, a query sees from neighbours * b to (neighbours + 1) * b - 1 keys on each side,
    depending on where it sits in its block: the mask lies between two element windows and equals neither."""
    n = (2 * neighbours + 3) * block_size + 1  # enough blocks for interior rows, and a short last block
    dense = BlockLayout.sliding_window(block_size, neighbours=neighbours).to_dense(n)
    inner = sliding_window_mask(n, neighbours * block_size + 1)
    outer = sliding_window_mask(n, (neighbours + 1) * block_size)
    assert torch.equal(dense & inner, inner) and torch.equal(dense | outer, outer)  # inner <= dense <= outer
    assert not any(torch.equal(dense, sliding_window_mask(n, w)) for w in range(1, n + 1))
