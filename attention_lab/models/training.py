"""A small, transparent training loop for the toy tasks: the optimizer, the warmup schedule, and what it records.

``train(model, task, steps=..., lr=...)`` draws a fresh batch every step (so the accuracy it records is measured on
sequences the model has never seen), and returns a :class:`History` with, per step: the loss, the token accuracy,
the learning rate, the gradient norm (total and per layer, before clipping) and the weight norm.

Weight decay applies to the matrices (every parameter with two or more dimensions: projections, embeddings, the
output layer), not to biases and LayerNorm gains, as is usual; ``History.weight_norm`` is the norm of those matrices.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

from .._validation import check_choice, check_number, check_positive_int, fail
from .tasks import IGNORE_INDEX, make_generator

__all__ = ["OPTIMIZERS", "SCHEDULES", "History", "WarmupSchedule", "evaluate", "make_optimizer", "train",
           "warmup_schedule"]

OPTIMIZERS = ("adamw", "adam_l2")
SCHEDULES = ("constant", "linear", "cosine")


@dataclass(frozen=True)
class WarmupSchedule:
    """The learning-rate factor at each step: a linear warmup, then constant, linear decay or cosine decay.

    ``factor(step)`` for step ``0, 1, ...``: ``(step + 1) / warmup_steps`` during the warmup (so the first step
    already moves), then ``1`` (constant), ``1 - p`` (linear) or ``(1 + cos(pi p)) / 2`` (cosine), where
    ``p = (step - warmup_steps) / (total_steps - warmup_steps)`` runs from 0 to 1 after the warmup.
    It is a plain function of the step, so it works with any optimizer through
    ``torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)``.

    Shape: step (an int) -> factor (a float in [0, 1]).
    """

    warmup_steps: int
    total_steps: int
    schedule: str = "constant"

    def __call__(self, step: int) -> float:
        if step < self.warmup_steps:
            return (step + 1) / self.warmup_steps
        if self.schedule == "constant":
            return 1.0
        progress = min(1.0, (step - self.warmup_steps) / max(1, self.total_steps - self.warmup_steps))
        if self.schedule == "linear":
            return 1.0 - progress
        return 0.5 * (1.0 + math.cos(math.pi * progress))


def warmup_schedule(warmup_steps: int, total_steps: int, schedule: str = "constant") -> WarmupSchedule:
    """A :class:`WarmupSchedule`: ``warmup_steps`` of linear warmup, then ``schedule`` until ``total_steps``.

    Use it with any optimizer: ``LambdaLR(optimizer, warmup_schedule(100, 1000, "cosine"))``, then call
    ``scheduler.step()`` after each ``optimizer.step()``.

    Shape: step (an int) -> factor (a float in [0, 1]).
    """
    fn = "warmup_schedule"
    check_positive_int(fn, "warmup_steps", warmup_steps, minimum=0)
    check_positive_int(fn, "total_steps", total_steps, minimum=1)
    check_choice(fn, "schedule", schedule, SCHEDULES)
    return WarmupSchedule(warmup_steps, total_steps, schedule)


def _decayed(parameters: Iterable[tuple[str, nn.Parameter]]) -> tuple[list[nn.Parameter], list[nn.Parameter]]:
    decay, no_decay = [], []
    for _, p in parameters:
        if p.requires_grad:
            (decay if p.dim() >= 2 else no_decay).append(p)
    return decay, no_decay


def make_optimizer(model: nn.Module, optimizer: str = "adamw", *, lr: float, weight_decay: float = 0.0
                   ) -> torch.optim.Optimizer:
    """AdamW (decoupled weight decay) or Adam with an L2 penalty, decaying only the model's matrices.

    ``"adamw"``: ``w <- w - lr * (m_hat / (sqrt(v_hat) + eps) + weight_decay * w)``: the decay shrinks w directly.
    ``"adam_l2"``: ``g <- g + weight_decay * w`` first, so the decay passes through Adam's per-weight scaling by
    ``1 / sqrt(v_hat)`` and weights with large gradients are hardly decayed at all.

    Shape: any model; parameters with ``dim >= 2`` are decayed, biases and LayerNorm gains are not.
    """
    fn = "make_optimizer"
    if not isinstance(model, nn.Module):
        fail(fn, f"model must be a torch.nn.Module, got {type(model).__name__}", TypeError)
    check_choice(fn, "optimizer", optimizer, OPTIMIZERS)
    lr = check_number(fn, "lr", lr, low=0, low_open=True)
    weight_decay = check_number(fn, "weight_decay", weight_decay, low=0)
    decay, no_decay = _decayed(model.named_parameters())
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    cls = torch.optim.AdamW if optimizer == "adamw" else torch.optim.Adam
    return cls(groups, lr=lr, foreach=True)  # one fused update per group: tiny models are bound by per-op overhead


def _layer_of(name: str) -> str:
    """'layers.1.attn.q_proj.weight' -> 'layers.1'; 'head.weight' -> 'head'."""
    parts = name.split(".")
    if len(parts) > 2 and parts[1].isdigit():
        return f"{parts[0]}.{parts[1]}"
    return parts[0]


@dataclass
class History:
    """What :func:`train` measured, one entry per step (``step[k] == k``).

    ``accuracy`` is the token accuracy on that step's batch, drawn fresh, so it is a held-out measurement;
    ``grad_norm`` is the total gradient norm before clipping, ``clipped_grad_norm`` the norm of the gradient the
    optimizer received (the same without clipping), and ``layer_grad_norm[name]`` the unclipped norm per top-level
    part of the model (``"layers.0"``, ``"head"``, ...); ``seconds[k]`` the wall time since training started, after
    step k. ``diverged`` is True when the loss became NaN or infinite (training stops there).

    Shape: every list has one value per step taken.
    """

    config: dict = field(default_factory=dict)
    step: list[int] = field(default_factory=list)
    loss: list[float] = field(default_factory=list)
    accuracy: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    grad_norm: list[float] = field(default_factory=list)
    clipped_grad_norm: list[float] = field(default_factory=list)
    weight_norm: list[float] = field(default_factory=list)
    layer_grad_norm: dict[str, list[float]] = field(default_factory=dict)
    seconds: list[float] = field(default_factory=list)
    diverged: bool = False

    def final(self, metric: str = "accuracy", last: int = 10) -> float:
        """The mean of ``metric`` over the last ``last`` steps (a less noisy end value than the last step)."""
        values = getattr(self, metric)
        if not values:
            return float("nan")
        tail = values[-last:]
        return sum(tail) / len(tail)

    def steps_to(self, accuracy: float = 1.0) -> int | None:
        """The number of steps taken when a batch first reached ``accuracy`` (None if it never did)."""
        for step, value in zip(self.step, self.accuracy):
            if value >= accuracy:
                return step + 1
        return None

    def seconds_to(self, accuracy: float = 1.0) -> float | None:
        """Wall time in seconds until a batch first reached ``accuracy`` (None if it never did)."""
        steps = self.steps_to(accuracy)
        return None if steps is None else self.seconds[steps - 1]


def _loss_and_accuracy(logits: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE_INDEX)
    scored = targets != IGNORE_INDEX
    hits = (logits.argmax(-1) == targets) & scored
    return loss, hits.sum() / scored.sum().clamp(min=1)


def train(
    model: nn.Module,
    task: object,
    *,
    steps: int,
    lr: float,
    optimizer: str = "adamw",
    weight_decay: float = 0.0,
    warmup_steps: int = 0,
    schedule: str = "constant",
    clip_grad_norm: float | None = None,
    seed: int = 0,
    batch_size: int = 64,
    progress: bool = True,
) -> History:
    """Train ``model`` on ``task`` for ``steps`` steps, each on a fresh batch; return the :class:`History`.

    ``optimizer`` is ``"adamw"`` or ``"adam_l2"`` (see :func:`make_optimizer`), the learning rate follows
    :func:`warmup_schedule` (``warmup_steps``, then ``schedule``), ``clip_grad_norm`` rescales the gradient when its
    norm exceeds that value, ``seed`` fixes the batches (the initial weights are fixed by the seed in force when
    the model was built). ``progress=False`` hides the progress bar. Stops early if the loss becomes NaN/inf.

    Shape: ``model(tokens)`` maps ``(b, i)`` token ids to ``(b, i, vocab)`` logits; ``task.sample`` gives
    ``(b, i)`` tokens and targets.
    """
    fn = "train"
    if not isinstance(model, nn.Module):
        fail(fn, f"model must be a torch.nn.Module, got {type(model).__name__}", TypeError)
    if not callable(getattr(task, "sample", None)):
        fail(fn, f"task must have a sample(batch_size, generator=...) method (see attention_lab.models.tasks), got "
                 f"{type(task).__name__}", TypeError)
    check_positive_int(fn, "steps", steps, minimum=1)
    check_positive_int(fn, "warmup_steps", warmup_steps, minimum=0)
    check_positive_int(fn, "seed", seed, minimum=0)
    check_positive_int(fn, "batch_size", batch_size, minimum=1)
    check_choice(fn, "schedule", schedule, SCHEDULES)
    if clip_grad_norm is not None:
        clip_grad_norm = check_number(fn, "clip_grad_norm", clip_grad_norm, low=0, low_open=True)
    opt = make_optimizer(model, optimizer, lr=lr, weight_decay=weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(opt, warmup_schedule(warmup_steps, steps, schedule))
    generator = make_generator(seed)
    device = next(model.parameters()).device
    named = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
    layer_names = list(dict.fromkeys(_layer_of(name) for name, _ in named))
    layer_index = torch.tensor([layer_names.index(_layer_of(name)) for name, _ in named])
    matrices = _decayed(named)[0]

    history = History(config={"optimizer": optimizer, "lr": lr, "weight_decay": weight_decay,
                              "warmup_steps": warmup_steps, "schedule": schedule, "clip_grad_norm": clip_grad_norm,
                              "steps": steps, "seed": seed, "batch_size": batch_size},
                      layer_grad_norm={name: [] for name in layer_names})
    model.train()
    start = time.perf_counter()
    bar = tqdm(range(steps), desc=f"training ({getattr(task, 'name', 'task')})", disable=not progress,
               leave=False)
    for step in bar:
        tokens, targets = (t.to(device) for t in task.sample(batch_size, generator=generator))
        logits = model(tokens)
        loss, accuracy = _loss_and_accuracy(logits, targets)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        with torch.no_grad():
            grads = [p.grad if p.grad is not None else torch.zeros_like(p) for _, p in named]
            grad_sq = torch.stack(torch._foreach_norm(grads)).cpu().pow(2)  # one value per parameter tensor
            per_layer = torch.zeros(len(layer_names), dtype=grad_sq.dtype).index_add_(0, layer_index, grad_sq)
        if clip_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_([p for _, p in named], clip_grad_norm)
        history.lr.append(opt.param_groups[0]["lr"])
        opt.step()
        scheduler.step()
        with torch.no_grad():
            weight_norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(matrices))
                                                   ) if matrices else torch.zeros(())
        loss_value, accuracy_value, weight_value = (float(v.detach()) for v in (loss, accuracy, weight_norm))
        history.step.append(step)
        history.loss.append(loss_value)
        history.accuracy.append(accuracy_value)
        grad_norm = float(grad_sq.sum().sqrt())
        history.grad_norm.append(grad_norm)
        history.clipped_grad_norm.append(grad_norm if clip_grad_norm is None else
                                         grad_norm * min(1.0, clip_grad_norm / (grad_norm + 1e-6)))
        history.weight_norm.append(weight_value)
        for name, value in zip(layer_names, per_layer.sqrt().tolist()):
            history.layer_grad_norm[name].append(value)
        history.seconds.append(time.perf_counter() - start)
        if progress and step % 10 == 0:
            bar.set_postfix(loss=f"{loss_value:.3f}", acc=f"{accuracy_value:.2f}", refresh=False)
        if not math.isfinite(loss_value):
            history.diverged = True
            break
    bar.close()
    model.eval()
    return history


@torch.no_grad()
def evaluate(model: nn.Module, task: object, *, n_sequences: int = 1000, seed: int = 10_000,
             **model_options: object) -> dict[str, float]:
    """Loss, token accuracy and whole-sequence accuracy on ``n_sequences`` fresh sequences drawn with ``seed``.

    Use a seed the training did not use (training draws from ``seed``, the default here is 10000) so the sequences
    are held out. Extra keyword arguments go to ``model(tokens, ...)`` (e.g. ``head_mask=``).

    Shape: ``model(tokens)`` maps ``(b, i)`` to ``(b, i, vocab)``.
    """
    fn = "evaluate"
    check_positive_int(fn, "n_sequences", n_sequences)
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    tokens, targets = (t.to(device) for t in task.sample(n_sequences, generator=make_generator(seed)))
    logits = model(tokens, **model_options)
    loss, accuracy = _loss_and_accuracy(logits, targets)
    scored = targets != IGNORE_INDEX
    sequence_right = ((logits.argmax(-1) == targets) | ~scored).all(dim=-1)
    model.train(was_training)
    return {"loss": float(loss), "token_accuracy": float(accuracy),
            "sequence_accuracy": float(sequence_right.float().mean())}
