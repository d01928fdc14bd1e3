"""Lesson 06's comparison at full size: naive, blockwise and PyTorch's attention against n, time and peak memory.

    OMP_PROC_BIND=close OMP_PLACES=cores .venv/bin/python benchmarks/cost_of_attention.py    # n = 128 ... 2048
    .venv/bin/python benchmarks/cost_of_attention.py --quick   # n up to 1024, 4 heads (under 15 s)
    .venv/bin/python benchmarks/cost_of_attention.py --csv     # also writes benchmarks/results/cost_of_attention.csv

Setting: b = 1, h = 8 (4 with --quick), d = 64, float32, forward only, 2 threads (the script sets OMP_PROC_BIND=close
OMP_PLACES=cores and re-executes itself when they are missing: OpenMP reads them only at start-up). At each n the
three attentions and one 1024 x 1024 matrix product are timed by :func:`attention_lab.measure.timing.compare` in
interleaved rounds (fastest of the rounds, ratios within a round), as lesson 06's live cell does. The matrix product
is a rough reference ceiling: an attention's FLOP/s over the product's, from the same rounds, says how much of the
machine's matmul speed it reaches (a fused kernel can come close to it or pass it a little). Each attention's
forward peak memory is measured once with :func:`attention_lab.measure.memory.measure_peak_memory`. Fresh large
tensors cost page faults on the CPU, and a naive attention pays them on every call: the times include that cost.
The CSV holds one row per (n, variant) with the machine, threads, torch version, date and load average; read it
with :func:`attention_lab.measure.results.read_results` (``plotting.plot_bench`` draws it).
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
from pathlib import Path

if os.environ.get("OMP_PROC_BIND") is None or os.environ.get("OMP_PLACES") is None:
    os.environ.setdefault("OMP_PROC_BIND", "close")
    os.environ.setdefault("OMP_PLACES", "cores")
    os.execv(sys.executable, [sys.executable, *sys.argv])

import torch
import torch.nn.functional as F

import attention_lab as al
from attention_lab.measure.conclusions import fit_slope
from attention_lab.measure.cost import attention_flops
from attention_lab.measure.memory import format_bytes, measure_peak_memory
from attention_lab.measure.results import write_results
from attention_lab.measure.timing import compare, thread_report
from attention_lab.runtime import machine_label

DEFAULT_LENGTHS, QUICK_LENGTHS = (128, 256, 512, 1024, 2048), (128, 256, 512, 1024)
MATMUL = "1024 x 1024 matmul"
MATMUL_FLOPS = 2 * 1024**3  # one multiply-add = 2 FLOPs
DEFAULT_CSV = Path(__file__).parent / "results" / "cost_of_attention.csv"
FIELDS = ["n", "variant", "fastest_ms", "gflops", "share_of_matmul", "peak_bytes", "batch", "heads", "head_dim",
          "rounds", "machine", "threads", "torch", "date", "load"]
ATTENTIONS = {
    "naive (attention_lab)": lambda q, k, v: al.scaled_dot_product_attention(q, k, v)[0],
    "blockwise (attention_lab)": al.blockwise_attention,
    "F.scaled_dot_product_attention": F.scaled_dot_product_attention,
}


def _load() -> str:
    return f"{os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else ""


def sweep(lengths: list[int], *, batch: int, heads: int, head_dim: int, rounds: int) -> list[dict[str, object]]:
    """One row per (n, attention): fastest time, GFLOP/s, share of the matmul's speed, forward peak bytes."""
    left, right = torch.randn(2, 1024, 1024).unbind(0)
    stamp = {"batch": batch, "heads": heads, "head_dim": head_dim, "rounds": rounds, "machine": machine_label(),
             "threads": torch.get_num_threads(), "torch": torch.__version__,
             "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")}
    print(f"{'n':>6} {'variant':<32} {'fastest ms':>10} {'GFLOP/s':>8} {'of matmul':>10} {'peak memory':>12}")
    rows = []
    for n in lengths:
        q, k, v = torch.randn(3, batch, heads, n, head_dim).unbind(0)  # (b, h, i, d) each
        calls = {MATMUL: lambda: left @ right}
        calls.update({name: (lambda fn=fn, q=q, k=k, v=v: fn(q, k, v)) for name, fn in ATTENTIONS.items()})
        with torch.no_grad():
            result = compare(calls, baseline=MATMUL, rounds=rounds, min_time=0.05)
            load = _load()
            flops = attention_flops(n, head_dim=head_dim, num_heads=heads, batch=batch)
            for name, fn in ATTENTIONS.items():
                seconds = result.best_s[name]
                share = result.ratio[name] * flops / MATMUL_FLOPS  # its FLOP/s over the matmul's, same rounds
                peak = measure_peak_memory(fn, q, k, v).peak_bytes
                rows.append({"n": n, "variant": name, "fastest_ms": f"{seconds * 1e3:.3f}",
                             "gflops": f"{flops / seconds / 1e9:.2f}", "share_of_matmul": f"{share:.3f}",
                             "peak_bytes": peak, "load": load, **stamp})
                print(f"{n:>6} {name:<32} {seconds * 1e3:>10.2f} {flops / seconds / 1e9:>8.1f} {share:>10.0%} "
                      f"{format_bytes(peak):>12}", flush=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smaller sweep (lengths up to 1024, 4 heads)")
    parser.add_argument("--lengths", type=int, nargs="+", help="sequence lengths n to sweep")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--heads", type=int, help="attention heads (default 8, 4 with --quick)")
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, help="interleaved timing rounds per n (default 5, 3 with --quick)")
    parser.add_argument("--csv", nargs="?", const=DEFAULT_CSV, type=Path, metavar="PATH",
                        help=f"write the rows to PATH (default {DEFAULT_CSV.relative_to(DEFAULT_CSV.parents[2])})")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    lengths = args.lengths or list(QUICK_LENGTHS if args.quick else DEFAULT_LENGTHS)
    heads = args.heads or (4 if args.quick else 8)
    rounds = args.rounds or (3 if args.quick else 5)
    print(f"torch {torch.__version__}; {thread_report()}; float32 forward, batch {args.batch}, {heads} heads, "
          f"d = {args.head_dim}; fastest of {rounds} interleaved rounds; load average {_load()}", flush=True)
    rows = sweep(lengths, batch=args.batch, heads=heads, head_dim=args.head_dim, rounds=rounds)
    fitted = [n for n in lengths if n >= 512]
    fitted = fitted if len(fitted) >= 2 else lengths  # the n^2 regime where there are enough lengths
    for name in ATTENTIONS if len(fitted) >= 2 else ():
        ms = [float(r["fastest_ms"]) for r in rows if r["variant"] == name and r["n"] in fitted]
        print(fit_slope(fitted, ms, name=f"{name}'s time"))
    if args.csv:
        write_results(rows, args.csv, FIELDS)
        print(f"wrote {len(rows)} rows to {args.csv}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
