"""What attention takes in memory, measured: the highest tensor memory a call had allocated at any moment.

``measure_peak_memory`` runs a function and reports the highest amount of tensor memory it had allocated at any
moment, above what was allocated before it started. It works on the CPU as on CUDA:

* CPU: PyTorch keeps no running total for its CPU allocator, but the profiler (``profile_memory=True``) records every
  allocation and every free (with negative bytes) as a raw ``[memory]`` event. Summing those records in time order
  gives the exact level after every step, hence the exact peak. (An operator's ``cpu_memory_usage`` in the profiler's
  tables is not used: it also counts its children's allocations, so it overstates.)
* CUDA: the caching allocator's own peak statistics (``torch.cuda.max_memory_allocated``).

Measurements nest (a measured function may itself call ``measure_peak_memory``: a nested one hands the outer ones
what it saw) and repeat; they are not thread-safe. On the CPU, allocations made on other threads are counted only
where PyTorch hands them its profiling state (autograd's threads, for one). :func:`format_bytes` prints bytes.

What a call should take, by arithmetic, is in :mod:`attention_lab.measure.cost`; the machine's free memory in
:mod:`attention_lab.measure.memory_report`.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch.autograd.profiler import profile as _autograd_profile

from .._validation import check_device, check_number, fail

__all__ = ["MiB", "PeakMemory", "format_bytes", "measure_peak_memory"]

MiB = 2**20  # bytes in a mebibyte

_CPU_DEVICE_TYPES = {"CPU", "MKLDNN", "IDEEP"}
# Lines the profiler writes straight to the process's stderr on every start/stop (and when a tensor made before the
# measurement is freed during it): noise for a learner, and nbval would see it as a cell output.
_PROFILER_NOISE = re.compile(r"SyncActivityProfilerHandler|Memory block of unknown size was allocated before")


def format_bytes(n: int | float) -> str:
    """``1536`` -> ``'1.50 KiB'``: binary units (KiB = 1024 B, MiB = 1024 KiB), two decimals.

    Shape: a number -> a string.
    """
    value = check_number("format_bytes", "n", n, unit="bytes")
    if abs(value) < 1024:
        return f"{int(value)} B"
    for unit in ("KiB", "MiB"):
        value /= 1024
        if abs(value) < 1024:
            return f"{value:.2f} {unit}"
    return f"{value / 1024:.2f} GiB"


@dataclass(frozen=True)
class PeakMemory:
    """The result of ``measure_peak_memory``.

    ``peak_bytes``: the highest tensor memory allocated while ``fn`` ran, above the level before it (0 if it
    allocated nothing). ``retained_bytes``: what was still allocated when ``fn`` returned (its result, what autograd
    keeps for backward), above the same level; negative if ``fn`` freed more than it kept.

    Shape: two ints of bytes; ``result`` is whatever ``fn`` returned.
    """

    peak_bytes: int
    retained_bytes: int
    result: Any
    device: torch.device

    @property
    def peak_mib(self) -> float:
        return self.peak_bytes / MiB

    def __str__(self) -> str:
        return (f"peak {format_bytes(self.peak_bytes)}, still held at the end {format_bytes(self.retained_bytes)} "
                f"({self.device})")


class _Meter:
    """One running measurement: the level relative to its start, and the highest level seen."""

    def __init__(self) -> None:
        self.level = 0
        self.peak = 0

    def feed(self, nbytes: int) -> None:
        self.level += nbytes
        self.peak = max(self.peak, self.level)


class _CpuSession:
    """The one profiler run shared by every open CPU measurement.

    The profiler cannot run twice at once, so a nested measurement stops the current run, hands its records to every
    open meter, and starts a fresh one; the size of each live block survives across runs, so frees are still
    counted exactly.
    """

    meters: list[_Meter] = []
    profiler: _autograd_profile | None = None

    @classmethod
    def _start(cls) -> None:
        if torch.autograd.profiler._is_profiler_enabled:
            fail("measure_peak_memory", "expected no other torch profiler to be running, but one is; PyTorch runs "
                                        "one profiler at a time: measure outside your torch.profiler.profile block",
                 RuntimeError)
        prof = _autograd_profile(profile_memory=True)
        prof.__enter__()
        cls.profiler = prof

    @classmethod
    def _stop(cls) -> None:
        prof, cls.profiler = cls.profiler, None
        if prof is None:
            return
        prof.__exit__(None, None, None)
        events = [e for e in prof.kineto_results.events()
                  if e.name() == "[memory]" and e.device_type().name in _CPU_DEVICE_TYPES]
        for event in sorted(events, key=lambda e: e.start_ns()):
            for meter in cls.meters:
                meter.feed(event.nbytes())

    @classmethod
    @contextlib.contextmanager
    def measure(cls) -> Iterator[_Meter]:
        meter = _Meter()
        outermost = not cls.meters
        with _profiler_noise_filtered() if outermost else contextlib.nullcontext():
            cls._stop()
            cls.meters.append(meter)
            try:
                cls._start()
                yield meter
            finally:
                try:
                    cls._stop()
                finally:
                    cls.meters.remove(meter)
                    if cls.meters:
                        cls._start()


@contextlib.contextmanager
def _profiler_noise_filtered() -> Iterator[None]:
    """Send the process's stderr to a file meanwhile; afterwards pass on every line but the profiler's chatter."""
    try:
        saved = os.dup(2)
    except OSError:  # no file descriptor 2 (some embedded interpreters): nothing to filter
        yield
        return
    with tempfile.TemporaryFile() as capture:
        _flush_stderr()
        os.dup2(capture.fileno(), 2)
        try:
            yield
        finally:
            _flush_stderr()
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            kept = [line for line in capture.read().decode(errors="replace").splitlines(keepends=True)
                    if not _PROFILER_NOISE.search(line)]
            if kept:
                sys.stderr.write("".join(kept))


def _flush_stderr() -> None:
    with contextlib.suppress(Exception):
        sys.stderr.flush()


class _CudaMeters:
    """Open CUDA measurements: a nested one resets the allocator's peak, so the outer ones bank theirs first."""

    open: list[tuple[torch.device, _Meter, int]] = []  # (device, meter, allocated bytes at its start)

    @classmethod
    def _bank(cls) -> None:
        for dev, meter, start in cls.open:
            meter.peak = max(meter.peak, torch.cuda.max_memory_allocated(dev) - start)

    @classmethod
    @contextlib.contextmanager
    def measure(cls, dev: torch.device) -> Iterator[_Meter]:
        torch.cuda.synchronize(dev)
        cls._bank()
        meter = _Meter()
        start = torch.cuda.memory_allocated(dev)
        torch.cuda.reset_peak_memory_stats(dev)
        cls.open.append((dev, meter, start))
        try:
            yield meter
        finally:
            torch.cuda.synchronize(dev)
            cls._bank()
            meter.level = torch.cuda.memory_allocated(dev) - start
            cls.open.pop()


def _infer_device(args: tuple, kwargs: dict) -> torch.device:
    for value in (*args, *kwargs.values()):
        if isinstance(value, torch.Tensor):
            return value.device
    return torch.get_default_device()


def measure_peak_memory(fn: Callable[..., Any], *args: Any, device: torch.device | str | None = None,
                        **kwargs: Any) -> PeakMemory:
    """Run ``fn(*args, **kwargs)`` and measure the peak of tensor memory allocated meanwhile, above the start.

    Exact on the CPU for every tensor PyTorch's allocator hands out (see the module docstring); on CUDA it reads the
    allocator's peak statistics. ``device`` defaults to the device of the first tensor among the arguments, else
    PyTorch's default device: pass it when ``fn`` takes no tensors but allocates on a GPU. An exception raised by
    ``fn`` propagates, and the measurement is stopped first. Tensors made before the call and freed during it are
    not seen on the CPU (their size is unknown to the profiler), so the peak then counts them as still alive.

    Shape: whatever ``fn`` takes and returns (the result is in ``.result``).
    """
    name = "measure_peak_memory"
    if not callable(fn):
        fail(name, f"fn must be callable (a function or a lambda), got {type(fn).__name__} {fn!r}; "
                   f"pass the function itself, e.g. measure_peak_memory(attention, q, k, v), not its result",
             TypeError)
    if device is None:
        dev = _infer_device(args, kwargs)
    else:
        dev = check_device(name, "device", device)
    if dev.type == "cpu":
        meter_cm = _CpuSession.measure()
    elif dev.type == "cuda":
        if not torch.cuda.is_available():
            fail(name, f"device {dev} was asked for but CUDA is not available here; use device='cpu'")
        meter_cm = _CudaMeters.measure(dev)
    else:
        fail(name, f"expected a 'cpu' or 'cuda' device, got {dev}; PyTorch has no peak statistics for "
                   f"{dev.type}: measure the same code on the CPU instead")
    with meter_cm as meter:
        result = fn(*args, **kwargs)
    return PeakMemory(peak_bytes=meter.peak, retained_bytes=meter.level, result=result, device=dev)
