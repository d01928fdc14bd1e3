"""Lesson 10's long-range benchmark: the same small model trained with each attention on each long-range task.

    .venv/bin/python benchmarks/long_range.py --quick            # n = 256, 100 steps: about a minute
    nohup .venv/bin/python benchmarks/long_range.py --machine-note "quiet" > long_range.log &   # the full run

Leave ``OMP_PROC_BIND`` and ``OMP_PLACES`` unset for this script: with one thread per process, binding can put
both training processes on the same core.

The full run trains :data:`attention_lab.measure.long_range.LONG_RANGE_ATTENTIONS` (softmax, block-sparse sliding
window, sliding + global, linear, Performer, top-k, cluster, Linformer, Synthesizer) on associative recall and the
ListOps-style task at n = 1024 (``--steps`` steps of ``--batch`` sequences), and on recall at the longer
``--long-n`` (``--long-steps`` steps of ``--long-batch`` sequences), one seed each (``--seeds`` for more).

Two phases:

1. **Accuracy.** The training runs go to ``--jobs`` worker processes of one thread each (two on a 2-core machine:
   these models are small, and one run with two threads mostly waits), longest first.
2. **Speed.** Then, with the workers gone, this process times one training step of every attention per task and
   length in interleaved rounds (``attention_lab.measure.timing.compare``, fastest of ``--rounds``, one thread).
   The speeds in the CSV come from here, so two runs side by side in phase 1 do not distort them.

It writes ``benchmarks/results/long_range.csv``: task, attention, n, steps, batch size, seed, held-out accuracy,
training steps per second (timed) and the speed relative to softmax attention (median of the rounds' ratios), the
peak memory of one training step (the package's exact meter), the training's own wall clock, and the machine,
threads, torch version, date and the 1-minute load average when each row was finished. Rows are written as the
training runs finish (speeds empty until phase 2), so a stopped run keeps what it finished.
"""

from __future__ import annotations

import argparse
import datetime
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import torch

from attention_lab.measure.long_range import (
    LONG_RANGE_ATTENTIONS,
    LONG_RANGE_TASKS,
    LongRangeSetting,
    run_long_range,
    time_training_steps,
)
from attention_lab.measure.results import write_results
from attention_lab.runtime import machine_label

DEFAULT_CSV = Path(__file__).parent / "results" / "long_range.csv"
QUADRATIC_FIRST = ("cluster", "topk", "synthesizer", "softmax", "sliding+global")  # the slowest runs start first


def _one_thread() -> None:
    torch.set_num_threads(1)


def _train(task: str, attention: str, n: int, steps: int, seed: int, setting: LongRangeSetting) -> dict[str, object]:
    row = run_long_range(task, attention, n, steps=steps, seed=seed, setting=setting).as_row()
    row["train_steps_per_s"] = row.pop("steps_per_s")  # the CSV's steps_per_s is timed in phase 2
    return {**row, "load": _load()}


def _load() -> str:
    return f"{os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="n = 256, --quick-steps steps, no longer n")
    parser.add_argument("--n", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=LongRangeSetting().batch_size)
    parser.add_argument("--long-n", type=int, default=2048, help="the longer length (0: none)")
    parser.add_argument("--long-steps", type=int, default=500)
    parser.add_argument("--long-batch", type=int, default=4)
    parser.add_argument("--long-tasks", nargs="+", default=["recall"], choices=list(LONG_RANGE_TASKS))
    parser.add_argument("--quick-steps", type=int, default=100)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--tasks", nargs="+", default=list(LONG_RANGE_TASKS), choices=list(LONG_RANGE_TASKS))
    parser.add_argument("--attentions", nargs="+", default=list(LONG_RANGE_ATTENTIONS),
                        choices=list(LONG_RANGE_ATTENTIONS))
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="training runs side by side")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds per task and length")
    parser.add_argument("--csv", type=Path, default=None, help=f"default {DEFAULT_CSV} (quick: not written)")
    parser.add_argument("--machine-note", default="", help="e.g. 'quiet' or 'shared, busy' (in the machine column)")
    args = parser.parse_args()
    _one_thread()
    plan = [(256, args.quick_steps, args.tasks, LongRangeSetting(batch_size=args.batch))] if args.quick else [
        (args.n, args.steps, args.tasks, LongRangeSetting(batch_size=args.batch))]
    if not args.quick and args.long_n:
        plan.append((args.long_n, args.long_steps, args.long_tasks, LongRangeSetting(batch_size=args.long_batch)))
    path = args.csv if args.csv is not None else (None if args.quick else DEFAULT_CSV)
    stamp = {"machine": machine_label(args.machine_note), "threads": 1, "torch": torch.__version__,
             "date": datetime.date.today().isoformat()}
    print(f"{stamp['machine']}; torch {stamp['torch']}; {args.jobs} training job(s) of 1 thread; load average "
          f"{_load()}", flush=True)
    runs = [(task, attention, n, steps, seed, setting) for n, steps, tasks, setting in plan for task in tasks
            for seed in args.seeds for attention in args.attentions]
    runs.sort(key=lambda run: (-run[2], QUADRATIC_FIRST.index(run[1]) if run[1] in QUADRATIC_FIRST else 99))
    start = time.perf_counter()
    rows: list[dict[str, object]] = []
    print(f"{'task':<8} {'attention':<15} {'n':>5} {'steps':>5} {'accuracy':>8} {'train s':>8} {'peak MiB':>9}",
          flush=True)
    with ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("spawn"),
                             initializer=_one_thread) as pool:
        futures = {pool.submit(_train, *run): run for run in runs}
        for future in as_completed(futures):
            if future.exception() is not None:  # report it and keep the other runs
                print(f"FAILED {futures[future][:4]}: {future.exception()!r}", flush=True)
                continue
            row = {**future.result(), **stamp}
            rows.append(row)
            print(f"{row['task']:<8} {row['attention']:<15} {row['n']:>5} {row['steps']:>5} {row['accuracy']:>8.3f} "
                  f"{row['train_seconds']:>8.0f} {row['peak_bytes'] / 2**20:>9.1f}", flush=True)
            if path is not None:
                write_results(rows, path, list(COLUMNS))
    print(f"phase 1 (training) took {time.perf_counter() - start:.0f} s", flush=True)
    for n, _, tasks, setting in plan:
        for task in tasks:
            timing = time_training_steps(task, n, args.attentions, setting=setting, rounds=args.rounds)
            print(f"\n{task}, n = {n}, batch {setting.batch_size}: one training step, fastest of {args.rounds} "
                  f"interleaved rounds\n{timing}", flush=True)
            for row in rows:
                if row["task"] == task and row["n"] == n:
                    row["steps_per_s"] = 1.0 / timing.best_s[row["attention"]]
                    # relative to softmax only: blank when softmax was not among the attentions
                    row["speed_vs_softmax"] = timing.ratio[row["attention"]] if timing.baseline == "softmax" else ""
                    row["timing_load"] = _load()
    rows.sort(key=lambda row: (row["n"], list(LONG_RANGE_TASKS).index(row["task"]),
                               list(LONG_RANGE_ATTENTIONS).index(row["attention"]), row["seed"]))
    if path is not None:
        write_results(rows, path, list(COLUMNS))
    print(f"\n{len(rows)} runs in {time.perf_counter() - start:.0f} s" + (f"; wrote {path}" if path else ""))


COLUMNS = ("task", "attention", "n", "steps", "batch_size", "seed", "accuracy", "steps_per_s", "speed_vs_softmax",
           "peak_bytes", "train_seconds", "train_steps_per_s", "machine", "threads", "torch", "date", "load",
           "timing_load")


if __name__ == "__main__":
    sys.exit(main())
