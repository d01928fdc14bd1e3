"""Lesson 11's figures: decoding with and without a KV cache, a pre-allocated against a concatenated cache, and the
cache's bytes against the formula.

    .venv/bin/python benchmarks/generation.py                           # everything (a few minutes), writes the CSV
    .venv/bin/python benchmarks/generation.py --note "quiet machine"    # the note goes into every CSV row
    .venv/bin/python benchmarks/generation.py --quick                   # contexts 128 and 256 only, no CSV
    .venv/bin/python benchmarks/generation.py --threads 1               # a busy machine: CPU time of one thread

Setting: lesson 11's model (TinyTransformer, d_model 32, 4 heads of 8, 2 layers, rotary positions, vocabulary 11),
float32, CPU, 2 threads in one process (the script sets OMP_PROC_BIND=close OMP_PLACES=cores and re-executes itself
when they are missing: OpenMP reads them only at start-up). Every comparison runs its variants in interleaved rounds
(attention_lab.measure.timing.compare): the fastest round per variant, ratios taken within a round; the CSV keeps
every round's ratio (round_ratios), so a reader concludes from their spread (attention_lab.measure.timing.ratio).

1. Tokens per second at a context of c = 128 ... 2048 tokens: the time to get the next token's logits, recomputing
   the whole sequence (what decoding without a cache does for every token) against one step with a cache holding
   c - 1 positions. Goal: the cache at least 10x faster at c = 1024.
2. Pre-allocated against concatenated cache at c = 2048, for one sequence and for a batch of 16 (a server decoding
   16 sequences at once): per step, the concatenated cache copies everything it holds, the pre-allocated one only
   the new position. Timed twice: the cache update alone (one append, what the two caches do differently), and a
   whole decoding step of the lesson's model, where the model's fixed cost per step (tiny matrices, Python) hides
   most of the copy. Goal: pre-allocated at least 1.5x faster at 2048. With --end-to-end, also 2032 tokens generated
   from a 16-token prompt, up to a context of 2048 (minutes on a busy machine).
3. Cache bytes: measured with attention_lab.measure.memory.measure_peak_memory (every allocation the profiler saw)
   and compared, to the byte, with attention_lab.kv_cache_bytes.

Writes benchmarks/results/generation.csv (one row per figure, with machine, threads, torch version, date and the
load average over 1 minute at the start and the end of the run: above about 2 on 2 cores, other work shared them).
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

import attention_lab as al
from attention_lab.measure.conclusions import crossover
from attention_lab.measure.memory import format_bytes, measure_peak_memory
from attention_lab.measure.results import write_results
from attention_lab.measure.timing import Comparison, compare, thread_report
from attention_lab.models.attention_choice import attention_spec
from attention_lab.models.generate import decode, next_token_timers
from attention_lab.models.transformer import TinyTransformer, TransformerConfig
from attention_lab.runtime import machine_label

THREADS = 2
VOCAB, D_MODEL, HEADS, LAYERS = 11, 32, 4, 2  # lesson 11's model (Repeat task with 10 symbols + separator)
RESULTS = Path(__file__).parent / "results" / "generation.csv"
FIELDS = ["section", "setting", "context", "batch", "variant", "seconds", "tokens_per_s", "ratio", "round_ratios",
          "baseline", "bytes_measured", "bytes_formula", "machine", "threads", "torch", "date", "load", "note"]


def lesson_model(num_kv_heads: int | None = None) -> TinyTransformer:
    torch.manual_seed(0)
    config = TransformerConfig(vocab_size=VOCAB, max_len=4096, d_model=D_MODEL, num_heads=HEADS, num_layers=LAYERS,
                               causal=True, attention=attention_spec("softmax", positions="rope",
                                                                     num_kv_heads=num_kv_heads))
    return TinyTransformer(config).eval()


def speed_vs_context(model: TinyTransformer, contexts: list[int], rounds: int, rows: list[dict]) -> None:
    print(f"\n1. next-token time at each context, batch 1 ({thread_report()})")
    print(f"{'context':>8} {'recompute':>12} {'pre-alloc':>12} {'concat':>12} {'cache/recompute':>16}")
    ratios, steady = [], []
    for context in contexts:
        result = compare(next_token_timers(model, context), rounds=rounds, min_time=0.02)
        ratio = result.ratio["pre-allocated cache"]
        ratios.append(ratio)
        steady.append(result.speed("pre-allocated cache").conclusive)
        print(f"{context:>8} " + " ".join(f"{1 / s:>8.0f} t/s" for s in result.best_s.values()) + f" {ratio:>15.1f}x")
        for variant, seconds in result.best_s.items():
            rows.append(dict(section="speed_vs_context", setting="batch 1", context=context, batch=1, variant=variant,
                             seconds=f"{seconds:.6g}", tokens_per_s=f"{1 / seconds:.6g}",
                             ratio=f"{result.ratio[variant]:.4g}", round_ratios=_rounds(result, variant),
                             baseline=result.baseline))
    print(crossover(contexts, ratios, name="decoding with the cache", baseline="recomputation"))
    if 1024 in contexts:
        at_1024, index = ratios[contexts.index(1024)], contexts.index(1024)
        verdict = "not decided: its rounds disagree" if not steady[index] else "met" if at_1024 >= 10 else "MISSED"
        print(f"goal (cache >= 10x recomputation at 1024): {at_1024:.1f}x, {verdict}")


def cache_update_timers(context: int, batch: int) -> dict:
    """One append of one position to a cache holding ``context - 1`` (then cropped back), per cache kind: the
    cache's own work in a decoding step, without the model around it. Shape: the lesson model's k, v per layer,
    ``(batch, HEADS, 1, D_MODEL // HEADS)``."""
    head_dim = D_MODEL // HEADS
    generator = torch.Generator().manual_seed(0)
    past = torch.randn(batch, HEADS, context - 1, head_dim, generator=generator)  # (b, h_kv, context - 1, d)
    new = torch.randn(batch, HEADS, 1, head_dim, generator=generator)  # (b, h_kv, 1, d)
    timers = {}
    for name, cache in (("concatenated cache", al.ConcatKVCache(batch, HEADS, head_dim)),  # the baseline
                        ("pre-allocated cache", al.KVCache(batch, HEADS, context, head_dim))):
        cache.append(past, past)

        def update(cache=cache) -> torch.Tensor:
            keys, _ = cache.append(new, new)
            cache.crop(context - 1)
            return keys

        timers[name] = update
    return timers


def _rounds(result: Comparison, variant: str) -> str:
    """Every round's ratio (baseline time / the variant's), for the CSV: a reader concludes from their spread
    (attention_lab.measure.timing.ratio), not from the median alone."""
    return " ".join(f"{r:.4g}" for r in result.round_ratios(variant))


def _cache_comparison(what: str, timers: dict, section: str, setting: str, context: int, batch: int, rounds: int,
                      rows: list[dict]) -> None:
    """Time concatenated against pre-allocated cache in interleaved rounds, print the verdict, keep the rows."""
    result = compare(timers, rounds=rounds, min_time=0.02)
    speed = result.speed("pre-allocated cache", "concatenated cache")
    verdict = "not decided: its rounds disagree" if not speed.conclusive else "met" if speed.low >= 1.5 else "MISSED"
    print(f"{what}, batch {batch:>2}: {speed} (goal 1.5x over the middle half of the rounds: {verdict})")
    for variant, seconds in result.best_s.items():
        rows.append(dict(section=section, setting=setting, context=context, batch=batch, variant=variant,
                         seconds=f"{seconds:.6g}", tokens_per_s=f"{batch / seconds:.6g}",
                         ratio=f"{result.ratio[variant]:.4g}", round_ratios=_rounds(result, variant),
                         baseline=result.baseline))


def preallocated_vs_concat(model: TinyTransformer, context: int, rounds: int, rows: list[dict],
                           generated: int) -> None:
    print(f"\n2. pre-allocated against concatenated cache at context {context}")
    for batch in (1, 16):
        _cache_comparison("cache update alone (append one position)", cache_update_timers(context, batch),
                          "prealloc_vs_concat_update", f"one append at context {context}", context, batch, rounds, rows)
    for batch in (1, 16):
        timers = next_token_timers(model, context, batch_size=batch)
        _cache_comparison("one step", {name: timers[name] for name in ("concatenated cache", "pre-allocated cache")},
                          "prealloc_vs_concat_step", f"one step at context {context}", context, batch, rounds, rows)
    if not generated:
        return
    prompt = torch.randint(0, VOCAB, (1, 16), generator=torch.Generator().manual_seed(0))
    for batch in (1, 16):
        prompts = prompt.expand(batch, -1).contiguous()
        variants = {name: (lambda kind=kind, prompts=prompts: decode(model, prompts, generated, cache=kind))
                    for name, kind in (("concatenated cache", "concat"), ("pre-allocated cache", "preallocated"))}
        result = compare(variants, rounds=2, min_time=0.01, warmup=0)  # seconds per call; the sizing call warms up
        ratio = result.ratio["pre-allocated cache"]
        print(f"{generated} tokens end to end, batch {batch:>2}: concat {result.best_s['concatenated cache']:.2f} s, "
              f"pre-allocated {result.best_s['pre-allocated cache']:.2f} s: pre-allocated {ratio:.2f}x faster")
        for variant, seconds in result.best_s.items():
            rows.append(dict(section="prealloc_vs_concat_generate", setting=f"{generated} tokens from 16",
                             context=16 + generated, batch=batch, variant=variant, seconds=f"{seconds:.6g}",
                             tokens_per_s=f"{batch * generated / seconds:.6g}", ratio=f"{result.ratio[variant]:.4g}",
                             baseline=result.baseline))


def cache_bytes(context: int, rows: list[dict]) -> None:
    print(f"\n3. cache bytes at context {context}, float32: measured against kv_cache_bytes")
    head_dim = D_MODEL // HEADS
    for kv_heads, label in ((HEADS, "multi-head"), (2, "grouped-query"), (1, "multi-query")):
        model = lesson_model(kv_heads)
        for batch in (1, 16):
            measured = measure_peak_memory(model.new_caches, batch, context).retained_bytes
            formula = al.kv_cache_bytes(num_layers=LAYERS, num_kv_heads=kv_heads, head_dim=head_dim, seq_len=context,
                                        batch_size=batch, bytes_per_value=4)
            print(f"{label:<14} batch {batch:>2}: measured {measured:>10,d} B, formula {formula:>10,d} B "
                  f"({format_bytes(formula)}): {'equal' if measured == formula else 'DIFFERENT'}")
            rows.append(dict(section="cache_bytes", setting=label, context=context, batch=batch, variant="KVCache",
                             bytes_measured=measured, bytes_formula=formula))
    window = 256
    measured = measure_peak_memory(lesson_model().new_caches, 1, 1, kind="sliding", window=window).retained_bytes
    formula = al.kv_cache_bytes(num_layers=LAYERS, num_kv_heads=HEADS, head_dim=head_dim, seq_len=window,
                                bytes_per_value=4)
    print(f"sliding window {window}: measured {measured:,d} B, formula {formula:,d} B at any context")
    rows.append(dict(section="cache_bytes", setting=f"sliding window {window}", context=context, batch=1,
                     variant="SlidingWindowKVCache", bytes_measured=measured, bytes_formula=formula))
    latent_dim = 8
    mla = al.MultiHeadLatentAttention(D_MODEL, HEADS, latent_dim)
    measured = LAYERS * measure_peak_memory(mla.new_cache, 1, context).retained_bytes
    formula = al.kv_cache_bytes(num_layers=LAYERS, num_kv_heads=HEADS, head_dim=head_dim, seq_len=context,
                                bytes_per_value=4, latent_dim=latent_dim)
    print(f"latent (latent_dim {latent_dim}), {LAYERS} layers: measured {measured:,d} B, formula {formula:,d} B")
    rows.append(dict(section="cache_bytes", setting=f"latent_dim {latent_dim}", context=context, batch=1,
                     variant="LatentCache", bytes_measured=measured, bytes_formula=formula))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="contexts 128 and 256 only; no CSV")
    parser.add_argument("--rounds", type=int, default=9, help="interleaved rounds per comparison")
    parser.add_argument("--end-to-end", action="store_true", help="also time whole generations up to the longest "
                        "context (each cache kind, batch 1 and 16)")
    parser.add_argument("--note", default="", help="written into every CSV row, e.g. 'busy shared machine'")
    parser.add_argument("--threads", type=int, default=THREADS, help="torch threads (default 2, on 2 quiet cores); "
                        "1 times by the thread's CPU time, which other programs on a busy machine do not stretch")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    contexts = [128, 256] if args.quick else [128, 256, 512, 1024, 2048]
    model = lesson_model()
    load_at_start = os.getloadavg()[0]
    print(f"load average (1 min) at start: {load_at_start:.2f}")
    rows: list[dict] = []
    with torch.no_grad():
        speed_vs_context(model, contexts, args.rounds, rows)
        generated = contexts[-1] - 16 if args.end_to_end else 0  # up to the longest context from a 16-token prompt
        preallocated_vs_concat(model, contexts[-1], args.rounds, rows, generated=generated)
    cache_bytes(contexts[-1], rows)
    load = f"{load_at_start:.2f} -> {os.getloadavg()[0]:.2f}"
    print(f"\nload average (1 min), start -> end: {load}")
    if args.quick:
        return
    stamp = dict(machine=machine_label(), threads=torch.get_num_threads(), torch=torch.__version__,
                 date=datetime.date.today().isoformat(), load=load, note=args.note)
    write_results([row | stamp for row in rows], RESULTS, FIELDS)
    print(f"\nwrote {len(rows)} rows to {RESULTS}")


if __name__ == "__main__":
    main()
