"""What attention costs in memory: the bytes it should take (arithmetic) and the bytes it does take (measured).

``attention_memory_bytes`` counts the tensors of one attention call by hand. ``measure_peak_memory`` runs a function
and reports the highest amount of tensor memory it had allocated at any moment, above what was allocated before it
started. It works on the CPU as on CUDA:

* CPU: PyTorch keeps no running total for its CPU allocator, but the profiler (``profile_memory=True``) records every
  allocation and every free (with negative bytes) as a raw ``[memory]`` event. Summing those records in time order
  gives the exact level after every step, hence the exact peak. (An operator's ``cpu_memory_usage`` in the profiler's
  tables is not used: it also counts its children's allocations, so it overstates.)
* CUDA: the caching allocator's own peak statistics (``torch.cuda.max_memory_allocated``).

Measurements nest (a measured function may itself call ``measure_peak_memory``) and repeat; they are not thread-safe.
On the CPU, allocations made on other threads are counted only where PyTorch hands them its profiling state
(autograd's threads, for one).
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

from .._validation import check_positive_int, fail

__all__ = [
    "AttentionMemory",
    "PeakMemory",
    "attention_memory_bytes",
    "available_memory_bytes",
    "format_bytes",
    "measure_peak_memory",
    "memory_report",
]

MiB = 2**20
_CPU_DEVICE_TYPES = {"CPU", "MKLDNN", "IDEEP"}
# Lines the profiler writes straight to the process's stderr on every start/stop (and when a tensor made before the
# measurement is freed during it): noise for a learner, and nbval would see it as a cell output.
_PROFILER_NOISE = re.compile(r"SyncActivityProfilerHandler|Memory block of unknown size was allocated before")


def format_bytes(n: int | float) -> str:
    """``1536`` -> ``'1.50 KiB'``: binary units (KiB = 1024 B, MiB = 1024 KiB), two decimals."""
    value = float(n)
    if abs(value) < 1024:
        return f"{int(value)} B"
    for unit in ("KiB", "MiB"):
        value /= 1024
        if abs(value) < 1024:
            return f"{value:.2f} {unit}"
    return f"{value / 1024:.2f} GiB"


# ---- arithmetic ----


@dataclass(frozen=True)
class AttentionMemory:
    """Bytes of each tensor in one attention call (``b`` sequences, ``h`` heads)."""

    q: int
    k: int
    v: int
    scores: int
    weights: int
    output: int

    @property
    def qkv(self) -> int:
        """Q, K and V together: 3 * n * d values per head when i == j."""
        return self.q + self.k + self.v

    @property
    def naive_peak(self) -> int:
        """What a naive forward allocates beyond its inputs: the scores and the weights alive together + output."""
        return self.scores + self.weights + self.output

    @property
    def total(self) -> int:
        return self.qkv + self.scores + self.weights + self.output

    def as_dict(self) -> dict[str, int]:
        return {"q": self.q, "k": self.k, "v": self.v, "scores": self.scores, "weights": self.weights,
                "output": self.output}

    def __str__(self) -> str:
        rows = [f"{name:>8}: {format_bytes(size)}" for name, size in self.as_dict().items()]
        return "\n".join(rows + [f"{'total':>8}: {format_bytes(self.total)}"])


def attention_memory_bytes(
    n_queries: int,
    n_keys: int | None = None,
    *,
    head_dim: int,
    num_heads: int = 1,
    batch: int = 1,
    dtype: torch.dtype = torch.float32,
) -> AttentionMemory:
    """Bytes of Q, K, V, the score matrix, the weight matrix and the output of one attention call: arithmetic only.

    Each ``(i, j)`` matrix holds ``b * h * i * j`` values, Q and the output ``b * h * i * d``, K and V
    ``b * h * j * d``; each value takes ``dtype``'s item size (4 bytes for float32, 2 for float16 and bfloat16).

    Shape: q ``(b, h, i, d)``, k and v ``(b, h, j, d)``, scores and weights ``(b, h, i, j)``, output ``(b, h, i, d)``.
    """
    fn = "attention_memory_bytes"
    check_positive_int(fn, "n_queries", n_queries)
    n_keys = n_queries if n_keys is None else check_positive_int(fn, "n_keys", n_keys)
    check_positive_int(fn, "head_dim", head_dim)
    check_positive_int(fn, "num_heads", num_heads)
    check_positive_int(fn, "batch", batch)
    if not isinstance(dtype, torch.dtype):
        fail(fn, f"dtype must be a torch.dtype such as torch.float32, got {type(dtype).__name__} {dtype!r}",
             TypeError)
    item = torch.empty((), dtype=dtype).element_size()
    per_head = batch * num_heads * item
    return AttentionMemory(
        q=per_head * n_queries * head_dim,
        k=per_head * n_keys * head_dim,
        v=per_head * n_keys * head_dim,
        scores=per_head * n_queries * n_keys,
        weights=per_head * n_queries * n_keys,
        output=per_head * n_queries * head_dim,
    )


# ---- measurement ----


@dataclass(frozen=True)
class PeakMemory:
    """The result of ``measure_peak_memory``.

    ``peak_bytes``: the highest tensor memory allocated while ``fn`` ran, above the level before it (0 if it
    allocated nothing). ``retained_bytes``: what was still allocated when ``fn`` returned (its result, what autograd
    keeps for backward), above the same level; negative if ``fn`` freed more than it kept.
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
        try:
            dev = torch.device(device)
        except (RuntimeError, TypeError):
            fail(name, f"device must be a torch.device or a string such as 'cpu' or 'cuda', got {device!r}",
                 TypeError)
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


# ---- what the machine has ----


def _resolve(device: torch.device | str | None) -> torch.device:
    return torch.device(device) if device is not None else torch.get_default_device()


def available_memory_bytes(device: torch.device | str | None = None) -> int:
    """Free memory on ``device`` now: on CUDA the driver's free bytes, on the CPU the RAM available to new
    allocations without swapping (psutil, on Linux, macOS and Windows alike)."""
    dev = _resolve(device)
    if dev.type == "cuda":
        free, _total = torch.cuda.mem_get_info(dev)
        return int(free)
    if dev.type != "cpu":
        fail("available_memory_bytes", f"expected a 'cpu' or 'cuda' device, got {dev}")
    import psutil  # a learner requirement; imported here so that `import attention_lab` stays light

    return int(psutil.virtual_memory().available)


def memory_report(device: torch.device | str | None = None) -> str:
    """A few lines on memory now, on any device (CUDA or CPU).

    CUDA: tensor memory allocated, reserved by the caching allocator, the peak since the last reset, and the
    device's free/total memory. CPU: PyTorch keeps no running total of CPU tensor bytes, so the report gives the
    process's resident memory and the machine's available/total RAM (psutil) and points to ``measure_peak_memory``.
    """
    dev = _resolve(device)
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            fail("memory_report", f"device {dev} was asked for but CUDA is not available here; use device='cpu'")
        free, total = torch.cuda.mem_get_info(dev)
        return "\n".join([
            f"device: {dev} ({torch.cuda.get_device_name(dev)})",
            f"allocated by tensors: {format_bytes(torch.cuda.memory_allocated(dev))}",
            f"reserved by the caching allocator: {format_bytes(torch.cuda.memory_reserved(dev))}",
            f"peak allocated since last reset: {format_bytes(torch.cuda.max_memory_allocated(dev))}",
            f"device memory free / total: {format_bytes(free)} / {format_bytes(total)}",
        ])
    if dev.type != "cpu":
        fail("memory_report", f"expected a 'cpu' or 'cuda' device, got {dev}")
    lines = [f"device: {dev}"]
    try:
        import psutil
    except ImportError:
        lines.append("psutil is not installed: `pip install psutil` to see process and system memory")
    else:
        vm = psutil.virtual_memory()
        lines += [
            f"process resident memory (RSS): {format_bytes(psutil.Process().memory_info().rss)}",
            f"system memory available / total: {format_bytes(vm.available)} / {format_bytes(vm.total)}",
        ]
    lines.append("tensor bytes: PyTorch keeps no running total on the CPU; measure_peak_memory(fn) gives exact "
                 "peaks")
    return "\n".join(lines)
