"""The conclusions drawn from timing figures, computed and never typed, and refused when the figures are too noisy.

:func:`crossover` finds the smallest measured n from which a variant is faster at every larger measured n;
:func:`fit_slope` fits log(time) against log(n) and says how well a line fits; :func:`agree` tells whether two
statistics of the same rounds tell the same story. Each says "too noisy to conclude" (``conclusive=False`` and a
reason) instead of concluding from bad figures. The figures come from :mod:`attention_lab.measure.timing` (a live run)
or from a committed benchmark CSV (:mod:`attention_lab.measure.results`).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass

from .._validation import fail

__all__ = ["Crossover", "Slope", "agree", "crossover", "fit_slope"]


def agree(ratio: float, best_ratio: float, *, tolerance: float = 0.25) -> bool:
    """Whether a round-by-round ratio and the ratio of the fastest times tell the same story: the same side of 1,
    and within a factor ``1 + tolerance`` of each other. Shape: a bool."""
    return (ratio > 1) == (best_ratio > 1) and abs(math.log(ratio / best_ratio)) <= math.log1p(tolerance)


@dataclass(frozen=True)
class Crossover:
    """Where a variant becomes faster for good. ``n`` is None when it never does (or the data cannot say). Shape: no
    tensors."""

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
              baseline: str = "the baseline", best_ratios: Sequence[float] | None = None) -> Crossover:
    """The smallest measured n from which ``name`` is faster (ratio > 1) at every larger measured n.

    ``ratios[k]`` is baseline time / ``name`` time at ``lengths[k]``. The answer is not the first faster length:
    slower at 256, faster at 512 and from then on gives 512. When faster and slower alternate (the ratio crosses 1
    more than once, e.g. faster at 256, slower at 512, faster from 1024 on) the figures are called too noisy to
    conclude (``conclusive=False``), since a real crossover happens once. A variant faster at the small lengths
    and slower from some length on has no crossover (``n`` None). ``best_ratios`` (baseline's fastest time / the
    variant's, per length) must say "faster" at the same lengths as ``ratios``, or the figures are too noisy.

    Shape: two sequences of equal length, ``lengths`` increasing.
    """
    fn = "crossover"
    values = _numbers(fn, "ratios", ratios)
    _increasing_lengths(fn, lengths, values, "ratios")
    if any(r <= 0 for r in values):
        fail(fn, f"ratios must be > 0 (a time divided by a time), got {values}")
    shown = ", ".join(f"n={n}: {r:.2f}x" for n, r in zip(lengths, values))
    faster = [r > 1 for r in values]
    if best_ratios is not None:
        best = _numbers(fn, "best_ratios", best_ratios)
        _increasing_lengths(fn, lengths, best, "best_ratios")
        split = [n for n, r, b in zip(lengths, values, best) if (r > 1) != (b > 1)]
        if split:
            return Crossover(None, False, f"too noisy to conclude: at n = {', '.join(map(str, split))} the "
                                          f"round-by-round ratio and the fastest times disagree on whether {name} "
                                          f"is faster than {baseline}; rerun the cell on a quieter machine")
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
    """Least-squares exponent p in time ~ n^p over ``fitted_on``, with the fit's r^2 (1 = a perfect line).

    Shape: no tensors; ``fitted_on`` is the first and last length.
    """

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
        return Slope(slope, r2, span, False, f"too noisy to conclude: {name} does not rise at every step of n over "
                                            f"{where} (fitted slope {slope:.2f}, r^2 = {r2:.3f}); rerun on a quieter "
                                            f"machine")
    if r2 < min_r2:
        return Slope(slope, r2, span, False, f"too noisy to conclude: a line fits {name} poorly over {where} "
                                            f"(slope {slope:.2f}, r^2 = {r2:.3f} < {min_r2}); rerun on a quieter "
                                            f"machine")
    quality = "two points, so no check of the fit" if len(xs) == 2 else f"r^2 = {r2:.3f}"
    return Slope(slope, r2, span, True, f"{name} grows as n^{slope:.2f} over {where} ({quality})")
