"""Lesson 12 checks accept every right answer and reject common mistakes with their own hint."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
import torch
from _check_helpers import accepts, inputs_tried, rejects
from answers.lesson12 import repeat_loops, repeat_variant, top_p_sorted, top_p_variant

from attention_lab.models.text_corpus import ngram_bits_per_char
from attention_lab.teaching.checks import lesson12 as check

# ---- exercise 1: the bigram baseline by hand ----


def bigram(train_ids, valid_ids, vocab_size, alpha, *, log=math.log2, starts_from_all=False, denominator_alpha=None,
           total=False, over=None):
    train, valid = train_ids.tolist(), valid_ids.tolist()
    pairs = Counter(zip(train, train[1:]))
    starts = Counter(train) if starts_from_all else Counter(train[:-1])
    smoothing = alpha * vocab_size if denominator_alpha is None else denominator_alpha
    scores = [log((pairs[b, c] + alpha) / (starts[b] + smoothing)) for b, c in zip(valid, valid[1:])]
    return -sum(scores) if total else -sum(scores) / (over or len(scores))


def test_bigram_bits_by_hand_on_the_example(capsys):
    """abracadabra: pairs ab x2, br x2, ra x2, ac, ca, ad, da; count(a) = 4 pairs start with a (the last a starts
    none). cabbara's pairs ca, ab, bb, ba, ar, ra with V = 6, alpha = 0.5: worked out by hand below."""
    p = {"ca": (1 + .5) / (1 + 3), "ab": (2 + .5) / (4 + 3), "bb": (0 + .5) / (2 + 3), "ba": (0 + .5) / (2 + 3),
         "ar": (0 + .5) / (4 + 3), "ra": (2 + .5) / (2 + 3)}
    by_hand = -sum(math.log2(x) for x in p.values()) / 6
    check.bigram_bits(bigram)
    assert f"{by_hand:.4f} bits" in capsys.readouterr().out


def test_bigram_bits_accepts_every_numeric_form(capsys):
    accepts(capsys, check.bigram_bits, bigram)
    accepts(capsys, check.bigram_bits, lambda *a: torch.tensor(bigram(*a), dtype=torch.float32))
    accepts(capsys, check.bigram_bits, lambda *a: np.float64(bigram(*a)))
    accepts(capsys, check.bigram_bits, lambda *a: bigram(*a, log=math.log) / math.log(2))


def unsmoothed(train_ids, valid_ids, vocab_size):
    counts = torch.zeros(vocab_size, vocab_size).index_put_((train_ids[:-1], train_ids[1:]),
                                                            torch.ones(len(train_ids) - 1), accumulate=True)
    return -(counts / counts.sum(1, keepdim=True))[valid_ids[:-1], valid_ids[1:]].log2().mean()  # inf: log2(0)


@pytest.mark.parametrize("wrong, hint", [
    (lambda *a: bigram(*a, log=math.log), "nats"),
    (lambda *a: bigram(*a, log=math.log10), "base 10"),
    (lambda t, v, n, a: bigram(t, v, n, a, denominator_alpha=a), r"alpha \* vocab_size"),
    (lambda *a: bigram(*a, starts_from_all=True), "START with b"),
    (lambda *a: bigram(*a, total=True), "PER character"),
    (lambda t, v, n, a: bigram(t, v, n, a, over=len(v)), "M - 1 pairs"),
    (lambda t, v, n, a: bigram(v, v, n, a), "counts come from the training text"),
    (lambda t, v, n, a: bigram(t.flip(0), v.flip(0), n, a), "BEFORE each one"),
    (lambda t, v, n, a: bigram(t, v, 6, a), "right for the exercise's example"),
    (lambda t, v, n, a: unsmoothed(t, v, n), "infinite loss"),
])
def test_bigram_bits_names_each_mistake(wrong, hint):
    rejects(check.bigram_bits, wrong, match=hint)


def test_bigram_bits_names_the_unigram():
    def unigram(train_ids, valid_ids, vocab_size, alpha):
        counts = train_ids.bincount(minlength=vocab_size).double()
        return -((counts + alpha) / (counts.sum() + alpha * vocab_size))[valid_ids[1:]].log2().mean()

    rejects(check.bigram_bits, unigram, match="unigram")


def test_bigram_bits_refuses_the_library_the_exercise_forbids():
    rejects(check.bigram_bits, lambda t, v, n, a: ngram_bits_per_char(t, v, order=2, vocab_size=n, alpha=a),
            match="library's answer")


def test_bigram_bits_wrong_formulas_differ_on_the_example_itself():
    """The example alone tells each wrong count from the right one (the learner sees its number)."""
    example = inputs_tried(check.bigram_bits, bigram)[0]
    right = bigram(*example)
    for wrong in (dict(log=math.log), dict(starts_from_all=True), dict(denominator_alpha=example[3]),
                  dict(total=True), dict(over=len(example[1]))):
        assert abs(bigram(*example, **wrong) - right) > 1e-3, wrong

    def wrong_on_the_example_only(train_ids, valid_ids, vocab_size, alpha):
        on_example = torch.equal(train_ids, example[0]) and torch.equal(valid_ids, example[1])
        return bigram(train_ids, valid_ids, vocab_size, alpha, starts_from_all=on_example)

    rejects(check.bigram_bits, wrong_on_the_example_only, match="count each pair")


def test_bigram_bits_turns_errors_and_wrong_types_into_hints():
    rejects(check.bigram_bits, lambda *a: 1 / 0, match="ZeroDivisionError")
    rejects(check.bigram_bits, lambda *a: "2.39", match="one number")
    rejects(check.bigram_bits, lambda *a: None, match="one number")
    rejects(check.bigram_bits, 2.39, match="define a function bigram_bits")
    rejects(check.bigram_bits, ..., match="still empty")


# ---- exercise 2: top-p probabilities ----

top_p = top_p_sorted  # the right answer: sort, cumsum, scatter


def test_top_p_accepts_every_form(capsys):
    def masked_logits(logits, p):
        ordered, order = logits.sort(dim=-1, descending=True)
        probs = ordered.softmax(-1)
        masked = ordered.masked_fill(probs.cumsum(-1) - probs >= p, float("-inf"))
        return torch.empty_like(logits).scatter(-1, order, masked).softmax(-1)

    accepts(capsys, check.top_p_probabilities, top_p)
    accepts(capsys, check.top_p_probabilities, masked_logits)
    accepts(capsys, check.top_p_probabilities, lambda logits, p: top_p(logits, p).numpy())
    accepts(capsys, check.top_p_probabilities, lambda logits, p: top_p(logits.float(), p).tolist())


def test_top_p_tries_more_than_one_shape_and_dtype():
    tried = inputs_tried(check.top_p_probabilities, top_p)
    assert len({tuple(logits.shape) for logits, _ in tried}) >= 3
    assert {logits.dtype for logits, _ in tried} == {torch.float32, torch.float64}
    assert len({p for _, p in tried}) >= 3


@pytest.mark.parametrize("wrong, hint", [
    (top_p_variant(include_crossing=False), "SMALLEST set"),
    (top_p_variant(renormalise=False), "divided by their sum"),
    (top_p_variant(descending=False), "MOST likely"),
    (top_p_variant(sort=False), "order of probability"),
    (top_p_variant(dim=0), "last axis"),
    (lambda logits, p: logits.masked_fill(top_p(logits, p) == 0, float("-inf")), "not the masked logits"),
    (lambda logits, p: top_p(logits.reshape(-1, logits.shape[-1])[0], p), "shape of the logits"),
    (lambda logits, p: top_p(logits, 0.8), "softmax, sort from the most likely"),  # p of the example written in
])
def test_top_p_names_each_mistake(wrong, hint):
    rejects(check.top_p_probabilities, wrong, match=hint)


def test_top_p_names_a_mistake_only_when_every_input_shows_it():
    """Keeping the top token alone is the crossing-token mistake on the example (p = 0.8 is crossed by the second
    token) but not on the other inputs: the check must not name that mistake."""
    def top_one(logits, p):
        return top_p(logits, 1e-9)

    with pytest.raises(AssertionError) as failed:
        check.top_p_probabilities(top_one)
    assert "SMALLEST" not in str(failed.value) and "softmax, sort" in str(failed.value)


def test_top_p_turns_errors_into_hints():
    rejects(check.top_p_probabilities, lambda logits, p: logits.view(7, -1), match="RuntimeError")
    rejects(check.top_p_probabilities, lambda logits, p: None, match="None")
    rejects(check.top_p_probabilities, torch.zeros(6), match="define a function top_p_probabilities")


# ---- exercise 3: the share on earlier occurrences of the same character ----

repeat_share = repeat_variant()  # the right answer: a mask of earlier equal ids


def test_repeat_share_by_hand(capsys):
    """ids a b a a: query 2 (a) has key 0, query 3 (a) keys 0 and 2; queries 0, 1 have no earlier occurrence."""
    weights = torch.tensor([[[1.0, 0, 0, 0], [0.5, 0.5, 0, 0], [0.2, 0.3, 0.5, 0], [0.1, 0.2, 0.3, 0.4]]])
    ids = torch.tensor([[0, 1, 0, 0]])
    assert repeat_share(weights, ids).item() == pytest.approx(((0.2) + (0.1 + 0.3)) / 2)
    check.repeat_share(repeat_share)
    assert capsys.readouterr().out.startswith("Correct")


def test_repeat_share_accepts_every_form(capsys):
    accepts(capsys, check.repeat_share, repeat_loops)
    accepts(capsys, check.repeat_share, lambda w, ids: repeat_share(w, ids).item())
    accepts(capsys, check.repeat_share, lambda w, ids: repeat_share(w.float(), ids).reshape(1, 1))
    accepts(capsys, check.repeat_share, lambda w, ids: np.float64(repeat_share(w, ids)))


def test_repeat_share_tries_several_shapes_and_dtypes():
    tried = inputs_tried(check.repeat_share, repeat_share)
    assert len({tuple(w.shape) for w, _ in tried}) >= 3
    assert {w.dtype for w, _ in tried} == {torch.float32, torch.float64}


def largest_only(weights, ids):
    n = ids.shape[-1]
    same = (ids[:, :, None] == ids[:, None, :]) & torch.ones(n, n, dtype=torch.bool).tril(-1)
    return (weights * same).amax(-1)[same.any(-1)].mean()


def latest_only(weights, ids):
    n = ids.shape[-1]
    same = (ids[:, :, None] == ids[:, None, :]) & torch.ones(n, n, dtype=torch.bool).tril(-1)
    latest = torch.where(same, torch.arange(n), -1).amax(-1)  # (b, i): the latest earlier occurrence, or -1
    on_latest = weights.gather(-1, latest.clamp(min=0)[..., None])[..., 0]
    return on_latest[latest >= 0].mean()


@pytest.mark.parametrize("wrong, hint", [
    (lambda w, ids: repeat_variant(diagonal=0)(w, ids), "own position"),
    (lambda w, ids: repeat_variant(over_all=True)(w, ids), "HAVE an earlier occurrence"),
    (largest_only, "not only the largest"),
    (latest_only, "not only the latest"),
    (lambda w, ids: repeat_variant(diagonal=-2)(w, ids), "for each query i, add"),
    (lambda w, ids: repeat_share(w, ids).expand(2), "one number"),
])
def test_repeat_share_names_each_mistake(wrong, hint):
    rejects(check.repeat_share, wrong, match=hint)


def test_repeat_share_names_later_keys_only_where_they_carry_weight():
    """Causal weights are 0 on later keys, so counting them changes nothing unless the query itself is counted:
    counting every key of the same character is the 'own position' mistake."""
    rejects(check.repeat_share, lambda w, ids: (w * (ids[:, :, None] == ids[:, None, :])).sum(-1).mean(),
            match="own position")


def test_repeat_share_turns_errors_into_hints():
    rejects(check.repeat_share, lambda w, ids: w @ ids, match="RuntimeError")
    rejects(check.repeat_share, lambda w, ids: None, match="None")
    rejects(check.repeat_share, 0.3, match="define a function repeat_share")
