"""The plain math of the attentions of lessons 01-11 (the package's ``attention_lab.reference``)."""

from __future__ import annotations

import math

import torch

__all__ = ["attention", "blockwise_attention", "block_sparse_attention"]
__all__ += ["linear_attention", "performer_attention", "topk_attention", "cluster_attention", "linformer_attention",
            "synthesizer_attention"]


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None, *,
              scale: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Softmax attention, written out: scores, masked softmax, weighted sum of values.

    Shape: q ``(..., i, d)``, k ``(..., j, d)``, v ``(..., j, dv)``, mask bool ``(..., i, j)`` (broadcastable,
    True = may attend) -> output ``(..., i, dv)``, weights ``(..., i, j)``.
    """
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = q @ k.transpose(-2, -1) * scale  # alpha_{i,j} = q^i . k^j / sqrt(d), (..., i, j)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))  # a new tensor: the caller's scores are not touched
    # softmax by hand, so that a row with no allowed key (all -inf) gives zeros instead of 0/0 = NaN
    row_max = scores.amax(dim=-1, keepdim=True) if scores.shape[-1] else scores.sum(-1, keepdim=True)
    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))  # (..., i, 1)
    exp = torch.exp(scores - row_max)  # exp(-inf) = 0 for masked keys
    total = exp.sum(dim=-1, keepdim=True)  # (..., i, 1)
    weights = exp / torch.where(total > 0, total, torch.ones_like(total))  # alpha'_{i,j}, rows sum to 1 or 0
    return weights @ v, weights  # b^i = sum_j alpha'_{i,j} v^j


def blockwise_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, block_size: int,
                        causal: bool = False) -> torch.Tensor:
    """Exact softmax attention, one block of keys at a time, keeping a running max m, sum l and output acc.

    Shape: q ``(..., i, d)``, k ``(..., j, d)``, v ``(..., j, dv)`` -> ``(..., i, dv)``; ``causal`` lets query i
    see keys j <= i (upper-left aligned).
    """
    scale = 1.0 / math.sqrt(q.shape[-1])
    n_q, n_k = q.shape[-2], k.shape[-2]
    m = torch.full(q.shape[:-1] + (1,), float("-inf"), dtype=q.dtype, device=q.device)  # running max, (..., i, 1)
    l = torch.zeros_like(m)  # noqa: E741 (l as in the FlashAttention papers) running sum of exp(score - m), (..., i, 1)
    acc = torch.zeros(q.shape[:-1] + (v.shape[-1],), dtype=q.dtype, device=q.device)  # (..., i, dv)
    rows = torch.arange(n_q, device=q.device)[:, None]  # (i, 1)
    for start in range(0, n_k, block_size):
        k_blk, v_blk = k[..., start:start + block_size, :], v[..., start:start + block_size, :]  # (..., jb, d)
        s = q @ k_blk.transpose(-2, -1) * scale  # this block's scores, (..., i, jb)
        if causal:
            cols = torch.arange(start, start + k_blk.shape[-2], device=q.device)[None, :]  # (1, jb)
            s = s.masked_fill(cols > rows, float("-inf"))
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))  # (..., i, 1)
        safe = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))  # rows with nothing seen yet
        p = torch.exp(s - safe)  # (..., i, jb)
        correction = torch.exp(m - safe)  # rescales what was summed under the old max, (..., i, 1)
        l = l * correction + p.sum(dim=-1, keepdim=True)  # noqa: E741
        acc = acc * correction + p @ v_blk
        m = m_new
    return acc / torch.where(l > 0, l, torch.ones_like(l))  # a row that saw no key stays 0


def block_sparse_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layout) -> torch.Tensor:
    """Dense attention with the layout's block mask expanded to one entry per (query, key) pair.

    Shape: q ``(..., i, d)``, k ``(..., j, d)``, v ``(..., j, dv)`` with i = j = n, ``layout`` a
    :class:`~attention_lab.BlockLayout`, or a list of h of them, one per head (axis -3) -> ``(..., i, dv)``.
    """
    n = q.shape[-2]
    per_head = isinstance(layout, (list, tuple))
    masks = [one.to_dense(n) for one in (layout if per_head else [layout])]  # bool (i, j) each: True = kept
    mask = torch.stack(masks) if per_head else masks[0]  # (h, i, j) or (i, j)
    return attention(q, k, v, mask.to(q.device))[0]


# ---- efficient-attention family ----
# Each returns (output, weights) like `attention`: weights is the method's effective i x j matrix, the weight each
# query gives each value, written out in full (which the fast paths in attention_lab.efficient never do).


def _row_normalise(weights: torch.Tensor) -> torch.Tensor:
    """Divide each row by its sum; a row that sums to 0 stays 0 (a query with nothing to attend to)."""
    total = weights.sum(dim=-1, keepdim=True)  # (..., i, 1)
    return weights / torch.where(total > 0, total, torch.ones_like(total))


def _future(n_q: int, n_k: int, device: torch.device) -> torch.Tensor:
    """True where key j comes after query i (upper-left aligned). Shape: (i, j) bool."""
    return torch.ones(n_q, n_k, dtype=torch.bool, device=device).triu(1)


def linear_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = False,
                     feature_map="elu") -> tuple[torch.Tensor, torch.Tensor]:
    """Linear attention in its quadratic form: weights phi(q^i) . phi(k^j), each row divided by its sum.

    ``feature_map``: ``"elu"`` (elu(x) + 1), ``"relu"`` or a callable giving non-negative features.

    Shape: q ``(..., i, d)``, k ``(..., j, d)``, v ``(..., j, dv)`` -> output ``(..., i, dv)``, weights
    ``(..., i, j)``.
    """
    if feature_map == "elu":
        phi = lambda x: torch.nn.functional.elu(x) + 1.0
    elif feature_map == "relu":
        phi = torch.relu
    else:
        phi = feature_map
    similarity = phi(q) @ phi(k).transpose(-2, -1)  # phi(q^i) . phi(k^j), (..., i, j)
    if causal:
        similarity = similarity.masked_fill(_future(q.shape[-2], k.shape[-2], q.device), 0.0)  # keys j <= i only
    weights = _row_normalise(similarity)  # alpha'_{i,j}
    return weights @ v, weights  # b^i = sum_j alpha'_{i,j} v^j


def performer_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, projection: torch.Tensor, *,
                        causal: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """FAVOR+ with the random directions given: phi(x) = exp(W x' - |x'|^2 / 2) / sqrt(m), x' = x / d^(1/4).

    phi(q^i) . phi(k^j) estimates exp(q^i . k^j / sqrt(d)); rows are normalised as in softmax.

    Shape: q ``(..., i, d)``, k ``(..., j, d)``, v ``(..., j, dv)``, projection ``(m, d)`` -> output
    ``(..., i, dv)``, weights ``(..., i, j)``.
    """
    m = projection.shape[0]

    def phi(x: torch.Tensor) -> torch.Tensor:
        x = x / x.shape[-1] ** 0.25  # x', so that q' . k' = q . k / sqrt(d)
        return torch.exp(x @ projection.T - (x * x).sum(dim=-1, keepdim=True) / 2) / math.sqrt(m)  # (..., n, m)

    return linear_attention(q, k, v, causal=causal, feature_map=phi)


def topk_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, top_k: int,
                   index_scores: torch.Tensor | None = None, causal: bool = False
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """Softmax attention masked to each query's ``top_k`` keys by ``index_scores`` (or by q . k when None).

    Shape: q ``(..., i, d)``, k ``(..., j, d)``, v ``(..., j, dv)``, index_scores ``(..., i, j)`` -> output
    ``(..., i, dv)``, weights ``(..., i, j)``.
    """
    chosen_by = q @ k.transpose(-2, -1) if index_scores is None else index_scores  # (..., i, j)
    if causal:
        chosen_by = chosen_by.masked_fill(_future(q.shape[-2], k.shape[-2], q.device), float("-inf"))
    best = chosen_by.topk(top_k, dim=-1)  # the top_k keys of each query, (..., i, top_k)
    keep = torch.zeros_like(chosen_by, dtype=torch.bool).scatter(-1, best.indices, torch.isfinite(best.values))
    return attention(q, k, v, keep)  # a chosen key with score -inf (future, or ruled out) is not kept


def cluster_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, query_clusters: torch.Tensor,
                      key_clusters: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Softmax attention in which query i sees key j only when both belong to the same cluster.

    Shape: q ``(..., i, d)``, k ``(..., j, d)``, v ``(..., j, dv)``, query_clusters ``(..., i)``, key_clusters
    ``(..., j)`` -> output ``(..., i, dv)``, weights ``(..., i, j)``.
    """
    same = query_clusters[..., :, None] == key_clusters[..., None, :]  # (..., i, j)
    return attention(q, k, v, same)


def linformer_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, e_proj: torch.Tensor,
                        f_proj: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Softmax attention over K' = E K and V' = F V (``rank`` mixed rows); weights = alpha' F on the real values.

    Shape: q ``(..., i, d)``, k ``(..., j, d)``, v ``(..., j, dv)``, e_proj and f_proj ``(rank, j)`` -> output
    ``(..., i, dv)``, weights ``(..., i, j)``.
    """
    output, projected = attention(q, e_proj @ k, f_proj @ v)  # alpha'_{i,r} over the rank rows, (..., i, r)
    return output, projected @ f_proj  # weight of query i on value j: sum_r alpha'_{i,r} F_{r,j}, (..., i, j)


def synthesizer_attention(scores: torch.Tensor, v: torch.Tensor, *, causal: bool = False
                          ) -> tuple[torch.Tensor, torch.Tensor]:
    """Softmax over given scores (not q . k), then the weighted sum of values.

    Shape: scores ``(..., i, j)``, v ``(..., j, dv)`` -> output ``(..., i, dv)``, weights ``(..., i, j)``.
    """
    if causal:
        scores = scores.masked_fill(_future(scores.shape[-2], scores.shape[-1], scores.device), float("-inf"))
    weights = torch.softmax(scores, dim=-1)  # alpha'_{i,j}
    return weights @ v, weights
# ---- attention while generating ----


__all__ += ["rope", "grouped_query_attention", "latent_attention", "sliding_window_attention"]


def rope(x: torch.Tensor, positions: torch.Tensor, *, base: float = 10000.0) -> torch.Tensor:
    """Rotary position embedding: each adjacent feature pair (x[2m], x[2m+1]) turned by a 2 x 2 rotation matrix.

    Shape: x ``(..., n, d)`` with d even, positions ``(n,)`` integers -> ``(..., n, d)``.
    """
    d = x.shape[-1]
    rotated_pairs = []
    for m in range(d // 2):
        theta = base ** (-2 * m / d)  # pair m turns by theta_m radians per position
        angle = positions.to(torch.float64) * theta  # p theta_m for every position, (n,)
        cos, sin = torch.cos(angle), torch.sin(angle)
        rows = [torch.stack([cos, -sin], -1), torch.stack([sin, cos], -1)]  # [cos -sin], [sin cos], (n, 2) each
        rotation = torch.stack(rows, -2)  # R(p theta_m), (n, 2, 2)
        pair = x[..., 2 * m:2 * m + 2]  # (x_{2m}, x_{2m+1}) at every position, (..., n, 2)
        rotated_pairs.append((rotation.to(x.dtype) @ pair[..., None])[..., 0])  # R times the pair, (..., n, 2)
    return torch.cat(rotated_pairs, dim=-1)  # (..., n, d)


def grouped_query_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None
                            ) -> torch.Tensor:
    """Attention of h query heads over h_kv key/value heads: each key/value head repeated for its group of
    g = h / h_kv consecutive query heads (query head i reads key/value head i // g), then plain attention.

    Shape: q ``(b, h, i, d)``, k and v ``(b, h_kv, j, d)``, mask bool broadcastable to ``(b, h, i, j)``
    -> ``(b, h, i, d)``.
    """
    group = q.shape[-3] // k.shape[-3]  # g query heads per key/value head
    k_repeated = torch.repeat_interleave(k, group, dim=-3)  # heads 0..g-1 get kv head 0, and so on, (b, h, j, d)
    v_repeated = torch.repeat_interleave(v, group, dim=-3)  # (b, h, j, d)
    return attention(q, k_repeated, v_repeated, mask)[0]


def latent_attention(q: torch.Tensor, latents: torch.Tensor, w_uk: torch.Tensor, w_uv: torch.Tensor,
                     mask: torch.Tensor | None = None) -> torch.Tensor:
    """Multi-head latent attention: every head's keys and values rebuilt from one latent per position
    (k^{j,h} = W^{UK}_h c^j, v^{j,h} = W^{UV}_h c^j), then plain attention. ``w_uk`` and ``w_uv`` are laid out as
    ``nn.Linear`` weights, (h d, r).

    Shape: q ``(b, h, i, d)``, latents ``(b, j, r)``, w_uk and w_uv ``(h d, r)``, mask broadcastable to
    ``(b, h, i, j)`` -> ``(b, h, i, d)``.
    """
    h, d = q.shape[-3], q.shape[-1]
    k = (latents @ w_uk.T).unflatten(-1, (h, d)).transpose(-3, -2)  # all heads' keys, (b, j, h d) -> (b, h, j, d)
    v = (latents @ w_uv.T).unflatten(-1, (h, d)).transpose(-3, -2)  # all heads' values, (b, h, j, d)
    return attention(q, k, v, mask)[0]


def sliding_window_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, window: int) -> torch.Tensor:
    """Causal attention in which query i sees only the last ``window`` keys, i - window < j <= i.

    Shape: q ``(..., n, d)``, k ``(..., n, d)``, v ``(..., n, dv)`` -> ``(..., n, dv)``.
    """
    i = torch.arange(q.shape[-2], device=q.device)[:, None]  # query positions, (i, 1)
    j = torch.arange(k.shape[-2], device=q.device)[None, :]  # key positions, (1, j)
    mask = (j <= i) & (j > i - window)  # True = may attend, (i, j)
    return attention(q, k, v, mask)[0]


__all__ += ["kv_cache_bytes", "attention_flops"]


def kv_cache_bytes(*, num_layers: int, num_kv_heads: int, head_dim: int, seq_len: int, batch_size: int = 1,
                   dtype: torch.dtype = torch.bfloat16, latent_dim: int | None = None) -> int:
    """The bytes a decoder's cache keeps, counted from tensors of the shapes it keeps (on the meta device, so nothing
    is allocated): per layer a key and a value tensor ``(b, h_kv, n, d)``, or one latent tensor ``(b, n, r)``.

    Shape: integers and a dtype -> an integer number of bytes.
    """
    if latent_dim is not None:
        per_layer = [(batch_size, seq_len, latent_dim)]  # the latents c^j
    else:
        per_layer = [(batch_size, num_kv_heads, seq_len, head_dim)] * 2  # keys and values
    return num_layers * sum(torch.empty(shape, dtype=dtype, device="meta").nbytes for shape in per_layer)


def attention_flops(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> int:
    """The floating-point operations of attention's two matrix products, a multiply and an add counted as 2 (as
    PyTorch's counter does): q k^T is 2 i j d per (batch, head), the weighted sum of the values 2 i j dv.

    Shape: q ``(..., i, d)``, k ``(..., j, d)``, v ``(..., j, dv)`` -> an integer.
    """
    slices = math.prod(torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2]))  # batch x heads
    i, j, d, dv = q.shape[-2], k.shape[-2], q.shape[-1], v.shape[-1]
    return slices * (2 * i * j * d + 2 * i * j * dv)
