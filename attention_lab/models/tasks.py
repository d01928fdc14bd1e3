"""Toy sequence tasks, generated on the fly from a seeded ``torch.Generator`` (no downloads, no files).

Every task draws a batch with ``task.sample(batch_size, generator=g)`` and returns ``(tokens, targets)``: ``tokens``
is what the model reads, ``targets`` what it must write at each position, with ``IGNORE_INDEX`` (-100, the default
``ignore_index`` of ``F.cross_entropy``) where nothing is scored. One model output per input position keeps every
task in the same shape, so the same encoder-style :class:`~attention_lab.models.transformer.TinyTransformer` learns
any of them.

=====================  ================================================  =============================
task                   target at position ``t``                          what attention must do
=====================  ================================================  =============================
``Reversal``           ``tokens[n - 1 - t]``                             look at the mirrored position
``Sorting``            the ``t``-th smallest token                       compare every pair (counting)
``PointerLookup``      last position only: the symbol the pointer names  one long jump, set by content
``AssociativeRecall``  the last positions: the value of the key asked    find one token among many
``ListOps``            inner operators and the end: the tree's values    select a maximum, twice
``Repeat``             after the separator: the token k positions back   look exactly k back (decoder)
=====================  ================================================  =============================

``AssociativeRecall`` and ``ListOps`` are the long-range tasks of the efficient-attention benchmark (written in
``_long_range_tasks``, the shared base class in ``_task_base``): their answers depend on tokens placed anywhere in
sequences of a thousand positions or more.

Shape: tokens and targets ``(b, i)``, integer (``torch.long``).
"""


from __future__ import annotations

from dataclasses import dataclass

import torch

from .._validation import check_choice, fail
from ._long_range_tasks import AssociativeRecall, ListOps
from ._task_base import IGNORE_INDEX, _Task, make_generator

__all__ = ["IGNORE_INDEX", "PointerLookup", "Repeat", "Reversal", "Sorting", "TASKS", "make_generator", "make_task",
           "AssociativeRecall", "ListOps"]


@dataclass(frozen=True)
class Reversal(_Task):
    """Write the input backwards: the target at position ``t`` is ``tokens[n - 1 - t]``.

    Shape: tokens and targets ``(b, i)``.
    """

    name = "reversal"

    def solve(self, tokens: torch.Tensor) -> torch.Tensor:
        return tokens.flip(-1)


@dataclass(frozen=True)
class Sorting(_Task):
    """Write the input sorted ascending: the target at position ``t`` is the ``t``-th smallest token.

    Shape: tokens and targets ``(b, i)``.
    """

    name = "sorting"

    def solve(self, tokens: torch.Tensor) -> torch.Tensor:
        return tokens.sort(dim=-1).values


@dataclass(frozen=True)
class PointerLookup(_Task):
    """The last token is a pointer ``->p``; the answer, scored at the last position only, is ``tokens[p]``.

    Tokens ``0 .. n_symbols-1`` are symbols; token ``n_symbols + p`` is the pointer to position ``p``
    (``0 <= p < seq_len - 1``). The pointer can name the first position, so the last query must be able to jump
    the whole sequence, and where it jumps depends on the pointer's content, not on its own position.

    Shape: tokens and targets ``(b, i)``; targets are ``IGNORE_INDEX`` except at ``i = seq_len - 1``.
    """

    name = "pointer"

    @property
    def vocab_size(self) -> int:
        return self.n_symbols + self.seq_len - 1

    def _make(self, symbols: torch.Tensor, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        pointer = torch.randint(0, self.seq_len - 1, (symbols.shape[0],), generator=generator)  # (b,)
        tokens = symbols.clone()
        tokens[:, -1] = self.n_symbols + pointer
        return tokens, self.solve(tokens)

    def solve(self, tokens: torch.Tensor) -> torch.Tensor:
        pointer = (tokens[:, -1] - self.n_symbols).clamp(0, self.seq_len - 2)  # (b,)
        targets = torch.full_like(tokens, IGNORE_INDEX)
        targets[:, -1] = tokens.gather(-1, pointer[:, None])[:, 0]
        return targets

    def token_labels(self, tokens: torch.Tensor) -> list[str]:
        return [str(t) if t < self.n_symbols else f"->{t - self.n_symbols}" for t in tokens.tolist()]


@dataclass(frozen=True)
class Repeat(_Task):
    """Read k = seq_len / 2 symbols and a separator, then write the same k symbols again (a decoder's task).

    Token ``n_symbols`` is the separator. The sequence is ``x_0 .. x_{k-1}, |, x_0 .. x_{k-2}``; the target at
    position t >= k is ``x_{t-k}``, the token exactly k positions back, and nothing is scored before the separator.
    Generating from the prompt ``x_0 .. x_{k-1}, |`` writes the copy one token at a time, each k positions after its
    original: a model that only sees the last k positions or fewer (a sliding window) cannot do it.

    Shape: tokens and targets ``(b, i)`` with ``i = seq_len``; targets are ``IGNORE_INDEX`` before position k.
    """

    name = "repeat"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.seq_len % 2:
            fail("Repeat", f"seq_len must be even (k symbols, the separator, then k - 1 copied ones), got "
                         f"seq_len={self.seq_len}; use {self.seq_len + 1}")

    @property
    def vocab_size(self) -> int:
        return self.n_symbols + 1

    def _make(self, symbols: torch.Tensor, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        k = self.seq_len // 2
        separator = torch.full_like(symbols[:, :1], self.n_symbols)  # (b, 1)
        tokens = torch.cat([symbols[:, :k], separator, symbols[:, :k - 1]], dim=1)  # (b, 2k)
        return tokens, self.solve(tokens)

    def solve(self, tokens: torch.Tensor) -> torch.Tensor:
        k = self.seq_len // 2
        targets = torch.full_like(tokens, IGNORE_INDEX)
        targets[:, k:] = tokens[:, :k]
        return targets

    def token_labels(self, tokens: torch.Tensor) -> list[str]:
        return [str(t) if t < self.n_symbols else "|" for t in tokens.tolist()]


TASKS = {"reversal": Reversal, "sorting": Sorting, "pointer": PointerLookup, "recall": AssociativeRecall,
         "listops": ListOps, "repeat": Repeat}


def make_task(name: str, **options: int) -> _Task:
    """A task by name (a key of :data:`TASKS`), e.g. ``make_task("reversal", seq_len=8)``."""
    check_choice("make_task", "name", name, sorted(TASKS))
    return TASKS[name](**options)
