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

Computation: queries and keys are sorted by group; then, for every (batch, head) slice and group, one fused
dense attention among the group's own members (a Python loop over slices and groups): sum over groups of (queries
in it) * (keys in it) scores instead of i * j. Balanced groups cut the work by about c; one group that holds most
tokens (a long run of identical filler tokens, say) leaves it close to dense.

How it differs from :func:`attention_lab.reference.cluster_attention` (dense attention masked by "same group";
tested equal in fp64, values and gradients) and what that buys: the reference computes all i x j scores and masks
the pairs in different groups; here queries and keys are sorted by group and each group's members meet only each
other, in one fused attention call per group, so no score across groups is ever computed and no i x j matrix
exists. Same numbers up to rounding.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .._validation import check_bool, check_positive_int, check_qkv, check_seed, check_tensor, fail
from ..core.functional import _empty_attention

__all__ = ["attention_within_clusters", "cluster_attention", "kmeans_clusters"]

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
    check_seed(fn, seed)
    if num_clusters > n_keys > 0:  # no key at all: every query gets zeros, as in SDPA
        fail(fn, f"num_clusters must be at most the number of keys j={n_keys}, got num_clusters={num_clusters}; "
                 f"more groups than keys leaves groups with no key at all")


def _members(groups: torch.Tensor, c: int) -> tuple[torch.Tensor, list[list[int]], list[list[int]]]:
    """Positions sorted by group, and where each group starts in that order and how many members it has.

    Shape: groups ``(B, n)`` -> order ``(B, n)``, starts and counts ``B`` lists of ``c`` ints.
    """
    order = groups.argsort(dim=-1, stable=True)  # (B, n)
    counts = torch.zeros(groups.shape[0], c, dtype=torch.long, device=groups.device).scatter_add_(
        1, groups, torch.ones_like(groups))  # (B, c)
    return order, (counts.cumsum(dim=-1) - counts).tolist(), counts.tolist()


def _grouped_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, qc: torch.Tensor, kc: torch.Tensor,
                       c: int) -> torch.Tensor:
    """Dense attention inside each group: one fused ``scaled_dot_product_attention`` call per (slice, group) on
    exactly that group's queries and keys, so sum_g |queries in g| * |keys in g| scores instead of i * j.

    One call per slice and group, with no padding: padding the groups to a common size would need a mask, and with
    a mask PyTorch's CPU kernel falls back to one that stores every score of the padded group. On a GPU the many
    small calls cost launch time instead; this path is written for the CPU.

    Shape: q ``(B, i, d)``, k ``(B, j, d)``, v ``(B, j, dv)``, qc ``(B, i)``, kc ``(B, j)`` -> ``(B, i, dv)``.
    """
    q_order, q_starts, q_counts = _members(qc, c)
    k_order, k_starts, k_counts = _members(kc, c)
    heads, rows, positions = [], [], []
    for b in range(q.shape[0]):
        for g in range(c):
            nq, nk = q_counts[b][g], k_counts[b][g]
            if nq == 0 or nk == 0:
                continue  # no query, or no key: the group's queries keep their zeros
            mine = q_order[b, q_starts[b][g]:q_starts[b][g] + nq]  # this group's queries, (nq,)
            theirs = k_order[b, k_starts[b][g]:k_starts[b][g] + nk]  # its keys, (nk,)
            one = F.scaled_dot_product_attention(q[b, mine][None, None], k[b, theirs][None, None],
                                                 v[b, theirs][None, None])  # (1, 1, nq, dv): the fused kernel's 4-d
            heads.append(one[0, 0])  # (nq, dv)
            rows.append(torch.full_like(mine, b))
            positions.append(mine)
    out = v.new_zeros(q.shape[0], q.shape[1], v.shape[-1])  # (B, i, dv)
    if not heads:  # no query has a key: zeros, still joined to q, k, v so that backward gives zero gradients
        return out + 0.0 * (q.sum() + k.sum() + v.sum())
    return out.index_put((torch.cat(rows), torch.cat(positions)), torch.cat(heads))  # each query written once


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
    check_bool(fn, "return_clusters", return_clusters)
    empty = _empty_attention(q, k, v)
    if empty is not None:
        lead = empty.shape[:-2]
        none = torch.zeros(*lead, q.shape[-2], dtype=torch.long, device=q.device)  # (..., i): group 0 of none
        return (empty, none, torch.zeros(*lead, k.shape[-2], dtype=torch.long, device=q.device)) if return_clusters \
            else empty
    query_clusters, key_clusters = kmeans_clusters(q, k, num_clusters=num_clusters, seed=seed)
    out = _within_clusters(fn, q, k, v, query_clusters, key_clusters, num_clusters)  # (..., i, dv)
    if return_clusters:
        lead = out.shape[:-2]
        return out, query_clusters.expand(*lead, q.shape[-2]), key_clusters.expand(*lead, k.shape[-2])
    return out


def attention_within_clusters(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, query_clusters: torch.Tensor,
                              key_clusters: torch.Tensor) -> torch.Tensor:
    """Softmax attention in which query i sees key j only when both are in the same cluster, for clusters given
    (by :func:`kmeans_clusters` or any other grouping): what :func:`cluster_attention` computes after its k-means.
    A query whose cluster holds no key gets zeros.

    Shape: q ``(..., i, d)``, k ``(..., j, d)``, v ``(..., j, dv)``, query_clusters ``(..., i)``, key_clusters
        ``(..., j)`` (long, >= 0; leading dimensions broadcast) -> ``(..., i, dv)``.
    """
    fn = "attention_within_clusters"
    check_qkv(fn, q, k, v)
    for name, clusters, n in (("query_clusters", query_clusters, q.shape[-2]), ("key_clusters", key_clusters,
                                                                                  k.shape[-2])):
        check_tensor(fn, name, clusters, min_dim=1)
        if clusters.dtype != torch.long or clusters.shape[-1] != n or bool((clusters < 0).any()):
            fail(fn, f"{name} must be a long tensor of shape (..., {n}) holding one cluster index >= 0 per position, "
                     f"got dtype {clusters.dtype} and shape {tuple(clusters.shape)}; take them from kmeans_clusters")
    num_clusters = 1 + max((int(c.max()) for c in (query_clusters, key_clusters) if c.numel()), default=0)
    return _within_clusters(fn, q, k, v, query_clusters, key_clusters, num_clusters)


def _within_clusters(fn: str, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, query_clusters: torch.Tensor,
                     key_clusters: torch.Tensor, c: int) -> torch.Tensor:
    """Flatten the broadcast leading dimensions into one batch axis B, attend within clusters, restore them.

    Shape: q ``(..., i, d)``, k and v ``(..., j, d|dv)``, clusters ``(..., i)`` and ``(..., j)`` -> ``(..., i, dv)``.
    """
    try:
        lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2], query_clusters.shape[:-1],
                                      key_clusters.shape[:-1])
    except RuntimeError:
        fail(fn, f"the leading dimensions of q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)} and of the "
                 f"clusters {tuple(query_clusters.shape)}, {tuple(key_clusters.shape)} do not broadcast")
    i, j = q.shape[-2], k.shape[-2]
    q3 = q.expand(*lead, i, q.shape[-1]).reshape(-1, i, q.shape[-1])  # (B, i, d)
    k3 = k.expand(*lead, j, k.shape[-1]).reshape(-1, j, k.shape[-1])  # (B, j, d)
    v3 = v.expand(*lead, j, v.shape[-1]).reshape(-1, j, v.shape[-1])  # (B, j, dv)
    qc = query_clusters.expand(*lead, i).reshape(-1, i)  # (B, i)
    kc = key_clusters.expand(*lead, j).reshape(-1, j)  # (B, j)
    return _grouped_attention(q3, k3, v3, qc, kc, c).reshape(*lead, i, v.shape[-1])  # (..., i, dv)
