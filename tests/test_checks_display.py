"""What a learner sees when a check fails: one line, "Not yet: <hint>", in plain Python and under IPython (a real
kernel, as in JupyterLab and nbconvert), never a frame of the package; and a hint, never a traceback, for an
untouched stub, a missing return or an error inside the learner's own code. Everything goes through the lessons'
checks, as a learner meets it (lesson 06's score_count takes any function of three sizes)."""

import nbformat
import pytest
import torch
from nbclient import NotebookClient

from attention_lab.teaching.checks import NotYet, lesson00, lesson06


def hint_of(check, *args, **kwargs) -> str:
    with pytest.raises(NotYet) as error:
        check(*args, **kwargs)
    return str(error.value)


def test_a_failed_check_is_an_assertion_error_shown_as_one_line():
    with pytest.raises(AssertionError) as error:  # nbgrader, pytest and "Run All" stop on it
        lesson00.weights_shape("5 by 5", n_tokens=5)
    lines = error.value._render_traceback_()
    assert len(lines) == 1
    assert lines[0].startswith("\x1b[1;31mNot yet:\x1b[0m write the shape as a tuple")
    assert str(error.value) == "Not yet: " + error.value.hint


@pytest.mark.slow
def test_ipython_shows_only_the_hint_without_frames_of_the_package(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("from attention_lab.teaching.checks import lesson00\n"
                                          "lesson00.weights_shape((5, 4), n_tokens=5)")]
    nb.cells[0].metadata["tags"] = ["raises-exception"]
    NotebookClient(nb, timeout=120, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    (error,) = [o for o in nb.cells[0].outputs if o.output_type == "error"]
    assert len(error.traceback) == 1, error.traceback
    assert error.traceback[0].startswith("\x1b[1;31mNot yet:\x1b[0m ")
    assert "attention_lab" not in "".join(error.traceback)
    assert "_core.py" not in "".join(error.traceback) and "n_queries" not in "".join(error.traceback)


@pytest.mark.parametrize("placeholder", [Ellipsis, NotImplemented])
def test_an_untouched_stub_says_what_to_write_and_where(placeholder):
    weights = torch.full((3, 3), 1 / 3)
    for text in (hint_of(lesson00.weights_shape, placeholder, n_tokens=5),
                 hint_of(lesson00.attention_received, placeholder, weights),
                 hint_of(lesson06.score_count, placeholder)):
        assert text == ("Not yet: your answer is still empty: the answer cell above still holds the placeholder `...`; "
                        "write your answer in its place, run that cell, then run this check again")


def test_none_is_explained_as_a_missing_return():
    def cross_scores(n_queries, n_keys, num_heads):
        n_queries * n_keys * num_heads  # computed, never returned

    assert "without a `return`" in hint_of(lesson00.attention_received, None, torch.eye(3))
    assert "without a `return`" in hint_of(lesson00.weights_shape, (5, None), n_tokens=5)  # an entry of the answer
    assert "without a `return`" in hint_of(lesson06.score_count, cross_scores)


def test_the_learner_is_named_by_their_own_function_name():
    def cross_scores(n_queries, n_keys, num_heads):
        raise ZeroDivisionError("oops")

    text = hint_of(lesson06.score_count, cross_scores)
    assert text.startswith("Not yet: your cross_scores raised ZeroDivisionError (oops) when the check called it")
    assert "your function raised" in hint_of(lesson06.score_count, lambda n_queries, n_keys, num_heads: 1 / 0)


def test_a_value_that_is_not_a_function_is_named_as_such():
    assert "should be a function" in hint_of(lesson06.score_count, 7)


def test_an_assertion_inside_the_learners_function_becomes_a_hint():
    def cross_scores(n_queries, n_keys, num_heads):
        torch.testing.assert_close(n_queries, n_queries + 1)  # the learner's own test fails

    text = hint_of(lesson06.score_count, cross_scores)
    assert text.startswith("Not yet: your cross_scores raised AssertionError")


def test_an_unfinished_function_stub_gets_a_hint():
    def cross_scores(n_queries, n_keys, num_heads):
        raise NotImplementedError("replace this line with your answer")

    assert hint_of(lesson06.score_count, cross_scores) == (
        "Not yet: your cross_scores still raises NotImplementedError: replace that line with your code")
