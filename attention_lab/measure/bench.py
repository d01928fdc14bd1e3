"""Timing attention on this machine: a small timing helper and a sweep over sequence lengths.

    python -m attention_lab.measure.bench                 # default sweep (under a minute on a 2-core laptop)
    python -m attention_lab.measure.bench --quick         # smaller sweep (under 15 s)
    python -m attention_lab.measure.bench --csv cost.csv  # then plotting.plot_bench(read_csv("cost.csv"))

Times are medians of ``torch.utils.benchmark`` runs after a warm-up call, with the thread count stated. Each variant
is also set against a rough reference ceiling: the GFLOP/s one large matrix multiplication reaches here (its best
run). Fresh large tensors cost page faults on the CPU, and a naive attention pays them on every call; the times
include that cost.
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

import torch
import torch.nn.functional as F
from torch.utils import benchmark

from .._validation import check_number, check_positive_int, fail
from ..core.functional import scaled_dot_product_attention
from ..efficient.blockwise import blockwise_attention
from .memory import measure_peak_memory

__all__ = [
    "BenchRow",
    "Timing",
    "attention_flops",
    "attention_variants",
    "format_table",
    "loglog_slope",
    "main",
    "matmul_peak_gflops",
    "read_csv",
    "run_sweep",
    "time_function",
    "write_csv",
]

DEFAULT_LENGTHS = (128, 256, 512, 1024, 2048)
QUICK_LENGTHS = (128, 256, 512, 1024)


@dataclass(frozen=True)
class Timing:
    """Median and interquartile range of one function's run time, in seconds, and the threads it ran with."""

    median_s: float
    iqr_s: float
    runs: int
    threads: int

    def __str__(self) -> str:
        return f"{self.median_s * 1e3:.3f} ms (IQR {self.iqr_s * 1e3:.3f} ms, {self.runs} runs, {self.threads} threads)"


def time_function(fn: Callable[..., Any], *args: Any, min_run_time: float = 0.2, warmup: int = 1,
                  num_threads: int | None = None, **kwargs: Any) -> Timing:
    """Time ``fn(*args, **kwargs)``: ``warmup`` untimed calls, then ``torch.utils.benchmark`` blocks of runs for at
    least ``min_run_time`` seconds; the median over the blocks. CUDA work is synchronised by the timer.

    Shape: whatever ``fn`` takes.
    """
    name = "time_function"
    if not callable(fn):
        fail(name, f"fn must be callable, got {type(fn).__name__}; pass the function, not its result", TypeError)
    check_positive_int(name, "warmup", warmup, minimum=0)
    threads = torch.get_num_threads() if num_threads is None else check_positive_int(name, "num_threads",
                                                                                      num_threads)
    check_number(name, "min_run_time", min_run_time, low=0, low_open=True, unit="seconds")
    for _ in range(warmup):
        fn(*args, **kwargs)
    timer = benchmark.Timer(stmt="fn(*args, **kwargs)", globals={"fn": fn, "args": args, "kwargs": kwargs},
                            num_threads=threads)
    m = timer.blocked_autorange(min_run_time=min_run_time)
    return Timing(median_s=m.median, iqr_s=m.iqr, runs=len(m.times) * m.number_per_run, threads=threads)


def attention_flops(n_queries: int, n_keys: int | None = None, *, head_dim: int, num_heads: int = 1,
                    batch: int = 1) -> int:
    """Multiply-add FLOPs of one attention forward: Q K^T and weights @ V, 2 * i * j * d each, per head.

    The softmax adds a few operations per score (O(i * j), not O(i * j * d)) and is left out, as is usual.

    Shape: q ``(b, h, i, d)``, k and v ``(b, h, j, d)``.
    """
    fn = "attention_flops"
    check_positive_int(fn, "n_queries", n_queries)
    n_keys = n_queries if n_keys is None else check_positive_int(fn, "n_keys", n_keys)
    for name, value in (("head_dim", head_dim), ("num_heads", num_heads), ("batch", batch)):
        check_positive_int(fn, name, value)
    return 4 * batch * num_heads * n_queries * n_keys * head_dim


def matmul_peak_gflops(size: int = 1024, *, device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32,
                       min_run_time: float = 0.3, repeats: int = 5) -> float:
    """The GFLOP/s of the fastest of several ``size x size`` matrix multiplications here: a rough reference ceiling.

    One call is warmed up, then single calls are timed (CUDA synchronised) until at least ``repeats`` calls and
    ``min_run_time`` seconds are done. The best call, not the median, is used: other programs only ever slow a call
    down, so the fastest is the least disturbed. 1024 is large enough to keep a laptop's cores busy. It is a
    reference, not a hard limit: a fused kernel (such as ``F.scaled_dot_product_attention``) can come close to it
    or pass it a little.

    Shape: two ``(size, size)`` matrices.
    """
    name = "matmul_peak_gflops"
    check_positive_int(name, "size", size)
    check_positive_int(name, "repeats", repeats)
    check_number(name, "min_run_time", min_run_time, low=0, unit="seconds")
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    timer = benchmark.Timer(stmt="torch.matmul(a, b)", globals={"torch": torch, "a": a, "b": b},
                            num_threads=torch.get_num_threads())
    torch.matmul(a, b)  # warm up
    best, spent, runs = math.inf, 0.0, 0
    while runs < repeats or spent < min_run_time:
        seconds = timer.timeit(1).mean
        best, spent, runs = min(best, seconds), spent + seconds, runs + 1
    return 2 * size**3 / best / 1e9


def loglog_slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Least-squares slope of log(y) against log(x): the exponent p in y ~ x^p (2 for a cost that grows as n^2)."""
    if len(xs) != len(ys) or len(xs) < 2:
        fail("loglog_slope", f"expected two sequences of equal length >= 2, got lengths {len(xs)} and {len(ys)}")
    if min(xs) <= 0 or min(ys) <= 0:
        fail("loglog_slope", "expected positive values (logarithms of them are taken)")
    lx = [math.log(x) for x in xs]
    ly = [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    var = sum((x - mx) ** 2 for x in lx)
    if var == 0:
        fail("loglog_slope", "expected at least two different x values")
    return sum((x - mx) * (y - my) for x, y in zip(lx, ly)) / var


def attention_variants() -> dict[str, Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]]:
    """The attention implementations the sweep compares, by name; each maps q, k, v to the output.

    Shape: q ``(b, h, i, d)``, k and v ``(b, h, j, d)`` -> output ``(b, h, i, d)``.
    """
    return {
        "naive (attention_lab)": lambda q, k, v: scaled_dot_product_attention(q, k, v)[0],
        "blockwise (attention_lab)": blockwise_attention,
        "F.scaled_dot_product_attention": F.scaled_dot_product_attention,
    }


@dataclass(frozen=True)
class BenchRow:
    """One variant at one sequence length (i = j = n)."""

    variant: str
    n: int
    batch: int
    heads: int
    head_dim: int
    threads: int
    median_ms: float
    iqr_ms: float
    gflops: float
    share_of_matmul_peak: float
    peak_bytes: int


def run_sweep(lengths: Sequence[int] = DEFAULT_LENGTHS, *, batch: int = 1, heads: int = 8, head_dim: int = 64,
              device: torch.device | str = "cpu", min_run_time: float = 0.2, matmul_gflops: float | None = None,
              variants: dict[str, Callable[..., torch.Tensor]] | None = None,
              progress: bool = True) -> list[BenchRow]:
    """Time (and measure the peak memory of) every variant at every length; float32, forward only.

    Shape: q, k, v ``(batch, heads, n, head_dim)`` for each n in ``lengths``.
    """
    for n in lengths:
        check_positive_int("run_sweep", "every length", n)
    device = torch.device(device)
    variants = attention_variants() if variants is None else variants
    if matmul_gflops is None:
        matmul_gflops = matmul_peak_gflops(device=device)
    jobs = [(name, n) for n in lengths for name in variants]
    if progress:
        from tqdm.auto import tqdm  # a learner requirement; the bar is a widget in Jupyter, text in a terminal

        jobs = tqdm(jobs, desc="attention sweep", unit="run")
    rows = []
    for name, n in jobs:
        fn = variants[name]
        q, k, v = torch.randn(3, batch, heads, n, head_dim, device=device).unbind(0)  # (b, h, i, d) each
        timing = time_function(fn, q, k, v, min_run_time=min_run_time)
        peak = measure_peak_memory(fn, q, k, v, device=device).peak_bytes
        gflops = attention_flops(n, head_dim=head_dim, num_heads=heads, batch=batch) / timing.median_s / 1e9
        rows.append(BenchRow(variant=name, n=n, batch=batch, heads=heads, head_dim=head_dim, threads=timing.threads,
                             median_ms=timing.median_s * 1e3, iqr_ms=timing.iqr_s * 1e3, gflops=gflops,
                             share_of_matmul_peak=gflops / matmul_gflops, peak_bytes=peak))
    return rows


def format_table(rows: Sequence[BenchRow]) -> str:
    """The sweep as a fixed-width text table."""
    header = (f"{'variant':<32} {'n':>6} {'time ms':>10} {'GFLOP/s':>8} {'of peak':>8} {'peak MiB':>9}")
    lines = [header, "-" * len(header)]
    for r in rows:
        lines.append(f"{r.variant:<32} {r.n:>6} {r.median_ms:>10.2f} {r.gflops:>8.1f} "
                     f"{r.share_of_matmul_peak:>8.1%} {r.peak_bytes / 2**20:>9.2f}")
    return "\n".join(lines)


def _slopes(rows: Sequence[BenchRow]) -> dict[str, float]:
    by_variant: dict[str, list[BenchRow]] = {}
    for r in rows:
        by_variant.setdefault(r.variant, []).append(r)
    slopes = {}
    for name, rs in by_variant.items():
        big = [r for r in rs if r.n >= 512] if sum(r.n >= 512 for r in rs) >= 2 else rs  # the n^2 regime
        if len(big) >= 2:
            slopes[name] = loglog_slope([r.n for r in big], [r.median_ms for r in big])
    return slopes


def write_csv(rows: Sequence[BenchRow], path: str) -> None:
    """The sweep as CSV, one row per variant and length, a header of :class:`BenchRow`'s field names."""
    names = [f.name for f in fields(BenchRow)]
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=names)
        writer.writeheader()
        for r in rows:
            writer.writerow(asdict(r))


def read_csv(path: str) -> list[BenchRow]:
    """The rows :func:`write_csv` wrote, typed again (for ``plotting.plot_bench`` or another table)."""
    types = {f.name: f.type for f in fields(BenchRow)}
    convert = {"str": str, "int": int, "float": float}
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        if set(reader.fieldnames or ()) != set(types):
            fail("read_csv", f"expected a CSV with the columns {sorted(types)}, got {reader.fieldnames}; read a file "
                             "written by write_csv() or `python -m attention_lab.measure.bench --csv`")
        return [BenchRow(**{name: convert[types[name]](value) for name, value in row.items()}) for row in reader]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m attention_lab.measure.bench",
                                     description="Time attention against the sequence length on this machine.")
    parser.add_argument("--quick", action="store_true", help="a smaller sweep (lengths up to 1024, 4 heads)")
    parser.add_argument("--lengths", type=int, nargs="+", help="sequence lengths n to sweep")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--heads", type=int, help="attention heads (default 8, 4 with --quick)")
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--threads", type=int, help="torch threads (default: what torch uses now)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    parser.add_argument("--min-run-time", type=float, help="seconds of timed runs per point (default 0.2, quick 0.05)")
    parser.add_argument("--csv", metavar="PATH", help="write the table as CSV")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)

    if args.threads is not None:
        torch.set_num_threads(args.threads)
    lengths = args.lengths or (QUICK_LENGTHS if args.quick else DEFAULT_LENGTHS)
    heads = args.heads or (4 if args.quick else 8)
    min_run_time = args.min_run_time or (0.05 if args.quick else 0.2)
    device = torch.device(args.device)
    matmul = matmul_peak_gflops(device=device, min_run_time=0.1 if args.quick else 0.3)
    print(f"torch {torch.__version__}, device {device}, {torch.get_num_threads()} threads; float32 forward, "
          f"batch {args.batch}, {heads} heads, d = {args.head_dim}")
    print(f"this machine's matmul peak (best 1024 x 1024 run, a rough reference): {matmul:.1f} GFLOP/s; times are "
          "medians after a warm-up")
    sys.stdout.flush()
    rows = run_sweep(lengths, batch=args.batch, heads=heads, head_dim=args.head_dim, device=device,
                     min_run_time=min_run_time, matmul_gflops=matmul, progress=not args.no_progress)
    print(format_table(rows))
    for name, slope in _slopes(rows).items():
        print(f"log-log slope of time against n, {name}: {slope:.2f}")
    if args.csv:
        write_csv(rows, args.csv)
        print(f"wrote {args.csv}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
