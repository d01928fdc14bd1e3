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

Computation: queries and keys are sorted by group; then one group at a time (a Python loop over the c groups),
batched over all (batch, head) slices, dense attention among its own members: about sum over groups of
(queries in it) * (keys in it) scores instead of i * j. Balanced groups cut the work by about c; one group that
holds most tokens (a long run of identical filler tokens, say) leaves it close to dense.

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


def _members(groups: torch.Tensor, c: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Positions sorted by group, where each group starts in that order, and how many members it has.

    Shape: groups ``(B, n)`` -> order ``(B, n)``, starts ``(B, c)``, counts ``(B, c)``.
    """
    order = groups.argsort(dim=-1, stable=True)  # (B, n)
    counts = _counts(groups, c)  # (B, c)
    return order, counts.cumsum(dim=-1) - counts, counts


def _take(order: torch.Tensor, starts: torch.Tensor, counts: torch.Tensor, g: int, capacity: int
          ) -> tuple[torch.Tensor, torch.Tensor]:
    """Positions of group g's members, padded to ``capacity`` (padding repeats position 0), and which are real.

    Shape: -> index ``(B, capacity)``, real ``(B, capacity)`` bool.
    """
    slot = torch.arange(capacity, device=order.device)  # (capacity,)
    real = slot < counts[:, g:g + 1]  # (B, capacity)
    at = (starts[:, g:g + 1] + slot).clamp(max=order.shape[-1] - 1)  # (B, capacity)
    return torch.where(real, order.gather(1, at), torch.zeros_like(at)), real


def _rows(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """x[b, index[b, t], :]. Shape: x ``(B, n, d)``, index ``(B, t)`` -> ``(B, t, d)``."""
    return x.gather(1, index[..., None].expand(-1, -1, x.shape[-1]))


def _grouped_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, qc: torch.Tensor, kc: torch.Tensor,
                       c: int) -> torch.Tensor:
    """Dense attention inside each group, one group at a time, batched over B (padded to the group's largest
    size in the batch): about sum_g |queries in g| * |keys in g| scores instead of i * j.

    Shape: q ``(B, i, d)``, k ``(B, j, d)``, v ``(B, j, dv)``, qc ``(B, i)``, kc ``(B, j)`` -> ``(B, i, dv)``.
    """
    q_order, q_starts, q_counts = _members(qc, c)
    k_order, k_starts, k_counts = _members(kc, c)
    scale = 1.0 / math.sqrt(q.shape[-1])
    out = v.new_zeros(q.shape[0], q.shape[1] + 1, v.shape[-1])  # row i collects padding, dropped at the end
    for g in range(c):
        q_cap, k_cap = int(q_counts[:, g].max()), int(k_counts[:, g].max())
        if q_cap == 0 or k_cap == 0:
            continue  # no query, or no key: the group's queries keep their zeros
        q_index, q_real = _take(q_order, q_starts, q_counts, g, q_cap)
        k_index, k_real = _take(k_order, k_starts, k_counts, g, k_cap)
        scores = _rows(q, q_index) @ _rows(k, k_index).transpose(-2, -1) * scale  # (B, q_cap, k_cap)
        scores = scores.masked_fill(~k_real[:, None, :], float("-inf"))
        top = scores.amax(dim=-1, keepdim=True)  # (B, q_cap, 1)
        top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))  # this batch row has no key in g
        weights = torch.exp(scores - top)
        total = weights.sum(dim=-1, keepdim=True)
        heads = (weights / torch.where(total > 0, total, torch.ones_like(total))) @ _rows(v, k_index)  # (B, q_cap, dv)
        target = torch.where(q_real, q_index, q.shape[1])  # padding goes to the spare row, (B, q_cap)
        out = out.scatter(1, target[..., None].expand(-1, -1, v.shape[-1]), heads)
    return out[:, :-1]  # (B, i, dv)


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
