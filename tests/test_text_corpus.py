"""Lesson 12's corpus: the split by file, the character vocabulary, the count baselines (figures worked out by hand
on a made-up corpus), the training windows, the bracket pairs, and clear errors for bad input."""

import math
import sysconfig
from pathlib import Path

import pytest
import torch

from attention_lab.models.tasks import make_generator
from attention_lab.models.text_corpus import (
    TRAIN_MODULES,
    UNKNOWN,
    VALIDATION_MODULES,
    CharVocabulary,
    TextWindows,
    bits,
    bracket_pairs,
    ngram_bits_per_char,
    read_stdlib,
)


@pytest.fixture
def tiny_library(tmp_path):
    """A made-up standard library of three modules."""
    for name, text in {"one": "abab", "two": "ba(", "three": "ab\u00e9"}.items():
        (tmp_path / f"{name}.py").write_text(text, encoding="utf-8")
    return tmp_path


def test_the_split_is_by_file_in_the_order_given(tiny_library):
    corpus = read_stdlib(("two", "one"), ("three",), root=tiny_library)
    assert corpus.train == "ba(abab" and corpus.validation == "ab\u00e9"
    assert corpus.train_files == ("two.py", "one.py") and corpus.validation_files == ("three.py",)


def test_the_lessons_modules_are_disjoint_sorted_and_present_here():
    assert not set(TRAIN_MODULES) & set(VALIDATION_MODULES)
    assert list(TRAIN_MODULES) == sorted(TRAIN_MODULES) and list(VALIDATION_MODULES) == sorted(VALIDATION_MODULES)
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    corpus = read_stdlib()
    assert corpus.validation.startswith((stdlib / f"{VALIDATION_MODULES[0]}.py").read_text(encoding="utf-8"))
    assert 300_000 < len(corpus.train) < 1_500_000 and 20_000 < len(corpus.validation) < 80_000


@pytest.mark.parametrize("train, validation, error, match", [
    (("one",), ("one",), ValueError, r"read_stdlib\(\): train and validation must be different files, got \['one'\]"),
    (("one", "missing"), ("two",), FileNotFoundError, r"read_stdlib\(\): expected the module file .*missing\.py"),
    ("one", ("two",), TypeError, r"read_stdlib\(\): train_modules must be a non-empty list of module names"),
    (("one",), (), TypeError, r"read_stdlib\(\): validation_modules must be a non-empty list"),
])
def test_read_stdlib_refuses_bad_lists(tiny_library, train, validation, error, match):
    with pytest.raises(error, match=match):
        read_stdlib(train, validation, root=tiny_library)


def test_the_vocabulary_is_the_training_characters_sorted_after_the_unknown_id():
    vocab = CharVocabulary("baab(")
    assert vocab.chars == ("\ufffd", "(", "a", "b") and len(vocab) == 4
    assert vocab.encode("ab(").tolist() == [2, 3, 1]
    assert vocab.decode(vocab.encode("a(ba")) == "a(ba"
    assert "4 ids" in repr(vocab)


def test_a_character_never_seen_in_training_gets_the_unknown_id():
    vocab = CharVocabulary("abab")
    ids = vocab.encode("abzé")
    assert ids.tolist() == [1, 2, UNKNOWN, UNKNOWN] and ids.dtype == torch.long
    assert vocab.decode(ids) == "ab\ufffd\ufffd"


@pytest.mark.parametrize("call, error, match", [
    (lambda: CharVocabulary(""), ValueError, r"CharVocabulary\(\): text must be a non-empty string"),
    (lambda: CharVocabulary(["a"]), TypeError, r"CharVocabulary\(\): text must be a non-empty string"),
    (lambda: CharVocabulary("ab").encode(3), TypeError, r"CharVocabulary.encode\(\): text must be a string"),
    (lambda: CharVocabulary("ab").decode(torch.tensor([3])), ValueError, r"ids in \[0, vocab_size=3\)"),
    (lambda: CharVocabulary("ab").decode(torch.tensor([[1]])), ValueError, r"ids must have shape \(n,\)"),
    (lambda: CharVocabulary("ab").decode([1]), TypeError, r"CharVocabulary.decode\(\): ids must be a torch.Tensor"),
])
def test_the_vocabulary_refuses_bad_input(call, error, match):
    with pytest.raises(error, match=match):
        call()


# ---- the count baselines: a corpus small enough to work out by hand ----
# training "abab" (ids a=1, b=2, V=3 with the unknown id), validation "ab"

def _ids(text):
    return CharVocabulary("abab").encode(text)


def test_the_unigram_by_hand():
    # counts a=2, b=2 of 4; p(a) = p(b) = (2 + 1) / (4 + 3 * 1) = 3/7 with alpha = 1: log2(7/3) bits each
    got = ngram_bits_per_char(_ids("abab"), _ids("ab"), order=1, vocab_size=3, alpha=1.0)
    assert got == pytest.approx(math.log2(7 / 3), rel=1e-12)


def test_the_bigram_by_hand():
    # pairs ab, ba, ab: count(a, b) = 2 of count(a) = 2 pairs starting with a; p(b | a) = (2 + 1) / (2 + 3)
    got = ngram_bits_per_char(_ids("abab"), _ids("ab"), order=2, vocab_size=3, alpha=1.0)
    assert got == pytest.approx(math.log2(5 / 3), rel=1e-12)
    # an unseen pair (b, b) after a seen context: (0 + 0.5) / (1 + 1.5); and (a, a): (0 + 0.5) / (2 + 1.5)
    got = ngram_bits_per_char(_ids("abab"), _ids("bba"), order=2, vocab_size=3, alpha=0.5)
    assert got == pytest.approx((math.log2(2.5 / 0.5) + math.log2(2.5 / 1.5)) / 2, rel=1e-12)


def _brute_force(train, valid, order, vocab_size, alpha):
    train, valid = train.tolist(), valid.tolist()
    pairs, contexts = {}, {}
    for t in range(order - 1, len(train)):
        context = tuple(train[t - order + 1:t])
        pairs[context, train[t]] = pairs.get((context, train[t]), 0) + 1
        contexts[context] = contexts.get(context, 0) + 1
    total = 0.0
    for t in range(order - 1, len(valid)):
        context = tuple(valid[t - order + 1:t])
        p = (pairs.get((context, valid[t]), 0) + alpha) / (contexts.get(context, 0) + alpha * vocab_size)
        total -= math.log2(p)
    return total / (len(valid) - order + 1)


@pytest.mark.parametrize("order, vocab_size", [(1, 5), (2, 5), (3, 6), (4, 70)])  # (4, 70): the sparse path
def test_the_counts_agree_with_a_plain_python_count(order, vocab_size):
    generator = make_generator(order)
    train = torch.randint(0, 4, (300,), generator=generator)  # a few ids only, so contexts repeat
    valid = torch.randint(0, vocab_size, (97,), generator=generator)  # some ids never seen in training
    got = ngram_bits_per_char(train, valid, order=order, vocab_size=vocab_size, alpha=0.3)
    assert got == pytest.approx(_brute_force(train, valid, order, vocab_size, 0.3), rel=1e-10)


def test_more_context_means_fewer_bits_on_the_lessons_corpus():
    corpus = read_stdlib()
    vocab = CharVocabulary(corpus.train)
    train, valid = vocab.encode(corpus.train), vocab.encode(corpus.validation)
    values = [ngram_bits_per_char(train, valid, order=order, vocab_size=len(vocab)) for order in (1, 2, 3)]
    assert values[0] - 0.5 > values[1] > values[2] + 0.5 and values[0] < math.log2(len(vocab))


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(order=0, vocab_size=3), ValueError, r"ngram_bits_per_char\(\): order must be >= 1"),
    (dict(order=2, vocab_size=3, alpha=0), ValueError, r"alpha must be a finite number > 0.*unseen character"),
    (dict(order=2, vocab_size=2), ValueError, r"train_ids must hold ids in \[0, vocab_size=2\)"),
    (dict(order=5, vocab_size=3), ValueError, r"validation_ids must have shape \(N,\) with N >= order=5"),
])
def test_the_baselines_refuse_bad_input(kwargs, error, match):
    with pytest.raises(error, match=match):
        ngram_bits_per_char(_ids("ababab"), _ids("abab"), **kwargs)


def test_the_baselines_refuse_an_order_whose_counts_cannot_be_indexed():
    ids = torch.zeros(20, dtype=torch.long)
    with pytest.raises(ValueError, match=r"vocab_size \*\* order must stay below 2\*\*62 .*, got 200\*\*9"):
        ngram_bits_per_char(ids, ids, order=9, vocab_size=200)


def test_the_baselines_refuse_float_ids():
    with pytest.raises(TypeError, match=r"ngram_bits_per_char\(\): train_ids must be integer ids"):
        ngram_bits_per_char(torch.tensor([1.0, 2.0]), _ids("ab"), order=1, vocab_size=3)


def test_bits_are_nats_over_ln2():
    assert bits(math.log(8)) == pytest.approx(3.0)


# ---- training windows ----

def test_windows_predict_the_next_character_and_follow_the_seed():
    ids = torch.arange(50)
    task = TextWindows(ids, 8)
    tokens, targets = task.sample(5, generator=make_generator(3))
    assert tokens.shape == targets.shape == (5, 8)
    torch.testing.assert_close(targets, tokens + 1)  # the next id, since ids count up
    assert torch.equal((tokens[:, 1:] - tokens[:, :-1]), torch.ones(5, 7, dtype=torch.long))  # contiguous
    torch.testing.assert_close(task.sample(5, generator=make_generator(3))[0], tokens)


@pytest.mark.parametrize("ids, seq_len, error, match", [
    (torch.arange(8), 8, ValueError, r"TextWindows\(\): ids must be a \(N,\) long tensor with N > seq_len=8"),
    (torch.arange(20.0), 4, ValueError, r"got dtype torch.float32"),
    ([1, 2, 3], 1, TypeError, r"TextWindows\(\): ids must be a torch.Tensor"),
    (torch.arange(20), 0, ValueError, r"TextWindows\(\): seq_len must be >= 1"),
])
def test_windows_refuse_bad_input(ids, seq_len, error, match):
    with pytest.raises(error, match=match):
        TextWindows(ids, seq_len)


# ---- bracket pairs ----

def test_bracket_pairs_match_the_innermost_open_bracket_of_their_kind():
    assert bracket_pairs("f(a[1], {b: (c)})") == [(3, 5), (12, 14), (8, 15), (1, 16)]
    assert bracket_pairs("a)(") == []  # a closing bracket with nothing open is skipped
    assert bracket_pairs("( ]") == []  # a closing bracket of another kind is skipped, the open one stays open
    assert bracket_pairs("([)]") == [(1, 3)]


def test_bracket_pairs_refuse_a_non_string():
    with pytest.raises(TypeError, match=r"bracket_pairs\(\): text must be a string"):
        bracket_pairs(["(", ")"])
