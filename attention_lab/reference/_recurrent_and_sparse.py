"""The plain math of lesson 14's second half: interleaved local and global layers (their cache), the gated delta
rule, and attention over the keys a lightning indexer picks (the package's ``attention_lab.reference``)."""

from __future__ import annotations

import torch

from ._attention import attention, kv_cache_bytes

__all__ = ["gated_delta_rule", "indexed_sparse_attention", "interleaved_kv_cache_bytes", "lightning_index_scores"]


def interleaved_kv_cache_bytes(windows, *, num_kv_heads: int, head_dim: int, seq_len: int, batch_size: int = 1,
                               dtype: torch.dtype = torch.bfloat16) -> int:
    """The caches of a stack, layer by layer: a global layer (window None) keeps every position, a local layer the
    last ``window`` of them; each counted from the tensors it keeps (:func:`kv_cache_bytes`, one layer).

    Shape: a sequence of windows (ints or None) and integers -> an integer number of bytes.
    """
    total = 0
    for window in windows:
        kept = seq_len if window is None else min(seq_len, window)  # positions this layer's cache holds
        total += kv_cache_bytes(num_layers=1, num_kv_heads=num_kv_heads, head_dim=head_dim, seq_len=kept,
                                batch_size=batch_size, dtype=dtype)
    return total


def gated_delta_rule(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, beta: torch.Tensor,
                     alpha: torch.Tensor) -> torch.Tensor:
    """Gated DeltaNet's recurrence, position by position from S_0 = 0:
    S_t = alpha_t (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T, and b^t = S_t^T q_t.

    Shape: q and k ``(..., n, d)``, v ``(..., n, dv)``, beta and alpha ``(..., n)`` -> ``(..., n, dv)``.
    """
    d, dv = k.shape[-1], v.shape[-1]
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2], beta.shape[:-1], alpha.shape[:-1])
    state = torch.zeros(*lead, d, dv, dtype=v.dtype, device=v.device)  # S, (..., d, dv)
    identity = torch.eye(d, dtype=v.dtype, device=v.device)
    outputs = []
    for t in range(k.shape[-2]):
        k_t = k[..., t, :, None]  # a column, (..., d, 1)
        v_t = v[..., t, :, None]  # (..., dv, 1)
        a_t, b_t = alpha[..., t, None, None], beta[..., t, None, None]  # (..., 1, 1)
        state = a_t * (identity - b_t * k_t @ k_t.transpose(-2, -1)) @ state + b_t * k_t @ v_t.transpose(-2, -1)
        outputs.append(state.transpose(-2, -1) @ q[..., t, :, None])  # S_t^T q_t, (..., dv, 1)
    return torch.cat(outputs, dim=-1).transpose(-2, -1)  # (..., n, dv)


def lightning_index_scores(q_index: torch.Tensor, k_index: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """DeepSeek's lightning indexer: I_{t,s} = sum_h w_{t,h} ReLU(q^I_{t,h} . k^I_s), one indexer head at a time.

    Shape: q_index ``(..., h, i, d)``, k_index ``(..., j, d)``, weights ``(..., h, i)`` -> ``(..., i, j)``.
    """
    scores = 0
    for h in range(q_index.shape[-3]):
        dots = q_index[..., h, :, :] @ k_index.transpose(-2, -1)  # q^I_{t,h} . k^I_s, (..., i, j)
        scores = scores + weights[..., h, :, None] * torch.relu(dots)
    return scores


def indexed_sparse_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, index_scores: torch.Tensor, *,
                             top_k: int, causal: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Softmax attention of every head over the same ``top_k`` keys per query, those with the highest index scores
    (later keys never chosen when ``causal``): dense attention with the mask "key s is among query t's chosen keys".

    Shape: q ``(b, h, i, d)``, k ``(b, h, j, d)``, v ``(b, h, j, dv)``, index_scores ``(b, i, j)`` -> output
    ``(b, h, i, dv)``, weights ``(b, h, i, j)``.
    """
    scores = index_scores
    if causal:
        later = torch.ones(scores.shape[-2:], dtype=torch.bool, device=scores.device).triu(1)  # s > t, (i, j)
        scores = scores.masked_fill(later, float("-inf"))
    best = scores.topk(top_k, dim=-1)  # (b, i, top_k)
    chosen = torch.zeros_like(scores, dtype=torch.bool).scatter(-1, best.indices, torch.isfinite(best.values))
    return attention(q, k, v, chosen[:, None])  # the same keys for every head, (b, 1, i, j)
