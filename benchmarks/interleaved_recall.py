"""Lesson 14's committed run for local and global layers interleaved: what one global layer among local ones keeps
of lesson 10's associative recall (one sharp lookup by content anywhere in the sequence).

    .venv/bin/python benchmarks/interleaved_recall.py            # 5 patterns x 3 seeds (about 10 minutes, 2 jobs)
    .venv/bin/python benchmarks/interleaved_recall.py --quick    # seed 0 only, fewer steps; marked "quick"

Setting: lesson 10's long-range model and training (attention_lab.measure.long_range.LongRangeSetting: d_model 32, 2
heads, AdamW at lr 3e-3, warmup then cosine decay, batches of 8, position embeddings zeroed and frozen: the task is
defined by content) with LAYERS softmax layers, each local (a window of WINDOW keys on each side, the query included)
or global, in five patterns: every layer local (LLLL), three local then one global (LLLG, Gemma's order), local and
global alternating (LGLG, Gemma 2's), one global then three local (GLLL), every layer global (GGGG). Task:
AssociativeRecall at n = SEQ_LEN with lesson 10's sizes (4 pairs, 4 keys, 4 values). Held-out token accuracy on 512
fresh sequences (seeds the training never draws); chance is 1/4.

Writes benchmarks/results/interleaved_recall.csv: one row per pattern and seed, with its KV-cache bytes at n (bf16,
from attention_lab.interleaved_kv_cache_bytes) and the machine, threads, torch version, date and load average.
"""

from __future__ import annotations

import argparse
import datetime
import multiprocessing
import os
import platform
from pathlib import Path

import torch

import attention_lab as al
from attention_lab.measure.long_range import LongRangeSetting, long_range_task
from attention_lab.measure.results import write_results
from attention_lab.models.training import evaluate, train
from attention_lab.models.transformer import TinyTransformer, TransformerConfig
from attention_lab.runtime import machine_label

LAYERS, WINDOW, SEQ_LEN, STEPS, QUICK_STEPS, SEEDS = 4, 8, 128, 600, 200, (0, 1, 2)
RESULTS = Path(__file__).parent / "results" / "interleaved_recall.csv"
FIELDS = ["pattern", "layers", "window", "n", "seed", "steps", "accuracy", "cache_bytes", "machine", "threads",
          "torch", "python", "date", "load", "note"]
PATTERNS = {  # by their letters (L local, G global); the first two ends and Gemma's order (global last) between
    "LLLL": (WINDOW,) * LAYERS,
    "LLLG": al.interleaved_windows(LAYERS, window=WINDOW, local_per_global=LAYERS - 1),
    "LGLG": al.interleaved_windows(LAYERS, window=WINDOW, local_per_global=1),
    "GLLL": (None,) + (WINDOW,) * (LAYERS - 1),
    "GGGG": (None,) * LAYERS,
}


def run(pattern: str, seed: int, steps: int) -> dict[str, object]:
    setting, task = LongRangeSetting(), long_range_task("recall", SEQ_LEN)
    windows = PATTERNS[pattern]
    torch.manual_seed(seed)
    model = TinyTransformer(TransformerConfig(vocab_size=task.vocab_size, max_len=SEQ_LEN, d_model=setting.d_model,
                                              num_heads=setting.num_heads, num_layers=LAYERS, windows=windows))
    with torch.no_grad():
        model.position_embedding.weight.zero_()  # content-only task, as lesson 10's benchmark
    model.position_embedding.weight.requires_grad_(False)
    train(model, task, steps=steps, lr=setting.lr, warmup_steps=setting.warmup_steps, schedule="cosine", seed=seed,
          batch_size=setting.batch_size, progress=False)
    accuracy = evaluate(model, task, n_sequences=512, seed=10_000 + seed)["token_accuracy"]
    cache = al.interleaved_kv_cache_bytes(windows, num_kv_heads=setting.num_heads,
                                          head_dim=setting.d_model // setting.num_heads, seq_len=SEQ_LEN)
    return dict(pattern=pattern, layers=LAYERS, window=WINDOW, n=SEQ_LEN, seed=seed, steps=steps,
                accuracy=f"{accuracy:.4f}", cache_bytes=cache)


def _run(job: tuple[str, int, int]) -> dict[str, object]:
    torch.set_num_threads(1)  # tiny models: a second thread mostly waits; two jobs side by side on two cores
    row = run(*job)
    print(f"{row['pattern']} seed {row['seed']}: accuracy {row['accuracy']}", flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"seed 0, {QUICK_STEPS} steps; marked 'quick'")
    parser.add_argument("--note", default="", help="written into every CSV row, e.g. 'busy shared machine'")
    parser.add_argument("--jobs", type=int, default=2, help="training runs side by side, one thread each")
    args = parser.parse_args()
    torch.set_num_threads(1)  # tiny models: a second thread mostly waits
    steps, seeds = (QUICK_STEPS, SEEDS[:1]) if args.quick else (STEPS, SEEDS)
    note = "; ".join(part for part in (args.note, "quick: provisional, not the full run" if args.quick else "") if part)
    load_at_start = os.getloadavg()[0]
    jobs = [(pattern, seed, steps) for seed in seeds for pattern in PATTERNS]
    with multiprocessing.get_context("spawn").Pool(args.jobs) as pool:
        rows = pool.map(_run, jobs, chunksize=1)
    load = f"{load_at_start:.2f} -> {os.getloadavg()[0]:.2f}"
    stamp = dict(machine=machine_label(), threads=torch.get_num_threads(), torch=torch.__version__,
                 python=platform.python_version(), date=datetime.date.today().isoformat(), load=load, note=note)
    write_results([row | stamp for row in rows], RESULTS, FIELDS)
    print(f"wrote {RESULTS} (load average {load})")


if __name__ == "__main__":
    main()
