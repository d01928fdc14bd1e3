"""Lesson 10's speed and memory figures: every efficient attention against dense SDPA, n = 1k ... 16k, in one run.

    OMP_PROC_BIND=close OMP_PLACES=cores .venv/bin/python benchmarks/efficient_attention.py     # the full sweep
    .venv/bin/python benchmarks/efficient_attention.py --lengths 1024 2048 --rounds 2 --csv /tmp/quick.csv

Setting: b = 1, h = 8, d = 64, float32, forward pass only, 2 threads (the script sets OMP_PROC_BIND=close
OMP_PLACES=cores and re-executes itself when they are missing: OpenMP reads them only at start-up). At each n the
variants are timed by :func:`attention_lab.measure.timing.compare` in interleaved rounds (fastest of the rounds,
ratios within a round), and each one's forward peak memory is measured once with
:func:`attention_lab.measure.memory.measure_peak_memory`. The CSV (default
``benchmarks/results/efficient_attention.csv``) holds one row per (n, variant) with the machine, threads, torch
version and date, and the lesson plots it.

Goals: linear attention >= 10x faster than dense SDPA at n = 16384 with peak memory linear in n; Performer with 256
features >= 5x faster at the same n. The dense Synthesizer stores an n x n matrix per head (given as input here), so
it runs only up to ``--synthesizer-max`` (4096: its scores alone take 512 MiB there).
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
from attention_lab.measure.conclusions import crossover, fit_slope
from attention_lab.measure.memory import format_bytes, measure_peak_memory
from attention_lab.measure.results import write_results
from attention_lab.measure.timing import compare, thread_report
from attention_lab.runtime import machine_label

HEADS, HEAD_DIM = 8, 64
SLIDING = al.BlockLayout.sliding_window(128, neighbours=1)
BASELINE = "SDPA (dense)"
SLIDING_NAME = "block-sparse sliding (128, 1 block each side)"
DEFAULT_CSV = Path(__file__).parent / "results" / "efficient_attention.csv"


def variants(n: int, synthesizer_max: int) -> dict:
    """name -> zero-argument call, on fresh inputs of length n (b=1, h=8, d=64)."""
    q, k, v = torch.randn(3, 1, HEADS, n, HEAD_DIM).unbind(0)  # (b, h, n, d) each
    rank = 256
    e_proj, f_proj = (torch.randn(rank, n) / rank**0.5 for _ in range(2))  # Linformer's E, F: (rank, n)
    calls = {
        BASELINE: lambda: F.scaled_dot_product_attention(q, k, v),
        SLIDING_NAME: lambda: al.block_sparse_attention(q, k, v, SLIDING),
        "linear": lambda: al.linear_attention(q, k, v),
        "linear, causal": lambda: al.linear_attention(q, k, v, causal=True),
        "performer (256 features)": lambda: al.performer_attention(q, k, v, num_features=256),
        "top-k (64 keys)": lambda: al.topk_attention(q, k, v, top_k=64),
        "cluster (16 groups)": lambda: al.cluster_attention(q, k, v, num_clusters=16),
        "linformer (rank 256)": lambda: al.linformer_attention(q, k, v, e_proj, f_proj),
    }
    if n <= synthesizer_max:
        scores = torch.randn(1, HEADS, n, n)  # a random Synthesizer's learned scores: (b, h, i, j)
        calls["synthesizer (random)"] = lambda: al.synthesizer_attention(scores, v)
    return calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[1024, 2048, 4096, 8192, 16384])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--synthesizer-max", type=int, default=4096)
    parser.add_argument("--csv", type=Path, default=DEFAULT_CSV)
    parser.add_argument("--skip", nargs="+", default=[], help="variants to leave out, by name (e.g. the slowest)")
    parser.add_argument("--machine-note", default="", help="e.g. 'shared, busy' (goes into the CSV's machine column)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    machine = machine_label(args.machine_note)
    print(f"{machine}; torch {torch.__version__}; {thread_report()}; load average {os.getloadavg()[0]:.1f}")
    stamp = {"machine": machine, "threads": torch.get_num_threads(), "torch": torch.__version__,
             "date": datetime.date.today().isoformat(), "batch": 1, "heads": HEADS, "head_dim": HEAD_DIM}
    rows = []
    with torch.no_grad():
        for n in args.lengths:
            calls = {name: call for name, call in variants(n, args.synthesizer_max).items() if name not in args.skip}
            result = compare(calls, baseline=BASELINE, rounds=args.rounds, min_time=0.05)
            peaks = {name: measure_peak_memory(call).peak_bytes for name, call in calls.items()}
            load = f"{os.getloadavg()[0]:.1f}"  # 1-minute load average once this n is timed
            for name in calls:
                rows.append({"n": n, "variant": name, "load": load, "best_ms": round(result.best_s[name] * 1e3, 3),
                             "speed_vs_sdpa": round(result.ratio[name], 3), "peak_bytes": peaks[name],
                             "memory_vs_sdpa": round(peaks[name] / peaks[BASELINE], 3)})
                print(f"{n:>6} {name:<34} {result.best_s[name] * 1e3:>10.1f} ms {result.ratio[name]:>8.2f}x "
                      f"{format_bytes(peaks[name]):>12} ({peaks[name] / peaks[BASELINE]:.2f} of SDPA's)", flush=True)
            del calls
            # after every n: a stopped run keeps what it finished
            write_results([{**row, **stamp} for row in rows], args.csv, [*rows[0], *stamp])
    print(f"\nwrote {len(rows)} rows to {args.csv}")
    lengths = args.lengths
    for name in ("linear", "performer (256 features)", SLIDING_NAME, "cluster (16 groups)"):
        ratios = [r["speed_vs_sdpa"] for r in rows if r["variant"] == name]
        print(crossover(lengths, ratios, name=name, baseline="dense SDPA"))
    linear_peaks = [r["peak_bytes"] for r in rows if r["variant"] == "linear"]
    if len(lengths) >= 2:
        print(fit_slope(lengths, linear_peaks, name="linear attention's peak memory"))
    last = {r["variant"]: r["speed_vs_sdpa"] for r in rows if r["n"] == lengths[-1]}
    print(f"at n = {lengths[-1]}: linear {last['linear']:.1f}x SDPA's speed (goal >= 10 at n = 16384), performer "
          f"{last['performer (256 features)']:.1f}x (goal >= 5)")


if __name__ == "__main__":
    main()
