"""Lesson 03's committed figures: a recurrent loop over nn.RNNCell against one SelfAttention call, n = 32 ... 2048.

    OMP_PROC_BIND=close OMP_PLACES=cores .venv/bin/python benchmarks/rnn_vs_attention.py          # print the table
    .venv/bin/python benchmarks/rnn_vs_attention.py --csv           # and write benchmarks/results/rnn_vs_attention.csv
    .venv/bin/python benchmarks/rnn_vs_attention.py --lengths 32 64 --csv /tmp/rnn.csv   # a quick try

The same comparison as lesson 03's live cell, at more lengths and rounds: e = 64, batch 1, float32, inference mode,
timed with :func:`attention_lab.measure.timing.sweep` (interleaved rounds, the fastest round per variant, each ratio
taken within a round) on ``timing.LESSON_THREADS`` torch thread (1), the lesson's thread rule, so that the
comparison is about sequential steps, not about how many cores each variant can use. ``--csv [PATH]`` writes one row
per n with the machine, threads, torch version, date and the 1-minute load average just after that length was timed
(above the thread count: other programs were running, and the figures are only provisional). When a learner's live
run is too noisy to conclude, lesson 03 prints what the committed file concludes, labelled with its machine.

Expected on a quiet machine: the loop's time grows about linearly (n steps of equal cost); the attention call is
faster at every length, by a factor that first grows with n and then shrinks once its n^2 work dominates.
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
from torch import nn

import attention_lab as al
from attention_lab.measure import conclusions, timing
from attention_lab.measure.results import write_results
from attention_lab.runtime import machine_label

D_MODEL = 64
DEFAULT_CSV = Path(__file__).resolve().parent / "results" / "rnn_vs_attention.csv"
CSV_FIELDS = ["machine", "logical_cores", "threads", "torch", "date", "load_average", "n", "rnn_ms", "attention_ms",
              "ratio", "best_ratio", "rounds"]
VARIANTS = ("RNN loop", "one attention call")


def make_variants(cell: nn.RNNCell, layer: al.SelfAttention):
    def rnn_forward(x: torch.Tensor) -> torch.Tensor:
        h, outputs = torch.zeros(x.shape[0], D_MODEL), []
        for t in range(x.shape[1]):  # n sequential steps
            h = cell(x[:, t], h)
            outputs.append(h)
        return torch.stack(outputs, dim=1)  # (b, n, e)

    def variants(n: int):
        x = torch.randn(1, n, D_MODEL)  # (b, n, e)
        return {VARIANTS[0]: lambda: rnn_forward(x), VARIANTS[1]: lambda: layer(x)}

    return variants


def measure(lengths: list[int], rounds: int) -> list[dict[str, object]]:
    """One row per n: the fastest round of each variant and the RNN / attention ratio (median of the rounds)."""
    torch.manual_seed(0)
    variants = make_variants(nn.RNNCell(D_MODEL, D_MODEL), al.SelfAttention(D_MODEL))
    label = {"machine": machine_label(), "logical_cores": os.cpu_count(), "torch": torch.__version__,
             "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")}
    rows = []
    print(f"{'n':>6} {'RNN loop ms':>12} {'attention ms':>13} {'RNN / attention':>16} {'load':>5}")
    with torch.inference_mode(), timing.fixed_threads(timing.LESSON_THREADS) as threads:
        for n in lengths:
            race = timing.sweep(variants, [n], baseline=VARIANTS[0], rounds=rounds, min_time=0.02)
            load = os.getloadavg()[0]
            row = {**label, "threads": threads, "load_average": f"{load:.1f}", "n": n,
                   "rnn_ms": f"{race.best_s[VARIANTS[0]][0] * 1e3:.4f}",
                   "attention_ms": f"{race.best_s[VARIANTS[1]][0] * 1e3:.4f}",
                   "ratio": f"{race.ratio[VARIANTS[1]][0]:.3f}", "best_ratio": f"{race.best_ratio(VARIANTS[1])[0]:.3f}",
                   "rounds": rounds}
            rows.append(row)
            print(f"{n:>6} {row['rnn_ms']:>12} {row['attention_ms']:>13} {row['ratio']:>16} {row['load_average']:>5}",
                  flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[32, 64, 128, 256, 512, 1024, 2048])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--csv", nargs="?", const=DEFAULT_CSV, type=Path, metavar="PATH",
                        help="write the figures to PATH (default benchmarks/results/rnn_vs_attention.csv)")
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {timing.LESSON_THREADS} thread, OMP_PROC_BIND={os.environ['OMP_PROC_BIND']} "
          f"OMP_PLACES={os.environ['OMP_PLACES']}; load average {os.getloadavg()[0]:.1f}"
          + (" (above the thread count: other processes make these figures provisional)"
             if os.getloadavg()[0] > timing.LESSON_THREADS else ""))
    rows = measure(sorted(args.lengths), args.rounds)
    n = [int(row["n"]) for row in rows]
    print(conclusions.crossover(n, [float(row["ratio"]) for row in rows], name="one attention call",
                                baseline="the RNN loop", best_ratios=[float(row["best_ratio"]) for row in rows]))
    if args.csv:
        write_results(rows, args.csv, CSV_FIELDS)
        print(f"wrote {len(rows)} rows to {args.csv}")


if __name__ == "__main__":
    main()
