"""A small, transparent training loop for the toy tasks: the optimizer, the loop, and what it records.

``train(model, task, steps=..., lr=...)`` draws a fresh batch every step (so the accuracy it records is measured on
sequences the model has never seen), and returns a :class:`History` with, per step: the loss, the token accuracy,
the learning rate, the gradient norm (total and per layer, before clipping) and the weight norm. The learning rate
follows :func:`~attention_lab.models.schedule.warmup_schedule`.

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

from .._validation import check_choice, check_number, check_positive_int, check_seed, fail
from .schedule import SCHEDULES, warmup_schedule
from .tasks import IGNORE_INDEX, make_generator

__all__ = ["OPTIMIZERS", "History", "evaluate", "loss_and_accuracy", "make_optimizer", "train"]

OPTIMIZERS = ("adamw", "adam_l2")


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
    return _make_optimizer("make_optimizer", model, optimizer, lr, weight_decay)


def _make_optimizer(fn: str, model: nn.Module, optimizer: str, lr: float, weight_decay: float
                    ) -> torch.optim.Optimizer:
    """make_optimizer's work, its errors in the name of ``fn`` (the function called: make_optimizer or train)."""
    if not isinstance(model, nn.Module):
        fail(fn, f"model must be a torch.nn.Module, got {type(model).__name__}; pass the model itself", TypeError)
    check_choice(fn, "optimizer", optimizer, OPTIMIZERS)
    lr = check_number(fn, "lr", lr, low=0, low_open=True)
    weight_decay = check_number(fn, "weight_decay", weight_decay, low=0)
    decay, no_decay = _decayed(model.named_parameters())
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    cls = torch.optim.AdamW if optimizer == "adamw" else torch.optim.Adam
    # fused: one kernel updates every parameter of a group (CPU too, since torch 2.4); tiny models are bound by
    # per-op overhead: an AdamW step of lesson 08's model takes 0.34-0.41 ms of CPU so, 1.13-1.29 ms with foreach=True
    return cls(groups, lr=lr, fused=True)


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


def loss_and_accuracy(logits: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Cross-entropy over the scored positions and the share of them predicted right (``IGNORE_INDEX`` skipped).

    Shape: logits ``(b, i, vocab)``, targets ``(b, i)`` -> two scalars.
    """
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
    clip_grad_norm = _check_train_arguments(model, task, steps=steps, warmup_steps=warmup_steps, seed=seed,
                                            batch_size=batch_size, schedule=schedule, clip_grad_norm=clip_grad_norm)
    opt = _make_optimizer("train", model, optimizer, lr, weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(opt, warmup_schedule(warmup_steps, steps, schedule))
    generator = make_generator(seed)
    device = next(model.parameters()).device
    watched = _watch(model)
    history = History(config={"optimizer": optimizer, "lr": lr, "weight_decay": weight_decay,
                              "warmup_steps": warmup_steps, "schedule": schedule, "clip_grad_norm": clip_grad_norm,
                              "steps": steps, "seed": seed, "batch_size": batch_size},
                      layer_grad_norm={name: [] for name in watched.layer_names})
    model.train()
    start = time.perf_counter()
    bar = tqdm(range(steps), desc=f"training ({getattr(task, 'name', 'task')})", disable=not progress,
               leave=False)
    for step in bar:
        tokens, targets = (t.to(device) for t in task.sample(batch_size, generator=generator))
        history.lr.append(opt.param_groups[0]["lr"])  # the rate this step uses
        loss, accuracy, grad_sq = _train_step(model, opt, tokens, targets, watched.params, clip_grad_norm)
        scheduler.step()
        _record(history, step, loss, accuracy, grad_sq, watched, clip_grad_norm, time.perf_counter() - start)
        if progress and step % 10 == 0:
            bar.set_postfix(loss=f"{loss:.3f}", acc=f"{accuracy:.2f}", refresh=False)
        if not math.isfinite(loss):
            history.diverged = True
            break
    bar.close()
    model.eval()
    return history


def _check_train_arguments(model: object, task: object, *, steps: int, warmup_steps: int, seed: int,
                           batch_size: int, schedule: str, clip_grad_norm: float | None) -> float | None:
    """Check train()'s arguments (the optimizer's are checked by make_optimizer); return clip_grad_norm as a float."""
    fn = "train"
    if not isinstance(model, nn.Module):
        fail(fn, f"model must be a torch.nn.Module, got {type(model).__name__}; pass the model itself", TypeError)
    if not callable(getattr(task, "sample", None)):
        fail(fn, f"task must have a sample(batch_size, generator=...) method (see attention_lab.models.tasks), got "
                 f"{type(task).__name__}", TypeError)
    check_positive_int(fn, "steps", steps, minimum=1)
    check_positive_int(fn, "warmup_steps", warmup_steps, minimum=0)
    check_seed(fn, seed)
    check_positive_int(fn, "batch_size", batch_size, minimum=1)
    check_choice(fn, "schedule", schedule, SCHEDULES)
    if clip_grad_norm is None:
        return None
    return check_number(fn, "clip_grad_norm", clip_grad_norm, low=0, low_open=True)


@dataclass(frozen=True)
class _Watched:
    """The parameters train() reports on: every trainable one, the layer each belongs to, the decayed matrices."""

    params: list[nn.Parameter]
    layer_names: list[str]
    layer_index: torch.Tensor  # (parameters,): position of each parameter's layer in layer_names
    matrices: list[nn.Parameter]


def _watch(model: nn.Module) -> _Watched:
    named = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
    layer_names = list(dict.fromkeys(_layer_of(name) for name, _ in named))
    layer_index = torch.tensor([layer_names.index(_layer_of(name)) for name, _ in named])
    return _Watched([p for _, p in named], layer_names, layer_index, _decayed(named)[0])


def _train_step(model: nn.Module, opt: torch.optim.Optimizer, tokens: torch.Tensor, targets: torch.Tensor,
                params: list[nn.Parameter], clip_grad_norm: float | None) -> tuple[float, float, torch.Tensor]:
    """One optimizer step; returns the loss, the token accuracy and the squared gradient norms before clipping.

    Shape: tokens and targets ``(b, i)``; the norms ``(parameters,)``.
    """
    loss, accuracy = loss_and_accuracy(model(tokens), targets)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    grad_sq = _squared_norms([p.grad if p.grad is not None else torch.zeros_like(p) for p in params])
    if clip_grad_norm is not None:
        torch.nn.utils.clip_grad_norm_(params, clip_grad_norm)
    opt.step()
    return float(loss.detach()), float(accuracy), grad_sq


@torch.no_grad()
def _squared_norms(tensors: list[torch.Tensor]) -> torch.Tensor:
    """The squared L2 norm of each tensor, on the CPU. Shape: ``(len(tensors),)``."""
    if not tensors:
        return torch.zeros(0)
    return torch.stack([torch.linalg.vector_norm(t) for t in tensors]).cpu().pow(2)


def _record(history: History, step: int, loss: float, accuracy: float, grad_sq: torch.Tensor, watched: _Watched,
            clip_grad_norm: float | None, seconds: float) -> None:
    """Append one step's figures to ``history``: gradient norms in total and per layer, the weights' norm."""
    per_layer = torch.zeros(len(watched.layer_names), dtype=grad_sq.dtype).index_add_(0, watched.layer_index, grad_sq)
    grad_norm = float(grad_sq.sum().sqrt())
    history.step.append(step)
    history.loss.append(loss)
    history.accuracy.append(accuracy)
    history.grad_norm.append(grad_norm)
    history.clipped_grad_norm.append(grad_norm if clip_grad_norm is None else
                                     grad_norm * min(1.0, clip_grad_norm / (grad_norm + 1e-6)))
    history.weight_norm.append(float(_squared_norms(watched.matrices).sum().sqrt()))
    for name, value in zip(watched.layer_names, per_layer.sqrt().tolist()):
        history.layer_grad_norm[name].append(value)
    history.seconds.append(seconds)


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
    loss, accuracy = loss_and_accuracy(logits, targets)
    scored = targets != IGNORE_INDEX
    sequence_right = ((logits.argmax(-1) == targets) | ~scored).all(dim=-1)
    model.train(was_training)
    return {"loss": float(loss), "token_accuracy": float(accuracy),
            "sequence_accuracy": float(sequence_right.float().mean())}
