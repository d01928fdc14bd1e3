"""One timing helper for every timing cell, and the conclusions drawn from its figures.

:func:`compare` times several variants in interleaved rounds (A, B, C, A, B, C, ...), so that a burst of other work on
the machine slows every variant alike, and keeps the fastest of the rounds per variant: other programs only ever slow
a call down, so the fastest call is the least disturbed. With one torch thread on the CPU (the lessons'
:data:`LESSON_THREADS`) the clock is the CPU time of the thread doing the work, which leaves out the time other
programs hold its core: on a busy laptop that is most of the noise. Ratios are taken against a baseline measured
in the same rounds, never between two separately timed numbers. :func:`sweep` does this for each sequence length.

:func:`ratio` concludes from the rounds of a comparison: the median ratio with the middle half of its rounds. The other
conclusions drawn from these figures (a crossover, a fitted slope) are in :mod:`attention_lab.measure.conclusions`.
:func:`fixed_threads` holds torch's thread count fixed while a cell times,
and :func:`thread_report` says what it was. This is the package's one timer: lessons, benchmarks and the long-range
harness all time with :func:`compare` or :func:`sweep`.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from .._validation import check_choice, check_number, check_positive_int, fail
from ..i18n import msg
from .conclusions import Conclusion, _numbers
from .labels import label

__all__ = ["LESSON_THREADS", "SAME_SPEED", "Comparison", "Ratio", "Sweep", "compare", "fixed_threads", "ratio", "sweep",
           "thread_report"]

LESSON_THREADS = 1
"""The torch threads every timing cell of a lesson uses (``with fixed_threads(LESSON_THREADS):``). One thread,
because a learner's laptop is busy with other programs: a second thread waits for whichever core is free and adds
that wait to the timing, while one thread's ratios (the figure a lesson concludes from) move far less. The
benchmark scripts use 2 threads pinned to 2 quiet cores (``benchmarks/``), and say so in their CSVs."""


def thread_report() -> str:
    """One line naming the threads torch uses here, the machine's logical cores and the clock a timing reads
    (:func:`compare`'s). Shape: a string."""
    said = {"threads": torch.get_num_threads(), "cores": os.cpu_count()}
    if _clock() is time.thread_time:
        return str(msg("timed with {threads} torch thread(s) on a machine with {cores} logical core(s), by the CPU "
                       "time of the thread that runs them (time other programs hold the core is not counted)", **said))
    return str(msg("timed with {threads} torch thread(s) on a machine with {cores} logical core(s)", **said))


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

    Shape: one float per variant in ``best_s`` and ``ratio``; one list of seconds per variant in ``rounds_s``.
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
        per_round = sorted(self.round_ratios(name, reference))
        return per_round[len(per_round) // 2]

    def round_ratios(self, name: str, reference: str | None = None) -> list[float]:
        """reference time / ``name`` time in each round (default reference: the baseline). Shape: one float per
        round."""
        reference = self.baseline if reference is None else reference
        for which in (name, reference):
            if which not in self.rounds_s:
                fail("Comparison.ratio_between", f"expected one of {list(self.rounds_s)}, got {which!r}")
        return [ref / own for ref, own in zip(self.rounds_s[reference], self.rounds_s[name], strict=True)]

    def speed(self, name: str, reference: str | None = None) -> Ratio:
        """``name``'s speed over ``reference``'s (default: the baseline), from the rounds: :func:`ratio`.
        Shape: no tensors."""
        reference = self.baseline if reference is None else reference
        return ratio(self.round_ratios(name, reference), name=name, baseline=reference)

    def __str__(self) -> str:
        lines = [f"{name:<28} {seconds * 1e3:9.3f} ms  {self.ratio[name]:7.2f}x {self.baseline}'s speed"
                 for name, seconds in self.best_s.items()]
        return "\n".join(lines)


@dataclass(frozen=True)
class Ratio(Conclusion):
    """How much faster ``name`` ran than a baseline timed in the same interleaved rounds: the median of the
    per-round ratios (baseline time / ``name`` time) and the range of the middle half of the rounds, ``low`` to
    ``high`` (the quartiles: a round a burst of other work hit lands outside it). Shape: no tensors.
    """

    median: float
    low: float
    high: float
    rounds: int
    conclusive: bool
    message: str


SAME_SPEED = 1.25
"""Two variants ran at about the same speed when the middle half of their rounds lies within 1 / 1.25 ... 1.25."""


def ratio(per_round: Sequence[float], *, name: str = "the variant", baseline: str = "the baseline") -> Ratio:
    """The conclusion of a ratio measured in interleaved rounds: its median, with the middle half of the rounds.

    Faster when that middle half lies above 1, slower when below, about the same speed when it lies within
    1 / :data:`SAME_SPEED` ... :data:`SAME_SPEED`; otherwise this run cannot tell (``conclusive=False``). With
    three rounds or fewer the middle half is every round.

    Shape: one ratio per round, each baseline time / ``name`` time.
    """
    fn = "ratio"
    values = sorted(_numbers(fn, "per_round", per_round))
    if not values:
        fail(fn, "per_round must hold at least one ratio, got an empty sequence")
    if values[0] <= 0:
        fail(fn, f"ratios must be > 0 (a time divided by a time), got {values}")
    quarter = (len(values) - 1) // 4
    median, low, high = values[len(values) // 2], values[quarter], values[-1 - quarter]
    said = {"name": label(name), "baseline": label(baseline), "median": median, "low": low, "high": high,
            "rounds": len(values)}
    if low > 1 or high < 1:
        return Ratio(median, low, high, len(values), True,
                     msg("{name} ran at {median:.2f}x {baseline}'s speed (median of {rounds} rounds; the middle "
                         "half between {low:.2f}x and {high:.2f}x)", **said))
    if 1 / SAME_SPEED <= low and high <= SAME_SPEED:
        return Ratio(median, low, high, len(values), True,
                     msg("{name} and {baseline} ran at about the same speed ({median:.2f}x, median of {rounds} "
                         "rounds; the middle half between {low:.2f}x and {high:.2f}x)", **said))
    return Ratio(median, low, high, len(values), False,
                 msg("this run cannot tell whether {name} is faster than {baseline}: the middle half of its "
                     "{rounds} rounds ranged from {low:.2f}x to {high:.2f}x {baseline}'s speed (median "
                     "{median:.2f}x)", **said))


def _median_ratio(reference: Sequence[float], mine: Sequence[float]) -> float:
    per_round = sorted(ref / own for ref, own in zip(reference, mine, strict=True))
    return per_round[len(per_round) // 2]


def _clock() -> Callable[[], float]:
    """The clock of a timing: with one torch thread on the CPU, the work runs in the calling thread, and that
    thread's CPU time leaves out the moments other programs held its core; otherwise the wall clock."""
    return time.thread_time if torch.get_num_threads() == 1 and not torch.cuda.is_available() else time.perf_counter


def _time_once(fn: Callable[[], Any], number: int) -> float:
    clock = _clock()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    start = clock()
    for _ in range(number):
        fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return (clock() - start) / number


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
    ratio = {name: _median_ratio(times[baseline], times[name]) for name in variants}
    return Comparison(best_s={name: min(ts) for name, ts in times.items()}, ratio=ratio, baseline=baseline,
                      rounds=rounds, threads=torch.get_num_threads(), rounds_s=times)


@dataclass(frozen=True)
class Sweep:
    """:func:`compare` at each length: ``best_s[name][k]`` and ``ratio[name][k]`` belong to ``lengths[k]``.

    Shape: one list per variant, one entry per length.
    """

    lengths: list[int]
    best_s: dict[str, list[float]]
    ratio: dict[str, list[float]]
    baseline: str
    threads: int
    comparisons: list[Comparison] = field(repr=False, default_factory=list)

    def ratio_between(self, name: str, reference: str) -> list[float]:
        """:meth:`Comparison.ratio_between` at each length. Shape: one float per length."""
        return [c.ratio_between(name, reference) for c in self.comparisons]

    def best_ratio(self, name: str, reference: str | None = None) -> list[float]:
        """reference's fastest time / ``name``'s at each length (``crossover``'s ``best_ratios``). Shape: a list."""
        reference = self.baseline if reference is None else reference
        return [a / b for a, b in zip(self.best_s[reference], self.best_s[name])]


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
