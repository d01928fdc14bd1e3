"""Checks for lesson 12 (a small GPT on real text: the bigram baseline counted by hand, top-p sampling, a head
that looks back at the same character).

Each answer is a function, tried on several inputs: made-up corpora of a few characters with different vocabulary
sizes and smoothing, on which the common wrong counts give numbers different from the right one and from each
other; logits of one, two and three axes, float32 and float64, with values of p on which keeping or dropping the
token that crosses p, renormalising or not, give different distributions; causal attention weights on windows of
a few symbols, of different batch sizes and lengths, where counting the query itself, later keys, the largest or the
latest occurrence only, or every query in the mean each give another share.
"""

from __future__ import annotations

import math

import torch

from ...i18n import msg
from ._calls import recording_calls
from ._core import as_tensor, call_learner, correct, fallback_hint, guard_errors, hint, learner_name
from ._function_answers import expect_function

__all__ = ["bigram_bits", "repeat_share", "top_p_probabilities"]  # the checks; the rest is their machinery

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


# ---- exercise 3: a head that looks back at the same character ----

def _repeat_share(weights: torch.Tensor, ids: torch.Tensor, *, earlier: int = -1, over_all: bool = False,
                  reduce: str = "sum", latest_only: bool = False) -> torch.Tensor:
    """The right share and its common variants (each switch is one mistake). Shape: (b, i, j), (b, n) -> ()."""
    n = ids.shape[-1]
    allowed = torch.ones(n, n, dtype=torch.bool).tril(earlier) if earlier is not None else torch.ones(n, n).bool()
    same = (ids[:, :, None] == ids[:, None, :]) & allowed  # (b, i, j)
    if latest_only:
        latest = torch.where(same, torch.arange(n), -1).amax(-1, keepdim=True)  # (b, i, 1)
        same = same & (torch.arange(n) == latest)
    on_same = weights.double() * same
    share = on_same.amax(-1) if reduce == "max" else on_same.sum(-1)  # (b, i)
    return share.mean() if over_all else share[same.any(-1)].mean()


def _repeat_inputs() -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Causal attention weights of one head and the ids they were computed on: the exercise's example first."""
    generator = torch.Generator().manual_seed(120)
    cases = []
    for b, n, symbols, dtype in ((2, 8, 3, torch.float64), (3, 6, 2, torch.float32), (1, 11, 4, torch.float64),
                                 (4, 5, 3, torch.float32)):
        ids = torch.randint(0, symbols, (b, n), generator=generator)
        scores = torch.randn(b, n, n, generator=generator, dtype=torch.float64) * 2
        causal = torch.ones(n, n, dtype=torch.bool).tril()
        weights = scores.masked_fill(~causal, float("-inf")).softmax(-1).to(dtype)  # (b, i, j)
        cases.append((weights, ids))
    return cases


_REPEAT_MISTAKES = (
    (dict(earlier=0), msg("the query's own position is not an earlier occurrence: count keys j < i only")),
    (dict(earlier=None), msg("a causal head cannot look at later characters; count the keys j < i only")),
    (dict(over_all=True), msg("average over the queries that HAVE an earlier occurrence of their character; a query "
                              "without one has nothing to look back at")),
    (dict(reduce="max"), msg("add up the weight on every earlier occurrence, not only the largest one")),
    (dict(latest_only=True), msg("count every earlier occurrence of the character, not only the latest")),
)


@guard_errors
def repeat_share(fn: object) -> None:
    """Exercise 3: ``fn(weights, ids)``, for one head's weights ``(b, i, j)`` on ids ``(b, n)``: the mean, over the
    queries whose character occurred earlier in their window, of the total weight on those earlier occurrences."""
    fn = expect_function(fn, "repeat_share(weights, ids)")
    name = learner_name(fn)
    inputs, answers = _repeat_inputs(), []
    for weights, ids in inputs:
        got = as_tensor(call_learner(fn, weights.clone(), ids.clone()), msg("what {name} returns", name=name))
        if got.numel() != 1:
            hint(msg("{name} should return one number (a mean over queries), got a tensor of shape {shape}",
                     name=name, shape=tuple(got.shape)))
        answers.append(got.double().reshape(()))
    right = [_repeat_share(*case) for case in inputs]
    if all(_same(got, want) for got, want in zip(answers, right)):
        correct(msg("the share on earlier occurrences, averaged over the queries that have one; on the example: "
                    "{value:.3f}", value=right[0].item()))
        return
    for options, message in _REPEAT_MISTAKES:
        wrongs = [_repeat_share(*case, **options) for case in inputs]
        if any(not _same(w, r) for w, r in zip(wrongs, right)) and all(_same(g, w) for g, w in zip(answers, wrongs)):
            hint(message)
    fallback_hint(msg("for each query i, add weights[b, i, j] over the keys j < i with ids[b, j] == ids[b, i]; then "
                      "average those totals over the queries that have at least one such key"))
