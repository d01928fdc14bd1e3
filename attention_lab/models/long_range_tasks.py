"""The long-range tasks of the efficient-attention benchmark (lesson 10): answers that depend on tokens placed
anywhere in sequences of a thousand positions or more. Each builds on :class:`attention_lab.models.tasks.Task`.

Shape: tokens and targets ``(b, i)``, integer (``torch.long``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .._validation import fail
from .tasks import IGNORE_INDEX, Task

__all__ = ["AssociativeRecall", "ListOps"]


@dataclass(frozen=True)
class AssociativeRecall(Task):
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
    sizes = ("n_keys", "n_pairs")

    def __post_init__(self) -> None:
        super().__post_init__()
        fn = type(self).__name__
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
class ListOps(Task):
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
    sizes = ("n_groups", "group_size")

    def __post_init__(self) -> None:
        super().__post_init__()
        fn = type(self).__name__
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


