"""Cluster attention: group queries and keys, and let each query attend only to the keys of its own group.

Two published ways to group: Reformer's LSH (random rotations hash similar vectors to the same bucket, a fresh
random draw that ignores the data) and the Routing Transformer's k-means (centroids fitted to the vectors). This
module uses **k-means**, for three reasons: it adapts to where this input's queries and keys actually lie, so at
the same number of groups more of each query's heavy keys land in its group; the number of groups is any integer
(angular LSH needs an even number of buckets); and the result is deterministic for a seed, the same property the
tests and the lesson rely on.

As in the Routing Transformer, queries and keys share one set of centroids and both are unit-normalised first
(spherical k-means: similarity = cosine), so q^i and k^j meet when both are close to one centroid, which makes
q^i . k^j large. Here the centroids are fitted for every call (``_ITERATIONS`` Lloyd steps from ``num_clusters``
vectors drawn with ``seed``), per (batch, head); the Routing Transformer instead learns them during training with
a moving average. A query whose group holds no key gets zeros, as everywhere in the package.

Computation: queries and keys are sorted by group and padded to the largest group, and every group runs dense
attention on its own members, batched: cost about c * (largest query group) * (largest key group) scores instead of
i * j. If the groups are so uneven that this exceeds the dense cost, it falls back to dense attention with the
group mask (the same result).

Differences from :func:`attention_lab.reference.cluster_attention` (dense attention masked by the groups): the
sorting and padding. Same numbers up to rounding.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .._validation import check_positive_int, check_qkv, fail

__all__ = ["cluster_attention", "kmeans_clusters"]

_ITERATIONS = 5  # Lloyd steps; the assignments rarely change after a few


def kmeans_clusters(q: torch.Tensor, k: torch.Tensor, *, num_clusters: int, seed: int = 0
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """Spherical k-means over the unit-normalised queries and keys together, per (batch, head) slice.

    Centroids start at ``num_clusters`` distinct vectors drawn with ``seed`` (its own generator: the global
    random state is not touched), then ``_ITERATIONS`` times: assign each vector to the centroid with the largest
    cosine, move each centroid to the normalised mean of its members (a centroid left empty stays). Returns each
    query's and each key's group.

    Shape: q ``(..., i, d)``, k ``(..., j, d)`` -> query_clusters ``(..., i)``, key_clusters ``(..., j)`` (long).
    """
    fn = "kmeans_clusters"
    check_qkv(fn, q, k, k)
    _check_clusters(fn, num_clusters, seed, k.shape[-2])
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2])
    i, j, d = q.shape[-2], k.shape[-2], q.shape[-1]
    with torch.no_grad():
        points = torch.cat([q.expand(*lead, i, d), k.expand(*lead, j, d)], dim=-2).reshape(-1, i + j, d)  # (B, N, d)
        points = F.normalize(points, dim=-1)
        generator = torch.Generator().manual_seed(seed)
        first = torch.rand(points.shape[0], i + j, generator=generator).argsort(dim=-1)[:, :num_clusters]  # (B, c)
        centroids = points.gather(1, first.to(points.device)[..., None].expand(-1, -1, d))  # (B, c, d)
        for _ in range(_ITERATIONS):
            groups = (points @ centroids.transpose(-2, -1)).argmax(dim=-1)  # (B, N)
            sums = torch.zeros_like(centroids).scatter_add_(1, groups[..., None].expand(-1, -1, d), points)
            filled = sums.norm(dim=-1, keepdim=True) > 0  # (B, c, 1)
            centroids = torch.where(filled, F.normalize(sums, dim=-1), centroids)  # (B, c, d)
        groups = (points @ centroids.transpose(-2, -1)).argmax(dim=-1)  # (B, N)
    return groups[:, :i].reshape(*lead, i), groups[:, i:].reshape(*lead, j)


def _check_clusters(fn: str, num_clusters: object, seed: object, n_keys: int) -> None:
    check_positive_int(fn, "num_clusters", num_clusters)
    check_positive_int(fn, "seed", seed, minimum=0)
    if num_clusters > n_keys:
        fail(fn, f"num_clusters must be at most the number of keys j={n_keys}, got num_clusters={num_clusters}; "
                 f"more groups than keys leaves groups with no key at all")


def _counts(groups: torch.Tensor, c: int) -> torch.Tensor:
    """Members per group. Shape: groups ``(B, n)`` -> ``(B, c)`` (long)."""
    return torch.zeros(groups.shape[0], c, dtype=torch.long, device=groups.device).scatter_add_(
        1, groups, torch.ones_like(groups))


def _slots(groups: torch.Tensor, c: int) -> tuple[torch.Tensor, int]:
    """Each member's flat slot ``group * capacity + rank within its group``, and the capacity (largest group).

    Shape: groups ``(B, n)`` -> slots ``(B, n)``, an int.
    """
    order = groups.argsort(dim=-1, stable=True)  # members sorted by group, (B, n)
    counts = _counts(groups, c)  # (B, c)
    capacity = max(1, int(counts.max()))
    starts = counts.cumsum(dim=-1) - counts  # first sorted position of each group, (B, c)
    sorted_groups = groups.gather(1, order)  # (B, n)
    rank = torch.arange(groups.shape[-1], device=groups.device) - starts.gather(1, sorted_groups)  # (B, n)
    slots = torch.empty_like(groups).scatter_(1, order, sorted_groups * capacity + rank)  # back in sequence order
    return slots, capacity


def _padded(x: torch.Tensor, slots: torch.Tensor, size: int) -> torch.Tensor:
    """Members of x placed at their slots in a zero-filled ``(B, size, d)``."""
    out = x.new_zeros(x.shape[0], size, x.shape[-1])
    return out.scatter(1, slots[..., None].expand(-1, -1, x.shape[-1]), x)  # (B, size, d)


def _grouped_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, qc: torch.Tensor, kc: torch.Tensor,
                       c: int) -> torch.Tensor:
    q_slots, q_cap = _slots(qc, c)
    k_slots, k_cap = _slots(kc, c)
    b, i, j = q.shape[0], q.shape[-2], k.shape[-2]
    if c * q_cap * k_cap > i * j:  # very uneven groups: dense attention with the group mask costs less
        same = qc[:, :, None] == kc[:, None, :]  # (B, i, j)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=same)
        return torch.where(same.any(dim=-1, keepdim=True), out, torch.zeros((), dtype=out.dtype, device=out.device))
    qg = _padded(q, q_slots, c * q_cap).reshape(b, c, q_cap, q.shape[-1])  # (B, c, q_cap, d)
    kg = _padded(k, k_slots, c * k_cap).reshape(b, c, k_cap, k.shape[-1])  # (B, c, k_cap, d)
    vg = _padded(v, k_slots, c * k_cap).reshape(b, c, k_cap, v.shape[-1])  # (B, c, k_cap, dv)
    counts = _counts(kc, c)  # keys per group, (B, c)
    real = torch.arange(k_cap, device=q.device) < counts[..., None]  # slot holds a key, (B, c, k_cap)
    scores = (qg @ kg.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))  # (B, c, q_cap, k_cap)
    scores = scores.masked_fill(~real[:, :, None, :], float("-inf"))
    top = scores.amax(dim=-1, keepdim=True)  # (B, c, q_cap, 1)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))  # a group with no key
    weights = torch.exp(scores - top)
    total = weights.sum(dim=-1, keepdim=True)
    out = (weights / torch.where(total > 0, total, torch.ones_like(total))) @ vg  # (B, c, q_cap, dv)
    flat = out.reshape(b, c * q_cap, v.shape[-1])  # (B, c*q_cap, dv)
    return flat.gather(1, q_slots[..., None].expand(-1, -1, v.shape[-1]))  # back in query order, (B, i, dv)


def cluster_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, num_clusters: int, seed: int = 0,
                      return_clusters: bool = False
                      ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Softmax attention within groups found by spherical k-means (Routing Transformer style, see the module).

    Query i attends to key j only when both fall in the same group: the result equals dense attention masked by
    ``query_clusters[..., :, None] == key_clusters[..., None, :]``, and a query whose group has no key gets zeros.
    ``return_clusters=True`` returns ``(output, query_clusters, key_clusters)``. Deterministic for a ``seed``.

    Shape: q ``(..., i, d)``, k ``(..., j, d)``, v ``(..., j, dv)`` -> ``(..., i, dv)`` (and ``(..., i)``,
        ``(..., j)`` long).
    """
    fn = "cluster_attention"
    check_qkv(fn, q, k, v)
    _check_clusters(fn, num_clusters, seed, k.shape[-2])
    if not isinstance(return_clusters, bool):
        fail(fn, f"return_clusters must be True or False, got {type(return_clusters).__name__}", TypeError)
    query_clusters, key_clusters = kmeans_clusters(q, k, num_clusters=num_clusters, seed=seed)
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    i, j = q.shape[-2], k.shape[-2]
    q3 = q.expand(*lead, i, q.shape[-1]).reshape(-1, i, q.shape[-1])  # (B, i, d)
    k3 = k.expand(*lead, j, k.shape[-1]).reshape(-1, j, k.shape[-1])  # (B, j, d)
    v3 = v.expand(*lead, j, v.shape[-1]).reshape(-1, j, v.shape[-1])  # (B, j, dv)
    qc = query_clusters.expand(*lead, i).reshape(-1, i)  # (B, i)
    kc = key_clusters.expand(*lead, j).reshape(-1, j)  # (B, j)
    out = _grouped_attention(q3, k3, v3, qc, kc, num_clusters).reshape(*lead, i, v.shape[-1])  # (..., i, dv)
    if return_clusters:
        return out, query_clusters.expand(*lead, i), key_clusters.expand(*lead, j)
    return out
