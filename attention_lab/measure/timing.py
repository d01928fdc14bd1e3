"""One timing helper for every timing cell, and the conclusions drawn from its figures.

:func:`compare` times several variants in interleaved rounds (A, B, C, A, B, C, ...), so that a burst of other work on
the machine slows every variant alike, and keeps the fastest of the rounds per variant: other programs only ever slow
a call down, so the fastest call is the least disturbed. Ratios are taken against a baseline measured in the same
rounds, never between two separately timed numbers. :func:`sweep` does this for each sequence length.

The conclusions drawn from these figures (a crossover, a fitted slope, or "too noisy to conclude") are in
:mod:`attention_lab.measure.conclusions`. :func:`fixed_threads` holds torch's thread count fixed while a cell times,
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
from .conclusions import agree
from .labels import label

__all__ = ["LESSON_THREADS", "Comparison", "Sweep", "compare", "fixed_threads", "sweep", "thread_report"]

LESSON_THREADS = 1
"""The torch threads every timing cell of a lesson uses (``with fixed_threads(LESSON_THREADS):``). One thread,
because a learner's laptop is busy with other programs: a second thread waits for whichever core is free and adds
that wait to the timing, while one thread's ratios (the figure a lesson concludes from) move far less. The
benchmark scripts use 2 threads pinned to 2 quiet cores (``benchmarks/``), and say so in their CSVs."""


def thread_report() -> str:
    """One line naming the threads torch uses here and the machine's logical cores. Shape: a string."""
    return str(msg("timed with {threads} torch thread(s) on a machine with {cores} logical core(s)",
                   threads=torch.get_num_threads(), cores=os.cpu_count()))


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
        for which in (name, reference):
            if which not in self.rounds_s:
                fail("Comparison.ratio_between", f"expected one of {list(self.rounds_s)}, got {which!r}")
        return _median_ratio(self.rounds_s[reference], self.rounds_s[name])

    def speed(self, name: str, reference: str | None = None, *, tolerance: float = 0.25) -> str:
        """``name``'s speed over ``reference``'s (default: the baseline) as a sentence, or "too noisy to conclude"
        when the round-by-round ratio and the ratio of the fastest times disagree (on which is faster, or by more
        than ``tolerance``). Shape: a string."""
        reference = self.baseline if reference is None else reference
        within, best = self.ratio_between(name, reference), self.best_s[reference] / self.best_s[name]
        name, reference = label(name), label(reference)  # as the conclusions print them
        if not agree(within, best, tolerance=tolerance):
            return str(msg("too noisy to conclude: {name} ran at {within:.2f}x {reference}'s speed round by round, "
                           "but the fastest times give {best:.2f}x; rerun on a quieter machine", name=name,
                           within=within, reference=reference, best=best))
        return str(msg("{name} ran at {within:.2f}x {reference}'s speed (median of {rounds} rounds; the fastest "
                       "times give {best:.2f}x)", name=name, within=within, reference=reference, rounds=self.rounds,
                       best=best))

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
