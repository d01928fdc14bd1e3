"""Checks for lesson 10 (the efficient-attention family: linear attention with decay, the size of a recurrent
state, a causal linear attention that leaks the future).

Each answer is a function, tried on several inputs: two shapes (with and without leading batch and head axes) and
two decays; state sizes on which the common wrong counts differ; a leak test that changes the tokens after several
split points and reads an answer's NaN or inf as what it is, never as a leak.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ...core.masks import causal_mask
from ...efficient.linear import linear_attention
from ...i18n import msg
from ...measure.memory import format_bytes
from ._calls import recording_calls
from ._core import as_tensor, call_learner, close, correct, fallback_hint, guard_errors, hint, learner_name
from ._function_answers import expect_function
from ._sizes import check_function

__all__ = ["decayed_linear_attention", "fixed_causal_linear", "recurrent_state_bytes"]  # the checks

_SHAPES = ((7, 3, 2), (2, 3, 11, 4, 5))  # (n, d, dv) and (b, h, n, d, dv): a hard-coded axis fails one of them


def _inputs(shape: tuple[int, ...], seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    *lead, n, d, dv = shape
    q = torch.randn(*lead, n, d, generator=g, dtype=torch.float64)
    k = torch.randn(*lead, n, d, generator=g, dtype=torch.float64)
    v = torch.randn(*lead, n, dv, generator=g, dtype=torch.float64)
    return q, k, v


def _phi(x: torch.Tensor) -> torch.Tensor:
    return F.elu(x) + 1


def _decayed(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, gamma: float, *, state_decay: float | None = None,
             norm_decay: float | None = None, causal: bool = True, phi=_phi, normalise: bool = True) -> torch.Tensor:
    """Quadratic form: weight gamma^(t - s) phi(q^t) . phi(k^s) for s <= t, rows normalised (the expected value,
    and with other decays, feature maps or masks, the results of common mistakes)."""
    n = q.shape[-2]
    t = torch.arange(n, dtype=torch.float64)
    gap = (t[:, None] - t[None, :]).clamp(min=0)  # t - s, (n, n)
    similarity = phi(q) @ phi(k).transpose(-2, -1)  # (..., n, n)
    allowed = causal_mask(n) if causal else torch.ones(n, n, dtype=torch.bool)  # (n, n)
    s_weights = similarity * (gamma if state_decay is None else state_decay) ** gap * allowed
    z_weights = similarity * (gamma if norm_decay is None else norm_decay) ** gap * allowed
    return (s_weights @ v) / z_weights.sum(dim=-1, keepdim=True) if normalise else s_weights @ v


def _decayed_unmasked(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, gamma: float) -> torch.Tensor:
    """The parallel form with gamma^(t - s) for every s, later keys included (a mask that forgot causality)."""
    t = torch.arange(q.shape[-2], dtype=torch.float64)
    weights = _phi(q) @ _phi(k).transpose(-2, -1) * gamma ** (t[:, None] - t[None, :])  # (..., n, n)
    return (weights @ v) / weights.sum(dim=-1, keepdim=True)


def _as_output(got: object, expected: torch.Tensor, name: object) -> torch.Tensor:
    """The learner's output as a float64 tensor of the expected shape, or a hint."""
    got = as_tensor(got, msg("what {name} returns", name=name))
    if got.shape != expected.shape:
        hint(msg("with v of shape {expected} the output should have that shape too (one output of dv numbers per "
                 "position), got {shape}; work on the last two axes only, so that any leading (batch, head) axes "
                 "pass through", expected=tuple(expected.shape), shape=tuple(got.shape)))
    return got.double()
    return got


def _not_finite(got: torch.Tensor, name: object) -> None:
    """A hint for an output with NaN or inf (read before any comparison: a NaN is never a leak or a mistake)."""
    if not torch.isfinite(got).all():
        bad = sorted({int(i) for i in torch.nonzero(~torch.isfinite(got))[:, -2]})
        hint(msg("{name} gives NaN or inf at positions {positions}: a division by zero (a row whose weights are all "
                 "0) or an exponent that overflows? Each output is a weighted average, finite for any input",
                 name=name, positions=", ".join(map(str, bad[:6]))))


def _matches(got: torch.Tensor, wrong: torch.Tensor) -> bool:
    """The learner's output equals a mistake's, NaN where it has NaN."""
    return got.shape == wrong.shape and torch.allclose(got, wrong.double(), atol=1e-6, rtol=1e-6, equal_nan=True)


def _weighted(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, decay: torch.Tensor) -> torch.Tensor:
    weights = _phi(q) @ _phi(k).transpose(-2, -1) * decay  # (..., n, n)
    return (weights @ v) / weights.sum(dim=-1, keepdim=True)


def _decay_mistakes(q, k, v, gamma):
    t = torch.arange(q.shape[-2], dtype=torch.float64)
    gap = t[:, None] - t[None, :]  # t - s, (n, n)
    return (
        (linear_attention(q, k, v, causal=True),
         msg("that is linear attention without forgetting: multiply the state by gamma before adding each new key, "
             "so a key s steps back counts gamma^s times less")),
        (_decayed(q, k, v, gamma, norm_decay=1.0),
         msg("S forgets but z does not: the normaliser must forget at the same rate as the state, or the weights of "
             "each output no longer sum to 1")),
        (_decayed(q, k, v, gamma, state_decay=1.0), msg("z forgets but S does not: decay both sums by gamma at every "
                                                        "step")),
        (_decayed(q, k, v, gamma, causal=False),
         msg("every position reads keys from later positions: a causal state holds only keys 0..t when output t is "
             "computed")),
        (_decayed_unmasked(q, k, v, gamma),
         msg("later keys get weight gamma^(t - s), above 1 for s > t, instead of 0: the decay matrix must also be "
             "causal, zero above the diagonal")),
        (_weighted(q, k, v, torch.where(gap <= 0, gamma ** -gap, 0.0)),
         msg("every position reads keys from later positions and none from earlier ones: the decay matrix is "
             "transposed; D[t, s] = gamma^(t - s) for s <= t, 0 above the diagonal")),
        (_weighted(q, k, v, gamma ** gap.abs()),
         msg("every position reads keys from later positions: gamma^|t - s| decays both ways, but a causal state "
             "holds only keys 0..t")),
        (_decayed(q, k, v, 1.0 / gamma),
         msg("older keys weigh more than newer ones: a key s steps back should count gamma^s, with gamma < 1")),
        (_decayed(q, k, v, gamma, normalise=False),
         msg("the outputs are not normalised: divide each by phi(q^t) . z_t, the same decayed sum with the values "
             "replaced by ones")),
        (_decayed(q, k, v, gamma, phi=lambda x: x.exp()),
         msg("phi is elu(x) + 1, not exp(x): linear attention replaces the exponential by this feature map")),
        (_decayed(q, k, v, gamma, phi=torch.relu),
         msg("phi is elu(x) + 1, not relu(x): relu gives 0 for every negative feature, so a row can lose all its "
             "weight")),
    )


@guard_errors
def decayed_linear_attention(answer: object) -> None:
    """Exercise 1: ``decayed(q, k, v, gamma)``, causal linear attention (phi = elu + 1) whose state forgets:
    S_t = gamma S_{t-1} + phi(k^t) v^t^T, z_t = gamma z_{t-1} + phi(k^t), b^t = phi(q^t)^T S_t / phi(q^t)^T z_t.
    The loop and the parallel form (``decayed_parallel``) go through this one check.
    """
    fn = expect_function(answer, "decayed(q, k, v, gamma)")
    name = learner_name(fn)
    for index, shape in enumerate(_SHAPES):
        for gamma in (0.9, 0.5):
            q, k, v = _inputs(shape, seed=10 * index + int(gamma * 10))
            expected = _decayed(q, k, v, gamma)
            got = _as_output(call_learner(fn, q.clone(), k.clone(), v.clone(), gamma), expected, name)
            if close(got, expected, atol=1e-6, rtol=1e-6):
                continue
            for wrong, message in _decay_mistakes(q, k, v, gamma):
                if _matches(got, wrong):
                    hint(message)
            _not_finite(got, name)
            fallback_hint(msg("compare your output with the recurrence on a sequence of 2 or 3 positions written out "
                              "by hand: which weight does each earlier key get?"))
    correct(msg("S and z both forget by gamma each step: key s weighs gamma^(t - s) phi(q^t) . phi(k^s) in output t, "
                "a causal attention whose recent past counts most (the idea behind RetNet and gated linear "
                "attention)"))


# ---- exercise 2: the bytes of a recurrent state ----

# The exercise's model first, then sizes on which features and value_dim differ (so m (dv + 1) and dv (m + 1) do),
# with one layer of one head, and 8-byte numbers (so bits and bytes differ by a factor a count cannot fake).
_STATE_CASES = (
    {"layers": 24, "heads": 16, "features": 64, "value_dim": 64, "bytes_per_number": 2},
    {"layers": 2, "heads": 2, "features": 64, "value_dim": 16, "bytes_per_number": 4},
    {"layers": 6, "heads": 8, "features": 256, "value_dim": 32, "bytes_per_number": 4},
    {"layers": 1, "heads": 1, "features": 3, "value_dim": 5, "bytes_per_number": 8},
)


def _state(layers, heads, features, value_dim, bytes_per_number) -> int:
    return layers * heads * features * (value_dim + 1) * bytes_per_number


_STATE_MISTAKES = (
    (lambda **c: c["layers"] * c["heads"] * c["features"] * c["value_dim"] * c["bytes_per_number"],
     msg("you counted the state S; each head also keeps the normaliser z, one more number per feature")),
    (lambda **c: 8 * _state(**c), msg("that is bits: a float16 number takes 2 bytes, float32 4, float64 8")),
    (lambda **c: _state(**{**c, "layers": 1}), msg("that is one layer: every layer keeps its own state")),
    (lambda **c: _state(**{**c, "heads": 1}), msg("that is one head per layer: every head keeps its own state")),
    (lambda **c: _state(**{**c, "features": c["value_dim"], "value_dim": c["features"]}),
     msg("z has one number per feature (m of them), not one per value dimension")),
    (lambda **c: _state(**{**c, "bytes_per_number": 1}),
     msg("that counts numbers; multiply by the bytes of one number")),
    (lambda **c: 2 * c["layers"] * c["heads"] * c["features"] * c["value_dim"] * c["bytes_per_number"],
     msg("that is a KV cache of one position (a key and a value per head); the state is S (features x value_dim) "
         "and z (features)")),
)


@guard_errors
def recurrent_state_bytes(answer: object) -> None:
    """Exercise 2: ``state_bytes(layers, heads, features, value_dim, bytes_per_number)``: the bytes of every head's
    recurrent state (S, m x dv, and z, m) in every layer, for one sequence."""
    fn = expect_function(answer, "state_bytes(layers, heads, features, value_dim, bytes_per_number)")
    check_function(fn, _STATE_CASES, _state, _STATE_MISTAKES, fallback=msg(
        "count the numbers of one head (S is features x value_dim, z has features entries), then multiply by heads, "
        "layers and the bytes of one number"))
    state = _state(**_STATE_CASES[0])
    kv_cache = 24 * 16 * 2 * 100_000 * 64 * 2  # layers x heads x (key, value) x tokens x head_dim x bytes
    correct(msg("m (dv + 1) numbers per head and layer, whatever the length of the sequence: the state never grows. "
                "The exercise's model: {state}, against {cache} for a softmax model's KV cache after 100 000 tokens",
                state=format_bytes(state), cache=format_bytes(kv_cache)))


# ---- exercise 3: the causal linear attention that leaked ----

def _outputs(fn: object, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, expected: torch.Tensor) -> torch.Tensor:
    """The learner's output, finite and of the expected shape (or a hint)."""
    got = _as_output(call_learner(fn, q.clone(), k.clone(), v.clone()), expected, learner_name(fn))
    _not_finite(got, learner_name(fn))
    return got


def _leak(fn: object, q, k, v, expected: torch.Tensor) -> int | None:
    """The first split point t after which changing every later token changes an output at t or before (None when
    no split point leaks). Several split points: a sum that runs over the future shows at every one of them, a sum
    that runs one token too far only at some."""
    before = _outputs(fn, q, k, v, expected)
    n = q.shape[-2]
    for t in sorted({0, 1, n // 2, n - 2}):
        later = [x.clone() for x in (q, k, v)]
        for x in later:
            x[..., t + 1:, :] = x[..., t + 1:, :] * -2.0 + 1.0
        after = _outputs(fn, *later, expected)
        if not torch.allclose(before[..., : t + 1, :], after[..., : t + 1, :], atol=1e-9, rtol=1e-9):
            return t
    return None


@guard_errors
def fixed_causal_linear(answer: object) -> None:
    """Exercise 3: ``causal_linear(q, k, v)``, the given causal linear attention with its leak of the future fixed."""
    fn = expect_function(answer, "causal_linear(q, k, v)")
    name = learner_name(fn)
    for index, shape in enumerate(_SHAPES):
        q, k, v = _inputs(shape, seed=100 + index)
        expected = linear_attention(q, k, v, causal=True)
        with recording_calls() as calls:
            got = _outputs(fn, q, k, v, expected)
        if "linear_attention" in calls.library:
            hint(msg("{name} calls the library's linear_attention: the exercise asks you to fix the given function, "
                     "with its own running sums", name=name))
        if close(got, expected, atol=1e-6, rtol=1e-6):
            continue
        leak = _leak(fn, q, k, v, expected)
        if leak is not None:
            hint(msg("changing the tokens after position {t} still changes the output at position {t} or before: "
                     "some sum in {name} still runs over later positions; each running sum may hold keys 0..t only",
                     t=leak, name=name))
        exclusive = linear_attention(q[..., 1:, :], k[..., :-1, :], v[..., :-1, :], causal=True)
        if close(got[..., 1:, :], exclusive):
            hint(msg("query t must also see its own key t: the running sums include position t"))
        fallback_hint(msg("no leak left, but the values differ: compare with linear_attention(q, k, v, causal=True) "
                          "row by row"))
    correct(msg("both running sums, S and z, now stop at position t: no output reads a later token"))
