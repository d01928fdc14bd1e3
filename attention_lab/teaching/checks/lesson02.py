"""Checks for lesson 02 (scaled dot-product attention)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import torch

from ._core import as_tensor, call_learner, check_tensor_answer, close, correct, guard_errors, hint


@guard_errors
def scaled_scores(answer: object, q: torch.Tensor, k: torch.Tensor, d_model: int | None = None) -> None:
    """Exercise 1: S = Q K^T / sqrt(d) for q ``(i, d)`` and k ``(j, d)``; ``d_model``, the width of the tokens
    the projections started from, names the mistake of scaling by it."""
    q, k = as_tensor(q, "Q"), as_tensor(k, "K")
    d = q.shape[-1]
    raw = q @ k.transpose(-2, -1)  # (i, j)
    mistakes = [
        (raw, "the scores are not scaled: divide by sqrt(d) to keep their variance near 1"),
        (raw / d, "divide by sqrt(d), not by d: the variance of q . k grows like d, its spread like sqrt(d)"),
        ((k @ q.transpose(-2, -1)) / math.sqrt(d), "rows must be queries and columns keys: that is K Q^T, "
                                                    "the transpose"),
        (raw * math.sqrt(d), "you multiplied by sqrt(d); the scale divides the scores by sqrt(d)"),
        (torch.softmax(raw / math.sqrt(d), dim=-1), "those are the weights after the softmax; the exercise asks "
                                                    "for the scaled scores, before the softmax"),
    ]
    if d_model is not None and d_model != d:
        mistakes.append((raw / math.sqrt(d_model), "you scaled by the width of the input tokens (d_model); d is "
                                                   "the size of one query or key vector, the length of q^i"))
    if q.shape[-2] != d:
        mistakes.append((raw / math.sqrt(q.shape[-2]), "you scaled by the number of tokens; d is the size of one "
                                                       "query or key vector, the length of q^i"))
    check_tensor_answer(
        answer,
        raw / math.sqrt(d),
        what="your score matrix",
        mistakes=mistakes,
        shape_hint="one score per (query, key) pair: (number of queries, number of keys)",
        success="S = Q K^T / sqrt(d): one scaled score per (query, key) pair",
    )


def _softmax_error_hint(error: BaseException) -> None:
    text = str(error)
    if isinstance(error, TypeError) and "return_types" in text:
        hint("a maximum taken along an axis comes back as a pair, the maxima and where they are; use only the "
             "maxima")
    if isinstance(error, RuntimeError) and "must match the size" in text:
        hint("the shapes did not line up: a maximum or sum taken per row has lost its axis; keep that axis "
             "(size 1) so it broadcasts against the rows")


def _run_softmax(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    try:
        result = fn(x.clone())
    except AssertionError:
        raise
    except Exception as error:  # a slip with a hint of its own first, then any other error as a hint
        _softmax_error_hint(error)
        result = call_learner(fn, x.clone(), what="your softmax")
    if result is None:
        hint("your softmax returned None: end it with a return statement that gives back the weights")
    return as_tensor(result, "your softmax's result")


@guard_errors
def stable_softmax(fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
    """Exercise 2: a softmax over the last axis, for any number of axes, that survives scores like 1000."""
    if not callable(fn):
        hint("pass your function itself, e.g. stable_softmax(my_softmax), not its result")
    gen = torch.Generator().manual_seed(0)  # a private generator: the lesson's random numbers stay as they were
    for shape in ((4, 6), (5, 5), (2, 3, 5), (2, 2, 3, 4), (7,)):  # a hard-coded axis fails on one of these
        x = torch.randn(*shape, generator=gen)
        got = _run_softmax(fn, x)
        if got.shape != x.shape:
            hint("softmax returns one weight per score: the output has the input's shape")
        if close(got, torch.softmax(x, dim=-1)):
            continue
        if x.dim() == 2 and x.shape[0] == x.shape[1]:
            lost = (x - x.amax(dim=-1)).exp()  # per-row maxima without their axis line up with the columns
            if close(got, lost / lost.sum(dim=-1, keepdim=True)):
                hint("a maximum taken per row has lost its axis, so it lines up with the columns when you "
                     "subtract it; keep that axis so every row is shifted by its own maximum")
        if any(close(got, torch.softmax(x, dim=axis)) for axis in range(x.dim() - 1)):
            hint(f"on scores of shape {tuple(x.shape)} your weights are normalised over another axis; normalise "
                 f"over the last axis, the keys, whatever the number of axes")
        hint(f"on ordinary scores of shape {tuple(x.shape)} your result differs from softmax: exp of each score, "
             f"divided by the sum of exps of its row")
    huge = torch.tensor([[1000.0, 999.0, 0.0], [-1000.0, -1001.0, -1002.0]])
    got_huge = _run_softmax(fn, huge)
    expected_huge = torch.softmax(huge.double(), dim=-1).float()
    finite_rows = torch.isfinite(got_huge).all(dim=-1)
    if finite_rows[0] and not finite_rows[1] and close(got_huge[0], expected_huge[0]):
        hint("a row whose scores all lie far below the largest score of the tensor underflows to 0/0: subtract "
             "each row's own maximum, not the maximum of the whole tensor")
    if not finite_rows[0] and finite_rows[1]:
        hint("the row of scores near 1000 still overflows: exp(1000) is inf; shift each row so that its largest "
             "score becomes 0, and then no exponent can exceed exp(0) = 1")
    if not finite_rows.all():
        hint("at scores of 1000 or -1000 your softmax gives NaN: exp(1000) overflows to inf, exp(-1000) "
             "underflows to 0, and inf/inf or 0/0 is NaN; softmax does not change if you subtract the same "
             "number from a whole row, so choose that number to make each row's largest score 0")
    if not close(got_huge, expected_huge):
        hint("on large scores your result is finite but wrong; subtract each row's own maximum")
    correct("your softmax matches torch.softmax on scores with 1 to 4 axes and stays finite at scores of 1000")


def _attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    return torch.softmax(q @ k.transpose(-2, -1) * scale, dim=-1) @ v  # (..., i, dv)


@guard_errors
def fixed_attention(fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]) -> None:
    """Exercise 3: ``fn(Q, K, V)`` = softmax(Q K^T / sqrt(d)) V for ``(..., i, d)`` inputs with any leading
    batch and head axes, tried on several shapes."""
    gen = torch.Generator().manual_seed(2)  # a private generator: the lesson's random numbers stay as they were
    cases = [((), 5, 6, 4, 3), ((), 3, 7, 8, 8), ((2, 3), 4, 6, 8, 5)]  # (leading axes, i, j, d, dv)
    for lead, i, j, d, dv in cases:
        q = torch.randn(*lead, i, d, generator=gen, dtype=torch.float64)
        k = torch.randn(*lead, j, d, generator=gen, dtype=torch.float64)
        v = torch.randn(*lead, j, dv, generator=gen, dtype=torch.float64)
        warn_always = torch.is_warn_always_enabled()
        torch.set_warn_always(True)  # PyTorch warns about a transpose of a batch once per process otherwise
        result, failure = None, None
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                result = fn(q.clone(), k.clone(), v.clone())
        except AssertionError:
            raise
        except Exception as error:  # named below, after the slip that usually causes it on a batch
            failure = error
        finally:
            torch.set_warn_always(warn_always)
        if any("x.T" in str(w.message) for w in caught):
            hint("on a batch of shape (b, h, j, d) a plain transpose reverses every axis; swap only the last two "
                 "axes (keys and features)")
        if failure is not None and lead:
            hint(f"your function works on single (i, d) matrices but raised {type(failure).__name__} on a batch "
                 f"Q of shape {tuple(q.shape)}; every step must act on the last two axes only (a plain "
                 f"transpose, for one, reverses every axis)")
        if failure is not None:
            call_learner(fn, q.clone(), k.clone(), v.clone(), what="your attention")  # names the error
        if result is None:
            hint("your attention returned None: end it with a return statement that gives back the outputs")
        got = as_tensor(result, "your attention's result")
        expected = _attention(q, k, v, 1 / math.sqrt(d))
        if close(got, expected):
            continue
        scores = q @ k.transpose(-2, -1) / math.sqrt(d)
        if close(got, torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[0]), dim=-2) @ v):
            hint("this still computes what the classmate's function computes; it has more than one bug: for each "
                 "line ask which axis it works on and which axis it should work on")
        if close(got, torch.softmax(scores, dim=-1)):
            hint("those are the weights; multiply them by V to mix the values")
        if got.shape != expected.shape:
            hint(f"for Q {tuple(q.shape)}, K {tuple(k.shape)}, V {tuple(v.shape)} the output has one row per "
                 f"query: shape {tuple(expected.shape)}, yours is {tuple(got.shape)}")
        if close(got, torch.softmax(scores, dim=-2) @ v):
            hint("the softmax still runs over the queries; each query's weights over the keys must sum to 1")
        for n in (set(q.shape[:-1]) | {k.shape[-2], v.shape[-1]}) - {d}:  # every other size the inputs offer
            if close(got, _attention(q, k, v, 1 / math.sqrt(n))):
                hint("the scale is 1/sqrt(d), with d the size of one query vector (the last axis of Q), not a "
                     "count of tokens, heads or value features")
        for n in {c[3] for c in cases} - {d}:  # a d that fits another input, such as the lesson's Q
            if close(got, _attention(q, k, v, 1 / math.sqrt(n))):
                hint(f"your scale is 1/sqrt({n}) for Q of shape {tuple(q.shape)}; read d from the input (the last "
                     f"axis of Q) instead of a fixed number")
        if close(got, _attention(q, k, v, 1.0)):
            hint("the scores are missing the 1/sqrt(d) scale")
        if close(got, _attention(q, k, v, 1 / d)):
            hint("divide the scores by sqrt(d), not by d")
        hint(f"for Q of shape {tuple(q.shape)} your output differs from softmax(Q K^T / sqrt(d)) V; check each "
             f"step against the matrix form above")
    correct("softmax(Q K^T / sqrt(d)) V for any batch and head axes: the classmate's bugs are fixed")


@guard_errors
def predicted_variance(answer: object, d: int, variance: float = 1.0) -> None:
    """Exercise 4: Var(q . k) when q and k have d independent entries of mean 0 and variance ``variance``."""
    if isinstance(answer, (str, bytes)):
        hint("give a number (or an expression in d, such as d * 2), not text")
    try:
        value = float(answer)
    except (TypeError, ValueError):
        hint("give a number (or an expression in d, such as d * 2)")
    s2 = float(variance)
    expected = d * s2 * s2

    def near(x: float) -> bool:
        return math.isclose(value, x, rel_tol=1e-6)

    if near(expected):
        correct(f"Var(q . k) = d * {s2:g} * {s2:g} = {expected:g}: a sum of d products, each of variance "
                f"{s2:g} * {s2:g}; scaling by 1/sqrt(d) alone would leave a variance of {expected / d:g}")
        return
    if near(math.sqrt(expected)):
        hint("that is the standard deviation; the question asks for the variance")
    if s2 != 1 and near(d * s2):
        hint("each product q_t k_t multiplies two independent numbers of variance s^2 each: the variance of the "
             "product is s^2 times s^2, not s^2")
    if s2 != 1 and near(d):
        hint("that is the variance when every entry has variance 1; here the entries are larger")
    if near(s2 * s2) or near(1.0):
        hint("that is the variance of one product; q . k adds up d of them, and variances of independent terms "
             "add")
    hint("q . k is a sum of d independent products q_t k_t; find the variance of one product, then add them up")
