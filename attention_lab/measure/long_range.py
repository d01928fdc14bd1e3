"""The long-range benchmark: one small model, trained with each attention of the family on each long-range task.

Long Range Arena (Tay et al. 2020) compares efficient attentions on one bubble chart: accuracy against speed, bubble
size = memory. This module runs a laptop-sized version: :func:`run_long_range` builds the same
:class:`~attention_lab.models.transformer.TinyTransformer` (only its attention changes), trains it for a fixed
number of steps on :class:`~attention_lab.models.long_range_tasks.AssociativeRecall` or
:class:`~attention_lab.models.long_range_tasks.ListOps`, and reports held-out accuracy, training steps per second and
the peak memory of one training step (the package's exact meter). ``benchmarks/long_range.py`` runs the grid and
writes the CSV the lesson plots. It is measurement built on the models, so it lives here, beside the meter and the
timer it uses, and ``models`` needs nothing of ``measure``.

The model has no position embeddings (they are zeroed and frozen): both tasks are defined by content (which key,
which group), and learned absolute positions start as random vectors as large as the token embeddings, which makes
every filler token look different and hides the task. Measured on associative recall at n = 256: at chance after 300
steps with them, 90 % without. The sliding-window layouts still know what is near: their mask is positional.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import torch

from .._validation import check_choice, check_positive_int, check_seed, fail
from ..efficient.block_sparse import BlockLayout
from ..models.attention_choice import AttentionSpec, attention_spec
from ..models.long_range_tasks import AssociativeRecall, ListOps
from ..models.tasks import IGNORE_INDEX, Task, make_generator
from ..models.training import evaluate, loss_and_accuracy, make_optimizer, train
from ..models.transformer import TinyTransformer, TransformerConfig
from .memory import measure_peak_memory
from .timing import Comparison, compare

__all__ = ["LONG_RANGE_ATTENTIONS", "LONG_RANGE_TASKS", "LongRangeResult", "LongRangeSetting", "blind_accuracy",
           "long_range_task",
           "run_long_range", "time_training_steps"]

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
    "listops": lambda n: ListOps(seq_len=n, n_symbols=3, n_groups=2, group_size=3),
}
"""Each task at length n: recall stores 4 pairs (4 keys, values 0-3) and asks all 4 keys; listops has 2 lists of 3
digits 0-2. Measured with softmax attention at n = 1024, 800 steps of 8 (one seed each, so a few points either
way): recall 1.00 at lr 3e-3 and at 1e-2; listops with digits 0-4 0.78 (lr 3e-3) and 0.82 (1e-2), with digits
0-2 0.96 (lr 3e-3; 0.99 at the inner lists, 0.90 at the outer operator) and 0.89 (1e-2). Three layers instead of
two helped listops on one seed and lost 6 to 11 points on recall, and batches of 4 for twice the steps learned
less, hence :class:`LongRangeSetting`'s defaults. Both are solved by softmax attention at n = 1024 in minutes on one
core: recall 1.000 after 1,000 steps (185 s), listops 0.939 after 1,000 steps and 0.999 after 2,000 (369 s;
``benchmarks/long_range.py --tasks listops --attentions softmax --steps 2000 --long-n 0``)."""


def long_range_task(name: str, n: int) -> object:
    """The benchmark's task ``name`` (``"recall"`` or ``"listops"``) at sequence length ``n``. Shape: its batches are
    ``(b, n)`` tokens and targets."""
    if name not in LONG_RANGE_TASKS:
        fail("long_range_task", f"name must be one of {sorted(LONG_RANGE_TASKS)}, got {name!r}")
    return LONG_RANGE_TASKS[name](n)


def blind_accuracy(task: object, *, n_sequences: int = 2048, seed: int = 123) -> float:
    """The accuracy of the best guess that sees only the token at the scored position (the question: a key, an
    operator), never the rest of the sequence: a model must beat it by reading the sequence.

    For recall every value is equally likely whatever the key, so this is one over the number of values. For
    listops it is higher: MAX of three digits is most often the largest digit, so the operator alone gets many
    answers right. Estimated on ``n_sequences`` fresh sequences (``seed``): for each question token, its most
    frequent answer.

    Shape: no tensors in or out.
    """
    fn = "blind_accuracy"
    if not isinstance(task, Task):
        fail(fn, f"task must be one of the package's tasks (e.g. long_range_task('recall', 1024)), got "
                 f"{type(task).__name__}", TypeError)
    check_positive_int(fn, "n_sequences", n_sequences)
    check_seed(fn, seed)
    tokens, targets = task.sample(n_sequences, generator=make_generator(seed))  # (b, i) each
    scored = targets != IGNORE_INDEX
    if not bool(scored.any()):
        fail(fn, f"{type(task).__name__} scored no position in {n_sequences} sequences; a task needs targets")
    question, answer = tokens[scored], targets[scored]  # (m,) each
    counts = torch.zeros(task.vocab_size, task.n_symbols, dtype=torch.long)  # answers seen per question token
    counts.index_put_((question, answer), torch.ones_like(answer), accumulate=True)
    return float(counts.amax(dim=-1).sum() / answer.numel())


@dataclass(frozen=True)
class LongRangeSetting:
    """The model and training every run shares (only the attention, the task and n change). Shape: no tensors."""

    d_model: int = 32
    num_heads: int = 2
    num_layers: int = 2
    batch_size: int = 8
    lr: float = 3e-3
    warmup_steps: int = 20
    eval_batches: int = 32  # held-out accuracy on eval_batches * batch_size fresh sequences


@dataclass(frozen=True)
class LongRangeResult:
    """One run: held-out token accuracy, training steps per second, peak bytes of one training step.

    Shape: no tensors.
    """

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
        loss, _ = loss_and_accuracy(model(tokens), targets)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    model.train()
    peak = measure_peak_memory(step).peak_bytes
    model.eval()
    return peak


def _benchmark_model(the_task: object, attention: str, n: int, seed: int, setting: LongRangeSetting
                     ) -> TinyTransformer:
    """The benchmark's model for one attention, seeded, position embeddings zeroed and frozen."""
    torch.manual_seed(seed)
    model = TinyTransformer(TransformerConfig(vocab_size=the_task.vocab_size, max_len=n, d_model=setting.d_model,
                                              num_heads=setting.num_heads, num_layers=setting.num_layers,
                                              attention=LONG_RANGE_ATTENTIONS[attention]))
    with torch.no_grad():
        model.position_embedding.weight.zero_()  # content-only tasks: see the module docstring
    model.position_embedding.weight.requires_grad_(False)
    return model


def time_training_steps(task: str, n: int, attentions: Sequence[str], *, setting: LongRangeSetting = LongRangeSetting(),
                        rounds: int = 5) -> Comparison:
    """Time one training step (forward, backward, AdamW update on one batch) of the benchmark's model with each
    attention, in interleaved rounds with :func:`~attention_lab.measure.timing.compare` (fastest of ``rounds``),
    against ``"softmax"`` when it is among ``attentions`` (else the first). Speeds in the benchmark's table and
    chart come from here, not from the training runs' wall clock, which other work on the machine (or a second
    run beside it) stretches unevenly.

    Shape: no tensors in or out; each model reads ``(batch_size, n)`` tokens.
    """
    fn = "time_training_steps"
    if isinstance(attentions, str) or not isinstance(attentions, Sequence) or not attentions:
        fail(fn, f"attentions must be a non-empty list of names from {list(LONG_RANGE_ATTENTIONS)}, got "
                 f"{attentions!r}; for one attention write [{attentions!r}]", TypeError)
    for name in attentions:
        check_choice(fn, "attention", name, list(LONG_RANGE_ATTENTIONS))
    check_choice(fn, "task", task, list(LONG_RANGE_TASKS))
    check_positive_int(fn, "n", n, minimum=2)
    check_positive_int(fn, "rounds", rounds)
    the_task = long_range_task(task, n)
    tokens, targets = the_task.sample(setting.batch_size, generator=make_generator(0))
    steps = {}
    for name in attentions:
        model = _benchmark_model(the_task, name, n, 0, setting)
        optimizer = make_optimizer(model, lr=1e-12)  # the update's cost without moving the weights measurably

        def step(model: TinyTransformer = model, optimizer: torch.optim.Optimizer = optimizer) -> None:
            loss, _ = loss_and_accuracy(model(tokens), targets)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()

        steps[name] = step
    baseline = "softmax" if "softmax" in steps else next(iter(steps))
    return compare(steps, baseline=baseline, rounds=rounds, min_time=1e-3)


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
    check_seed(fn, seed)
    the_task = long_range_task(task, n)
    model = _benchmark_model(the_task, attention, n, seed, setting)
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
