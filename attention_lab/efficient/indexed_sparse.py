"""Learned sparse attention (学习的稀疏注意力): a cheap scorer picks each query's top-k keys, exact attention on those.

DeepSeek-V3.2's DeepSeek Sparse Attention (DeepSeek-AI 2025, "DeepSeek-V3.2-Exp: Boosting Long-Context Efficiency
with DeepSeek Sparse Attention", section 2.1) puts a **lightning indexer** before the attention: from the query
token it computes H^I small query vectors q^I_{t,h} (d^I numbers each) and weights w_{t,h}, from every earlier
token one small key k^I_s, and scores

    I_{t,s} = sum_h w_{t,h} ReLU(q^I_{t,h} . k^I_s)

(:func:`lightning_index_scores`). Each query then keeps the top_k keys by I_{t,:} (2,048 in the paper) and runs
exact softmax attention over those only, every head reading the same chosen keys (:func:`indexed_sparse_attention`,
through :func:`~attention_lab.topk_attention`'s ``index_scores``). The indexer still sees every (query, key) pair, but
with few heads of few dimensions (and, in the paper, in FP8), so its share of the work is small; the attention's
work falls from j keys per query to top_k (:func:`indexed_attention_flops`). Before sparse training the indexer is
trained to imitate the dense attention: its loss is the KL divergence from the attention's weights (summed over
heads, renormalised) to the softmax of its scores (:func:`indexer_distillation_loss`). NSA (Yuan et al. 2025,
"Native Sparse Attention") chooses blocks of keys instead, from compressed block summaries, beside a sliding window.

Reference: :func:`attention_lab.reference.lightning_index_scores` (the formula above, one indexer head at a time)
and :func:`attention_lab.reference.indexed_sparse_attention` (dense attention masked to the chosen keys); tested
equal in fp64, values and gradients. How it differs and what that buys: every indexer head in one batched product,
and the attention gathers only the chosen keys and values (:func:`~attention_lab.topk_attention`), so its softmax
and weighted sum run over top_k keys instead of j. DeepSeek's inference code (the ``Indexer`` of its V3.2 release,
``inference/model.py``) was read, not copied; it also normalises the indexer's key (LayerNorm), rotates part of q^I
and k^I by RoPE, scales the scores by 1/sqrt(d^I) and the weights by 1/sqrt(H^I), and computes in FP8: left out
here, where the formula of the paper is the whole indexer.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .._validation import (
    check_bool,
    check_positive_ints,
    check_qkv,
    check_sequence_input,
    check_tensor,
    fail,
)
from ..core.masks import causal_mask
from .topk import topk_attention

__all__ = ["LightningIndexer", "indexed_attention_flops", "indexed_sparse_attention", "indexer_distillation_loss",
           "lightning_index_scores"]


def _check_indexer_inputs(fn: str, q_index: object, k_index: object, weights: object) -> None:
    check_tensor(fn, "q_index", q_index, min_dim=3, floating=True)
    check_tensor(fn, "k_index", k_index, min_dim=2, floating=True)
    check_tensor(fn, "weights", weights, min_dim=2, floating=True)
    if q_index.shape[-1] != k_index.shape[-1]:
        fail(fn, f"q_index and k_index must have the same last dimension d_index, got q_index "
                 f"{tuple(q_index.shape)} and k_index {tuple(k_index.shape)}")
    if tuple(weights.shape[-2:]) != tuple(q_index.shape[-3:-1]):
        fail(fn, f"weights must have one weight per indexer head and query, shape (..., h_index, i) = "
                 f"(..., {q_index.shape[-3]}, {q_index.shape[-2]}), got {tuple(weights.shape)}")
    try:
        torch.broadcast_shapes(q_index.shape[:-3], k_index.shape[:-2], weights.shape[:-2])
    except RuntimeError:
        fail(fn, f"the batch dimensions of q_index {tuple(q_index.shape)}, k_index {tuple(k_index.shape)} and "
                 f"weights {tuple(weights.shape)} do not broadcast; expected (..., h_index, i, d_index), "
                 f"(..., j, d_index) and (..., h_index, i)")


def lightning_index_scores(q_index: torch.Tensor, k_index: torch.Tensor, weights: torch.Tensor, *,
                           causal: bool = False) -> torch.Tensor:
    """The lightning indexer's scores I_{t,s} = sum_h w_{t,h} ReLU(q^I_{t,h} . k^I_s) for every query t and key s.

    ``causal=True`` sets the scores of later keys (s > t, upper-left aligned) to -inf, so that no top-k picks them.

    Shape: q_index ``(..., h_index, i, d_index)``, k_index ``(..., j, d_index)`` (one key per position, shared by
        the indexer heads), weights ``(..., h_index, i)`` -> scores ``(..., i, j)``.
    """
    fn = "lightning_index_scores"
    _check_indexer_inputs(fn, q_index, k_index, weights)
    check_bool(fn, "causal", causal)
    per_head = F.relu(q_index @ k_index.unsqueeze(-3).transpose(-2, -1))  # ReLU(q^I . k^I), (..., h_index, i, j)
    scores = (weights.unsqueeze(-1) * per_head).sum(dim=-3)  # weighted sum over the indexer heads, (..., i, j)
    if causal:
        scores = scores.masked_fill(~causal_mask(scores.shape[-2], scores.shape[-1], device=scores.device),
                                    float("-inf"))
    return scores


def indexed_sparse_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, index_scores: torch.Tensor, *,
                             top_k: int, causal: bool = False) -> torch.Tensor:
    """Exact softmax attention of every head over the ``top_k`` keys with the highest ``index_scores`` per query,
    the same keys for every head (DeepSeek Sparse Attention's selection).

    Shape: q ``(b, h, i, d)``, k ``(b, h, j, d)`` (or ``(b, 1, j, d)``: one key/value head), v ``(b, h, j, dv)``,
        index_scores ``(b, i, j)`` -> ``(b, h, i, dv)``.
    """
    fn = "indexed_sparse_attention"
    check_qkv(fn, q, k, v)
    check_tensor(fn, "index_scores", index_scores, min_dim=2, floating=True)
    if q.dim() != 4 or index_scores.dim() != 3:
        fail(fn, f"q must be (b, h, i, d) and index_scores (b, i, j), one score per query and key shared by the heads, "
                 f"got q {tuple(q.shape)} and index_scores {tuple(index_scores.shape)}")
    return topk_attention(q, k, v, top_k=top_k, index_scores=index_scores.unsqueeze(-3), causal=causal)


def indexer_distillation_loss(index_scores: torch.Tensor, attention_weights: torch.Tensor) -> torch.Tensor:
    """The indexer's warm-up loss: the mean over queries of KL(p_t || softmax(I_t)), where p_t is the attention's
    weights summed over heads and divided by their sum. Queries whose weights are all zero are left out.

    Shape: index_scores ``(b, i, j)`` (-inf where a key is not allowed), attention_weights ``(b, h, i, j)``
        -> a scalar tensor.
    """
    fn = "indexer_distillation_loss"
    check_tensor(fn, "index_scores", index_scores, min_dim=3, floating=True)
    check_tensor(fn, "attention_weights", attention_weights, min_dim=4, floating=True)
    if attention_weights.shape[:-3] + attention_weights.shape[-2:] != index_scores.shape:
        fail(fn, f"attention_weights (b, h, i, j) must match index_scores (b, i, j) but for the heads, got "
                 f"{tuple(attention_weights.shape)} and {tuple(index_scores.shape)}")
    target = attention_weights.detach().sum(dim=-3)  # (b, i, j)
    total = target.sum(dim=-1, keepdim=True)  # (b, i, 1)
    rows = total.squeeze(-1) > 0  # (b, i)
    p = target / torch.where(total > 0, total, torch.ones_like(total))  # (b, i, j)
    log_q = torch.log_softmax(index_scores, dim=-1)  # (b, i, j)
    terms = torch.where(p > 0, p * (torch.log(torch.where(p > 0, p, torch.ones_like(p))) - log_q), 0.0)
    return terms.sum(dim=-1)[rows].mean()


def indexed_attention_flops(n_queries: int, n_keys: int, *, top_k: int, num_heads: int, head_dim: int,
                            index_heads: int, index_dim: int) -> tuple[int, int, int]:
    """Multiply-adds counted as 2 FLOPs (as :func:`~attention_lab.reference.attention_flops`): the indexer's
    (2 i j h_index d_index, every pair), the sparse attention's (2 i top_k 2d per head: scores and weighted sum),
    and dense attention's (2 i j 2d per head), with values of ``head_dim`` too. Projections are left out.

    Shape: integers -> (indexer, sparse attention, dense attention) FLOPs.
    """
    check_positive_ints("indexed_attention_flops", n_queries=n_queries, n_keys=n_keys, top_k=top_k,
                        num_heads=num_heads, head_dim=head_dim, index_heads=index_heads, index_dim=index_dim)
    i, j = n_queries, n_keys
    kept = min(top_k, j)
    return (2 * i * j * index_heads * index_dim, 2 * i * kept * 2 * head_dim * num_heads,
            2 * i * j * 2 * head_dim * num_heads)


class LightningIndexer(nn.Module):
    """The lightning indexer as a layer: from token vectors x, ``index_heads`` query vectors and weights per token
    and one key per token, each of ``index_dim`` numbers, then :func:`lightning_index_scores`.

    Attributes: ``q_proj`` (e -> h_index d_index), ``k_proj`` (e -> d_index), ``w_proj`` (e -> h_index), each an
    ``nn.Linear`` without bias, and ``causal``.

    Shape: x ``(b, n, e)`` -> scores ``(b, i, j)`` with i = j = n.
    """

    def __init__(self, embed_dim: int, index_heads: int, index_dim: int, *, causal: bool = False) -> None:
        super().__init__()
        fn = "LightningIndexer"
        check_positive_ints(fn, embed_dim=embed_dim, index_heads=index_heads, index_dim=index_dim)
        self.causal = check_bool(fn, "causal", causal)
        self.index_heads, self.index_dim = index_heads, index_dim
        self.q_proj = nn.Linear(embed_dim, index_heads * index_dim, bias=False)
        self.k_proj = nn.Linear(embed_dim, index_dim, bias=False)
        self.w_proj = nn.Linear(embed_dim, index_heads, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Index scores of every token against every token of x. Shape: x ``(b, n, e)`` -> ``(b, i, j)``."""
        check_sequence_input("LightningIndexer.forward", "x", x, self.q_proj.weight)
        q_index = self.q_proj(x).unflatten(-1, (self.index_heads, self.index_dim)).transpose(-3, -2)  # (b, h, i, d)
        weights = self.w_proj(x).transpose(-2, -1)  # (b, h_index, i)
        return lightning_index_scores(q_index, self.k_proj(x), weights, causal=self.causal)
