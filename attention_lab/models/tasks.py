"""Toy sequence tasks, generated on the fly from a seeded ``torch.Generator`` (no downloads, no files).

Every task draws a batch with ``task.sample(batch_size, generator=g)`` and returns ``(tokens, targets)``: ``tokens``
is what the model reads, ``targets`` what it must write at each position, with ``IGNORE_INDEX`` (-100, the default
``ignore_index`` of ``F.cross_entropy``) where nothing is scored. One model output per input position keeps every
task in the same shape, so the same encoder-style :class:`~attention_lab.model.TinyTransformer` learns any of them.

=====================  ================================================  =============================
task                   target at position ``t``                          what attention must do
=====================  ================================================  =============================
``Reversal``           ``tokens[n - 1 - t]``                             look at the mirrored position
``Sorting``            the ``t``-th smallest token                       compare every pair (counting)
``PointerLookup``      last position only: the symbol the pointer names  one long jump, set by content
``AssociativeRecall``  the last positions: the value of the key asked    find one token among many
``ListOps``            inner operators and the end: the tree's values    select a maximum, twice
=====================  ================================================  =============================

The last two are long-range tasks for the efficient-attention benchmark: their answers depend on tokens placed
anywhere in sequences of a thousand positions or more.

Shape: tokens and targets ``(b, i)``, integer (``torch.long``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .._validation import check_choice, check_positive_int, fail

__all__ = ["IGNORE_INDEX", "PointerLookup", "Reversal", "Sorting", "TASKS", "make_generator", "make_task"]
__all__ += ["AssociativeRecall", "ListOps"]

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


# ---- long-range tasks (the efficient-attention benchmark) ----


@dataclass(frozen=True)
class AssociativeRecall(_Task):
    """Key-value pairs scattered over a long stretch of noise; then keys: write each one's value.

    ``n_pairs`` pairs with distinct keys (of ``n_keys``) and random values (of ``n_symbols``) sit at random positions
    among filler tokens; the last ``n_pairs`` positions ask for the keys again, in another order, and are scored with
    the value. Each pair is one token (its key and value together), so one attention layer can solve it: the query
    for key a must find the one token with key a anywhere in the sequence, and copy its value. A sharp lookup by
    content over the whole length: what linear attention's fixed-size state and a sliding window lack.

    Token ids: values ``0 .. V-1`` (answers only), filler ``V``, queried keys ``V+1 .. V+K``, pairs
    ``V + 1 + K + key * V + value``.

    Shape: tokens and targets ``(b, i)``; targets are ``IGNORE_INDEX`` except at the last ``n_pairs`` positions.
    """

    seq_len: int = 64
    n_symbols: int = 8
    n_keys: int = 8
    n_pairs: int = 4

    name = "recall"

    def __post_init__(self) -> None:
        super().__post_init__()
        fn = type(self).__name__
        check_positive_int(fn, "n_keys", self.n_keys)
        check_positive_int(fn, "n_pairs", self.n_pairs)
        if self.n_pairs > self.n_keys:
            fail(fn, f"n_pairs must be at most n_keys={self.n_keys} (every pair has its own key), got "
                     f"n_pairs={self.n_pairs}")
        if 2 * self.n_pairs > self.seq_len:
            fail(fn, f"seq_len must hold the pairs and the questions, 2 * n_pairs = {2 * self.n_pairs}, got "
                     f"seq_len={self.seq_len}")

    @property
    def vocab_size(self) -> int:
        return self.n_symbols + 1 + self.n_keys + self.n_keys * self.n_symbols

    def _make(self, symbols: torch.Tensor, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        b, n, p, v = symbols.shape[0], self.seq_len, self.n_pairs, self.n_symbols
        keys = torch.rand(b, self.n_keys, generator=generator).argsort(dim=-1)[:, :p]  # distinct keys, (b, p)
        values = torch.randint(0, v, (b, p), generator=generator)  # (b, p)
        where = torch.rand(b, n - p, generator=generator).argsort(dim=-1)[:, :p]  # pair positions, (b, p)
        asked = torch.rand(b, p, generator=generator).argsort(dim=-1)  # the order of the questions, (b, p)
        tokens = torch.full_like(symbols, v).scatter(1, where, v + 1 + self.n_keys + keys * v + values)
        tokens[:, n - p:] = v + 1 + keys.gather(1, asked)
        return tokens, self.solve(tokens)

    def solve(self, tokens: torch.Tensor) -> torch.Tensor:
        v, k, p = self.n_symbols, self.n_keys, self.n_pairs
        pair = tokens - (v + 1 + k)  # key * V + value for pair tokens, (b, i)
        is_pair = pair >= 0
        value_of_key = torch.zeros(tokens.shape[0], k + 1, dtype=torch.long)  # column k collects non-pairs
        value_of_key = value_of_key.scatter(1, torch.where(is_pair, pair // v, k), torch.where(is_pair, pair % v, 0))
        targets = torch.full_like(tokens, IGNORE_INDEX)
        asked = (tokens[:, -p:] - v - 1).clamp(0, k - 1)  # (b, p)
        targets[:, -p:] = value_of_key.gather(1, asked)
        return targets

    def token_labels(self, tokens: torch.Tensor) -> list[str]:
        v, k = self.n_symbols, self.n_keys
        labels = []
        for t in tokens.tolist():
            if t <= v:
                labels.append("." if t == v else str(t))
            elif t <= v + k:
                labels.append(f"k{t - v - 1}?")
            else:
                labels.append(f"k{(t - v - 1 - k) // v}:{(t - v - 1 - k) % v}")
        return labels


@dataclass(frozen=True)
class ListOps(_Task):
    """A two-level MAX/MIN expression spread over a long sequence (ListOps-style, with the brackets made explicit).

    ``n_groups`` inner lists, each an operator (MAX or MIN) and ``group_size`` digits (of ``n_symbols``), and an
    outer operator over the inner results: e.g. MAX(MIN(3, 7, 1), MAX(2, 8, 0)) = 8. ListOps (Nangia and Bowman
    2018, in the Long Range Arena) writes the tree with brackets, which a model must count; here every token
    carries its group instead (digit "3 of group 1", operator "MIN of group 1"), and the tokens sit at random
    positions among filler, so the tree is defined by content, not by distance. Scored at each inner operator (the
    value of its list) and at the last position, which holds the outer operator (the value of the whole tree):
    solving it takes a sharp selection (a maximum, not an average) over tokens anywhere, twice.

    Token ids: digits ``0 .. V-1`` (answers only), filler ``V``, digit x of group g ``V + 1 + g V + x``, operator
    o (0 = MAX, 1 = MIN) of group g ``V + 1 + G V + 2 g + o``, outer operator ``V + 1 + G V + 2 G + o``.

    Shape: tokens and targets ``(b, i)``; targets are ``IGNORE_INDEX`` except at the inner operators and the end.
    """

    seq_len: int = 64
    n_symbols: int = 10
    n_groups: int = 4
    group_size: int = 3

    name = "listops"

    def __post_init__(self) -> None:
        super().__post_init__()
        fn = type(self).__name__
        check_positive_int(fn, "n_groups", self.n_groups)
        check_positive_int(fn, "group_size", self.group_size)
        if self.n_groups * (self.group_size + 1) + 1 > self.seq_len:
            fail(fn, f"seq_len must hold every operator and digit and the outer operator, "
                     f"{self.n_groups * (self.group_size + 1) + 1} tokens, got seq_len={self.seq_len}")

    @property
    def vocab_size(self) -> int:
        return self.n_symbols + 1 + self.n_groups * self.n_symbols + 2 * self.n_groups + 2

    def _make(self, symbols: torch.Tensor, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        b, n, v, g, m = symbols.shape[0], self.seq_len, self.n_symbols, self.n_groups, self.group_size
        group = torch.arange(g).repeat_interleave(m)  # the group of each digit, (g*m,)
        digits = v + 1 + group * v + torch.randint(0, v, (b, g * m), generator=generator)  # (b, g*m)
        ops = v + 1 + g * v + 2 * torch.arange(g) + torch.randint(0, 2, (b, g), generator=generator)  # (b, g)
        outer = v + 1 + g * v + 2 * g + torch.randint(0, 2, (b, 1), generator=generator)  # (b, 1)
        where = torch.rand(b, n - 1, generator=generator).argsort(dim=-1)[:, :g * (m + 1)]  # (b, g*(m+1))
        tokens = torch.full((b, n), v, dtype=torch.long).scatter(1, where, torch.cat([digits, ops], dim=1))
        tokens[:, -1:] = outer
        return tokens, self.solve(tokens)

    def solve(self, tokens: torch.Tensor) -> torch.Tensor:
        v, g = self.n_symbols, self.n_groups
        b = tokens.shape[0]
        digit = tokens - (v + 1)  # g * V + x for digit tokens
        is_digit = (digit >= 0) & (digit < g * v)
        group = torch.where(is_digit, digit // v, g)  # column g collects everything else
        value = torch.where(is_digit, digit % v, 0)
        high = torch.full((b, g + 1), -1, dtype=torch.long).scatter_reduce(1, group, value, "amax")  # (b, g+1)
        low = torch.full((b, g + 1), v, dtype=torch.long).scatter_reduce(1, group, value, "amin")  # (b, g+1)
        op = tokens - (v + 1 + g * v)  # 2 * group + o for inner operators, 2 * g + o for the outer one
        is_op = (op >= 0) & (op < 2 * g)
        op_group = torch.where(is_op, op // 2, g)
        inner = torch.where(op % 2 == 0, high.gather(1, op_group), low.gather(1, op_group))  # (b, i)
        targets = torch.where(is_op, inner, torch.full_like(tokens, IGNORE_INDEX))
        group_values = torch.zeros(b, g + 1, dtype=torch.long).scatter(1, op_group, inner)[:, :g]  # (b, g)
        outer_is_max = (tokens[:, -1] - (v + 1 + g * v + 2 * g)) == 0  # (b,)
        targets[:, -1] = torch.where(outer_is_max, group_values.amax(dim=-1), group_values.amin(dim=-1))
        return targets

    def token_labels(self, tokens: torch.Tensor) -> list[str]:
        v, g = self.n_symbols, self.n_groups
        labels = []
        for t in tokens.tolist():
            if t <= v:
                labels.append("." if t == v else str(t))
            elif t < v + 1 + g * v:
                labels.append(f"{(t - v - 1) % v}g{(t - v - 1) // v}")
            elif t < v + 1 + g * v + 2 * g:
                o = t - v - 1 - g * v
                labels.append(f"{'MAX' if o % 2 == 0 else 'MIN'}g{o // 2}")
            else:
                labels.append("MAX" if t - v - 1 - g * v - 2 * g == 0 else "MIN")
        return labels


TASKS = {"reversal": Reversal, "sorting": Sorting, "pointer": PointerLookup, "recall": AssociativeRecall,
         "listops": ListOps}


def make_task(name: str, **options: int) -> _Task:
    """A task by name (a key of :data:`TASKS`), e.g. ``make_task("reversal", seq_len=8)``."""
    check_choice("make_task", "name", name, sorted(TASKS))
    return TASKS[name](**options)


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


TASKS["repeat"] = Repeat
__all__.append("Repeat")
