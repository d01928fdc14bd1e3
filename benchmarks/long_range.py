"""Lesson 10's long-range benchmark: the same small model trained with each attention on each long-range task.

    .venv/bin/python benchmarks/long_range.py --quick            # n = 256, a few steps: under 2 minutes
    nohup .venv/bin/python benchmarks/long_range.py --machine-note "shared, busy" > long_range.log &   # the full run

The full run trains :data:`attention_lab.models.long_range.LONG_RANGE_ATTENTIONS` (softmax, block-sparse sliding
window, sliding + global, linear, Performer, top-k, cluster, Linformer, Synthesizer) on associative recall and the
ListOps-style task at n = 1024 (``--steps`` steps of 16 sequences), and on recall at n = 2048 (``--long-steps``
steps of ``--long-batch`` sequences), one seed each (``--seeds`` for more), and writes
``benchmarks/results/long_range.csv``: task, attention, n, steps, batch size, seed, held-out accuracy, training steps
per second, the peak memory of one training step (the package's exact meter), and the machine, threads, torch
version, date and the 1-minute load average when the run ended. The CSV is rewritten after every run, so a stopped
run keeps what it finished. One thread by default: these models are small, a second thread mostly waits, and on a
shared machine it waits longer. The quadratic variants (softmax, top-k, cluster, Synthesizer) dominate the time;
budget roughly 40 minutes on a quiet 2-core machine (``--steps 150 --long-n 0`` takes about a quarter of that).
"""

from __future__ import annotations

import argparse
import csv
import datetime
import os
import sys
import time
from pathlib import Path

import torch

from attention_lab.models.long_range import LONG_RANGE_ATTENTIONS, LONG_RANGE_TASKS, LongRangeSetting, run_long_range
from attention_lab.runtime import machine_label

DEFAULT_CSV = Path(__file__).parent / "results" / "long_range.csv"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="n = 256 and --quick-steps steps: a smoke run")
    parser.add_argument("--n", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--long-n", type=int, default=2048, help="the longer length (0: none)")
    parser.add_argument("--long-steps", type=int, default=200)
    parser.add_argument("--long-batch", type=int, default=8)
    parser.add_argument("--long-tasks", nargs="+", default=["recall"], choices=list(LONG_RANGE_TASKS))
    parser.add_argument("--quick-steps", type=int, default=30)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--tasks", nargs="+", default=list(LONG_RANGE_TASKS), choices=list(LONG_RANGE_TASKS))
    parser.add_argument("--attentions", nargs="+", default=list(LONG_RANGE_ATTENTIONS),
                        choices=list(LONG_RANGE_ATTENTIONS))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--csv", type=Path, default=None, help=f"default {DEFAULT_CSV} (quick: not written)")
    parser.add_argument("--machine-note", default="", help="e.g. 'shared, busy' (goes into the machine column)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    plan = [(256, args.quick_steps, args.tasks, LongRangeSetting())] if args.quick else [
        (args.n, args.steps, args.tasks, LongRangeSetting())]
    if not args.quick and args.long_n:
        plan.append((args.long_n, args.long_steps, args.long_tasks, LongRangeSetting(batch_size=args.long_batch)))
    path = args.csv if args.csv is not None else (None if args.quick else DEFAULT_CSV)
    stamp = {"machine": machine_label(args.machine_note), "threads": torch.get_num_threads(),
             "torch": torch.__version__, "date": datetime.date.today().isoformat()}
    print(f"{stamp['machine']}; torch {stamp['torch']}; {stamp['threads']} thread(s); load average "
          f"{os.getloadavg()[0]:.1f}", flush=True)
    rows: list[dict[str, object]] = []
    start = time.perf_counter()
    print(f"{'task':<8} {'attention':<15} {'n':>5} {'steps':>5} {'accuracy':>8} {'steps/s':>8} {'peak MiB':>9}")
    for n, steps, tasks, setting in plan:
        for task in tasks:
            for seed in args.seeds:
                for attention in args.attentions:
                    result = run_long_range(task, attention, n, steps=steps, seed=seed, setting=setting)
                    rows.append({**result.as_row(), **stamp, "load": f"{os.getloadavg()[0]:.1f}"})
                    print(f"{task:<8} {attention:<15} {n:>5} {steps:>5} {result.accuracy:>8.3f} "
                          f"{result.steps_per_s:>8.2f} {result.peak_bytes / 2**20:>9.1f}", flush=True)
                    if path is not None:
                        write(rows, path)
    print(f"{len(rows)} runs in {time.perf_counter() - start:.0f} s" + (f"; wrote {path}" if path else ""))


def write(rows: list[dict[str, object]], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as out:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


if __name__ == "__main__":
    sys.exit(main())
