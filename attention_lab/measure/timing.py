"""One timing helper for every timing cell, and the conclusions drawn from its figures.

:func:`compare` times several variants in interleaved rounds (A, B, C, A, B, C, ...), so that a burst of other work on
the machine slows every variant alike, and keeps the fastest of the rounds per variant: other programs only ever slow
a call down, so the fastest call is the least disturbed. Ratios are taken against a baseline measured in the same
rounds, never between two separately timed numbers. :func:`sweep` does this for each sequence length.

The conclusions are computed, never typed: :func:`crossover` finds the smallest measured n from which a variant is
faster at every larger measured n; :func:`fit_slope` fits log(time) against log(n) and says how well a line fits;
both say "too noisy to conclude" (``conclusive=False`` and a reason) instead of concluding from bad figures.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from .._validation import check_choice, check_number, check_positive_int, fail

__all__ = ["Comparison", "Crossover", "Slope", "Sweep", "compare", "crossover", "fit_slope", "sweep", "thread_report"]


def thread_report() -> str:
    """One line naming the threads torch uses here and the machine's logical cores. Shape: a string."""
    return f"timed with {torch.get_num_threads()} torch thread(s) on a machine with {os.cpu_count()} logical core(s)"


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

    def __str__(self) -> str:
        lines = [f"{name:<28} {seconds * 1e3:9.3f} ms  {self.ratio[name]:7.2f}x {self.baseline}'s speed"
                 for name, seconds in self.best_s.items()]
        return "\n".join(lines)


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
    check_choice(fn, "baseline", baseline, list(variants))
    check_positive_int(fn, "rounds", rounds)
    check_positive_int(fn, "warmup", warmup, minimum=0)
    check_number(fn, "min_time", min_time, low=0, low_open=True, unit="seconds")
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
    ratio = {}
    for name in variants:
        per_round = sorted(base / mine for base, mine in zip(times[baseline], times[name], strict=True))
        ratio[name] = per_round[len(per_round) // 2]
    return Comparison(best_s={name: min(ts) for name, ts in times.items()}, ratio=ratio, baseline=baseline,
                      rounds=rounds, threads=torch.get_num_threads())


@dataclass(frozen=True)
class Sweep:
    """:func:`compare` at each length: ``best_s[name][k]`` and ``ratio[name][k]`` belong to ``lengths[k]``."""

    lengths: list[int]
    best_s: dict[str, list[float]]
    ratio: dict[str, list[float]]
    baseline: str
    threads: int
    comparisons: list[Comparison] = field(repr=False, default_factory=list)


def sweep(make_variants: Callable[[int], Mapping[str, Callable[[], Any]]], lengths: Sequence[int], *,
          baseline: str | None = None, rounds: int = 5, min_time: float = 0.01) -> Sweep:
    """:func:`compare` the variants ``make_variants(n)`` returns, for each n in ``lengths``.

    Shape: ``make_variants(n)`` builds inputs of length n and returns name -> zero-argument callable.
    """
    if not lengths:
        fail("sweep", "lengths must name at least one sequence length, got an empty sequence")
    results = [compare(make_variants(n), baseline=baseline, rounds=rounds, min_time=min_time) for n in lengths]
    names = list(results[0].best_s)
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


def crossover(lengths: Sequence[int], ratios: Sequence[float], *, name: str = "the variant",
              baseline: str = "the baseline") -> Crossover:
    """The smallest measured n from which ``name`` is faster (ratio > 1) at every larger measured n.

    Not a first faster length: a variant faster at n = 256, slower at 512 and faster from 1024 on crosses over at 1024.
    A ratio that flips more than once is called too noisy to conclude.

    Shape: two sequences of equal length, ``lengths`` increasing.
    """
    fn = "crossover"
    if len(lengths) != len(ratios) or not lengths:
        fail(fn, f"expected lengths and ratios of equal, non-zero length, got {len(lengths)} and {len(ratios)}")
    if any(b <= a for a, b in zip(lengths, lengths[1:])):
        fail(fn, f"lengths must increase, got {list(lengths)}")
    if any(not (r > 0 and math.isfinite(r)) for r in ratios):
        fail(fn, f"ratios must be finite and > 0, got {list(ratios)}")
    faster = [r > 1 for r in ratios]
    flips = sum(a != b for a, b in zip(faster, faster[1:]))
    if flips > 1:
        return Crossover(None, False, f"too noisy to conclude: {name} is faster at some lengths and slower at "
                                      f"others ({', '.join(f'n={n}: {r:.2f}x' for n, r in zip(lengths, ratios))}); "
                                      f"rerun the cell on a quieter machine")
    if not faster[-1]:
        return Crossover(None, True, f"{name} is not faster than {baseline} at any measured length up to "
                                     f"n = {lengths[-1]} (ratio there {ratios[-1]:.2f})")
    first = len(faster) - 1
    while first > 0 and faster[first - 1]:
        first -= 1
    if first == 0:
        return Crossover(lengths[0], True, f"{name} is faster than {baseline} at every measured length, from the "
                                           f"smallest, n = {lengths[0]} ({ratios[0]:.2f}x)")
    return Crossover(lengths[first], True, f"{name} overtakes {baseline} at n = {lengths[first]} "
                                           f"({ratios[first]:.2f}x there, {ratios[first - 1]:.2f}x at "
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

    Too noisy to conclude (``conclusive=False``) when times do not increase with n, or r^2 < ``min_r2``.

    Shape: two sequences of equal length >= 2, positive values.
    """
    fn = "fit_slope"
    if len(lengths) != len(times) or len(lengths) < 2:
        fail(fn, f"expected two sequences of equal length >= 2, got lengths {len(lengths)} and {len(times)}")
    if min(lengths) <= 0 or min(times) <= 0 or not all(map(math.isfinite, [*lengths, *times])):
        fail(fn, f"expected finite positive values (their logarithms are taken), got {list(lengths)}, {list(times)}")
    if any(b <= a for a, b in zip(lengths, lengths[1:])):
        fail(fn, f"lengths must increase, got {list(lengths)}")
    lx, ly = [math.log(x) for x in lengths], [math.log(y) for y in times]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    sxx = sum((x - mx) ** 2 for x in lx)
    sxy = sum((x - mx) * (y - my) for x, y in zip(lx, ly))
    syy = sum((y - my) ** 2 for y in ly)
    slope = sxy / sxx
    r2 = 1.0 if syy == 0 else sxy * sxy / (sxx * syy)
    span = (int(lengths[0]), int(lengths[-1]))
    where = f"n = {span[0]} ... {span[1]}"
    rising = all(b > a for a, b in zip(times, times[1:]))
    if not rising:
        return Slope(slope, r2, span, False, f"too noisy to conclude: {name} does not grow with n over {where} "
                                            f"(fitted slope {slope:.2f}, r^2 = {r2:.3f}); rerun on a quieter machine")
    if r2 < min_r2:
        return Slope(slope, r2, span, False, f"too noisy to conclude: a line fits {name} poorly over {where} "
                                            f"(slope {slope:.2f}, r^2 = {r2:.3f} < {min_r2}); rerun on a quieter "
                                            f"machine")
    return Slope(slope, r2, span, True, f"{name} grows as n^{slope:.2f} over {where} (r^2 = {r2:.3f})")
