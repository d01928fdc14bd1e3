"""Lesson 12's committed run: the lesson's small GPT recipe, bigger and longer (about five minutes on 2 cores).

    .venv/bin/python benchmarks/small_gpt.py                          # the full run (about 5 minutes), writes the CSV
    .venv/bin/python benchmarks/small_gpt.py --note "quiet machine"   # the note goes into every CSV row
    .venv/bin/python benchmarks/small_gpt.py --quick                  # 300 steps; writes the CSV marked "quick"

Setting: the lesson's corpus (attention_lab.models.text_corpus.read_stdlib: Python's standard library, split by
file), characters as tokens, the lessons' TinyTransformer as a causal decoder with rotary positions, trained with
the training loop of attention_lab.models.training written out (AdamW, warmup then cosine decay), 2 threads in one
process (the script sets OMP_PROC_BIND=close OMP_PLACES=cores and re-executes itself when they are missing: OpenMP
reads them only at start-up). The lesson's live run: d_model 64, 2 layers, 4 heads, windows of 64 characters, 16
per step, 250 steps. This run: d_model 128, 4 layers, 4 heads, windows of 128, 32 per step, 900 steps (--quick:
300): about five minutes on 2 quiet cores (275 s at load 1.0 -> 2.0). Not longer, because this corpus is small
(about 660,000 training characters, read 5.5 times in 900 steps): 2000 steps ended at 2.49 bits per character on
validation against 2.29 after 900, while the training loss went on falling (1.06 bits). Generation, as in the lesson,
keeps a sliding-window cache of the last 128 positions (the distances the model saw in training).

Writes benchmarks/results/small_gpt.csv: one row per count baseline (kind "result": its validation bits per
character), one row per logged step (kind "curve": the characters read, the training loss in bits averaged over the
steps since the last row, and at every tenth row the validation bits per character), and one for the model at the
end (kind "result"), each with the machine, threads, torch and Python versions, date and the load average over 1
minute at the start and the end of the run (above about 2 on 2 cores, other work shared them). And
benchmarks/results/small_gpt_samples.txt: a few samples of the trained model (greedy and sampled with temperature
0.8 and top-k 10), which lesson 12 prints.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import time
from pathlib import Path

if os.environ.get("OMP_PROC_BIND") is None or os.environ.get("OMP_PLACES") is None:
    os.environ.setdefault("OMP_PROC_BIND", "close")
    os.environ.setdefault("OMP_PLACES", "cores")
    os.execv(sys.executable, [sys.executable, *sys.argv])

import torch
import torch.nn.functional as F

import attention_lab as al
from attention_lab.measure.results import write_results
from attention_lab.measure.timing import thread_report
from attention_lab.models.attention_choice import attention_spec
from attention_lab.models.generate import decode
from attention_lab.models.schedule import warmup_schedule
from attention_lab.models.tasks import make_generator
from attention_lab.models.text_corpus import CharVocabulary, TextWindows, bits, ngram_bits_per_char, read_stdlib
from attention_lab.models.training import loss_and_accuracy, make_optimizer
from attention_lab.models.transformer import TinyTransformer, TransformerConfig
from attention_lab.runtime import machine_label

THREADS = 2
D_MODEL, LAYERS, HEADS, SEQ_LEN, BATCH, STEPS, QUICK_STEPS, LR = 128, 4, 4, 128, 32, 900, 300, 3e-3
RESULTS = Path(__file__).parent / "results" / "small_gpt.csv"
SAMPLES = RESULTS.with_name("small_gpt_samples.txt")
FIELDS = ["kind", "name", "step", "characters", "train_bits", "validation_bits", "seconds", "d_model", "layers",
          "heads", "seq_len", "batch", "steps", "machine", "threads", "torch", "python", "date", "load", "note"]
PROMPTS = ("    def __init__(self", "def ", "    if ")


def validation_bits(model: TinyTransformer, ids: torch.Tensor, seq_len: int) -> float:
    """Mean bits per character of ids cut into windows of seq_len (as lesson 12 measures it)."""
    n = (len(ids) - 1) // seq_len * seq_len
    x, y = ids[:n].view(-1, seq_len), ids[1:n + 1].view(-1, seq_len)  # (windows, seq_len)
    with torch.no_grad():
        total = sum(F.cross_entropy(model(xb).transpose(1, 2), yb, reduction="sum").item()
                    for xb, yb in zip(x.split(64), y.split(64)))
    return bits(total / y.numel())


def sample(model: TinyTransformer, vocab: CharVocabulary, prompt: str, n_new: int, *, temperature: float = 0.8,
           top_k: int = 10, seed: int = 0) -> str:
    """prompt followed by n_new characters drawn from the top_k most likely (lesson 12's loop), with a sliding cache
    of the last SEQ_LEN positions: the distances the model saw in training."""
    generator = torch.Generator().manual_seed(seed)
    tokens = vocab.encode(prompt)[None]  # (1, n)
    caches, new = model.new_caches(1, tokens.shape[1] + n_new, kind="sliding", window=SEQ_LEN), tokens
    with torch.no_grad():
        for _ in range(n_new):
            top = (model(new, caches=caches)[0, -1] / temperature).topk(top_k)
            new = top.indices[torch.multinomial(F.softmax(top.values, dim=-1), 1, generator=generator)][None]
            tokens = torch.cat([tokens, new], dim=1)  # (1, n + steps)
    return vocab.decode(tokens[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_STEPS} steps instead of {STEPS}; the CSV and "
                        "the samples are written, marked 'quick' in the note")
    parser.add_argument("--steps", type=int, default=None, help=f"training steps (default {STEPS})")
    parser.add_argument("--note", default="", help="written into every CSV row, e.g. 'busy shared machine'")
    parser.add_argument("--threads", type=int, default=THREADS, help="torch threads (default 2, on 2 quiet cores)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    steps = args.steps or (QUICK_STEPS if args.quick else STEPS)
    note = "; ".join(part for part in (args.note, "quick: provisional, not the full run" if args.quick else "") if part)
    load_at_start = os.getloadavg()[0]
    print(f"load average (1 min) at start: {load_at_start:.2f}; {thread_report()}")

    corpus = read_stdlib()
    vocab = CharVocabulary(corpus.train)
    train_ids, valid_ids = vocab.encode(corpus.train), vocab.encode(corpus.validation)
    rows: list[dict] = []
    for order, name in enumerate(["unigram", "bigram", "trigram"], start=1):
        value = ngram_bits_per_char(train_ids, valid_ids, order=order, vocab_size=len(vocab))
        rows.append(dict(kind="result", name=name, validation_bits=f"{value:.4f}"))
        print(f"{name}: {value:.3f} bits per character on validation")

    al.seed_everything(0)
    config = TransformerConfig(vocab_size=len(vocab), max_len=4 * SEQ_LEN, d_model=D_MODEL, num_heads=HEADS,
                               num_layers=LAYERS, causal=True, attention=attention_spec("softmax", positions="rope"))
    model = TinyTransformer(config)
    task = TextWindows(train_ids, SEQ_LEN)
    size = dict(d_model=D_MODEL, layers=LAYERS, heads=HEADS, seq_len=SEQ_LEN, batch=BATCH, steps=steps)
    optimizer = make_optimizer(model, lr=LR)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, warmup_schedule(max(1, steps // 50), steps, "cosine"))
    generator, every, losses, start = make_generator(0), max(1, steps // 60), [], time.perf_counter()
    model.train()
    for step in range(1, steps + 1):  # train()'s loop, written out so that the curve gets validation points
        tokens, targets = task.sample(BATCH, generator=generator)
        loss, _ = loss_and_accuracy(model(tokens), targets)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        scheduler.step()
        losses.append(loss.item())
        if step % every and step != steps:
            continue
        row = dict(kind="curve", name="model", step=step, characters=step * BATCH * SEQ_LEN,
                   train_bits=f"{bits(sum(losses) / len(losses)):.4f}", seconds=f"{time.perf_counter() - start:.1f}")
        losses = []
        if step == steps or (step // every) % 10 == 0:
            model.eval()
            row["validation_bits"] = f"{validation_bits(model, valid_ids, SEQ_LEN):.4f}"
            model.train()
        rows.append(row | size)
        print(f"step {step:5d}: train {row['train_bits']} bits" + (f", validation {row['validation_bits']}"
              if "validation_bits" in row else ""), flush=True)
    model.eval()
    final = validation_bits(model, valid_ids, SEQ_LEN)
    rows.append(dict(kind="result", name="model", step=steps, characters=steps * BATCH * SEQ_LEN,
                     validation_bits=f"{final:.4f}", seconds=f"{time.perf_counter() - start:.1f}") | size)
    print(f"model: {final:.3f} bits per character on validation after {time.perf_counter() - start:.0f} s")

    load = f"{load_at_start:.2f} -> {os.getloadavg()[0]:.2f}"
    print(f"load average (1 min), start -> end: {load}")
    stamp = dict(machine=machine_label(), threads=torch.get_num_threads(), torch=torch.__version__,
                 python=platform.python_version(), date=datetime.date.today().isoformat(), load=load, note=note)
    write_results([row | stamp for row in rows], RESULTS, FIELDS)
    greedy = decode(model, vocab.encode(PROMPTS[0]), 160, cache="sliding", window=SEQ_LEN).tokens
    texts = [f"greedy, after {PROMPTS[0]!r}:\n{vocab.decode(greedy)}"]
    texts += [f"sampled (temperature 0.8, top-k 10, seed {seed}), after {prompt!r}:\n"
              f"{sample(model, vocab, prompt, 240, seed=seed)}" for seed, prompt in enumerate(PROMPTS)]
    SAMPLES.write_text(f"# {machine_label()}, {steps} steps{'; ' + note if note else ''}\n\n"
                       + "\n\n".join(texts) + "\n", encoding="utf-8")
    print(f"wrote {len(rows)} rows to {RESULTS} and samples to {SAMPLES}")


if __name__ == "__main__":
    main()
