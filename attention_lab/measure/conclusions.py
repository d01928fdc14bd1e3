"""The conclusions drawn from timing figures, computed and never typed, and said plainly when a run cannot tell.

:func:`crossover` finds the smallest measured n from which a variant is faster at every larger measured n;
:func:`fit_slope` fits log(time) against log(n) and gives the exponent with its 95% interval, so a flat series is
reported as flat; :func:`agree` tells whether two statistics of the same rounds tell the same story, for figures
that kept no rounds (a ratio whose rounds were kept is :func:`attention_lab.measure.timing.ratio`).
When the figures cannot decide, the conclusion says what this run cannot tell (``conclusive=False``) and why, and
:func:`with_committed` leads with what the committed benchmark found, then says how busy this run's machine was.
The figures come from :mod:`attention_lab.measure.timing` (a live run) or from a committed benchmark CSV
(:mod:`attention_lab.measure.results`). The names of what is compared (``name``, ``baseline``) are printed in the
learner's language where :mod:`attention_lab.measure.labels` lists them.
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Sequence
from dataclasses import dataclass

from .._validation import fail
from ..i18n import Message, msg
from .labels import label

__all__ = ["FLAT_BELOW", "Conclusion", "Crossover", "Growth", "Slope", "agree", "crossover", "fit_slope", "growth",
           "with_committed"]


def agree(ratio: float, best_ratio: float, *, tolerance: float = 0.25) -> bool:
    """Whether a round-by-round ratio and the ratio of the fastest times tell the same story: the same side of 1,
    and within a factor ``1 + tolerance`` of each other. Shape: a bool."""
    return (ratio > 1) == (best_ratio > 1) and abs(math.log(ratio / best_ratio)) <= math.log1p(tolerance)


class Conclusion:
    """What every conclusion shares: whether the figures decided it (``conclusive``) and its ``message``, rendered
    when the conclusion is made (a ``Message`` becomes text in the language of that moment), and printed as itself.
    Shape: no tensors."""

    conclusive: bool
    message: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "message", str(self.message))

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class Crossover(Conclusion):
    """Where a variant becomes faster for good. ``n`` is None when it never does (or the data cannot say). Shape: no
    tensors."""

    n: int | None
    conclusive: bool
    message: str


def _numbers(fn: str, what: str, values: object) -> list[float]:
    """A non-empty sequence of finite real numbers (bools refused), as floats."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        fail(fn, f"{what} must be a sequence of numbers, got {type(values).__name__}; pass a list", TypeError)
    if any(isinstance(x, bool) or not isinstance(x, numbers.Real) for x in values):
        fail(fn, f"{what} must hold only numbers, got {list(values)!r}; convert each with float()", TypeError)
    floats = [float(x) for x in values]
    if not all(map(math.isfinite, floats)):
        fail(fn, f"{what} must be finite, got {floats}; drop or re-measure the NaN/inf entries")
    return floats


def _increasing_lengths(fn: str, lengths: object, others: Sequence[float], what: str) -> list[float]:
    xs = _numbers(fn, "lengths", lengths)
    if len(xs) != len(others) or not xs:
        fail(fn, f"expected one of the {what} per length, got {len(xs)} and {len(others)}; pass equal, non-empty lists")
    if any(b <= a for a, b in zip(xs, xs[1:])):
        fail(fn, f"lengths must increase, got {list(lengths)}; sort them (and the {what} with them)")
    if min(xs) <= 0:
        fail(fn, f"lengths must be > 0, got {list(lengths)}; drop the lengths <= 0")
    return xs


def crossover(lengths: Sequence[int], ratios: Sequence[float], *, name: str = "the variant",
              baseline: str = "the baseline", best_ratios: Sequence[float] | None = None) -> Crossover:
    """The smallest measured n from which ``name`` is faster (ratio > 1) at every larger measured n.

    ``ratios[k]`` is baseline time / ``name`` time at ``lengths[k]``. The answer is not the first faster length:
    slower at 256, faster at 512 and from then on gives 512. When faster and slower alternate (the ratio crosses 1
    more than once, e.g. faster at 256, slower at 512, faster from 1024 on) this run cannot tell
    (``conclusive=False``), since a real crossover happens once. A variant faster at the small lengths
    and slower from some length on has no crossover (``n`` None). ``best_ratios`` (baseline's fastest time / the
    variant's, per length) should say "faster" at the same lengths as ``ratios``: a length where they disagree is a
    tie, which is conclusive only between the lengths where the variant is slower and those where it is faster
    (a contiguous run, after which it is faster to the last length); anywhere else this run cannot tell.

    Shape: two sequences of equal length, ``lengths`` increasing.
    """
    fn = "crossover"
    name, baseline = label(name), label(baseline)
    values = _numbers(fn, "ratios", ratios)
    _increasing_lengths(fn, lengths, values, "ratios")
    if any(r <= 0 for r in values):
        fail(fn, f"ratios must be > 0 (a time divided by a time), got {values}")
    shown = ", ".join(f"n={n}: {r:.2f}x" for n, r in zip(lengths, values))
    said = {"name": name, "baseline": baseline, "shown": shown, "last": lengths[-1]}
    faster = [r > 1 for r in values]
    if best_ratios is not None:
        best = _numbers(fn, "best_ratios", best_ratios)
        _increasing_lengths(fn, lengths, best, "best_ratios")
        split = [k for k, (r, b) in enumerate(zip(values, best)) if (r > 1) != (b > 1)]  # about equal there
        ahead = [k for k in range(len(values)) if values[k] > 1 and k not in split]
        if split and ahead and ahead == list(range(split[-1] + 1, len(values))) and split == list(
                range(split[0], split[-1] + 1)) and not any(values[k] > 1 for k in range(split[0]) if k not in split):
            at = ahead[0]  # the ties sit between the lengths where it is slower and those where it is faster
            return Crossover(lengths[at], True, msg("{name} overtakes {baseline} at n = {at} ({ratio:.2f}x there) "
                                                    "and stays faster up to n = {last}; about equal at n = {ties}, "
                                                    "where the round-by-round ratio and the fastest times disagree "
                                                    "({shown})", at=lengths[at], ratio=values[at],
                                                    ties=", ".join(str(lengths[k]) for k in split), **said))
        if split:
            return Crossover(None, False, msg("this run cannot tell where {name} overtakes {baseline}: at n = "
                                              "{lengths} the round-by-round ratio and the fastest times disagree "
                                              "on which is faster", lengths=", ".join(str(lengths[k]) for k in split),
                                              name=name, baseline=baseline))
    if sum(a != b for a, b in zip(faster, faster[1:])) > 1:
        return Crossover(None, False, msg("this run cannot tell where {name} overtakes {baseline}: it is faster at "
                                          "some lengths and slower at others ({shown})", **said))
    if all(faster):
        peak = max(range(len(values)), key=values.__getitem__)
        return Crossover(lengths[0], True, msg("{name} is faster than {baseline} at every measured length, from "
                                               "n = {first} to n = {last} ({shown}; the largest gap, {peak:.2f}x, "
                                               "at n = {peak_n})", first=lengths[0], peak=values[peak],
                                               peak_n=lengths[peak], **said))
    if not any(faster):
        return Crossover(None, True, msg("{name} is not faster than {baseline} at any measured length up to "
                                         "n = {last} ({ratio:.2f}x there)", ratio=values[-1], **said))
    first = faster.index(not faster[0])  # where the single flip happens
    around = {"before": lengths[first - 1], "before_ratio": values[first - 1], **said}
    if not faster[-1]:
        return Crossover(None, True, msg("{name} is faster than {baseline} up to n = {before} ({before_ratio:.2f}x) "
                                         "but slower from n = {after} on ({after_ratio:.2f}x): it does not stay "
                                         "ahead ({shown})", after=lengths[first], after_ratio=values[first], **around))
    return Crossover(lengths[first], True, msg("{name} overtakes {baseline} at n = {at} ({ratio:.2f}x there, "
                                               "{before_ratio:.2f}x at n = {before}) and stays faster up to "
                                               "n = {last} ({shown})", at=lengths[first], ratio=values[first],
                                               **around))


@dataclass(frozen=True)
class Slope(Conclusion):
    """Least-squares exponent p in time ~ n^p over ``fitted_on``, with its 95% interval ``low`` ... ``high`` from
    the scatter of the points about the line (infinite with two points, which leave no scatter to measure).

    Shape: no tensors; ``fitted_on`` is the first and last length.
    """

    slope: float
    low: float
    high: float
    fitted_on: tuple[int, int]
    conclusive: bool
    message: str


# Student's t at 97.5% for 1 ... 10 degrees of freedom: a slope fitted to k points has k - 2 of them
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228)


def _t975(dof: int) -> float:
    return _T975[dof - 1] if dof <= len(_T975) else 1.96 + 2.4 / dof  # within 0.01 of the table beyond 10


FLAT_BELOW = 0.5  # an exponent p of time ~ n^p between -FLAT_BELOW and FLAT_BELOW is flat: slower than sqrt(n)


def fit_slope(lengths: Sequence[float], times: Sequence[float], *, name: str = "time",
              flat_below: float = FLAT_BELOW) -> Slope:
    """Fit log(time) = p log(n) + c and report p with its 95% interval, from the residuals of the fit.

    The interval decides what the figures say: above 0, ``name`` grows as n^p; below 0, it falls; around 0 and
    inside (-``flat_below``, ``flat_below``), it is flat (no growth this run can see, and none as fast as
    n^flat_below). An interval around 0 that reaches past ``flat_below`` cannot tell flat from growing: that, and
    only that, is inconclusive (``conclusive=False``). Two points have no residuals: the slope is reported as
    theirs, with no interval.

    Shape: two sequences of equal length >= 2, positive values.
    """
    fn = "fit_slope"
    name = label(name)
    ys = _numbers(fn, "times", times)
    xs = _increasing_lengths(fn, lengths, ys, "times")
    if len(xs) < 2:
        fail(fn, f"a slope needs at least two lengths, got {len(xs)}; measure more lengths")
    if min(ys) <= 0:
        fail(fn, f"times must be > 0 (their logarithms are taken), got {ys}")
    if isinstance(flat_below, bool) or not isinstance(flat_below, numbers.Real) or not flat_below > 0:
        fail(fn, f"flat_below must be a number > 0 (an exponent), got {flat_below!r}")
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    sxx = sum((x - mx) ** 2 for x in lx)
    sxy = sum((x - mx) * (y - my) for x, y in zip(lx, ly))
    slope = sxy / sxx
    span = (int(lengths[0]), int(lengths[-1]))
    where = {"name": name, "first": span[0], "last": span[1], "slope": slope}
    if len(xs) == 2:
        return Slope(slope, -math.inf, math.inf, span, True,
                     msg("{name} goes as n^{slope:.2f} over n = {first} ... {last} (two points, so no interval)",
                         **where))
    residuals = sum((y - my - slope * (x - mx)) ** 2 for x, y in zip(lx, ly))
    half = _t975(len(xs) - 2) * math.sqrt(residuals / (len(xs) - 2) / sxx)
    low, high = slope - half, slope + half
    where.update(low=low, high=high)
    if low > 0:
        return Slope(slope, low, high, span, True, msg("{name} grows as n^{slope:.2f} over n = {first} ... {last} "
                                                       "(interval at 95%: {low:.2f} to {high:.2f})", **where))
    if high < 0:
        return Slope(slope, low, high, span, True, msg("{name} falls as n^{slope:.2f} over n = {first} ... {last} "
                                                       "(interval at 95%: {low:.2f} to {high:.2f})", **where))
    if -flat_below < low and high < flat_below:
        return Slope(slope, low, high, span, True,
                     msg("{name} is flat over n = {first} ... {last}: slope {slope:.2f}, interval at 95%: "
                         "{low:.2f} to {high:.2f}, which holds 0", **where))
    return Slope(slope, low, high, span, False,
                 msg("this run cannot tell whether {name} grows over n = {first} ... {last}: slope {slope:.2f}, "
                     "interval at 95%: {low:.2f} to {high:.2f}, which holds both 0 and {flat_below}",
                     flat_below=flat_below, **where))


@dataclass(frozen=True)
class Growth(Conclusion):
    """How a quantity that is exact, not timed (a peak memory, a count), grows with n over the whole measured range.

    ``factor`` is the last value over the first, ``exponent`` the p of value ~ n^p fitted by least squares to every
    point (one step that jumps does not decide it), ``kind`` one of the names of :data:`_KINDS`.

    Shape: no tensors; ``span`` is the first and last length.
    """

    exponent: float
    factor: float
    span: tuple[int, int]
    kind: str
    message: str


_KINDS = ((0.9, "less than linear", msg("less than linear")), (1.1, "about linear", msg("about linear")),
          (1.9, "between linear and quadratic", msg("between linear and quadratic")),
          (2.1, "about quadratic", msg("about quadratic")),
          (math.inf, "faster than quadratic", msg("faster than quadratic")))


def growth(lengths: Sequence[float], values: Sequence[float], *, name: str = "it") -> Growth:
    """Fit value ~ n^p over every measured length and name the kind of growth from p (below 0.9: less than linear;
    up to 1.1: about linear; ... ; above 2.1: faster than quadratic), with the factor from the first length to the
    last. For exact figures; a timing goes through :func:`fit_slope`, which also gives the exponent's interval.

    Shape: two sequences of equal length >= 2, positive values, ``lengths`` increasing.
    """
    fn = "growth"
    name = label(name)
    ys = _numbers(fn, "values", values)
    xs = _increasing_lengths(fn, lengths, ys, "values")
    if len(xs) < 2:
        fail(fn, f"a growth needs at least two lengths, got {len(xs)}; measure more lengths")
    if min(ys) <= 0:
        fail(fn, f"values must be > 0 (their logarithms are taken), got {ys}")
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    exponent = sum((x - mx) * (y - my) for x, y in zip(lx, ly)) / sum((x - mx) ** 2 for x in lx)
    kind, said = next((text, said) for limit, text, said in _KINDS if exponent <= limit)
    span, factor = (int(lengths[0]), int(lengths[-1])), ys[-1] / ys[0]
    return Growth(exponent, factor, span, kind,
                  msg("{name} grows {factor:.1f}x while n grows {n_factor:.0f}x (n = {first} ... {last}; fitted "
                      "over every length: n^{exponent:.2f}, {kind})", name=name, factor=factor,
                      n_factor=xs[-1] / xs[0], first=span[0], last=span[1], exponent=exponent, kind=said))


def with_committed(live: Conclusion, committed: Conclusion | None, *, machine: str, missing: str = "",
                   load: float | None = None) -> Message:
    """What a timing cell prints: the conclusion from this run's figures when they allow one. Otherwise it leads
    with what the committed benchmark found from the same comparison, labelled with the machine it ran on
    (``machine``: :attr:`~attention_lab.measure.results.BenchmarkResults.machine`, with its load), then says that
    this run's machine was busy: its 1-minute load average (``load``, read here when None) on its cores, and the
    spread that kept this run from concluding. ``committed`` is the same conclusion function applied to the
    committed figures, or None where the file is ``missing`` (what to run instead).

    Shape: no tensors; a message of one or two lines.
    """
    if live.conclusive:
        return msg("{live}", live=live.message)
    if load is None:
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else math.nan
    busy = msg("this run's machine was busy (load average {load:.1f} on {cores} logical cores): {live}", load=load,
               cores=os.cpu_count(), live=live.message)
    if committed is None:
        return msg("{busy}\nno committed figures to compare with: {missing}", busy=busy, missing=missing)
    return msg("the committed benchmark ({machine}): {committed}\n{busy}", machine=machine,
               committed=committed.message, busy=busy)
