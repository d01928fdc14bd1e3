"""Lesson 06 checks: each answer is a function of the sizes, tried on sizes where the common wrong formulas give
different numbers (from the right one and from each other: the corpus, tests/answers/lesson06.py, gives every
mistake with the hint it must get, so a mistake equal to the right formula would be accepted there and two equal
mistakes would share a hint); the exercise's own example tells them apart too; the formula of exercise 2 is what
the meter measures; a number typed in, a size written into the function or the library's own answer does not pass.
The cases a check tries are read as the learner's function sees them (_check_helpers.inputs_tried)."""

from __future__ import annotations

import re

import pytest
import torch
from _check_helpers import accepts, hint_in, inputs_tried, only_on, rejects
from answers import lesson06 as corpus

from attention_lab.measure.memory import measure_peak_memory
from attention_lab.teaching.checks import lesson06 as check


def right_scores(n_queries, n_keys, num_heads):
    return n_queries * n_keys * num_heads


def right_flops(n_queries, n_keys, num_heads, head_dim):
    return 4 * n_queries * n_keys * num_heads * head_dim


def right_peak(batch, heads, n, head_dim, chunk, item_bytes):
    """out, then one chunk's scores and weights (chunk x n each) and its output, per sequence and head."""
    rows = min(chunk, n)
    return batch * heads * item_bytes * (n * head_dim + 2 * rows * n + rows * head_dim)


def right_batch(budget_bytes, n, num_heads, head_dim, layers):
    return budget_bytes // (num_heads * 4 * (2 * n * n + n * head_dim))


EXERCISES = {
    "score_count": (check.score_count, right_scores, corpus.WRONG_SCORES),
    "flop_count": (check.flop_count, right_flops, corpus.WRONG_FLOPS),
    "chunked_peak": (check.chunked_peak, right_peak, corpus.WRONG_PEAK),
    "largest_batch": (check.largest_batch, right_batch, corpus.WRONG_BATCH),
}
PEAK_CASES = inputs_tried(check.chunked_peak, right_peak)  # (batch, heads, n, head_dim, chunk, item_bytes) each
DTYPES = {8: torch.float64, 4: torch.float32, 2: torch.bfloat16}


@pytest.mark.parametrize("name", EXERCISES)
def test_the_exercise_example_alone_tells_the_wrong_formulas_apart_from_the_right_one(name):
    """The first case is the one the lesson names: every wrong formula of the corpus, given on that case only (and
    right on every other), is refused; but "a batch of at least one", which differs only where not even one
    sequence fits (the third case). (The corpus's answers typed in from the example are right there by design.)"""
    exercise, right, wrong = EXERCISES[name]
    example = inputs_tried(exercise, right)[0]
    accepted = []
    for label, formula, _ in wrong:
        if not callable(formula) or label.startswith("the example's"):
            continue
        try:
            exercise(only_on(example, formula, right))
        except AssertionError:
            continue
        accepted.append(label)
    assert accepted == (["at least one"] if name == "largest_batch" else []), (name, accepted)


def test_the_count_cases_are_not_answers_printed_by_the_lesson():
    """Section 1 prints self-attention counts for n = 128 ... 4096 with 8 heads and d = 64, and cell 5 the FLOPs at
    n = 512: the exercise's cross-attention answers are none of those numbers."""
    printed = set()
    for n in (128, 256, 512, 1024, 2048, 4096):
        printed |= {n * n, 8 * n * n, 4 * 8 * n * n * 64}
    assert right_scores(*inputs_tried(check.score_count, right_scores)[0]) not in printed
    assert right_flops(*inputs_tried(check.flop_count, right_flops)[0]) not in printed


def lesson_code() -> dict:
    """The lesson's naive_attention (06-005) and exercise 2's chunked_attention, as the notebook defines them."""
    import nbformat
    from _student_exercises import NOTEBOOKS

    nb = nbformat.read(NOTEBOOKS / "06_cost_of_attention.ipynb", as_version=4)
    sources = {c.get("id"): c.source for c in nb.cells}
    cell = next(c.source for c in nb.cells if c.cell_type == "code" and "def chunked_attention" in c.source)
    names = {"torch": torch}
    exec(compile(sources["06-005"].split("\n\n\n")[0], "06-005", "exec"), names)  # def naive_attention
    exec(compile(cell, "chunked_attention", "exec"), names)
    return names


@pytest.mark.parametrize("case", PEAK_CASES, ids=lambda c: f"n={c[2]},chunk={c[4]}")
def test_the_chunked_peak_formula_is_what_the_meter_measures(case):
    """On every case the check tries, the lesson's chunked_attention peaks at the formula the check accepts."""
    batch, heads, n, head_dim, chunk, item_bytes = case
    q, k, v = torch.randn(3, batch, heads, n, head_dim, dtype=DTYPES[item_bytes]).unbind(0)
    measured = measure_peak_memory(lesson_code()["chunked_attention"], q, k, v, chunk).peak_bytes
    assert measured == right_peak(*case)


def test_the_lessons_chunked_attention_is_attention():
    q, k, v = torch.randn(3, 2, 3, 50, 8, dtype=torch.float64).unbind(0)
    expected = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(lesson_code()["chunked_attention"](q, k, v, 7), expected)


def test_the_check_measures_what_the_formula_predicts(capsys):
    """The check measures its own copy of chunked_attention on the first two cases: the right formula's predictions
    are what it measured."""
    check.chunked_peak(right_peak)
    printed = capsys.readouterr().out
    said = re.search(r"you predicted (.+) and (.+) for the first two sizes; the meter measured (.+) and (.+)$", printed)
    assert said and said.group(1, 2) == said.group(3, 4), printed


def test_a_right_function_passes_and_a_hard_coded_one_does_not(capsys):
    accepts(capsys, check.score_count, right_scores)
    rejects(check.score_count, lambda n_queries, n_keys, num_heads: 4_032_000,
            match="same number when n_queries or n_keys or num_heads doubles")
    rejects(check.score_count, lambda n_queries, n_keys, num_heads: 6 * n_queries * n_keys,
            match="same number when num_heads doubles")


def test_the_hint_for_an_ignored_argument_is_all_in_the_learners_language():
    hard_coded = lambda n_queries, n_keys, num_heads: 4_032_000
    rejects(check.score_count, hard_coded,
            match="your function gives the same number when n_queries or n_keys or num_heads doubles")
    text = hint_in("zh-CN", check.score_count, hard_coded)
    assert "n_queries 或 n_keys 或 num_heads 翻倍时，你的函数给出的数" in text
    assert " or " not in text and "your function" not in text


def test_a_function_that_calls_the_library_is_asked_for_the_arithmetic():
    from attention_lab.measure.cost import attention_flops

    def cross_flops(n_queries, n_keys, num_heads, head_dim):
        return attention_flops(n_queries, n_keys, head_dim=head_dim, num_heads=num_heads)

    rejects(check.flop_count, cross_flops, match="calls attention_flops")


def test_the_first_try_at_every_exercise_gets_a_one_line_hint():
    def untouched(*args):
        raise NotImplementedError("write the body of this function, then run the check cell below")

    for exercise in (check.score_count, check.flop_count, check.chunked_peak, check.largest_batch):
        rejects(exercise, untouched, match="still raises NotImplementedError")
        rejects(exercise, ..., match="still empty")


def test_success_lines_state_no_other_exercises_answer(capsys):
    def cross_flops(n_queries, n_keys, num_heads, head_dim):
        return 4 * n_queries * n_keys * num_heads * head_dim

    outputs = {}
    for name, fn, answer in (("scores", check.score_count, right_scores), ("flops", check.flop_count, cross_flops),
                             ("peak", check.chunked_peak, right_peak), ("batch", check.largest_batch, right_batch)):
        fn(answer)
        outputs[name] = capsys.readouterr().out
        assert outputs[name].startswith("Correct:")
    answers = {"scores": f"{right_scores(*inputs_tried(check.score_count, right_scores)[0]):,}",
               "flops": f"{right_flops(*inputs_tried(check.flop_count, right_flops)[0]):,}", "batch": "a batch of 30"}
    for name, text in outputs.items():
        assert not [other for other, value in answers.items() if other != name and value in text], name


def test_chunked_peak_leaves_the_global_random_numbers_alone():
    torch.manual_seed(5)
    before = torch.rand(3)
    torch.manual_seed(5)
    check.chunked_peak(right_peak)
    assert torch.equal(torch.rand(3), before)


