"""One timing helper for every timing cell, and the conclusions drawn from its figures.

:func:`compare` times several variants in interleaved rounds (A, B, C, A, B, C, ...), so that a burst of other work on
the machine slows every variant alike, and keeps the fastest of the rounds per variant: other programs only ever slow
a call down, so the fastest call is the least disturbed. Ratios are taken against a baseline measured in the same
rounds, never between two separately timed numbers. :func:`sweep` does this for each sequence length.

The conclusions are computed, never typed: :func:`crossover` finds the smallest measured n from which a variant is
faster at every larger measured n; :func:`fit_slope` fits log(time) against log(n) and says how well a line fits;
both say "too noisy to conclude" (``conclusive=False`` and a reason) instead of concluding from bad figures.
:func:`fixed_threads` holds torch's thread count fixed while a cell times, and :func:`thread_report` says what it was.
"""

from __future__ import annotations

import contextlib
import math
import numbers
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from .._validation import check_positive_int, fail

__all__ = ["Comparison", "Crossover", "Slope", "Sweep", "compare", "crossover", "fit_slope", "fixed_threads", "sweep",
           "thread_report"]


def thread_report() -> str:
    """One line naming the threads torch uses here and the machine's logical cores. Shape: a string."""
    return f"timed with {torch.get_num_threads()} torch thread(s) on a machine with {os.cpu_count()} logical core(s)"


@contextlib.contextmanager
def fixed_threads(threads: int) -> Iterator[int]:
    """Run the block with ``min(threads, logical cores)`` torch threads, then restore the previous count.

    Shape: yields the thread count used.
    """
    check_positive_int("fixed_threads", "threads", threads)
    used = min(threads, os.cpu_count() or 1)
    previous = torch.get_num_threads()
    torch.set_num_threads(used)
    try:
        yield used
    finally:
        torch.set_num_threads(previous)


@dataclass(frozen=True)
class Comparison:
    """Fastest-of-rounds time per variant (seconds), and each variant's speed relative to the baseline.

    ``ratio[name]`` is baseline time / variant time (above 1: faster than the baseline), the median over rounds of the
    ratio within one round, so both times of a ratio come from the same moment on the machine.
    """

    best_s: dict[str, float]
    ratio: dict[str, float]
    baseline: str
    rounds: int
    threads: int
    rounds_s: dict[str, list[float]] = field(repr=False, default_factory=dict)

    def ratio_between(self, name: str, reference: str) -> float:
        """reference time / ``name`` time (above 1: ``name`` is faster), the median over rounds of the ratio
        within one round. Shape: a float."""
        for which in (name, reference):
            if which not in self.rounds_s:
                fail("Comparison.ratio_between", f"expected one of {list(self.rounds_s)}, got {which!r}")
        return _median_ratio(self.rounds_s[reference], self.rounds_s[name])

    def __str__(self) -> str:
        lines = [f"{name:<28} {seconds * 1e3:9.3f} ms  {self.ratio[name]:7.2f}x {self.baseline}'s speed"
                 for name, seconds in self.best_s.items()]
        return "\n".join(lines)


def _median_ratio(reference: Sequence[float], mine: Sequence[float]) -> float:
    per_round = sorted(ref / own for ref, own in zip(reference, mine, strict=True))
    return per_round[len(per_round) // 2]


def _time_once(fn: Callable[[], Any], number: int) -> float:
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(number):
        fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return (time.perf_counter() - start) / number


def compare(variants: Mapping[str, Callable[[], Any]], *, baseline: str | None = None, rounds: int = 5,
            min_time: float = 0.01, warmup: int = 1) -> Comparison:
    """Time each zero-argument callable in ``variants`` in ``rounds`` interleaved rounds.

    Each call is repeated until one timing lasts at least ``min_time`` seconds (the count is fixed after the warm-up,
    the same in every round). ``baseline`` (default: the first variant) is what the ratios are taken against.

    Shape: ``variants`` maps a name to a callable; the result holds one number per name.
    """
    fn = "compare"
    if not isinstance(variants, Mapping) or not variants:
        fail(fn, f"variants must be a non-empty dict of name -> zero-argument callable, got {variants!r}", TypeError)
    for name, call in variants.items():
        if not callable(call):
            fail(fn, f"variants[{name!r}] must be callable, got {type(call).__name__}; wrap the call in a lambda",
                 TypeError)
    baseline = next(iter(variants)) if baseline is None else baseline
    if baseline not in variants:
        fail(fn, f"baseline must be one of {list(variants)}, got {baseline!r}")
    check_positive_int(fn, "rounds", rounds)
    check_positive_int(fn, "warmup", warmup, minimum=0)
    if isinstance(min_time, bool) or not isinstance(min_time, (int, float)) or not min_time > 0:
        fail(fn, f"min_time must be a number of seconds > 0, got {min_time!r}")
    numbers = {}
    for name, call in variants.items():
        for _ in range(warmup):
            call()
        once = _time_once(call, 1)
        numbers[name] = max(1, math.ceil(min_time / max(once, 1e-9)))
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, call in variants.items():
            times[name].append(_time_once(call, numbers[name]))
    ratio = {name: _median_ratio(times[baseline], times[name]) for name in variants}
    return Comparison(best_s={name: min(ts) for name, ts in times.items()}, ratio=ratio, baseline=baseline,
                      rounds=rounds, threads=torch.get_num_threads(), rounds_s=times)


@dataclass(frozen=True)
class Sweep:
    """:func:`compare` at each length: ``best_s[name][k]`` and ``ratio[name][k]`` belong to ``lengths[k]``."""

    lengths: list[int]
    best_s: dict[str, list[float]]
    ratio: dict[str, list[float]]
    baseline: str
    threads: int
    comparisons: list[Comparison] = field(repr=False, default_factory=list)

    def ratio_between(self, name: str, reference: str) -> list[float]:
        """:meth:`Comparison.ratio_between` at each length. Shape: one float per length."""
        return [c.ratio_between(name, reference) for c in self.comparisons]


def sweep(make_variants: Callable[[int], Mapping[str, Callable[[], Any]]], lengths: Sequence[int], *,
          baseline: str | None = None, rounds: int = 5, min_time: float = 0.01) -> Sweep:
    """:func:`compare` the variants ``make_variants(n)`` returns, for each n in ``lengths``.

    Shape: ``make_variants(n)`` builds inputs of length n and returns name -> zero-argument callable.
    """
    if not callable(make_variants):
        fail("sweep", f"make_variants must be a function n -> dict of name -> callable, got "
                      f"{type(make_variants).__name__}", TypeError)
    if not lengths:
        fail("sweep", "lengths must name at least one sequence length, got an empty sequence")
    results = [compare(make_variants(n), baseline=baseline, rounds=rounds, min_time=min_time) for n in lengths]
    names = list(results[0].best_s)
    for n, result in zip(lengths, results):
        if list(result.best_s) != names:
            fail("sweep", f"make_variants must return the same names at every length, got {names} at "
                          f"n={lengths[0]} and {list(result.best_s)} at n={n}")
    return Sweep(lengths=list(lengths), best_s={name: [r.best_s[name] for r in results] for name in names},
                 ratio={name: [r.ratio[name] for r in results] for name in names}, baseline=results[0].baseline,
                 threads=results[0].threads, comparisons=results)


@dataclass(frozen=True)
class Crossover:
    """Where a variant becomes faster for good. ``n`` is None when it never does (or the data cannot say)."""

    n: int | None
    conclusive: bool
    message: str

    def __str__(self) -> str:
        return self.message


def _numbers(fn: str, what: str, values: object) -> list[float]:
    """A non-empty sequence of finite real numbers (bools refused), as floats."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        fail(fn, f"{what} must be a sequence of numbers, got {type(values).__name__}", TypeError)
    if any(isinstance(x, bool) or not isinstance(x, numbers.Real) for x in values):
        fail(fn, f"{what} must hold only numbers, got {list(values)!r}", TypeError)
    floats = [float(x) for x in values]
    if not all(map(math.isfinite, floats)):
        fail(fn, f"{what} must be finite, got {floats}")
    return floats


def _increasing_lengths(fn: str, lengths: object, others: Sequence[float], what: str) -> list[float]:
    xs = _numbers(fn, "lengths", lengths)
    if len(xs) != len(others) or not xs:
        fail(fn, f"expected lengths and {what} of equal, non-zero length, got {len(xs)} and {len(others)}")
    if any(b <= a for a, b in zip(xs, xs[1:])):
        fail(fn, f"lengths must increase, got {list(lengths)}; sort them (and the {what} with them)")
    if min(xs) <= 0:
        fail(fn, f"lengths must be > 0, got {list(lengths)}")
    return xs


def crossover(lengths: Sequence[int], ratios: Sequence[float], *, name: str = "the variant",
              baseline: str = "the baseline") -> Crossover:
    """The smallest measured n from which ``name`` is faster (ratio > 1) at every larger measured n.

    ``ratios[k]`` is baseline time / ``name`` time at ``lengths[k]``. The answer is not the first faster length:
    slower at 256, faster at 512 and from then on gives 512. When faster and slower alternate (the ratio crosses 1
    more than once, e.g. faster at 256, slower at 512, faster from 1024 on) the figures are called too noisy to
    conclude (``conclusive=False``), since a real crossover happens once. A variant faster at the small lengths
    and slower from some length on has no crossover (``n`` None).

    Shape: two sequences of equal length, ``lengths`` increasing.
    """
    fn = "crossover"
    values = _numbers(fn, "ratios", ratios)
    _increasing_lengths(fn, lengths, values, "ratios")
    if any(r <= 0 for r in values):
        fail(fn, f"ratios must be > 0 (a time divided by a time), got {values}")
    shown = ", ".join(f"n={n}: {r:.2f}x" for n, r in zip(lengths, values))
    faster = [r > 1 for r in values]
    flips = sum(a != b for a, b in zip(faster, faster[1:]))
    if flips > 1:
        return Crossover(None, False, f"too noisy to conclude: {name} is faster than {baseline} at some lengths and "
                                      f"slower at others ({shown}); rerun the cell on a quieter machine")
    if all(faster):
        return Crossover(lengths[0], True, f"{name} is faster than {baseline} at every measured length, from the "
                                           f"smallest, n = {lengths[0]} ({values[0]:.2f}x), up to n = {lengths[-1]} "
                                           f"({values[-1]:.2f}x)")
    if not any(faster):
        return Crossover(None, True, f"{name} is not faster than {baseline} at any measured length up to "
                                     f"n = {lengths[-1]} ({values[-1]:.2f}x there)")
    first = faster.index(not faster[0])  # where the single flip happens
    if not faster[-1]:
        return Crossover(None, True, f"{name} is faster than {baseline} up to n = {lengths[first - 1]} "
                                     f"({values[first - 1]:.2f}x) but slower from n = {lengths[first]} on "
                                     f"({values[first]:.2f}x): it does not stay ahead ({shown})")
    return Crossover(lengths[first], True, f"{name} overtakes {baseline} at n = {lengths[first]} "
                                           f"({values[first]:.2f}x there, {values[first - 1]:.2f}x at "
                                           f"n = {lengths[first - 1]}) and stays faster up to n = {lengths[-1]}")


@dataclass(frozen=True)
class Slope:
    """Least-squares exponent p in time ~ n^p over ``fitted_on``, with the fit's r^2 (1 = a perfect line)."""

    slope: float
    r2: float
    fitted_on: tuple[int, int]
    conclusive: bool
    message: str

    def __str__(self) -> str:
        return self.message


def fit_slope(lengths: Sequence[float], times: Sequence[float], *, name: str = "time", min_r2: float = 0.95) -> Slope:
    """Fit log(time) = p log(n) + c and report p with the range it was fitted on and how well a line fits.

    Too noisy to conclude (``conclusive=False``) when times do not increase with n, or r^2 < ``min_r2``. Two
    points always fit a line (r^2 = 1), so the message says so instead of quoting a fit quality.

    Shape: two sequences of equal length >= 2, positive values.
    """
    fn = "fit_slope"
    ys = _numbers(fn, "times", times)
    xs = _increasing_lengths(fn, lengths, ys, "times")
    if len(xs) < 2:
        fail(fn, f"a slope needs at least two lengths, got {len(xs)}; measure more lengths")
    if min(ys) <= 0:
        fail(fn, f"times must be > 0 (their logarithms are taken), got {ys}")
    if isinstance(min_r2, bool) or not isinstance(min_r2, numbers.Real) or not 0 <= min_r2 <= 1:
        fail(fn, f"min_r2 must be a number between 0 and 1, got {min_r2!r}")
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    sxx = sum((x - mx) ** 2 for x in lx)
    sxy = sum((x - mx) * (y - my) for x, y in zip(lx, ly))
    syy = sum((y - my) ** 2 for y in ly)
    slope = sxy / sxx
    r2 = 1.0 if syy == 0 else min(1.0, sxy * sxy / (sxx * syy))
    span = (int(lengths[0]), int(lengths[-1]))
    where = f"n = {span[0]} ... {span[1]}"
    if not all(b > a for a, b in zip(ys, ys[1:])):
        return Slope(slope, r2, span, False, f"too noisy to conclude: {name} does not grow with n over {where} "
                                            f"(fitted slope {slope:.2f}, r^2 = {r2:.3f}); rerun on a quieter machine")
    if r2 < min_r2:
        return Slope(slope, r2, span, False, f"too noisy to conclude: a line fits {name} poorly over {where} "
                                            f"(slope {slope:.2f}, r^2 = {r2:.3f} < {min_r2}); rerun on a quieter "
                                            f"machine")
    quality = "two points, so no check of the fit" if len(xs) == 2 else f"r^2 = {r2:.3f}"
    return Slope(slope, r2, span, True, f"{name} grows as n^{slope:.2f} over {where} ({quality})")
