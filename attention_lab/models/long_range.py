"""The long-range benchmark: one small model, trained with each attention of the family on each long-range task.

Long Range Arena (Tay et al. 2020) compares efficient attentions on one bubble chart: accuracy against speed, bubble
size = memory. This module runs a laptop-sized version: :func:`run_long_range` builds the same
:class:`~attention_lab.models.transformer.TinyTransformer` (only its attention changes), trains it for a fixed
number of steps on :class:`~attention_lab.models.tasks.AssociativeRecall` or
:class:`~attention_lab.models.tasks.ListOps`, and reports held-out accuracy, training steps per second and the
peak memory of one training step (the package's exact meter). ``benchmarks/long_range.py`` runs the grid and writes
the CSV the lesson plots.

The model has no position embeddings (they are zeroed and frozen): both tasks are defined by content (which key,
which group), and learned absolute positions start as random vectors as large as the token embeddings, which makes
every filler token look different and hides the task. Measured on associative recall at n = 256: at chance after 300
steps with them, 90 % without. The sliding-window layouts still know what is near: their mask is positional.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch

from .._validation import check_positive_int, fail
from ..efficient.layouts import BlockLayout
from ..measure.memory import measure_peak_memory
from .attention_choice import AttentionSpec, attention_spec
from .tasks import AssociativeRecall, ListOps, make_generator
from .training import _loss_and_accuracy, evaluate, make_optimizer, train
from .transformer import TinyTransformer

__all__ = ["LONG_RANGE_ATTENTIONS", "LONG_RANGE_TASKS", "LongRangeResult", "LongRangeSetting", "long_range_task",
           "run_long_range"]

_SLIDING = BlockLayout.sliding_window(64, neighbours=1)
LONG_RANGE_ATTENTIONS: dict[str, AttentionSpec] = {
    "softmax": attention_spec("softmax"),
    "sliding": attention_spec("block_sparse", layout=_SLIDING),
    "sliding+global": attention_spec("block_sparse", layout=_SLIDING | BlockLayout.global_blocks(64, [0])),
    "linear": attention_spec("linear"),
    "performer": attention_spec("performer", num_features=64),
    "topk": attention_spec("topk", top_k=32),
    "cluster": attention_spec("cluster", num_clusters=8),
    "linformer": attention_spec("linformer", rank=64),
    "synthesizer": attention_spec("synthesizer", kind="dense"),
}
"""The attentions the benchmark compares, by the label its CSV uses: block size 64 for the sliding window (one
block each side: 192 keys per query) and for the global block (the first 64 positions see and are seen by all)."""

LONG_RANGE_TASKS: dict[str, Callable[[int], object]] = {
    "recall": lambda n: AssociativeRecall(seq_len=n, n_symbols=4, n_keys=4, n_pairs=4),
    "listops": lambda n: ListOps(seq_len=n, n_symbols=5, n_groups=2, group_size=3),
}
"""Each task at length n: recall stores 4 pairs (4 keys, values 0-3) and asks all 4 keys; listops has 2 lists of 3
digits 0-4 (with 8 values and 8 keys, or digits 0-9, softmax attention needs several times more steps). Measured
with softmax attention, 300 steps of 16: at n = 1024, lr 3e-3, recall 0.85 and listops 0.71 held-out accuracy; at
n = 256, 150 steps, lr 1e-2 against 3e-3, recall 0.96 against 0.77 and listops 0.73 against 0.56, hence the default
lr 1e-2 (at n = 1024 it gives recall 0.82 after 300 steps, where top-k attention reaches 1.00: softmax needs more
steps than this budget to be near 100 % at n = 1024)."""


def long_range_task(name: str, n: int) -> object:
    """The benchmark's task ``name`` (``"recall"`` or ``"listops"``) at sequence length ``n``."""
    if name not in LONG_RANGE_TASKS:
        fail("long_range_task", f"name must be one of {sorted(LONG_RANGE_TASKS)}, got {name!r}")
    return LONG_RANGE_TASKS[name](n)


@dataclass(frozen=True)
class LongRangeSetting:
    """The model and training every run shares (only the attention, the task and n change)."""

    d_model: int = 32
    num_heads: int = 2
    num_layers: int = 2
    batch_size: int = 16
    lr: float = 1e-2
    warmup_steps: int = 20
    eval_batches: int = 8  # held-out accuracy on eval_batches * batch_size fresh sequences


@dataclass(frozen=True)
class LongRangeResult:
    """One run: held-out token accuracy, training steps per second, peak bytes of one training step."""

    task: str
    attention: str
    n: int
    steps: int
    batch_size: int
    seed: int
    accuracy: float
    steps_per_s: float
    peak_bytes: int
    train_seconds: float

    def as_row(self) -> dict[str, object]:
        return asdict(self)


def _held_out_accuracy(model: TinyTransformer, task: object, setting: LongRangeSetting) -> float:
    """Token accuracy on fresh sequences (seeds the training never draws), in batches to bound memory."""
    scores = [evaluate(model, task, n_sequences=setting.batch_size, seed=10_000 + index)["token_accuracy"]
              for index in range(setting.eval_batches)]
    return sum(scores) / len(scores)  # every batch scores the same number of positions


def _one_step_peak(model: TinyTransformer, task: object, setting: LongRangeSetting, seed: int) -> int:
    """Peak tensor bytes of one training step (forward, backward, optimizer update) on a fresh batch."""
    optimizer = make_optimizer(model, lr=1e-12)  # a step that changes nothing measurable
    tokens, targets = task.sample(setting.batch_size, generator=make_generator(seed + 1))

    def step() -> None:
        loss, _ = _loss_and_accuracy(model(tokens), targets)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    model.train()
    peak = measure_peak_memory(step).peak_bytes
    model.eval()
    return peak


def run_long_range(task: str, attention: str, n: int, *, steps: int, seed: int = 0,
                   setting: LongRangeSetting = LongRangeSetting()) -> LongRangeResult:
    """Train the benchmark's model with ``attention`` (a key of :data:`LONG_RANGE_ATTENTIONS`) on ``task`` at
    length ``n`` for ``steps`` steps (AdamW, warmup then cosine decay); return its :class:`LongRangeResult`.

    Shape: no tensors in or out; the model reads ``(batch_size, n)`` tokens.
    """
    fn = "run_long_range"
    if attention not in LONG_RANGE_ATTENTIONS:
        fail(fn, f"attention must be one of {list(LONG_RANGE_ATTENTIONS)}, got {attention!r}")
    check_positive_int(fn, "n", n, minimum=2)
    check_positive_int(fn, "steps", steps)
    check_positive_int(fn, "seed", seed, minimum=0)
    the_task = long_range_task(task, n)
    torch.manual_seed(seed)
    model = TinyTransformer(the_task.vocab_size, setting.d_model, setting.num_heads, setting.num_layers, max_len=n,
                            attention=LONG_RANGE_ATTENTIONS[attention])
    with torch.no_grad():
        model.position_embedding.weight.zero_()  # content-only tasks: see the module docstring
    model.position_embedding.weight.requires_grad_(False)
    start = time.perf_counter()
    history = train(model, the_task, steps=steps, lr=setting.lr, warmup_steps=min(setting.warmup_steps, steps),
                    schedule="cosine", seed=seed, batch_size=setting.batch_size, progress=False)
    seconds = time.perf_counter() - start
    accuracy = _held_out_accuracy(model, the_task, setting)
    peak = _one_step_peak(model, the_task, setting, seed)
    return LongRangeResult(task=task, attention=attention, n=n, steps=steps, batch_size=setting.batch_size,
                           seed=seed, accuracy=accuracy,
                           steps_per_s=len(history.step) / history.seconds[-1], peak_bytes=peak,
                           train_seconds=seconds)
