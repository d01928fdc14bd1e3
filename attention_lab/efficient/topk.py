"""Top-k attention: each query keeps its ``top_k`` highest-scoring keys and runs exact softmax over those only.

Which keys: the ``top_k`` largest entries of each row of ``index_scores`` (a cheap indexer's scores, as in
DeepSeek Sparse Attention, where a small "lightning indexer" scores every key and the main attention reads only
the chosen ones), or of q . k itself when no indexer is given. The result is exactly dense softmax attention with
the mask "key j is among query i's chosen keys"; how close it is to full attention depends on how much weight
falls outside the chosen keys.

The choice runs without gradients (it is a selection, not a smooth function); the kept scores and the softmax over
them are differentiable. Queries go in chunks, so memory holds one chunk's (chunk x j) selection scores and its
gathered (chunk x top_k) keys and values, never the whole i x j matrix at once. Choosing by q . k still computes
every score once (time n^2 d), so this saves memory and the softmax, not the score computation; with an indexer
only the indexer sees every pair.

How it differs from :func:`attention_lab.reference.topk_attention` (dense attention with the chosen-key mask;
tested equal in fp64, values and gradients) and what that buys: queries in chunks and only the chosen keys and
values gathered, so memory holds one chunk's selection scores and ``top_k`` keys per query instead of the whole
i x j matrix, and the softmax and the weighted sum run over ``top_k`` keys instead of j. Same keys, same numbers up
to rounding.
"""

from __future__ import annotations

import math

import torch

from .._validation import check_positive_int, check_qk, check_qkv, check_tensor, fail
from ..core.functional import _empty_attention
from .linear import _check_causal

__all__ = ["topk_attention", "topk_indices"]

_CHUNK_ELEMENTS = 1 << 22  # selection scores per chunk (16 MiB in fp32)


def _check_index_scores(fn: str, index_scores: object, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    check_tensor(fn, "index_scores", index_scores, min_dim=2, floating=True)
    i, j = q.shape[-2], k.shape[-2]
    if tuple(index_scores.shape[-2:]) != (i, j):
        fail(fn, f"index_scores must have shape (..., i, j) = (..., {i}, {j}), one score per (query, key), got "
                 f"{tuple(index_scores.shape)}")
    if index_scores.device != q.device:
        fail(fn, f"index_scores must be on q's device {q.device}, got {index_scores.device}")
    try:
        torch.broadcast_shapes(index_scores.shape[:-2], q.shape[:-2], k.shape[:-2])
    except RuntimeError:
        fail(fn, f"the leading dimensions of index_scores {tuple(index_scores.shape)} do not broadcast with q "
                 f"{tuple(q.shape)} and k {tuple(k.shape)}")
    return index_scores


def _selection(q: torch.Tensor, k: torch.Tensor, index_scores: torch.Tensor | None, rows: slice,
               causal: bool) -> torch.Tensor:
    """The scores the keys are chosen by, for queries ``rows``; future keys -inf when causal. (..., c, j)"""
    with torch.no_grad():
        if index_scores is None:
            chosen_by = q[..., rows, :] @ k.transpose(-2, -1)  # (..., c, j); the scale does not change the order
        else:
            chosen_by = index_scores[..., rows, :]  # (..., c, j)
        if causal:
            queries = torch.arange(rows.start, rows.stop, device=q.device)[:, None]  # (c, 1)
            future = torch.arange(k.shape[-2], device=q.device)[None, :] > queries  # (c, j)
            chosen_by = chosen_by.masked_fill(future, float("-inf"))  # a new tensor
    return chosen_by


def topk_indices(q: torch.Tensor, k: torch.Tensor, *, top_k: int, index_scores: torch.Tensor | None = None,
                 causal: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Which keys each query keeps: indices of the ``top_k`` largest selection scores, and whether each is allowed.

    A chosen key is not allowed when its selection score is -inf (a future key under ``causal``, or one the
    indexer ruled out): a query with fewer than ``top_k`` allowed keys keeps only those.

    Shape: q ``(..., i, d)``, k ``(..., j, d)``, index_scores ``(..., i, j)`` -> indices ``(..., i, top_k)``
        (long), allowed ``(..., i, top_k)`` (bool).
    """
    fn = "topk_indices"
    check_qk(fn, q, k)
    _check_topk(fn, q, k, top_k, index_scores, causal)
    chosen_by = _selection(q, k, index_scores, slice(0, q.shape[-2]), causal)  # (..., i, j)
    best = chosen_by.topk(top_k, dim=-1)
    return best.indices, torch.isfinite(best.values)


def _check_topk(fn: str, q: torch.Tensor, k: torch.Tensor, top_k: object, index_scores: object,
                causal: object) -> None:
    check_positive_int(fn, "top_k", top_k)
    if top_k > k.shape[-2] > 0:  # no key at all: every query gets zeros, as in SDPA
        fail(fn, f"top_k must be at most the number of keys j={k.shape[-2]}, got top_k={top_k}; with top_k = j "
                 f"every key is kept (dense attention)")
    if index_scores is not None:
        _check_index_scores(fn, index_scores, q, k)
    _check_causal(fn, causal, q, k)


def _gather_rows(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """x[b, index[b, c, t], :] for flat x ``(B, j, d)`` and index ``(B, c, t)`` -> ``(B, c, t, d)``."""
    flat = index.reshape(index.shape[0], -1, 1).expand(-1, -1, x.shape[-1])  # (B, c*t, d)
    return x.gather(1, flat).reshape(*index.shape, x.shape[-1])  # (B, c, t, d)


def topk_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, top_k: int,
                   index_scores: torch.Tensor | None = None, causal: bool = False) -> torch.Tensor:
    """Exact softmax attention over the ``top_k`` keys each query chooses (by ``index_scores``, else by q . k).

    Equal to dense attention with the mask of the chosen keys (see :func:`topk_indices`); a query with no allowed
    key gets zeros. ``causal=True`` lets query i choose among keys j <= i (upper-left aligned, i == j).

    Shape: q ``(..., i, d)``, k ``(..., j, d)``, v ``(..., j, dv)``, index_scores ``(..., i, j)``
        -> ``(..., i, dv)``.
    """
    fn = "topk_attention"
    check_qkv(fn, q, k, v)
    _check_topk(fn, q, k, top_k, index_scores, causal)
    empty = _empty_attention(q, k, v)
    if empty is not None:
        return empty
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2],
                                  *([] if index_scores is None else [index_scores.shape[:-2]]))
    i, j, d, dv = q.shape[-2], k.shape[-2], q.shape[-1], v.shape[-1]
    q3 = q.expand(*lead, i, d).reshape(-1, i, d)  # (B, i, d)
    k3 = k.expand(*lead, j, d).reshape(-1, j, d)  # (B, j, d)
    v3 = v.expand(*lead, j, dv).reshape(-1, j, dv)  # (B, j, dv)
    s3 = None if index_scores is None else index_scores.expand(*lead, i, j).reshape(-1, i, j)  # (B, i, j)
    scale = 1.0 / math.sqrt(d)
    chunk = max(1, min(i, _CHUNK_ELEMENTS // max(1, q3.shape[0] * j)))
    outputs = []
    for start in range(0, i, chunk):
        rows = slice(start, min(i, start + chunk))
        best = _selection(q3, k3, s3, rows, causal).topk(top_k, dim=-1)  # (B, c, top_k)
        allowed = torch.isfinite(best.values)  # (B, c, top_k)
        k_kept = _gather_rows(k3, best.indices)  # (B, c, top_k, d)
        v_kept = _gather_rows(v3, best.indices)  # (B, c, top_k, dv)
        scores = (k_kept @ q3[:, rows, :, None]).squeeze(-1) * scale  # q^i . k^j / sqrt(d), (B, c, top_k)
        scores = scores.masked_fill(~allowed, float("-inf"))
        top = scores.amax(dim=-1, keepdim=True)  # (B, c, 1)
        top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))  # a row with no allowed key
        weights = torch.exp(scores - top)  # (B, c, top_k)
        total = weights.sum(dim=-1, keepdim=True)  # (B, c, 1)
        weights = weights / torch.where(total > 0, total, torch.ones_like(total))
        outputs.append((weights[:, :, None, :] @ v_kept).squeeze(-2))  # sum_j alpha'_{i,j} v^j, (B, c, dv)
    return torch.cat(outputs, dim=1).reshape(*lead, i, dv)  # (..., i, dv)
