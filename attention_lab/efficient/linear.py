"""Linear attention (线性注意力): softmax replaced by a feature map, so the i x j matrix is never needed.

Softmax attention weighs value v^j by exp(q^i . k^j / sqrt(d)). Katharopoulos et al. (2020, "Transformers are
RNNs") replace that similarity by phi(q^i) . phi(k^j) for a feature map phi with non-negative outputs, here
phi(x) = elu(x) + 1. Then

    b^i = sum_j (phi(q^i) . phi(k^j)) v^j / sum_j phi(q^i) . phi(k^j) = phi(q^i)^T S / phi(q^i)^T z,

with S = sum_j phi(k^j) v^j^T (a d x dv matrix) and z = sum_j phi(k^j) (a d-vector). Matrix products are
associative: (phi(Q) phi(K)^T) V costs n^2 d, phi(Q) (phi(K)^T V) costs n d^2. With a causal mask the sums run over
j <= i, so S and z are running sums: a recurrent network (RNN) whose state (S, z) has a fixed size, and generating a
token costs the same at every position (:func:`linear_attention_recurrent`).

The causal parallel form here works in chunks of ``_CHUNK`` positions: inside a chunk the (chunk x chunk) masked
matrix, across chunks the running state. Time O(n chunk d + n d dv), memory O(n d + n dv), no i x j matrix
(a cumulative sum over every position would hold n states of d x dv numbers instead).

How it differs from :func:`attention_lab.reference.linear_attention` (the quadratic form: the i x j weights
phi(q^i) . phi(k^j) written out, each row divided by its sum; tested equal in fp64, values and gradients) and what
that buys: the products are taken in the other order, phi(Q) (phi(K)^T V), and the causal case in chunks, so time
and memory grow linearly with n instead of quadratically, and no i x j matrix exists. Same numbers up to
rounding.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from .._validation import check_bool, check_choice, check_qkv, fail
from ..core.masks import causal_mask

__all__ = ["FEATURE_MAPS", "LinearAttentionState", "kernel_attention", "linear_attention", "linear_attention_recurrent"]

_CHUNK = 64  # causal chunk: a (64 x 64) masked matrix per chunk; larger chunks do more masked-out work


def _elu_plus_one(x: torch.Tensor) -> torch.Tensor:
    return F.elu(x) + 1.0


FEATURE_MAPS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {"elu": _elu_plus_one, "relu": F.relu}
"""Named feature maps: ``"elu"`` is elu(x) + 1 (> 0 everywhere), ``"relu"`` is max(x, 0) (zero for a whole row
of negative numbers, and such a query then gets a zero output)."""


def _check_feature_map(fn: str, feature_map: object) -> str | Callable[[torch.Tensor], torch.Tensor]:
    """A name of :data:`FEATURE_MAPS` or a callable; checked where it is given (a spec, a state), not at first use."""
    if isinstance(feature_map, str):
        check_choice(fn, "feature_map", feature_map, sorted(FEATURE_MAPS), hint="or pass a callable x -> phi(x) >= 0")
    elif not callable(feature_map):
        fail(fn, f"feature_map must be a name ({sorted(FEATURE_MAPS)}) or a callable, got "
                 f"{type(feature_map).__name__}; pass feature_map='elu' or a function x -> phi(x) >= 0", TypeError)
    return feature_map


def _features(fn: str, feature_map: object, x: torch.Tensor, name: str) -> torch.Tensor:
    """phi(x) for a named or callable feature map, checked: a tensor of x's leading shape, no negative value."""
    if isinstance(_check_feature_map(fn, feature_map), str):
        return FEATURE_MAPS[feature_map](x)
    phi = feature_map(x)
    if not isinstance(phi, torch.Tensor) or phi.dim() != x.dim() or phi.shape[:-1] != x.shape[:-1]:
        fail(fn, f"feature_map must return a tensor of shape (..., n, m) for {name} of shape {tuple(x.shape)}, got "
                 f"{tuple(phi.shape) if isinstance(phi, torch.Tensor) else type(phi).__name__}; map each vector of "
                 f"the last axis to m features")
    _check_non_negative(fn, f"feature_map({name})", phi)
    return phi


def _check_non_negative(fn: str, name: str, phi: torch.Tensor) -> None:
    if not phi.is_floating_point():
        fail(fn, f"{name} must be a floating tensor, got dtype {phi.dtype}", TypeError)
    low = phi.detach().amin() if phi.numel() else phi.new_zeros(())
    if not bool(low >= 0):  # also catches NaN
        fail(fn, f"{name} must be >= 0 everywhere (weights phi(q) . phi(k) must not be negative), got a minimum of "
                 f"{float(low):.4g}; use a positive map such as elu(x) + 1 or exp")


def _divide(numerator: torch.Tensor, denominator: torch.Tensor) -> torch.Tensor:
    """numerator / denominator, with 0 where the denominator is 0 (a query whose weights are all 0).

    "0" includes denominators so small that the gradient of 1/denominator would overflow (below tiny / eps:
    about 1e-31 in fp32); such weights are rounding noise anyway.
    """
    info = torch.finfo(denominator.dtype)
    ok = denominator > (info.tiny if denominator.dtype == torch.float16 else info.tiny / info.eps)
    return numerator / torch.where(ok, denominator, torch.ones_like(denominator)) * ok


def _causal_chunked(phi_q: torch.Tensor, phi_k: torch.Tensor, v: torch.Tensor, chunk: int) -> torch.Tensor:
    n, m, dv = phi_q.shape[-2], phi_q.shape[-1], v.shape[-1]
    lead = phi_q.shape[:-2]
    pad = (-n) % chunk
    if pad:  # zero features add nothing to S or z; the padded queries are cut off at the end
        phi_q, phi_k, v = (F.pad(x, (0, 0, 0, pad)) for x in (phi_q, phi_k, v))
    c = (n + pad) // chunk
    qc = phi_q.reshape(*lead, c, chunk, m)  # (..., c, chunk, m)
    kc = phi_k.reshape(*lead, c, chunk, m)  # (..., c, chunk, m)
    vc = v.reshape(*lead, c, chunk, dv)  # (..., c, chunk, dv)
    inside = torch.ones(chunk, chunk, dtype=torch.bool, device=v.device).tril()  # key s <= query t in one chunk
    a = (qc @ kc.transpose(-2, -1)) * inside  # (..., c, chunk, chunk): phi(q^t) . phi(k^s), s <= t
    states = kc.transpose(-2, -1) @ vc  # each chunk's sum of phi(k^j) v^j^T, (..., c, m, dv)
    # the state S at the start of each chunk: earlier chunks only (shifted, not "cumsum - own", which would let
    # this chunk's later keys change the rounding of its earlier outputs)
    before = F.pad(states.cumsum(dim=-3)[..., :-1, :, :], (0, 0, 0, 0, 1, 0))  # (..., c, m, dv)
    z_before = F.pad(kc.sum(dim=-2).cumsum(dim=-2)[..., :-1, :], (0, 0, 1, 0)).unsqueeze(-1)  # (..., c, m, 1)
    numerator = a @ vc + qc @ before  # (..., c, chunk, dv)
    denominator = a.sum(dim=-1, keepdim=True) + qc @ z_before  # (..., c, chunk, 1)
    out = _divide(numerator, denominator).reshape(*lead, c * chunk, dv)  # (..., n + pad, dv)
    return out[..., :n, :]


def kernel_attention(phi_q: torch.Tensor, phi_k: torch.Tensor, v: torch.Tensor, *, causal: bool = False
                     ) -> torch.Tensor:
    """Attention with weights phi(q^i) . phi(k^j), normalised per query, from features already computed.

    The engine of :func:`linear_attention` and :func:`~attention_lab.performer_attention`: any non-negative
    features work. A query whose weights are all zero gets a zero output.

    Shape: phi_q ``(..., i, m)``, phi_k ``(..., j, m)``, v ``(..., j, dv)`` -> ``(..., i, dv)``; ``causal``
        needs i == j.
    """
    fn = "kernel_attention"
    check_qkv(fn, phi_q, phi_k, v)
    _check_causal(fn, causal, phi_q, phi_k)
    _check_non_negative(fn, "phi_q", phi_q)
    _check_non_negative(fn, "phi_k", phi_k)
    return _kernel_attention(phi_q, phi_k, v, causal)


def _kernel_attention(phi_q: torch.Tensor, phi_k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    lead = torch.broadcast_shapes(phi_q.shape[:-2], phi_k.shape[:-2], v.shape[:-2])
    phi_q = phi_q.expand(*lead, *phi_q.shape[-2:])  # (..., i, m)
    phi_k = phi_k.expand(*lead, *phi_k.shape[-2:])  # (..., j, m)
    v = v.expand(*lead, *v.shape[-2:])  # (..., j, dv)
    if causal:
        return _causal_chunked(phi_q, phi_k, v, _CHUNK)
    state = phi_k.transpose(-2, -1) @ v  # S = sum_j phi(k^j) v^j^T, (..., m, dv)
    z = phi_k.sum(dim=-2).unsqueeze(-1)  # z = sum_j phi(k^j), (..., m, 1)
    return _divide(phi_q @ state, phi_q @ z)  # (..., i, dv) / (..., i, 1)


def _check_causal(fn: str, causal: object, q: torch.Tensor, k: torch.Tensor) -> None:
    check_bool(fn, "causal", causal)
    if causal and q.shape[-2] != k.shape[-2]:
        fail(fn, f"causal=True needs as many queries as keys (self-attention), got i={q.shape[-2]} and "
                 f"j={k.shape[-2]}")


def _checked_features(fn: str, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: object,
                      feature_map: object) -> tuple[torch.Tensor, torch.Tensor]:
    """phi(q) and phi(k), after the checks every linear attention makes: the shapes of q, k, v, ``causal``, the
    feature map and its output."""
    check_qkv(fn, q, k, v)
    _check_causal(fn, causal, q, k)
    return _features(fn, feature_map, q, "q"), _features(fn, feature_map, k, "k")


def linear_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = False,
                     feature_map: str | Callable[[torch.Tensor], torch.Tensor] = "elu") -> torch.Tensor:
    """Linear attention (Katharopoulos et al. 2020): b^i = phi(q^i)^T S / phi(q^i)^T z, in O(n) time and memory.

    ``feature_map`` is ``"elu"`` (elu(x) + 1, the paper's), ``"relu"``, or a callable mapping ``(..., n, d)`` to
    non-negative ``(..., n, m)`` features (a negative feature raises ``ValueError``). ``causal=True`` lets query i
    use keys j <= i (upper-left aligned, i == j); it equals :func:`linear_attention_recurrent`.

    Shape: q ``(..., i, d)``, k ``(..., j, d)``, v ``(..., j, dv)`` -> ``(..., i, dv)``.
    """
    phi_q, phi_k = _checked_features("linear_attention", q, k, v, causal, feature_map)  # (..., i, m), (..., j, m)
    return _kernel_attention(phi_q, phi_k, v, causal)


def linear_attention_recurrent(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *,
                               feature_map: str | Callable[[torch.Tensor], torch.Tensor] = "elu") -> torch.Tensor:
    """Causal linear attention one position at a time, from a state of fixed size: attention as an RNN.

    For t = 0, 1, ...: S <- S + phi(k^t) v^t^T, z <- z + phi(k^t), b^t = phi(q^t)^T S / phi(q^t)^T z. The state
    (S, z) holds m * (dv + 1) numbers per head whatever t is, so each step costs the same: this is how a linear
    attention model generates. Equal to ``linear_attention(q, k, v, causal=True, feature_map=...)``.

    Shape: q ``(..., n, d)``, k ``(..., n, d)``, v ``(..., n, dv)`` -> ``(..., n, dv)``.
    """
    phi_q, phi_k = _checked_features("linear_attention_recurrent", q, k, v, True, feature_map)  # (..., n, m) each
    lead = torch.broadcast_shapes(phi_q.shape[:-2], phi_k.shape[:-2], v.shape[:-2])
    state = v.new_zeros(*lead, phi_k.shape[-1], v.shape[-1])  # S, (..., m, dv)
    z = v.new_zeros(*lead, phi_k.shape[-1])  # z, (..., m)
    outputs = []
    for t in range(q.shape[-2]):
        state = state + phi_k[..., t, :, None] * v[..., t, None, :]  # + phi(k^t) v^t^T, (..., m, dv)
        z = z + phi_k[..., t, :]  # (..., m)
        numerator = (phi_q[..., t, :, None] * state).sum(dim=-2)  # phi(q^t)^T S, (..., dv)
        denominator = (phi_q[..., t, :] * z).sum(dim=-1, keepdim=True)  # phi(q^t)^T z, (..., 1)
        outputs.append(_divide(numerator, denominator))
    return torch.stack(outputs, dim=-2)  # (..., n, dv)


class LinearAttentionState:
    """The running state (S, z) of causal linear attention: what a decoder keeps instead of keys and values.

    ``attend(q, k, v)`` takes the queries, keys and values of the t positions that come next (t = the whole prompt,
    then 1 per new token): inside those t positions the (t x t) masked weights, before them the state, exactly as
    :func:`linear_attention_recurrent` computes it; then S += phi(K)^T V and z += the sum of phi(k^j). S and z hold
    m (dv + 1) numbers per batch row and head however many positions were seen, so each step costs the same.
    ``offset`` (positions seen), ``nbytes``, ``reset()``, and ``snapshot()``/``restore()`` as the KV caches have.

    Shape: q and k ``(b, h, t, d)``, v ``(b, h, t, dv)`` -> ``(b, h, t, dv)``; S ``(b, h, m, dv)``, z ``(b, h, m)``.
    """

    def __init__(self, *, feature_map: str | Callable[[torch.Tensor], torch.Tensor] = "elu") -> None:
        self.feature_map = _check_feature_map("LinearAttentionState", feature_map)
        self.reset()

    @property
    def nbytes(self) -> int:
        """Bytes the state holds: S and z (nothing before the first ``attend``)."""
        return 0 if self.state is None else self.state.nbytes + self.z.nbytes

    def reset(self) -> None:
        """Forget every position. Shape: S and z become None until the next ``attend``."""
        self.state, self.z, self.offset = None, None, 0

    def snapshot(self) -> tuple:
        """What :meth:`restore` needs to undo later steps (``attend`` makes new tensors, so nothing is copied)."""
        return self.offset, self.state, self.z

    def restore(self, snapshot: tuple) -> None:
        """Go back to the state :meth:`snapshot` saw. Shape: S and z as they were then."""
        self.offset, self.state, self.z = snapshot

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Causal linear attention of t new positions after those already in the state; updates the state.

        Shape: q and k ``(b, h, t, d)``, v ``(b, h, t, dv)`` -> ``(b, h, t, dv)``.
        """
        fn = "LinearAttentionState.attend"
        phi_q, phi_k = _checked_features(fn, q, k, v, True, self.feature_map)  # (b, h, t, m) each
        sizes = (*phi_k.shape[:-2], phi_k.shape[-1], v.shape[-1])  # (b, h, m, dv)
        if self.state is None:
            state, z = v.new_zeros(sizes), v.new_zeros(sizes[:-1])  # S (b, h, m, dv), z (b, h, m)
        elif self.state.shape != sizes or self.state.dtype != v.dtype:
            fail(fn, f"inputs must match the state's S of shape {tuple(self.state.shape)} ({self.state.dtype}), got "
                     f"inputs that need {sizes} ({v.dtype}); use a new LinearAttentionState for another batch, layer "
                     f"or dtype")
        else:
            state, z = self.state, self.z
        a = (phi_q @ phi_k.transpose(-2, -1)) * causal_mask(q.shape[-2], device=q.device)  # (b, h, t, t)
        numerator = a @ v + phi_q @ state  # (b, h, t, dv)
        denominator = a.sum(dim=-1, keepdim=True) + phi_q @ z.unsqueeze(-1)  # (b, h, t, 1)
        self.state = state + phi_k.transpose(-2, -1) @ v  # (b, h, m, dv)
        self.z = z + phi_k.sum(dim=-2)  # (b, h, m)
        self.offset += q.shape[-2]
        return _divide(numerator, denominator)
