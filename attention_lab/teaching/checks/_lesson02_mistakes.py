"""What the common wrong answers of lesson 02's exercises compute, each with the hint that names its mistake: the
checks in :mod:`lesson02` call these once an answer is known to be wrong (each raises the hint it finds, or returns
and leaves the check's general hint to the caller)."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from ...i18n import msg
from ._core import close, hint


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, dim: int = -1) -> torch.Tensor:
    """softmax(q kᵀ · scale) v over ``dim``. Shape: q ``(..., i, d)``, k ``(..., j, d)``, v ``(..., j, dv)`` ->
    ``(..., i, dv)``."""
    return torch.softmax(q @ k.transpose(-2, -1) * scale, dim=dim) @ v  # (..., i, dv)


def softmax_mistake(got: torch.Tensor, x: torch.Tensor) -> None:
    """Name the mistake behind a wrong softmax of ordinary scores ``x`` (no overflow possible), if it is a known one."""
    x = x.double()
    shifted = (x - x.amax(dim=-1, keepdim=True)).exp()  # each row's exponentials, up to a factor
    if x.dim() == 2 and x.shape[0] == x.shape[1]:
        lost = (x - x.amax(dim=-1)).exp()  # per-row maxima without their axis line up with the columns
        if close(got, lost / lost.sum(dim=-1, keepdim=True)):
            hint(msg("a maximum taken per row has lost its axis, so it lines up with the columns when you subtract "
                     "it; keep that axis so every row is shifted by its own maximum"))
        if close(got, shifted / shifted.sum(dim=-1)):
            hint(msg("the row sums have lost their axis, so they line up with the columns when you divide; keep "
                     "that axis so every row is divided by its own sum"))
    if any(close(got, torch.softmax(x, dim=axis)) for axis in range(x.dim() - 1)):
        hint(msg("on scores of shape {shape} your weights are normalised over another axis; normalise over the "
                 "last axis, the keys, whatever the number of axes", shape=tuple(x.shape)))
    if close(got, shifted) or close(got, x.exp()):  # also exp divided by the row's largest exp, which is shifted
        hint(msg("your weights do not sum to 1 along each row: divide the exponentials by their row's sum"))
    if close(got, shifted / shifted.sum()) or close(got, x.exp() / x.exp().sum()):
        hint(msg("your weights sum to 1 over the whole tensor; each row must sum to 1 on its own"))
    if close(got, x - torch.logsumexp(x, dim=-1, keepdim=True)):
        hint(msg("those are the logarithms of the weights (a log-softmax); softmax gives the weights themselves, "
                 "positive and summing to 1"))


def attention_mistake(got: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, expected: torch.Tensor,
                      fixed_ds: set[int]) -> None:
    """Name the mistake behind a wrong attention output, if it is a known one."""
    d = q.shape[-1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(d)  # (..., i, j)
    if q.dim() == 2 and close(got, torch.softmax(q @ k.T / math.sqrt(q.shape[0]), dim=0) @ v):
        hint(msg("this still computes what the classmate's function computes; it has more than one bug: for each "
                 "line ask which axis it works on and which axis it should work on"))
    if close(got, torch.softmax(scores, dim=-1)):
        hint(msg("those are the weights; multiply them by V to mix the values"))
    if got.shape == expected.shape[:-1] + k.shape[-1:] and close(got, attention(q, k, k, 1 / math.sqrt(d))):
        hint(msg("you mixed the keys; the output is a weighted sum of the value vectors, the rows of V"))
    if got.shape != expected.shape:
        hint(msg("for Q {q}, K {k}, V {v} the output has one row per query and one column per value feature: "
                 "shape {expected}, yours is {shape}", q=tuple(q.shape), k=tuple(k.shape), v=tuple(v.shape),
                 expected=tuple(expected.shape), shape=tuple(got.shape)))
    if close(got, torch.softmax(scores, dim=-2) @ v):
        hint(msg("the softmax still runs over the queries; each query's weights over the keys must sum to 1"))
    if any(close(got, torch.softmax(scores, dim=axis) @ v) for axis in range(scores.dim() - 2)):
        hint(msg("on a batch Q of shape {shape} your softmax runs over another axis; the keys are the last axis, "
                 "whatever the number of axes", shape=tuple(q.shape)))
    for n in (set(q.shape[:-1]) | {k.shape[-2], v.shape[-1]}) - {d}:  # every other size the inputs offer
        if close(got, attention(q, k, v, 1 / math.sqrt(n))):
            hint(msg("the scale is 1/sqrt(d), with d the size of one query vector (the last axis of Q), not a "
                     "count of tokens, heads or value features"))
    for n in fixed_ds - {d}:  # a d that fits another input the check tries, such as the lesson's Q
        if close(got, attention(q, k, v, 1 / math.sqrt(n))):
            hint(msg("your scale is 1/sqrt({n}) for Q of shape {shape}; read d from the input (the last axis of Q) "
                     "instead of a fixed number", n=n, shape=tuple(q.shape)))
    if close(got, attention(q, k, v, 1.0)):
        hint(msg("the scores are missing the 1/sqrt(d) scale"))
    if close(got, attention(q, k, v, 1 / d)):
        hint(msg("divide the scores by sqrt(d), not by d"))


def variance_mistake(near: Callable[[float], bool], d: int, s2: float) -> None:
    """Name the formula behind a wrong variance, if it is a known one (``near(x)``: the answer equals x)."""
    if near(math.sqrt(d * s2 * s2)):
        hint(msg("that is the standard deviation of q · k; the question asks for its variance"))
    if s2 != 1 and near(d * s2):
        hint(msg("each product q_t k_t multiplies two independent numbers of variance s^2 each: the variance of the "
                 "product is s^2 times s^2, not s^2"))
    if s2 != 1 and near(2 * d * s2):
        hint(msg("the variance of a product of two independent numbers of mean 0 is the product of their "
                 "variances, not their sum"))
    if s2 != 1 and near(d):
        hint(msg("that is the variance when every entry has variance 1; here the entries have variance {s2:g}",
                 s2=s2))
    if near(s2 * s2):
        hint(msg("that is the variance of one product q_t k_t (and of q · k after the 1/sqrt(d) scale); before any "
                 "scaling q · k adds up d such products, and variances of independent terms add"))
    if near(1.0):
        hint(msg("1 is the variance after the 1/sqrt(d) scale when the entries have variance 1; here the entries "
                 "have variance {s2:g}, and the question asks before any scaling", s2=s2))
    if near(s2) or near(2 * s2):
        hint(msg("that is about one entry or one pair of entries; q · k adds up d products q_t k_t"))
    if near(d * d * s2 * s2):
        hint(msg("variances of independent terms add: d products give d times the variance of one, not d^2 times"))
