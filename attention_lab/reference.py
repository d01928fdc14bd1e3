"""The plain math of every attention the package computes: slow, obviously correct, no tricks.

Each function is a few lines in Lee's notation (q^i, k^j, alpha_{i,j}, b^i), base e, nothing in place. The fast
paths elsewhere in the package are tested against these (values and gradients, fp64), and the lessons show these
first. A query with no allowed key gets zeros, as everywhere in the package.
"""

from __future__ import annotations

import math

import torch

__all__ = ["attention", "blockwise_attention", "block_sparse_attention"]


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
