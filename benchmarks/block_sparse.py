"""Lesson 07's figures: blockwise and block-sparse attention against PyTorch's SDPA and compiled FlexAttention.

    OMP_PROC_BIND=close OMP_PLACES=cores .venv/bin/python benchmarks/block_sparse.py            # everything (minutes)
    .venv/bin/python benchmarks/block_sparse.py --targets                                       # the two targets only
    .venv/bin/python benchmarks/block_sparse.py --sweep --lengths 1024 2048 --no-flex           # a quick sweep
    .venv/bin/python benchmarks/block_sparse.py --sweep --csv        # the sweep, written to benchmarks/results/

The sweep times the variants with attention_lab.measure.timing (interleaved rounds, fastest of the rounds, each
ratio taken within a round), as lesson 07's live run does. ``--csv [PATH]`` writes its figures, one row per
(n, variant), with the machine, threads, torch version and date on every row, and the 1-minute load average just
after that length was measured (above the thread count: other programs were running, and the figures are only
provisional); lesson 07 reads the committed file (default ``benchmarks/results/block_sparse.csv``) and plots it
beside the learner's own small run.

Setting: b=1, h=8, d=64, float32, CPU, 2 threads (the script sets OMP_PROC_BIND=close OMP_PLACES=cores and
re-executes itself when they are missing: OpenMP reads them only at start-up). Variants within one table are timed
in interleaved rounds, so load from other processes hits them alike; we report medians (and minima) and the ratios.

Targets:
1. block-sparse sliding window (block 128, one neighbour) at n = 8192: >= 15x faster than dense
   F.scaled_dot_product_attention, and within 1.5x of compiled flex_attention with the same layout;
   forward + backward works (FlexAttention has no backward on CPU in torch 2.13).
2. blockwise exact at n = 4096: forward within 1.5x of F.scaled_dot_product_attention; forward + backward peak
   memory at most 1/10 of naive attention's.
Then the sweep n = 1024 ... 16384 (fastest of 5 interleaved rounds): forward time and peak memory for the four
variants, and the crossover.
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

if os.environ.get("OMP_PROC_BIND") is None or os.environ.get("OMP_PLACES") is None:
    os.environ.setdefault("OMP_PROC_BIND", "close")
    os.environ.setdefault("OMP_PLACES", "cores")
    os.execv(sys.executable, [sys.executable, *sys.argv])

import torch
import torch.nn.functional as F

import attention_lab as al
from attention_lab.measure import timing
from attention_lab.measure.memory import format_bytes, measure_peak_memory
from attention_lab.measure.results import write_results
from attention_lab.runtime import machine_label

HEADS, HEAD_DIM = 8, 64
DEFAULT_CSV = Path(__file__).resolve().parent / "results" / "block_sparse.csv"
CSV_FIELDS = ["machine", "logical_cores", "threads", "torch", "date", "load_average", "n", "variant", "fastest_ms",
              "median_ms", "sdpa_time_over_this", "peak_bytes", "rounds"]
SLIDING = al.BlockLayout.sliding_window(128, neighbours=1)
SPARSE = "block_sparse_attention sliding(128, neighbours=1)"


def make_qkv(n: int, grad: bool = False) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return tuple(torch.randn(1, HEADS, n, HEAD_DIM, requires_grad=grad) for _ in range(3))  # (b, h, n, d) each


def timed(fns: dict, rounds: int) -> dict[str, list[float]]:
    """Seconds per call of each function in ``rounds`` interleaved rounds of one call each (after a warm-up call),
    from :func:`attention_lab.measure.timing.compare`."""
    return timing.compare(fns, rounds=rounds, min_time=1e-9).rounds_s


def compiled_flex():
    """torch.compile(flex_attention), or (None, reason) when this machine cannot build it."""
    try:
        from torch.nn.attention.flex_attention import flex_attention
        return torch.compile(flex_attention, dynamic=False), None
    except Exception as error:
        return None, f"{type(error).__name__}: {error}"


def flex_call(flex, n: int, q, k, v):
    block_mask = SLIDING.to_flex_block_mask(n)
    return lambda: flex(q, k, v, block_mask=block_mask)


def report(label: str, times: dict[str, list[float]], reference: str) -> dict[str, float]:
    medians = {name: statistics.median(ts) for name, ts in times.items()}
    print(f"\n{label}")
    print(f"{'variant':<50} {'median ms':>10} {'min ms':>9} {'ref/this (median)':>18} {'(min)':>7}")
    for name, ts in times.items():
        print(f"{name:<50} {medians[name] * 1e3:>10.1f} {min(ts) * 1e3:>9.1f} "
              f"{medians[reference] / medians[name]:>18.2f} {min(times[reference]) / min(ts):>7.2f}")
    return medians


def target_block_sparse(rounds: int, use_flex: bool) -> None:
    n = 8192
    q, k, v = make_qkv(n)
    fns = {
        "F.scaled_dot_product_attention (dense)": lambda: F.scaled_dot_product_attention(q, k, v),
        SPARSE: lambda: al.block_sparse_attention(q, k, v, SLIDING),
    }
    if use_flex:
        flex, reason = compiled_flex()
        if flex is not None:
            try:
                with torch.no_grad():
                    start = time.perf_counter()
                    out = flex_call(flex, n, q, k, v)()
                print(f"flex_attention compiled in {time.perf_counter() - start:.1f} s; max |flex - ours| = "
                      f"{(out - al.block_sparse_attention(q, k, v, SLIDING)).abs().max():.2e}")
                fns["flex_attention compiled, same layout"] = flex_call(flex, n, q, k, v)
            except Exception as error:
                reason = f"{type(error).__name__}: {str(error).splitlines()[0]}"
        if reason:
            print(f"FlexAttention not measured: {reason}")
    with torch.no_grad():
        times = timed(fns, rounds)
    medians = report(f"target 1: forward at n = {n}, b=1 h={HEADS} d={HEAD_DIM} fp32 "
                     f"(ratio = dense SDPA time / this)", times, "F.scaled_dot_product_attention (dense)")
    if "flex_attention compiled, same layout" in medians:
        ratio = medians[SPARSE] / medians["flex_attention compiled, same layout"]
        print(f"block-sparse / flex (median): {ratio:.2f} (target <= 1.5)")
    qg, kg, vg = make_qkv(n, grad=True)
    start = time.perf_counter()
    al.block_sparse_attention(qg, kg, vg, SLIDING).sum().backward()
    print(f"block-sparse forward + backward at n = {n}: {time.perf_counter() - start:.2f} s, finite gradients: "
          f"{all(bool(torch.isfinite(t.grad).all()) for t in (qg, kg, vg))}")
    if use_flex:
        try:
            from torch.nn.attention.flex_attention import flex_attention
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                flex_attention(qg[..., :256, :], kg[..., :256, :], vg[..., :256, :]).sum().backward()
            print("flex_attention backward on CPU: ran (eager)")
        except Exception as error:
            print(f"flex_attention backward on CPU: {type(error).__name__}: {str(error).splitlines()[0][:120]}")


def target_blockwise(rounds: int, block_sizes: list[int]) -> None:
    n = 4096
    q, k, v = make_qkv(n)
    fns = {"F.scaled_dot_product_attention": lambda: F.scaled_dot_product_attention(q, k, v)}
    for size in block_sizes:
        fns[f"blockwise_attention block_size={size}"] = (
            lambda size=size: al.blockwise_attention(q, k, v, block_size=size))
    with torch.no_grad():
        times = timed(fns, rounds)
    report(f"target 2: exact forward at n = {n} (ratio = SDPA time / this; target >= 0.67)", times,
           "F.scaled_dot_product_attention")

    def forward_backward(attention, q, k, v):
        attention(q, k, v).sum().backward()

    print(f"\nforward + backward peak memory at n = {n} (measured with measure_peak_memory)")
    naive = None
    for name, attention in [("naive (attention_lab.scaled_dot_product_attention)",
                             lambda q, k, v: al.scaled_dot_product_attention(q, k, v)[0])] + [
            (f"blockwise_attention block_size={size}",
             lambda q, k, v, size=size: al.blockwise_attention(q, k, v, block_size=size)) for size in block_sizes]:
        qg, kg, vg = make_qkv(n, grad=True)
        peak = measure_peak_memory(forward_backward, attention, qg, kg, vg).peak_bytes
        naive = naive or peak
        print(f"{name:<52} {format_bytes(peak):>12}   naive / this = {naive / peak:6.1f}  (target >= 10)")


def sweep(lengths: list[int], rounds: int, use_flex: bool, block_size: int) -> list[dict[str, object]]:
    """Forward time (fastest of ``rounds`` interleaved rounds) and peak memory per variant and n; one dict a row."""
    flex = None
    if use_flex:
        flex, reason = compiled_flex()
        if reason:
            print(f"FlexAttention left out of the sweep: {reason}")
    label = {"machine": machine_label(), "logical_cores": os.cpu_count(), "threads": torch.get_num_threads(),
             "torch": torch.__version__, "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")}
    print(f"\nsweep: forward time (fastest of {rounds} interleaved rounds) and forward peak memory, b=1 h={HEADS} "
          f"d={HEAD_DIM} fp32, {torch.get_num_threads()} threads; blockwise block_size={block_size}; layout "
          f"{SLIDING!r}")
    print(f"{'n':>6} {'variant':<34} {'fastest ms':>10} {'median ms':>10} {'peak memory':>12} {'SDPA/this':>10}")
    rows = []
    for n in lengths:
        q, k, v = make_qkv(n)
        fns = {
            "F.scaled_dot_product_attention": lambda q=q, k=k, v=v: F.scaled_dot_product_attention(q, k, v),
            "blockwise_attention (exact)":
                lambda q=q, k=k, v=v: al.blockwise_attention(q, k, v, block_size=block_size),
            "block_sparse_attention (sliding)": lambda q=q, k=k, v=v: al.block_sparse_attention(q, k, v, SLIDING),
        }
        if flex is not None:
            try:
                with torch.no_grad():
                    call = flex_call(flex, n, q, k, v)
                    call()
                fns["flex_attention (sliding, compiled)"] = call
            except Exception as error:
                print(f"{n:>6} flex_attention failed: {type(error).__name__}: {str(error).splitlines()[0][:100]}")
        with torch.no_grad():
            result = timing.compare(fns, baseline="F.scaled_dot_product_attention", rounds=rounds, min_time=0.05,
                                    warmup=2)
            load = f"{os.getloadavg()[0]:.1f}"
            for name, fn in fns.items():
                peak = measure_peak_memory(fn).peak_bytes
                median = statistics.median(result.rounds_s[name])
                rows.append({**label, "load_average": load, "n": n, "variant": name,
                             "fastest_ms": f"{result.best_s[name] * 1e3:.3f}", "median_ms": f"{median * 1e3:.3f}",
                             "sdpa_time_over_this": f"{result.ratio[name]:.3f}", "peak_bytes": peak,
                             "rounds": rounds})
                print(f"{n:>6} {name:<34} {result.best_s[name] * 1e3:>10.1f} {median * 1e3:>10.1f} "
                      f"{format_bytes(peak):>12} {result.ratio[name]:>10.2f}", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", action="store_true", help="only the two targets")
    parser.add_argument("--sweep", action="store_true", help="only the sweep")
    parser.add_argument("--lengths", type=int, nargs="+", default=[1024, 2048, 4096, 8192, 16384])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--block-sizes", type=int, nargs="+", default=[128, 256, 512],
                        help="blockwise block sizes for target 2 (the sweep uses the first one)")
    parser.add_argument("--no-flex", action="store_true", help="skip FlexAttention (no torch.compile)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--csv", nargs="?", const=DEFAULT_CSV, type=Path, metavar="PATH",
                        help="write the sweep's figures to PATH (default benchmarks/results/block_sparse.csv)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, OMP_PROC_BIND={os.environ['OMP_PROC_BIND']} "
          f"OMP_PLACES={os.environ['OMP_PLACES']}, CPU capability {torch.backends.cpu.get_cpu_capability()}; "
          f"load average {os.getloadavg()[0]:.1f}"
          + (" (above the thread count: other processes make these figures provisional)"
             if os.getloadavg()[0] > args.threads else ""))
    both = not (args.targets or args.sweep)
    if args.targets or both:
        target_block_sparse(args.rounds, not args.no_flex)
        target_blockwise(args.rounds, args.block_sizes)
    if args.csv and args.targets and not args.sweep:
        parser.error("--csv writes the sweep's figures: run it with --sweep (or without --targets)")
    if args.sweep or both:
        rows = sweep(args.lengths, args.rounds, not args.no_flex, args.block_sizes[0])
        if args.csv:
            write_results(rows, args.csv, CSV_FIELDS)
            print(f"\nwrote {len(rows)} rows to {args.csv}")


if __name__ == "__main__":
    main()
