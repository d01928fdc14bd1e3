"""Real text for a small GPT (lesson 12): Python's own standard library, characters as tokens, count baselines.

:func:`read_stdlib` reads a fixed, sorted list of standard-library modules (:data:`TRAIN_MODULES`,
:data:`VALIDATION_MODULES`) from the Python that runs it (``sysconfig.get_paths()["stdlib"]``): code and English
docstrings that every machine running the lessons already has, so nothing is downloaded. Train and validation are
split by file, so no line of a validation file was seen in training. :class:`CharVocabulary` maps each character of
the training text to an id; a character it never saw gets the one unknown id, 0. :class:`TextWindows` draws random
windows of the training ids, the ``sample(batch_size, generator=...)`` that :func:`attention_lab.models.training.train`
asks of a task. :func:`ngram_bits_per_char` is the baseline every language model must beat: count how often each
character follows each context of ``order - 1`` characters in the training ids, add ``alpha`` to every count, and
score the validation ids in bits per character (the cross-entropy in base 2). :func:`bracket_pairs` finds which
opening bracket each closing bracket closes, for reading what a head attends to.

Python minor versions ship slightly different files, so every figure computed from this corpus moves a little from
one Python to the next: the lessons assert such figures with a margin, never compare them as text.
"""

from __future__ import annotations

import math
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import torch

from .._validation import check_number, check_positive_int, check_tensor, check_token_ids, fail
from .tasks import make_generator

__all__ = ["BRACKETS", "TRAIN_MODULES", "UNKNOWN", "VALIDATION_MODULES", "CharVocabulary", "StdlibCorpus",
           "TextWindows", "bits", "bracket_pairs", "ngram_bits_per_char", "read_stdlib"]

# Modules present, as single files, in every Python from 3.10 to 3.13, sorted: about 650 KB of training text and
# 37 KB of validation text (Python 3.11).
TRAIN_MODULES = ("abc", "base64", "bisect", "calendar", "codecs", "contextlib", "copy", "csv", "fractions",
                 "functools", "gettext", "glob", "graphlib", "gzip", "heapq", "hmac", "keyword", "linecache",
                 "numbers", "operator", "pprint", "queue", "quopri", "random", "reprlib", "sched", "secrets",
                 "selectors", "shlex", "statistics", "string", "tempfile", "textwrap", "tokenize", "traceback",
                 "types", "weakref")
VALIDATION_MODULES = ("cmd", "colorsys", "fnmatch", "netrc", "stat")
UNKNOWN = 0
"""The id of every character the vocabulary did not see in training."""
BRACKETS = {")": "(", "]": "[", "}": "{"}
"""Each closing bracket and the opening bracket it closes."""


@dataclass(frozen=True)
class StdlibCorpus:
    """The text of the training and of the validation modules, each file's text joined in the order of the lists.

    Shape: two strings; ``train_files`` and ``validation_files`` name the files read, in order.
    """

    train: str
    validation: str
    train_files: tuple[str, ...]
    validation_files: tuple[str, ...]


def _module_names(fn: str, name: str, modules: object) -> tuple[str, ...]:
    if isinstance(modules, str) or not isinstance(modules, (list, tuple)) or not modules \
            or not all(isinstance(m, str) and m for m in modules):
        fail(fn, f"{name} must be a non-empty list of module names such as ('abc', 'bisect'), got {modules!r}; pass "
                 f"module names without '.py'", TypeError)
    return tuple(modules)


def read_stdlib(train_modules: tuple[str, ...] = TRAIN_MODULES,
                validation_modules: tuple[str, ...] = VALIDATION_MODULES, *, root: str | Path | None = None
                ) -> StdlibCorpus:
    """Read the modules' source files (``<root>/<name>.py``, UTF-8) from ``root``, by default the standard library of
    the Python that runs this; a module in both lists is refused (the split is by file).

    Shape: -> a :class:`StdlibCorpus` (strings).
    """
    fn = "read_stdlib"
    train_modules = _module_names(fn, "train_modules", train_modules)
    validation_modules = _module_names(fn, "validation_modules", validation_modules)
    both = sorted(set(train_modules) & set(validation_modules))
    if both:
        fail(fn, f"train and validation must be different files, got {both} in both; remove them from one list")
    folder = Path(sysconfig.get_paths()["stdlib"] if root is None else root)
    texts = {}
    for name in (*train_modules, *validation_modules):
        path = folder / f"{name.replace('.', '/')}.py"
        if not path.is_file():
            fail(fn, f"expected the module file {path}, got no such file; pass modules that exist under {folder}",
                 FileNotFoundError)
        texts[name] = path.read_text(encoding="utf-8")
    return StdlibCorpus("".join(texts[n] for n in train_modules), "".join(texts[n] for n in validation_modules),
                        tuple(f"{n}.py" for n in train_modules), tuple(f"{n}.py" for n in validation_modules))


class CharVocabulary:
    """Characters as tokens: id 0 (:data:`UNKNOWN`) for any character not seen in ``text``, then one id per
    distinct character of ``text`` in sorted order.

    ``encode(text)`` gives the ids, ``decode(ids)`` the text (an unknown id reads as ``"\\ufffd"``), ``chars`` the
    characters in id order (``chars[0]`` the unknown mark), ``len(vocabulary)`` the number of ids.

    Shape: encode: a string of n characters -> ``(n,)`` long; decode: ``(n,)`` ids -> a string.
    """

    def __init__(self, text: str) -> None:
        if not isinstance(text, str) or not text:
            fail("CharVocabulary", f"text must be a non-empty string, got {text!r:.40}; build the vocabulary from "
                                   f"the training text", TypeError if not isinstance(text, str) else ValueError)
        self.chars = ("\ufffd", *sorted(set(text)))
        self._ids = {c: i for i, c in enumerate(self.chars) if i != UNKNOWN}

    def __len__(self) -> int:
        return len(self.chars)

    def __repr__(self) -> str:
        return f"CharVocabulary({len(self)} ids: {len(self) - 1} characters and the unknown id {UNKNOWN})"

    def encode(self, text: str) -> torch.Tensor:
        """The id of each character (:data:`UNKNOWN` for one not in the vocabulary).

        Shape: a string of n characters -> ``(n,)`` long.
        """
        if not isinstance(text, str):
            fail("CharVocabulary.encode", f"text must be a string, got {type(text).__name__}; pass the text itself",
                 TypeError)
        return torch.tensor([self._ids.get(c, UNKNOWN) for c in text], dtype=torch.long)

    def decode(self, ids: torch.Tensor) -> str:
        """The characters of ``ids``; the unknown id reads as ``"\\ufffd"``.

        Shape: ``(n,)`` ids -> a string of n characters.
        """
        fn = "CharVocabulary.decode"
        check_token_ids(fn, "ids", check_tensor(fn, "ids", ids), len(self))
        if ids.dim() != 1:
            fail(fn, f"ids must have shape (n,), got shape {tuple(ids.shape)}; decode one sequence at a time")
        return "".join(self.chars[i] for i in ids.tolist())


class TextWindows:
    """Random windows of a long sequence of ids, as a task for :func:`attention_lab.models.training.train`:
    ``sample(batch_size, generator=...)`` gives ``tokens = ids[s : s + seq_len]`` and the next characters
    ``targets = ids[s + 1 : s + seq_len + 1]`` for random starts s.

    Shape: ids ``(N,)`` -> tokens, targets ``(b, seq_len)``.
    """

    name = "stdlib text"

    def __init__(self, ids: torch.Tensor, seq_len: int) -> None:
        fn = "TextWindows"
        check_tensor(fn, "ids", ids)
        check_positive_int(fn, "seq_len", seq_len)
        if ids.dtype != torch.long or ids.dim() != 1 or len(ids) < seq_len + 1:
            fail(fn, f"ids must be a (N,) long tensor with N > seq_len={seq_len}, got dtype {ids.dtype} and shape "
                     f"{tuple(ids.shape)}; pass vocabulary.encode(text) of a longer text or a shorter seq_len")
        self.ids, self.seq_len = ids, seq_len

    def sample(self, batch_size: int, *, generator: torch.Generator | None = None) -> tuple[torch.Tensor, ...]:
        """``batch_size`` windows at random starts. Shape: -> tokens, targets ``(b, seq_len)``."""
        check_positive_int("TextWindows.sample", "batch_size", batch_size)
        generator = make_generator(0) if generator is None else generator
        starts = torch.randint(0, len(self.ids) - self.seq_len, (batch_size,), generator=generator)  # (b,)
        index = starts[:, None] + torch.arange(self.seq_len + 1)  # (b, seq_len + 1)
        windows = self.ids[index]
        return windows[:, :-1], windows[:, 1:]


def _codes(ids: torch.Tensor, order: int, vocab_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Each position's context (the order - 1 ids before it) and (context, id), as whole numbers in base V.

    Shape: ids ``(N,)`` -> two ``(N - order + 1,)`` tensors.
    """
    context = torch.zeros(len(ids) - order + 1, dtype=torch.long)
    for k in range(order - 1):
        context = context * vocab_size + ids[k:len(ids) - order + 1 + k]
    return context, context * vocab_size + ids[order - 1:]


def _lookup(table_keys: torch.Tensor, table_counts: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """The count of each key in the table (0 where absent). Shape: keys ``(n,)`` -> ``(n,)`` float64."""
    if not len(table_keys):
        return torch.zeros(len(keys), dtype=torch.float64)
    where = torch.searchsorted(table_keys, keys).clamp(max=len(table_keys) - 1)
    return torch.where(table_keys[where] == keys, table_counts[where], 0).double()


def ngram_bits_per_char(train_ids: torch.Tensor, validation_ids: torch.Tensor, *, order: int, vocab_size: int,
                        alpha: float = 0.1) -> float:
    """Bits per character of a count model on the validation ids: p(c | the order - 1 characters before it) =
    (count(context, c) + alpha) / (count(context) + alpha * vocab_size), counted in the training ids; order 1 is
    the unigram (no context), 2 the bigram. Every validation position from ``order - 1`` on is scored.

    Shape: train ``(N,)``, validation ``(M,)`` long ids in ``[0, vocab_size)`` -> a float.
    """
    fn = "ngram_bits_per_char"
    check_positive_int(fn, "order", order)
    check_positive_int(fn, "vocab_size", vocab_size)
    alpha = check_number(fn, "alpha", alpha, low=0, low_open=True,
                         hint="alpha > 0 keeps an unseen character's probability above 0 (a finite loss)")
    for name, ids in (("train_ids", train_ids), ("validation_ids", validation_ids)):
        check_token_ids(fn, name, check_tensor(fn, name, ids), vocab_size)
        if ids.dim() != 1 or len(ids) < order:
            fail(fn, f"{name} must have shape (N,) with N >= order={order}, got shape {tuple(ids.shape)}; pass a "
                     f"longer text or a smaller order")
    if vocab_size ** order >= 2 ** 62:
        fail(fn, f"vocab_size ** order must stay below 2**62 to index the counts, got {vocab_size}**{order}; pass a "
                 f"smaller order")
    train_context, train_full = _codes(train_ids, order, vocab_size)
    context, full = _codes(validation_ids, order, vocab_size)
    if vocab_size ** order <= 2 ** 24:  # a table of every (context, character): one pass, no sort
        pair_counts = torch.bincount(train_full, minlength=vocab_size ** order).double()[full]
        context_counts = torch.bincount(train_context, minlength=vocab_size ** (order - 1)).double()[context]
    else:  # only the (context, character) pairs the training text has
        pair_counts = _lookup(*torch.unique(train_full, return_counts=True), full)
        context_counts = _lookup(*torch.unique(train_context, return_counts=True), context)
    p = (pair_counts + alpha) / (context_counts + alpha * vocab_size)
    return float(-p.log2().mean())


def bracket_pairs(text: str) -> list[tuple[int, int]]:
    """The (opening index, closing index) of each bracket pair ``()``, ``[]``, ``{}`` in ``text``, by a stack: a
    closing bracket closes the innermost open one of its kind; one that matches no open bracket is skipped (strings
    and comments are not parsed, so a bracket inside them counts too). Sorted by closing index.

    Shape: a string -> a list of (int, int).
    """
    if not isinstance(text, str):
        fail("bracket_pairs", f"text must be a string, got {type(text).__name__}; pass the text itself", TypeError)
    stack, pairs = [], []
    for index, char in enumerate(text):
        if char in "([{":
            stack.append((char, index))
        elif char in BRACKETS and stack and stack[-1][0] == BRACKETS[char]:
            pairs.append((stack.pop()[1], index))
    return pairs


def bits(nats: float) -> float:
    """A loss in nats (natural log) in bits (log base 2). Shape: a float -> a float."""
    return nats / math.log(2)
