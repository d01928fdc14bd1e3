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

``AssociativeRecall`` and ``ListOps`` are the long-range tasks of the efficient-attention benchmark, in
:mod:`attention_lab.models.long_range_tasks`: their answers depend on tokens placed anywhere in sequences of a
thousand positions or more. They build on :class:`Task`, the base class here, as every task does.

Shape: tokens and targets ``(b, i)``, integer (``torch.long``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from .._validation import check_positive_int, check_positive_ints, check_seed, fail

__all__ = ["IGNORE_INDEX", "PointerLookup", "Repeat", "Reversal", "Sorting", "Task", "TriggerCopy", "make_generator"]

IGNORE_INDEX = -100  # F.cross_entropy's default ignore_index: positions with this target are not scored


def make_generator(seed: int) -> torch.Generator:
    """A CPU ``torch.Generator`` seeded with ``seed``: the tasks draw from it, so a seed fixes every batch.

    Shape: no tensors in; a generator out.
    """
    check_seed("make_generator", seed)
    generator = torch.Generator()
    generator.manual_seed(seed)
    return generator


def _check_generator(fn: str, generator: object) -> torch.Generator:
    if not isinstance(generator, torch.Generator):
        fail(fn, f"generator must be a torch.Generator, got {type(generator).__name__}; "
                 f"make one with attention_lab.models.tasks.make_generator(seed)", TypeError)
    return generator


@dataclass(frozen=True)
class Task:
    """What every task shares: ``seq_len`` tokens drawn from ``n_symbols`` symbols; a subclass says what the
    targets are (:meth:`solve`) and, if it needs to, how a sequence is made (``_make``).

    Shape: tokens and targets ``(b, i)``.
    """

    seq_len: int = 8
    n_symbols: int = 10

    name = "task"
    sizes: ClassVar[tuple[str, ...]] = ()  # a subclass's own size fields, each checked to be a positive int

    def __post_init__(self) -> None:
        fn = type(self).__name__
        check_positive_int(fn, "seq_len", self.seq_len, minimum=2)
        check_positive_int(fn, "n_symbols", self.n_symbols, minimum=2)
        check_positive_ints(fn, **{size: getattr(self, size) for size in self.sizes})

    @property
    def vocab_size(self) -> int:
        """How many distinct token ids there are (the model's embedding and output size)."""
        return self.n_symbols

    def sample(self, batch_size: int, *, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """A fresh batch ``(tokens, targets)``, drawn from ``generator`` only (so a seeded generator repeats it).

        Shape: tokens ``(b, i)``, targets ``(b, i)`` (``IGNORE_INDEX`` where a position is not scored).
        """
        fn = f"{type(self).__name__}.sample"
        check_positive_int(fn, "batch_size", batch_size)
        _check_generator(fn, generator)
        symbols = torch.randint(0, self.n_symbols, (batch_size, self.seq_len), generator=generator)  # (b, i)
        return self._make(symbols, generator)

    def _make(self, symbols: torch.Tensor, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        return symbols, self.solve(symbols)

    def solve(self, tokens: torch.Tensor) -> torch.Tensor:
        """The right targets for ``tokens`` (what a perfect model writes). Shape: ``(b, i) -> (b, i)``."""
        raise NotImplementedError

    def token_labels(self, tokens: torch.Tensor) -> list[str]:
        """Readable labels for one sequence of token ids (for plot ticks). Shape: tokens ``(i,)``."""
        return [str(t) for t in tokens.tolist()]


@dataclass(frozen=True)
class Reversal(Task):
    """Write the input backwards: the target at position ``t`` is ``tokens[n - 1 - t]``.

    Shape: tokens and targets ``(b, i)``.
    """

    name = "reversal"

    def solve(self, tokens: torch.Tensor) -> torch.Tensor:
        return tokens.flip(-1)


@dataclass(frozen=True)
class Sorting(Task):
    """Write the input sorted ascending: the target at position ``t`` is the ``t``-th smallest token.

    Shape: tokens and targets ``(b, i)``.
    """

    name = "sorting"

    def solve(self, tokens: torch.Tensor) -> torch.Tensor:
        return tokens.sort(dim=-1).values


@dataclass(frozen=True)
class PointerLookup(Task):
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
class Repeat(Task):
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


@dataclass(frozen=True)
class TriggerCopy(Task):
    """A decoder's task where attention is needed only now and then: after a start token, each symbol is copied,
    except a trigger (symbols ``0 .. n_triggers-1``), whose target is the token before it.

    Token ``n_symbols`` is the start token, always at position 0, and is not scored. At a trigger the model must
    read one position back; everywhere else it needs nothing from other positions, so an attention head has nothing
    to read most of the time: the setting in which trained models park attention on the first token (after the
    Bigram-Backcopy task of Guo et al. 2024, *Active-Dormant Attention Heads*).

    Shape: tokens and targets ``(b, i)``; targets are ``IGNORE_INDEX`` at position 0.
    """

    n_triggers: int = 2

    name = "trigger copy"
    sizes: ClassVar[tuple[str, ...]] = ("n_triggers",)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.n_triggers >= self.n_symbols:
            fail("TriggerCopy", f"n_triggers must be smaller than n_symbols={self.n_symbols} (some symbols are "
                                f"copied as they are), got n_triggers={self.n_triggers}; pass fewer triggers")

    @property
    def vocab_size(self) -> int:
        return self.n_symbols + 1

    def _make(self, symbols: torch.Tensor, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        tokens = symbols.clone()
        tokens[:, 0] = self.n_symbols  # the start token
        return tokens, self.solve(tokens)

    def solve(self, tokens: torch.Tensor) -> torch.Tensor:
        previous = torch.cat([tokens[:, :1], tokens[:, :-1]], dim=1)  # (b, i): the token one position back
        targets = torch.where(tokens < self.n_triggers, previous, tokens)
        targets[:, 0] = IGNORE_INDEX
        return targets

    def token_labels(self, tokens: torch.Tensor) -> list[str]:
        return ["<s>" if t == self.n_symbols else (f"*{t}" if t < self.n_triggers else str(t)) for t in tokens.tolist()]
