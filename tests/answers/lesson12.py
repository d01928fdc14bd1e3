"""Answers to lesson 12's exercises (a small GPT on real text): the add-alpha bigram baseline counted by hand
(12/1), the distribution top-p sampling draws from (12/2), and a head's share on earlier occurrences of the same
character (12/3)."""

import math
from collections import Counter

import numpy as np
import torch
import torch.nn.functional as F

from attention_lab.models.text_corpus import ngram_bits_per_char
from attention_lab.teaching.checks import lesson12

from . import GENERIC, Attempt


def stub(*args):
    raise NotImplementedError("write the body of this function, then run the check cell below")


# ---- 12/1: bigram_bits(train_ids, valid_ids, vocab_size, alpha) ------------------------------------------------

def bigram_table(train_ids, valid_ids, vocab_size, alpha):
    counts = torch.zeros(vocab_size, vocab_size, dtype=torch.float64)
    counts.index_put_((train_ids[:-1], train_ids[1:]), torch.ones(len(train_ids) - 1, dtype=torch.float64),
                      accumulate=True)
    p = (counts + alpha) / (counts.sum(1, keepdim=True) + alpha * vocab_size)
    return -p[valid_ids[:-1], valid_ids[1:]].log2().mean().item()


def bigram_counter(train_ids, valid_ids, vocab_size, alpha):
    train, valid = train_ids.tolist(), valid_ids.tolist()
    pairs, starts = Counter(zip(train, train[1:])), Counter(train[:-1])
    scores = [math.log2((pairs[b, c] + alpha) / (starts[b] + alpha * vocab_size)) for b, c in zip(valid, valid[1:])]
    return -sum(scores) / len(scores)


def bigram_numpy(train_ids, valid_ids, vocab_size, alpha):
    t, v = train_ids.numpy(), valid_ids.numpy()
    counts = np.zeros((vocab_size, vocab_size))
    np.add.at(counts, (t[:-1], t[1:]), 1)
    p = (counts + alpha) / (counts.sum(1, keepdims=True) + alpha * vocab_size)
    return np.float64(-np.log2(p[v[:-1], v[1:]]).mean())


def bigram_log_softmax(train_ids, valid_ids, vocab_size, alpha):
    """Natural logs, then divided by ln 2, returned as a 0-d float32 tensor."""
    counts = torch.zeros(vocab_size, vocab_size)
    counts.index_put_((train_ids[:-1], train_ids[1:]), torch.ones(len(train_ids) - 1), accumulate=True)
    log_p = (counts + alpha).log() - (counts.sum(1, keepdim=True) + alpha * vocab_size).log()
    return -log_p[valid_ids[:-1], valid_ids[1:]].mean() / math.log(2)


def bigram_variant(*, log=math.log2, contexts_from_all=False, smooth_denominator=True, mean=True,
                   divide_by_all=False, swap=False, train_on_valid=False):
    """The right counting with one mistake switched on."""
    def answer(train_ids, valid_ids, vocab_size, alpha):
        train, valid = train_ids.tolist(), valid_ids.tolist()
        if train_on_valid:
            train = valid
        if swap:
            train, valid = train[::-1], valid[::-1]
        pairs = Counter(zip(train, train[1:]))
        starts = Counter(train) if contexts_from_all else Counter(train[:-1])
        smoothing = alpha * vocab_size if smooth_denominator else alpha
        scores = [log((pairs[b, c] + alpha) / (starts[b] + smoothing)) for b, c in zip(valid, valid[1:])]
        total = -sum(scores)
        return total / (len(valid) if divide_by_all else len(scores)) if mean else total
    return answer


def unigram(train_ids, valid_ids, vocab_size, alpha):
    counts = train_ids.bincount(minlength=vocab_size).double()
    p = (counts + alpha) / (counts.sum() + alpha * vocab_size)
    return -p[valid_ids[1:]].log2().mean().item()


RIGHT_BIGRAM = [
    ("a table with index_put_", bigram_table),
    ("Counter of pairs", bigram_counter),
    ("numpy add.at", bigram_numpy),
    ("natural logs over ln 2, float32 tensor", bigram_log_softmax),
]

WRONG_BIGRAM = [
    ("nats", bigram_variant(log=math.log), "nats"),
    ("log10", bigram_variant(log=math.log10), "base 10"),
    ("alpha once in the denominator", bigram_variant(smooth_denominator=False), r"alpha \* vocab_size"),
    ("contexts counted over every character", bigram_variant(contexts_from_all=True), "START with b"),
    ("summed, not averaged", bigram_variant(mean=False), "PER character"),
    ("divided by M", bigram_variant(divide_by_all=True), "M - 1 pairs"),
    ("counted on validation", bigram_variant(train_on_valid=True), "counts come from the training text"),
    ("which character comes before", bigram_variant(swap=True), "BEFORE each one"),
    ("a unigram", unigram, "unigram"),
    ("alpha fixed at 0.5", lambda t, v, n, a: bigram_table(t, v, n, 0.5), "right for the exercise's example"),
    ("no smoothing", lambda t, v, n, a: bigram_table(t, v, n, 0.0), "infinite loss"),
    ("the library", lambda t, v, n, a: ngram_bits_per_char(t, v, order=2, vocab_size=n, alpha=a), "library's answer"),
    ("the example's number", lambda *a: 2.3919, GENERIC),
    ("a string", lambda *a: "2.39 bits", "one number"),
    ("a division by zero", lambda *a: 1 / 0, "ZeroDivisionError"),
    ("the stub", stub, "NotImplementedError"),
    ("no return", lambda *a: None, "one number"),
    ("the number, not a function", 2.3919, "define a function"),
]

# ---- 12/2: top_p_probabilities(logits, p) -----------------------------------------------------------------------


def top_p_sorted(logits, p):
    probs = F.softmax(logits, dim=-1)
    ordered, order = probs.sort(dim=-1, descending=True)
    keep = ordered.cumsum(-1) - ordered < p
    kept = torch.zeros_like(probs).scatter(-1, order, ordered * keep)
    return kept / kept.sum(-1, keepdim=True)


def top_p_masked_logits(logits, p):
    """As samplers write it: mask the logits outside the nucleus with -inf, then softmax again."""
    ordered, order = logits.sort(dim=-1, descending=True)
    probs = ordered.softmax(-1)
    drop = probs.cumsum(-1) - probs >= p
    masked = ordered.masked_fill(drop, float("-inf"))
    return torch.empty_like(logits).scatter(-1, order, masked).softmax(-1)


def top_p_numpy(logits, p):
    x = logits.numpy()
    probs = np.exp(x - x.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    order = np.argsort(-probs, axis=-1)
    ordered = np.take_along_axis(probs, order, -1)
    keep_sorted = np.cumsum(ordered, -1) - ordered < p
    keep = np.zeros_like(keep_sorted)
    np.put_along_axis(keep, order, keep_sorted, -1)
    kept = np.where(keep, probs, 0.0)
    return kept / kept.sum(-1, keepdims=True)


def top_p_variant(*, include_crossing=True, renormalise=True, descending=True, sort=True, dim=-1):
    def answer(logits, p):
        probs = F.softmax(logits, dim=dim)
        if sort:
            ordered, order = probs.sort(dim=-1, descending=descending)
        else:
            ordered, order = probs, torch.arange(probs.shape[-1]).expand_as(probs)
        cumulative = ordered.cumsum(-1)
        keep_sorted = cumulative - ordered < p if include_crossing else cumulative < p
        kept = torch.zeros_like(probs).scatter(-1, order, ordered * keep_sorted)
        return kept / kept.sum(-1, keepdim=True) if renormalise else kept
    return answer


RIGHT_TOP_P = [
    ("sort, cumsum, scatter", top_p_sorted),
    ("masked logits, softmax again", top_p_masked_logits),
    ("numpy", top_p_numpy),
    ("in float32", lambda logits, p: top_p_sorted(logits.float(), p)),
]

WRONG_TOP_P = [
    ("without the crossing token", top_p_variant(include_crossing=False), "SMALLEST set"),
    ("not renormalised", top_p_variant(renormalise=False), "divided by their sum"),
    ("least likely first", top_p_variant(descending=False), "MOST likely"),
    ("in vocabulary order", top_p_variant(sort=False), "order of probability"),
    ("softmax over the first axis", top_p_variant(dim=0), "last axis"),
    ("the masked logits", lambda logits, p: logits.masked_fill(top_p_sorted(logits, p) == 0, float("-inf")),
     "not the masked logits"),
    ("the first row only", lambda logits, p: top_p_sorted(logits.reshape(-1, logits.shape[-1])[0], p),
     "shape of the logits"),
    ("top-2 always", lambda logits, p: top_p_sorted(logits, 0.0001) + 0 * logits, GENERIC),
    ("a division by zero", lambda logits, p: 1 / 0, "ZeroDivisionError"),
    ("the stub", stub, "NotImplementedError"),
    ("no return", lambda logits, p: None, "None"),
]

# ---- 12/3: repeat_share(weights, ids) ----------------------------------------------------------------------------


def repeat_variant(*, diagonal=-1, over_all=False, largest=False):
    def answer(weights, ids):
        n = ids.shape[-1]
        same = (ids[:, :, None] == ids[:, None, :]) & torch.ones(n, n, dtype=torch.bool).tril(diagonal)
        on_same = weights * same
        totals = on_same.amax(-1) if largest else on_same.sum(-1)
        return totals.mean() if over_all else totals[same.any(-1)].mean()
    return answer


def repeat_loops(weights, ids):
    totals = []
    for b in range(ids.shape[0]):
        for i in range(ids.shape[1]):
            earlier = [j for j in range(i) if ids[b, j] == ids[b, i]]
            if earlier:
                totals.append(sum(float(weights[b, i, j]) for j in earlier))
    return sum(totals) / len(totals)


def repeat_einsum(weights, ids):
    one_hot = F.one_hot(ids).to(weights.dtype)  # (b, n, symbols)
    same = torch.einsum("bis,bjs->bij", one_hot, one_hot).tril(-1)
    has = same.sum(-1) > 0
    return (weights * same).sum(-1)[has].mean()


def repeat_latest(weights, ids):
    n = ids.shape[-1]
    same = (ids[:, :, None] == ids[:, None, :]) & torch.ones(n, n, dtype=torch.bool).tril(-1)
    latest = torch.where(same, torch.arange(n), -1).amax(-1)
    return weights.gather(-1, latest.clamp(min=0)[..., None])[..., 0][latest >= 0].mean()


RIGHT_REPEAT = [
    ("a mask of earlier equal ids", repeat_variant()),
    ("loops", repeat_loops),
    ("one-hot einsum", repeat_einsum),
    ("a Python float", lambda w, ids: repeat_variant()(w, ids).item()),
]

WRONG_REPEAT = [
    ("the query itself counted", repeat_variant(diagonal=0), "own position"),
    ("every query in the mean", repeat_variant(over_all=True), "HAVE an earlier occurrence"),
    ("the largest weight only", repeat_variant(largest=True), "not only the largest"),
    ("the latest occurrence only", repeat_latest, "not only the latest"),
    ("two back or more", repeat_variant(diagonal=-2), GENERIC),
    ("one value per window", lambda w, ids: repeat_variant()(w, ids).expand(ids.shape[0]), "one number"),
    ("a matrix product of weights and ids", lambda w, ids: w @ ids, "RuntimeError"),
    ("the stub", stub, "NotImplementedError"),
    ("no return", lambda w, ids: None, "None"),
]

ATTEMPTS = [
    *(Attempt("12/1", label, lesson12.bigram_bits, fn, right=True) for label, fn in RIGHT_BIGRAM),
    *(Attempt("12/1", label, lesson12.bigram_bits, fn, hint=hint) for label, fn, hint in WRONG_BIGRAM),
    *(Attempt("12/2", label, lesson12.top_p_probabilities, fn, right=True) for label, fn in RIGHT_TOP_P),
    *(Attempt("12/2", label, lesson12.top_p_probabilities, fn, hint=hint) for label, fn, hint in WRONG_TOP_P),
    *(Attempt("12/3", label, lesson12.repeat_share, fn, right=True) for label, fn in RIGHT_REPEAT),
    *(Attempt("12/3", label, lesson12.repeat_share, fn, hint=hint) for label, fn, hint in WRONG_REPEAT),
]
