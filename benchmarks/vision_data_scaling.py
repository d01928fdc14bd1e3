"""Lesson 13's committed run: accuracy against the size of the training set for the tiny ViT and the tiny CNN, on
more fractions and seeds than the lesson trains live (105 s of CPU on one thread; 208 s wall at load 3.9-5.1).

    .venv/bin/python benchmarks/vision_data_scaling.py                  # the full run: 6 fractions x 5 seeds
    .venv/bin/python benchmarks/vision_data_scaling.py --note "quiet"   # the note goes into every CSV row
    .venv/bin/python benchmarks/vision_data_scaling.py --quick          # 3 fractions x 2 seeds, marked "quick"

Setting: the lesson's own recipe (attention_lab.models.digits): scikit-learn's 1,797 digits split once, stratified,
25 % for the test set (450 images); for each seed a nested stratified subset of the 1,347 training images at each
fraction; attention_lab.models.vision.TinyViT (2,794 parameters) and TinyCNN (2,802), each seeded with the run's
seed and trained on its whole subset at once for the same STEPS steps of AdamW at learning rate LR; accuracy on the
whole test set. One torch thread, as the lesson (tiny models: a second thread mostly waits).

Writes benchmarks/results/vision_data_scaling.csv: one row per model, fraction and seed (the training images, the
test accuracy, the final training loss, the CPU seconds of its training), each with the machine, threads, torch and
Python versions, date and the load average over 1 minute at the start and the end of the run.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import resource
from pathlib import Path

import torch

from attention_lab.measure.results import write_results
from attention_lab.models.digits import accuracy, load_digits_split, train_classifier, training_subset
from attention_lab.models.vision import TinyCNN, TinyViT
from attention_lab.runtime import machine_label

THREADS = 1
STEPS, LR = 100, 2e-2  # the lesson's budget: the same for both models at every fraction
FRACTIONS, SEEDS = (0.05, 0.1, 0.2, 0.4, 0.7, 1.0), (0, 1, 2, 3, 4)
QUICK_FRACTIONS, QUICK_SEEDS = (0.05, 0.2, 1.0), (0, 1)
MODELS = {"ViT": TinyViT, "CNN": TinyCNN}
RESULTS = Path(__file__).parent / "results" / "vision_data_scaling.csv"
FIELDS = ["model", "fraction", "seed", "train_images", "test_accuracy", "train_loss", "cpu_seconds", "parameters",
          "steps", "lr", "machine", "threads", "torch", "python", "date", "load", "note"]


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 fractions x 2 seeds; the rows say 'quick'")
    parser.add_argument("--note", default="", help="written into every CSV row, e.g. 'busy shared machine'")
    args = parser.parse_args()
    torch.set_num_threads(THREADS)
    fractions, seeds = (QUICK_FRACTIONS, QUICK_SEEDS) if args.quick else (FRACTIONS, SEEDS)
    load_at_start = os.getloadavg()[0]
    print(f"load average (1 min) at start: {load_at_start:.2f}; {THREADS} torch thread")
    split = load_digits_split()
    rows = []
    for seed in seeds:
        for fraction in fractions:
            subset = training_subset(split.train_labels, fraction, seed=seed)
            images, labels = split.train_images[subset], split.train_labels[subset]
            for name, build in MODELS.items():
                torch.manual_seed(seed)
                model = build()
                start = cpu_seconds()
                losses = train_classifier(model, images, labels, steps=STEPS, lr=LR, seed=seed)
                spent = cpu_seconds() - start
                rows.append(dict(model=name, fraction=fraction, seed=seed, train_images=len(subset),
                                 test_accuracy=f"{accuracy(model, split.test_images, split.test_labels):.4f}",
                                 train_loss=f"{losses[-1]:.4f}", cpu_seconds=f"{spent:.2f}",
                                 parameters=sum(p.numel() for p in model.parameters()), steps=STEPS, lr=LR))
                print(f"seed {seed}, fraction {fraction:.2f} ({len(subset):4d} images): {name} "
                      f"{rows[-1]['test_accuracy']} ({spent:.1f} s)", flush=True)
    load = f"{load_at_start:.2f} -> {os.getloadavg()[0]:.2f}"
    note = "quick" + (f"; {args.note}" if args.note else "") if args.quick else (args.note or "full run")
    stamp = dict(machine=machine_label(), threads=THREADS, torch=torch.__version__, python=platform.python_version(),
                 date=datetime.date.today().isoformat(), load=load, note=note)
    write_results([row | stamp for row in rows], RESULTS, FIELDS)
    print(f"load average (1 min), start -> end: {load}; wrote {len(rows)} rows to {RESULTS}")


if __name__ == "__main__":
    main()
