"""Lesson 06 checks: each answer is a function of the sizes, tried on sizes where the common wrong formulas give
different numbers (from the right one and from each other); the formula of exercise 2 is what the meter measures;
a number typed in, a size written into the function or the library's own answer does not pass. The corpus
(tests/answers/lesson06.py) puts every common mistake through the checks; this file proves the properties behind
it."""

from __future__ import annotations

import itertools

import pytest
import torch
from _check_helpers import accepts, rejects

from attention_lab import set_language
from attention_lab.measure.memory import measure_peak_memory
from attention_lab.teaching.checks import lesson06 as check

FLOP_CASES = [{**case, "head_dim": d} for case, d in zip(check._COUNT_CASES, check._HEAD_DIMS)]
EXERCISES = {
    "score_count": (check._COUNT_CASES, check._scores, check._SCORE_MISTAKES),
    "flop_count": (FLOP_CASES, check._flops, check._FLOP_MISTAKES),
    "chunked_peak": (check._PEAK_CASES, check._peak, check._PEAK_MISTAKES),
    "largest_batch": (check._BATCH_CASES, check._batch, check._BATCH_MISTAKES),
}


@pytest.mark.parametrize("name", EXERCISES)
def test_every_wrong_formula_gives_other_numbers_than_the_right_one_and_than_each_other(name):
    cases, right, mistakes = EXERCISES[name]
    results = [tuple(f(**case) for case in cases) for f in (right, *(f for f, _ in mistakes))]
    for (a, first), (b, second) in itertools.combinations(enumerate(results), 2):
        assert first != second, f"{name}: formulas {a} and {b} agree on every case: {first}"


@pytest.mark.parametrize("name", EXERCISES)
def test_the_exercise_example_alone_tells_the_wrong_formulas_apart_from_the_right_one(name):
    """The first case is the one the lesson names: no common wrong formula gives its right answer (but "a batch of
    at least one", which differs only where not even one sequence fits: the third case)."""
    cases, right, mistakes = EXERCISES[name]
    coincide = [index for index, (f, _) in enumerate(mistakes) if f(**cases[0]) == right(**cases[0])]
    if name == "largest_batch":
        assert coincide == [1] and mistakes[1][0](**cases[2]) != right(**cases[2])
        return
    assert not coincide, f"{name}: mistakes {coincide} give the right answer on the exercise's own sizes"


def test_the_count_cases_are_not_answers_printed_by_the_lesson():
    """Section 1 prints self-attention counts for n = 128 ... 4096 with 8 heads and d = 64, and cell 5 the FLOPs at
    n = 512: the exercise's cross-attention answers are none of those numbers."""
    printed = set()
    for n in (128, 256, 512, 1024, 2048, 4096):
        printed |= {n * n, 8 * n * n, 4 * 8 * n * n * 64}
    first = check._COUNT_CASES[0]
    assert check._scores(**first) not in printed and check._flops(**FLOP_CASES[0]) not in printed


@pytest.mark.parametrize("case", check._PEAK_CASES, ids=lambda c: f"n={c['n']},chunk={c['chunk']}")
def test_the_chunked_peak_formula_is_what_the_meter_measures(case):
    dtype = {8: torch.float64, 4: torch.float32, 2: torch.bfloat16}[case["item_bytes"]]
    q, k, v = torch.randn(3, case["batch"], case["heads"], case["n"], case["head_dim"], dtype=dtype).unbind(0)
    measured = measure_peak_memory(check._chunked_attention, q, k, v, case["chunk"]).peak_bytes
    assert measured == check._peak(**case)


def test_the_checks_copy_of_chunked_attention_is_attention():
    q, k, v = torch.randn(3, 2, 3, 50, 8, dtype=torch.float64).unbind(0)
    expected = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(check._chunked_attention(q, k, v, 7), expected)


def right_scores(n_queries, n_keys, num_heads):
    return n_queries * n_keys * num_heads


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
    set_language("zh-CN")
    try:
        with pytest.raises(AssertionError) as error:
            check.score_count(hard_coded)
    finally:
        set_language("en")
    text = str(error.value)
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

    def peak(batch, heads, n, head_dim, chunk, item_bytes):
        return check._peak(batch, heads, n, head_dim, chunk, item_bytes)

    def batch(budget_bytes, n, num_heads, head_dim, layers):
        return budget_bytes // (num_heads * 4 * (2 * n * n + n * head_dim))

    outputs = {}
    for name, fn, answer in (("scores", check.score_count, right_scores), ("flops", check.flop_count, cross_flops),
                             ("peak", check.chunked_peak, peak), ("batch", check.largest_batch, batch)):
        fn(answer)
        outputs[name] = capsys.readouterr().out
        assert outputs[name].startswith("Correct:")
    answers = {"scores": f"{check._scores(**check._COUNT_CASES[0]):,}", "flops": f"{check._flops(**FLOP_CASES[0]):,}",
               "batch": "a batch of 30"}
    for name, text in outputs.items():
        assert not [other for other, value in answers.items() if other != name and value in text], name


def test_chunked_peak_leaves_the_global_random_numbers_alone():
    torch.manual_seed(5)
    before = torch.rand(3)
    torch.manual_seed(5)
    check.chunked_peak(lambda *sizes: check._peak(*sizes))
    assert torch.equal(torch.rand(3), before)


def test_the_lessons_chunked_attention_is_the_one_the_check_measures():
    """Exercise 2's cell defines chunked_attention; the check keeps its own copy: both peak at the formula."""
    import nbformat
    from _student_exercises import NOTEBOOKS

    nb = nbformat.read(NOTEBOOKS / "06_cost_of_attention.ipynb", as_version=4)
    sources = {c.get("id"): c.source for c in nb.cells}
    cell = next(c.source for c in nb.cells if c.cell_type == "code" and "def chunked_attention" in c.source)
    names = {"torch": torch}
    exec(compile(sources["06-005"].split("\n\n\n")[0], "06-005", "exec"), names)  # def naive_attention
    exec(compile(cell, "chunked_attention", "exec"), names)
    for case in check._PEAK_CASES[:2]:
        dtype = {8: torch.float64, 4: torch.float32}[case["item_bytes"]]
        q, k, v = torch.randn(3, case["batch"], case["heads"], case["n"], case["head_dim"], dtype=dtype).unbind(0)
        assert measure_peak_memory(names["chunked_attention"], q, k, v, case["chunk"]).peak_bytes == check._peak(**case)
