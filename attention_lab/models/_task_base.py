"""What every toy task shares: the seeded generator the batches come from, ``IGNORE_INDEX`` for unscored
positions, and the base class whose ``sample`` draws symbols and asks the task for its targets.

The tasks themselves live in :mod:`attention_lab.models.tasks` (short ones) and ``_long_range_tasks`` (the
long-range benchmark's); import them from ``tasks``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .._validation import check_positive_int, fail

__all__ = ["IGNORE_INDEX", "make_generator"]

IGNORE_INDEX = -100  # F.cross_entropy's default ignore_index: positions with this target are not scored


def make_generator(seed: int) -> torch.Generator:
    """A CPU ``torch.Generator`` seeded with ``seed``: the tasks draw from it, so a seed fixes every batch."""
    check_positive_int("make_generator", "seed", seed, minimum=0)
    generator = torch.Generator()
    generator.manual_seed(seed)
    return generator


def _check_generator(fn: str, generator: object) -> torch.Generator:
    if not isinstance(generator, torch.Generator):
        fail(fn, f"generator must be a torch.Generator, got {type(generator).__name__}; "
                 f"make one with attention_lab.models.tasks.make_generator(seed)", TypeError)
    return generator


@dataclass(frozen=True)
class _Task:
    seq_len: int = 8
    n_symbols: int = 10

    name = "task"

    def __post_init__(self) -> None:
        fn = type(self).__name__
        check_positive_int(fn, "seq_len", self.seq_len, minimum=2)
        check_positive_int(fn, "n_symbols", self.n_symbols, minimum=2)

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

