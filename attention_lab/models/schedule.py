"""The learning-rate schedule of the training loop: a linear warmup, then constant, linear or cosine decay."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .._validation import check_choice, check_positive_int

__all__ = ["SCHEDULES", "WarmupSchedule", "warmup_schedule"]

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
