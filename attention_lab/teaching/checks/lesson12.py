"""Checks for lesson 12 (a small GPT on real text: the bigram baseline counted by hand, top-p sampling).

Each answer is a function, tried on several inputs: made-up corpora of a few characters with different vocabulary
sizes and smoothing, on which the common wrong counts give numbers different from the right one and from each
other; logits of one, two and three axes, float32 and float64, with values of p on which keeping or dropping the
token that crosses p, renormalising or not, give different distributions.
"""

from __future__ import annotations

import math

import torch

from ...i18n import msg
from ._calls import recording_calls
from ._core import as_tensor, call_learner, correct, fallback_hint, guard_errors, hint, learner_name
from ._function_answers import expect_function

__all__ = ["bigram_bits", "top_p_probabilities"]  # the checks; the rest is their machinery

# ---- exercise 1: the bigram baseline, counted by hand ----

# (training text, validation text, vocabulary size, alpha): the exercise's example first. The vocabulary holds
# more ids than the texts use in some cases (an id no text has still gets alpha), alpha differs, and the last
# character of a training text is one no other position ends with, so counting it as a context shows.
_BIGRAM_CASES = (
    ("abracadabra", "cabbara", 6, 0.5),
    ("abcabcaab", "acbca", 3, 1.0),
    ("xyzzyxx", "zzyx", 5, 0.1),
    ("aaaab", "abab", 2, 2.0),
)


def _case(train: str, valid: str, vocab_size: int, alpha: float) -> tuple[torch.Tensor, torch.Tensor, int, float]:
    """The case as the learner's function gets it: each character's id is its place among the texts' characters."""
    ids = {c: i for i, c in enumerate(sorted(set(train + valid)))}
    return (torch.tensor([ids[c] for c in train]), torch.tensor([ids[c] for c in valid]), vocab_size, alpha)


def _bigram(train: torch.Tensor, valid: torch.Tensor, vocab_size: int, alpha: float, *, log=math.log2,
            contexts_from_all: bool = False, smooth_denominator: bool = True, mean: bool = True,
            positions: int | None = None) -> float:
    """The right answer and its common variants, in plain Python (each switch is one mistake)."""
    pairs, starts = {}, {}
    for a, b in zip(train[:-1].tolist(), train[1:].tolist()):
        pairs[a, b] = pairs.get((a, b), 0) + 1
        starts[a] = starts.get(a, 0) + 1
    if contexts_from_all:
        starts = {a: train.tolist().count(a) for a in set(train.tolist())}
    total = 0.0
    for a, b in zip(valid[:-1].tolist(), valid[1:].tolist()):
        denominator = starts.get(a, 0) + (alpha * vocab_size if smooth_denominator else alpha)
        total -= log((pairs.get((a, b), 0) + alpha) / denominator)
    return total / (positions or len(valid) - 1) if mean else total


def _unigram(train: torch.Tensor, valid: torch.Tensor, vocab_size: int, alpha: float) -> float:
    counts = train.bincount(minlength=vocab_size).double()
    p = (counts + alpha) / (counts.sum() + alpha * vocab_size)
    return float(-p[valid[1:]].log2().mean())


_BIGRAM_MISTAKES = (
    (lambda t, v, n, a: _bigram(t, v, n, a, log=math.log),
     msg("that is the loss in nats (natural log): bits per character take log base 2 (divide by ln 2)")),
    (lambda t, v, n, a: _bigram(t, v, n, a, log=math.log10), msg("bits take log base 2, not base 10")),
    (lambda t, v, n, a: _bigram(t, v, n, a, smooth_denominator=False),
     msg("after adding alpha to each of the V counts, the denominator needs alpha * vocab_size too, or the "
         "probabilities after a character do not sum to 1")),
    (lambda t, v, n, a: _bigram(t, v, n, a, contexts_from_all=True),
     msg("count(b) counts the pairs that START with b: the last character of the training text starts none")),
    (lambda t, v, n, a: _bigram(t, v, n, a, mean=False),
     msg("average over the scored characters instead of adding them up: bits PER character")),
    (lambda t, v, n, a: _bigram(t, v, n, a, positions=len(v)),
     msg("the validation text of M characters has M - 1 pairs (the first character has no previous one): "
         "average over those")),
    (lambda t, v, n, a: _bigram(v, v, n, a),
     msg("the counts come from the training text; counting the validation text scores it on itself")),
    (lambda t, v, n, a: _bigram(t.flip(0), v.flip(0), n, a),
     msg("that counts which character comes BEFORE each one: the model predicts the next character from the "
         "previous one, count(b, c) with b first")),
    (_unigram, msg("that ignores the previous character (a unigram model); the bigram conditions on it")),
)


def _agree(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)


def _as_number(value: object, name: object) -> float:
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    if isinstance(value, bool) or not hasattr(value, "__float__"):
        hint(msg("{name} should return one number (bits per character), got {type}", name=name,
                 type=type(value).__name__))
    number = float(value)
    if not math.isfinite(number):
        hint(msg("{name} returned {value}: a probability of 0 somewhere gives an infinite loss; alpha keeps every "
                 "count above 0", name=name, value=number))
    return number


@guard_errors
def bigram_bits(fn: object) -> None:
    """Exercise 1: ``fn(train_ids, valid_ids, vocab_size, alpha)``, the bits per character of the add-alpha bigram
    model counted on ``train_ids``, on the validation characters after the first."""
    fn = expect_function(fn, "bigram_bits(train_ids, valid_ids, vocab_size, alpha)")
    name = learner_name(fn)
    cases = [_case(*case) for case in _BIGRAM_CASES]
    got = []
    with recording_calls() as calls:
        for train, valid, n, a in cases:
            got.append(call_learner(fn, train.clone(), valid.clone(), n, a))
    if "ngram_bits_per_char" in calls.library:
        hint(msg("{name} calls ngram_bits_per_char: that is the library's answer; count the pairs yourself",
                 name=name))
    got = [_as_number(value, name) for value in got]
    right = [_bigram(*case) for case in cases]
    if all(_agree(g, r) for g, r in zip(got, right)):
        correct(msg("bits per character = mean over the validation pairs of -log2((count(b, c) + alpha) / (count(b) "
                    "+ alpha V)). The exercise's example: {value:.4f} bits", value=right[0]))
        return
    for mistake, message in _BIGRAM_MISTAKES:
        if all(_agree(g, mistake(*case)) for g, case in zip(got, cases)):
            hint(message)
    if _agree(got[0], right[0]):
        miss = next(k for k, (g, r) in enumerate(zip(got, right)) if not _agree(g, r))
        text, valid, n, a = _BIGRAM_CASES[miss]
        hint(msg("{name} is right for the exercise's example but not for training text {text!r}, validation "
                 "{valid!r}, vocab_size={n}, alpha={a}: it uses a number of the example where its arguments should "
                 "go", name=name, text=text, valid=valid, n=n, a=a))
    fallback_hint(msg("count each pair (b, c) of neighbours in the training ids and how many pairs start with each "
                      "b; then average -log2 of (count(b, c) + alpha) / (count(b) + alpha * vocab_size) over the "
                      "pairs of the validation ids"))


# ---- exercise 2: top-p (nucleus) sampling's distribution ----

def _top_p(logits: torch.Tensor, p: float, *, include_crossing: bool = True, renormalise: bool = True,
           descending: bool = True, sort: bool = True, dim: int = -1) -> torch.Tensor:
    """The right distribution and its common variants (each switch is one mistake). Shape: (..., V) -> (..., V)."""
    probs = torch.softmax(logits, dim=dim)
    ordered, order = (probs.sort(dim=-1, descending=descending) if sort
                      else (probs, torch.arange(probs.shape[-1]).expand_as(probs)))
    cumulative = ordered.cumsum(-1)
    keep_sorted = (cumulative - ordered < p) if include_crossing else (cumulative < p)
    keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
    kept = torch.where(keep, probs, torch.zeros_like(probs))
    return kept / kept.sum(-1, keepdim=True) if renormalise else kept


def _top_p_inputs() -> list[tuple[torch.Tensor, float]]:
    """The exercise's example first, then a batch in float32, three axes in float64, and a p the top token passes."""
    generator = torch.Generator().manual_seed(12)
    return [
        (torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0, 3.0], dtype=torch.float64), 0.8),
        (torch.randn(3, 7, generator=generator) * 2, 0.9),
        (torch.randn(2, 4, 5, generator=generator, dtype=torch.float64) * 1.5, 0.55),
        (torch.tensor([[0.0, 4.0, 1.0, -2.0], [1.0, 0.5, 3.5, 0.0]], dtype=torch.float64), 0.35),
    ]


def _top_p_mistakes(logits: torch.Tensor, p: float) -> list[tuple[torch.Tensor, object]]:
    right = _top_p(logits, p)
    masked = logits.masked_fill(right == 0, float("-inf"))
    return [
        (_top_p(logits, p, include_crossing=False),
         msg("keep the token whose probability carries the total past p: the nucleus is the SMALLEST set whose "
             "probabilities add up to at least p")),
        (_top_p(logits, p, renormalise=False),
         msg("the kept probabilities must be divided by their sum, so that they add up to 1 again")),
        (_top_p(logits, p, descending=False), msg("add up the probabilities from the MOST likely token down")),
        (_top_p(logits, p, sort=False),
         msg("add up the probabilities in order of probability, not in the order of the vocabulary")),
        (_top_p(logits, p, dim=0) if logits.dim() > 1 else right,
         msg("softmax over the vocabulary, the last axis (dim=-1), so that each row's probabilities sum to 1")),
        (masked, msg("return probabilities (after softmax), not the masked logits")),
        (torch.where(right > 0, logits, torch.zeros_like(logits)),
         msg("return probabilities (after softmax), not the masked logits")),
    ]


@guard_errors
def top_p_probabilities(fn: object) -> None:
    """Exercise 2: ``fn(logits, p)`` gives the distribution top-p sampling draws from: the softmax of ``logits``
    over the last axis, kept only on the smallest set of most likely tokens whose probabilities reach ``p``, and
    renormalised."""
    fn = expect_function(fn, "top_p_probabilities(logits, p)")
    name = learner_name(fn)
    inputs, answers = _top_p_inputs(), []
    for logits, p in inputs:
        got = as_tensor(call_learner(fn, logits.clone(), p), msg("what {name} returns", name=name))
        if tuple(got.shape) != tuple(logits.shape):
            hint(msg("return one probability per token, the shape of the logits: {expected} for logits of that shape, "
                     "got {shape}", expected=tuple(logits.shape), shape=tuple(got.shape)))
        answers.append(got.double())
    if all(_same(got, _top_p(logits, p)) for got, (logits, p) in zip(answers, inputs)):
        example, p = inputs[0]
        kept = int((_top_p(example, p) > 0).sum())
        correct(msg("the nucleus is the fewest most likely tokens whose probabilities reach p, renormalised; on the "
                    "example it keeps {kept} of {n} tokens at p={p}", kept=kept, n=example.shape[-1], p=p))
        return
    mistakes = [_top_p_mistakes(logits, p) for logits, p in inputs]  # per input: (wrong result, hint) pairs
    for k, (_, message) in enumerate(mistakes[0]):
        wrongs = [per_input[k][0] for per_input in mistakes]
        if any(not _same(wrong, _top_p(*case)) for wrong, case in zip(wrongs, inputs)) \
                and all(_same(got, wrong) for got, wrong in zip(answers, wrongs)):
            hint(message)
    example, p = inputs[0]
    fallback_hint(msg("softmax, sort from the most likely token, keep tokens while the total BEFORE them is below p, "
                      "zero the rest and renormalise; compare your output with that on the example, logits {logits} "
                      "and p={p}", logits=[round(x, 2) for x in example.tolist()], p=p))


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and torch.allclose(a.double(), b.double(), atol=1e-5, rtol=1e-4, equal_nan=True)
