"""Checks for lesson 02 (scaled dot-product attention)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import torch

from ...i18n import msg
from ._calls import Calls, recording_calls
from ._core import (
    as_tensor,
    call_learner,
    check_tensor_answer,
    close,
    correct,
    fallback_hint,
    guard_errors,
    hint,
    learner_name,
)
from ._lesson02_mistakes import attention, attention_mistake, softmax_mistake, variance_mistake


@guard_errors
def cross_scores(answer: object, X: torch.Tensor, memory: torch.Tensor, W_q: torch.Tensor, W_k: torch.Tensor) -> None:
    """Exercise 1: the scaled scores of cross-attention, S = Q Kᵀ / sqrt(d) with the queries from the tokens of
    ``X`` and the keys from the tokens of ``memory``: ``(X W_qᵀ)(memory W_kᵀ)ᵀ / sqrt(d)``.

    Shape: X ``(i, d_model)``, memory ``(j, d_model)``, W_q and W_k ``(d, d_model)`` -> answer ``(i, j)``.
    """
    X, memory = as_tensor(X, "X").double(), as_tensor(memory, "memory").double()
    W_q, W_k = as_tensor(W_q, "W_q").double(), as_tensor(W_k, "W_k").double()
    d, d_model, i, j = W_q.shape[0], X.shape[-1], X.shape[0], memory.shape[0]
    Q, K = X @ W_q.T, memory @ W_k.T  # (i, d), (j, d)
    raw = Q @ K.T  # (i, j)
    wrong_scale = msg("the scores are not scaled: divide by sqrt(d), the size of one query or key, to keep their "
                      "variance near 1")
    mistakes = [
        (Q @ (X @ W_k.T).T / math.sqrt(d), msg("those are the scores of X with itself (self-attention): here the "
                                               "keys come from the tokens of memory")),
        ((memory @ W_q.T) @ (X @ W_k.T).T / math.sqrt(d), msg("you took the queries from memory and the keys from "
                                                              "X: the tokens of X ask (queries), the tokens of "
                                                              "memory are looked up (keys)")),
        (K @ Q.T / math.sqrt(d), msg("rows must be queries and columns keys: your matrix is the transpose, K Qᵀ, "
                                     "with the keys on the rows")),
        ((memory @ W_q.T) @ (memory @ W_k.T).T / math.sqrt(d), msg("those are the scores of memory with itself: "
                                                                   "the queries come from the tokens of X")),
        ((X @ W_k.T) @ (memory @ W_q.T).T / math.sqrt(d), msg("the projections are swapped: queries go through "
                                                              "W^q and keys through W^k")),
        (Q @ (memory @ W_q.T).T / math.sqrt(d), msg("both sides went through W^q: the keys come from W^k")),
        ((X @ W_k.T) @ K.T / math.sqrt(d), msg("both sides went through W^k: the queries come from W^q")),
        (X @ memory.T / math.sqrt(d), msg("those are scores of the raw tokens: project them first, queries with "
                                          "W^q and keys with W^k")),
        (X @ memory.T / math.sqrt(d_model), msg("those are scores of the raw tokens: project them first, queries "
                                                "with W^q and keys with W^k")),
        (raw, wrong_scale),
        (raw / d, msg("divide by sqrt(d), not by d: the variance of q · k grows like d, its spread like sqrt(d)")),
        (raw * math.sqrt(d), msg("you multiplied by sqrt(d); the scale divides the scores by sqrt(d)")),
        (raw / math.sqrt(d_model), msg("you scaled by the width of the input tokens (d_model = {d_model}); d is "
                                       "the size of one query or key vector ({d})", d_model=d_model, d=d)),
        (raw / math.sqrt(i), msg("you scaled by the number of queries ({n}); d is the size of one query or key "
                                 "vector ({d})", n=i, d=d)),
        (raw / math.sqrt(j), msg("you scaled by the number of keys ({n}); d is the size of one query or key "
                                 "vector ({d})", n=j, d=d)),
        (torch.softmax(raw / math.sqrt(d), dim=-1), msg("those are the weights after the softmax; the exercise "
                                                        "asks for the scaled scores, before the softmax")),
    ]
    check_tensor_answer(
        answer,
        raw / math.sqrt(d),
        what=msg("your score matrix"),
        mistakes=mistakes,
        shape_hint=msg("one score per (query, key) pair: {i} queries from X by {j} keys from memory, shape "
                       "({i}, {j})", i=i, j=j),
        success=msg("one row per token of X, one column per token of memory, divided by sqrt(d) = sqrt({d}): "
                    "queries and keys need not come from the same tokens", d=d),
    )


def _softmax_error_hint(error: BaseException) -> None:
    text = str(error)
    if isinstance(error, TypeError) and "return_types" in text:
        hint(msg("a maximum taken along an axis comes back as a pair, the maxima and where they are; use only the "
                 "maxima"))
    if isinstance(error, RuntimeError) and "must match the size" in text:
        hint(msg("the shapes did not line up: a maximum or sum taken per row has lost its axis; keep that axis "
                 "(size 1) so it broadcasts against the rows"))


def _run_softmax(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> tuple[torch.Tensor, Calls]:
    """The learner's softmax of ``x`` and what it called; every way it can fail becomes a hint."""
    given = x.clone()
    try:
        with recording_calls() as calls:
            result = fn(given)
    except AssertionError:
        raise
    except Exception as error:  # a slip with a hint of its own first, then any other error as a hint
        _softmax_error_hint(error)
        call_learner(fn, x.clone())
        raise  # call_learner raised the hint; not reached
    softmaxes = sorted(name for name in calls.torch if "softmax" in name)
    if softmaxes:
        hint(msg("{what} calls PyTorch's {names}; the exercise is to write softmax yourself, from exp, a maximum "
                 "and a sum", what=learner_name(fn), names=", ".join(softmaxes)))
    if calls.library:
        hint(msg("{what} calls the library's {names}; the exercise is to write softmax yourself, from exp, a "
                 "maximum and a sum", what=learner_name(fn), names=", ".join(sorted(calls.library))))
    if result is None:
        hint(msg("{what} returned None: end it with a return statement that gives back the weights",
                 what=learner_name(fn)))
    if not torch.equal(given, x):
        hint(msg("{what} changed the scores it was given (an in-place operation such as -= or exp_()): whoever "
                 "calls it needs their scores unchanged, so compute into a new tensor", what=learner_name(fn)))
    return as_tensor(result, msg("the result of {what}", what=learner_name(fn))), calls


@guard_errors
def stable_softmax(fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
    """Exercise 2: a softmax over the last axis, written by hand, for any number of axes, that survives scores like
    1000 and leaves its input unchanged.

    Shape: fn maps scores ``(..., j)`` to weights ``(..., j)``.
    """
    if not callable(fn):
        hint(msg("pass your function itself, e.g. stable_softmax(my_softmax), not its result"))
    gen = torch.Generator().manual_seed(0)  # a private generator: the lesson's random numbers stay as they were
    used: set[str] = set()
    cases = [((4, 6), torch.float32), ((5, 5), torch.float32), ((2, 3, 5), torch.float32),
             ((2, 2, 3, 4), torch.float32), ((7,), torch.float32), ((3, 4), torch.float64)]
    for shape, dtype in cases:  # a hard-coded axis or shape fails on one of these
        x = torch.randn(*shape, generator=gen, dtype=dtype)
        got, calls = _run_softmax(fn, x)
        used |= calls.torch
        if got.shape != x.shape:
            hint(msg("softmax returns one weight per score: the output has the input's shape {shape}, yours has "
                     "{got}", shape=tuple(x.shape), got=tuple(got.shape)))
        if close(got, torch.softmax(x.double(), dim=-1)):
            continue
        softmax_mistake(got.double(), x)
        fallback_hint(msg("on ordinary scores of shape {shape} your result differs from softmax: exp of each "
                          "score, divided by the sum of the exps of its row", shape=tuple(x.shape)))
    huge = torch.tensor([[1000.0, 999.0, 0.0], [-1000.0, -1001.0, -1002.0]])
    got_huge, calls = _run_softmax(fn, huge)
    used |= calls.torch
    expected_huge = torch.softmax(huge.double(), dim=-1).float()
    if got_huge.shape != huge.shape:
        hint(msg("softmax returns one weight per score: the output has the input's shape {shape}, yours has "
                 "{got}", shape=tuple(huge.shape), got=tuple(got_huge.shape)))
    finite_rows = torch.isfinite(got_huge).all(dim=-1)
    if finite_rows[0] and not finite_rows[1] and close(got_huge[0], expected_huge[0]):
        hint(msg("a row whose scores all lie far below the largest score of the tensor underflows to 0/0: "
                 "subtract each row's own maximum, not the maximum of the whole tensor"))
    if not finite_rows[0] and finite_rows[1]:
        hint(msg("the row of scores near 1000 still overflows: exp(1000) is inf; shift each row so that its largest "
                 "score becomes 0, and then no exponent can exceed exp(0) = 1"))
    if not finite_rows.all():
        hint(msg("at scores of 1000 or -1000 your softmax gives NaN: exp(1000) overflows to inf, exp(-1000) "
                 "underflows to 0, and inf/inf or 0/0 is NaN; softmax does not change if you subtract the same "
                 "number from a whole row, so choose that number to make each row's largest score 0"))
    if not close(got_huge, expected_huge):
        hint(msg("on scores near 1000 your result is finite but wrong: shift each row by its own largest score, "
                 "which leaves softmax unchanged; clipping the scores changes them"))
    if "logsumexp" in used:
        correct(msg("your softmax matches torch.softmax on scores with 1 to 4 axes, in float32 and float64, and "
                    "stays finite at 1000; torch.logsumexp subtracts the row's maximum for you"))
        return
    correct(msg("your softmax matches torch.softmax on scores with 1 to 4 axes, in float32 and float64, and stays "
                "finite at scores of 1000"))


_CASES = [((), 5, 6, 4, 3), ((), 3, 7, 8, 8), ((2, 3), 4, 6, 8, 5), ((3,), 2, 5, 6, 4)]  # (leading axes, i, j, d, dv)


def _inputs(case: tuple, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    lead, i, j, d, dv = case
    return (torch.randn(*lead, i, d, generator=gen, dtype=torch.float64),
            torch.randn(*lead, j, d, generator=gen, dtype=torch.float64),
            torch.randn(*lead, j, dv, generator=gen, dtype=torch.float64))


def _call_attention(fn: Callable, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
    """The learner's result (or None), the error it raised (or None), whether PyTorch warned about a transpose of a
    batch, and what it called."""
    warn_always = torch.is_warn_always_enabled()
    torch.set_warn_always(True)  # PyTorch warns about a transpose of a batch once per process otherwise
    result, failure, calls = None, None, Calls()
    try:
        with warnings.catch_warnings(record=True) as caught, recording_calls() as calls:
            warnings.simplefilter("always")
            result = fn(q.clone(), k.clone(), v.clone())
    except AssertionError:
        raise
    except Exception as error:  # named by the caller, after the slips that usually cause it
        failure = error
    finally:
        torch.set_warn_always(warn_always)
    return result, failure, any("x.T" in str(w.message) for w in caught), calls


def _works_on_a_batch(fn: Callable, gen: torch.Generator) -> bool:
    q, k, v = _inputs(_CASES[2], gen)
    result, failure, _, _ = _call_attention(fn, q, k, v)
    return failure is None and result is not None and close(as_tensor(result, "result"),
                                                            attention(q, k, v, 1 / math.sqrt(q.shape[-1])))


@guard_errors
def fixed_attention(fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]) -> None:
    """Exercise 3: ``fn(Q, K, V)`` = softmax(Q Kᵀ / sqrt(d)) V by hand for ``(..., i, d)`` inputs with any leading
    batch and head axes, tried on several shapes.

    Shape: Q ``(..., i, d)``, K ``(..., j, d)``, V ``(..., j, dv)`` -> ``(..., i, dv)``.
    """
    if not callable(fn):
        call_learner(fn)  # names what was passed instead of a function
    what = learner_name(fn)
    gen = torch.Generator().manual_seed(2)  # a private generator: the lesson's random numbers stay as they were
    for lead, i, j, d, dv in _CASES:
        q, k, v = _inputs((lead, i, j, d, dv), gen)
        result, failure, warned, calls = _call_attention(fn, q, k, v)
        ready_made = sorted({name for name in calls.torch | calls.library if "attention" in name})
        if ready_made:
            hint(msg("{what} calls {names}, a ready-made attention; the exercise is to fix the classmate's steps by "
                     "hand: scores, softmax, weighted sum", what=what, names=", ".join(ready_made)))
        if warned:
            hint(msg("on a batch of shape (b, h, j, d) a plain transpose reverses every axis; swap only the last "
                     "two axes (keys and features)"))
        if failure is not None and lead:
            hint(msg("{what} works on single (i, d) matrices but raised {error} on a batch Q of shape {shape}; "
                     "every step must act on the last two axes only (a plain transpose, for one, reverses every "
                     "axis)", what=what, error=type(failure).__name__, shape=tuple(q.shape)))
        if failure is not None and _works_on_a_batch(fn, torch.Generator().manual_seed(3)):
            hint(msg("{what} works on a batch of heads but raised {error} on a single (i, d) matrix Q of shape "
                     "{shape}, the lesson's case; name the last two axes -2 and -1, so the code works for any "
                     "number of axes", what=what, error=type(failure).__name__, shape=tuple(q.shape)))
        if failure is not None:
            call_learner(fn, q.clone(), k.clone(), v.clone())  # names the error
        if result is None:
            hint(msg("{what} returned None: end it with a return statement that gives back the outputs",
                     what=what))
        got = as_tensor(result, msg("the result of {what}", what=what))
        expected = attention(q, k, v, 1 / math.sqrt(d))
        if close(got, expected):
            continue
        attention_mistake(got, q, k, v, expected, {case[3] for case in _CASES})
        fallback_hint(msg("for Q of shape {shape} your output differs from softmax(Q Kᵀ / sqrt(d)) V; check each "
                          "step against the matrix form above", shape=tuple(q.shape)))
    correct(msg("softmax(Q Kᵀ / sqrt(d)) V for any batch and head axes: the classmate's bugs are fixed"))


@guard_errors
def predicted_variance(answer: object, d: int, variance: float = 1.0) -> None:
    """Exercise 4: Var(q · k) when q and k have d independent entries of mean 0 and variance ``variance``.

    Shape: a number.
    """
    if isinstance(answer, (str, bytes)):
        hint(msg("give a number (or an expression in d, such as d * 2), not text"))
    if answer is None:
        hint(msg("your answer is None: give a number (or an expression in d, such as d * 2)"))
    try:
        value = float(answer)
    except (TypeError, ValueError, RuntimeError):
        hint(msg("give one number (or an expression in d, such as d * 2), got {type}", type=type(answer).__name__))
    s2 = float(variance)
    expected = d * s2 * s2

    def near(x: float) -> bool:
        return math.isclose(value, x, rel_tol=1e-6)

    if near(expected):
        correct(msg("Var(q · k) = d * {s2:g} * {s2:g} = {expected:g}: a sum of d products, each of variance "
                    "{s2:g} * {s2:g}; scaling by 1/sqrt(d) alone would leave a variance of {scaled:g}",
                    s2=s2, expected=expected, scaled=expected / d))
        return
    if math.isclose(value, expected, rel_tol=0.05):
        correct(msg("{value:.1f} is within 5% of the exact Var(q · k) = d * {s2:g} * {s2:g} = {expected:g} (a "
                    "measurement carries sampling noise)", value=value, s2=s2, expected=expected))
        return
    variance_mistake(near, d, s2)
    fallback_hint(msg("q · k is a sum of d independent products q_t k_t; find the variance of one product, then "
                      "add them up"))
