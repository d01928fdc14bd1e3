"""The browser test's bookkeeping, without a browser: what a committed lesson should show, and that every kind of
difference (error, missing figure, missing widget, cell not run) is reported."""

from __future__ import annotations

import labdriver as ld
import labpage as lp
import nbformat
import pytest

PNG = {"image/png": "iVBORw0KGgo=", "text/plain": "<Figure size 400x300 with 2 Axes>"}
WIDGET = {"application/vnd.jupyter.widget-view+json": {"model_id": "m"}, "text/plain": "IntSlider(value=3)"}


def _lesson(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# title"),
        nbformat.v4.new_code_cell("fig", outputs=[nbformat.v4.new_output("execute_result", PNG, execution_count=1)]),
        nbformat.v4.new_code_cell("w", outputs=[nbformat.v4.new_output("display_data", WIDGET)]),
        nbformat.v4.new_code_cell("raise ValueError('x')", metadata={"tags": ["raises-exception"]}),
        nbformat.v4.new_code_cell(""),
    ]
    path = tmp_path / "00_lesson.ipynb"
    nbformat.write(nb, path)
    return lp.expected_from_notebook(path)


def _as_shown(expected):
    """What a browser shows for a lesson that renders exactly as committed."""
    seen = {c.index: lp.CellSeen(prompt="[1]:" if c.has_code else "") for c in expected.cells}
    seen[1].images_shown, seen[1].images_in_dom = {0}, 1
    seen[2].widgets_shown, seen[2].widget_outputs = {0}, 1
    seen[3].errors = ["ValueError: x"]
    return seen


def test_expectations_come_from_the_stored_outputs(tmp_path):
    expected = _lesson(tmp_path)
    assert (expected.images, expected.widgets) == (1, 1)
    assert [c.has_code for c in expected.cells] == [False, True, True, True, False]
    assert expected.cells[3].tags == ("raises-exception",)


def test_a_lesson_shown_as_committed_passes(tmp_path):
    expected = _lesson(tmp_path)
    assert lp.compare(expected, _as_shown(expected)) == []


def test_a_widget_the_kernel_closed_counts_as_shown(tmp_path):
    expected = _lesson(tmp_path)
    seen = _as_shown(expected)
    seen[2].widgets_shown, seen[2].widget_outputs, seen[2].widgets_closed = set(), 0, 1  # tqdm(leave=False)
    assert lp.compare(expected, seen) == []


def test_every_kind_of_difference_is_reported(tmp_path):
    expected = _lesson(tmp_path)
    seen = _as_shown(expected)
    seen[1].images_shown = set()  # the figure never drew
    seen[2].widgets_shown = set()  # the widget stayed "Loading widget..."
    seen[2].errors = ["NameError: name 'w' is not defined"]  # an error outside a raises-exception cell
    seen[3].prompt = "[ ]:"  # the run stopped before this cell
    del seen[4]
    problems = "\n".join(lp.compare(expected, seen))
    assert "cell 1: 0 figure(s)" in problems
    assert "cell 2: 0 widget(s) drawn" in problems
    assert 'cell 2: error output (not tagged raises-exception): "NameError' in problems
    assert "cell 3: did not run" in problems
    assert "cell 4: never attached" in problems


def test_lab_is_started_with_the_makefile_options():
    options = ld.make_lab_options()
    assert any(o.startswith("--LabApp.default_url=") for o in options), options
    assert any(o.startswith("--ServerApp.root_dir=") for o in options), options


def test_the_test_lab_lands_on_the_solution_notebooks():
    options = ld.lab_options_for_the_lessons()
    assert [o for o in options if o.startswith("--LabApp.default_url=")] == [f"--LabApp.default_url={ld.LESSONS_URL}"]
    assert set(options) - {f"--LabApp.default_url={ld.LESSONS_URL}"} <= set(ld.make_lab_options())


def test_a_timeout_says_which_budget_ran_out_and_why():
    expected = r"waited 0 s, the budget for the first lesson, for the kernel; last seen: 3"
    with pytest.raises(TimeoutError, match=expected):
        lp.wait_until("the kernel", lambda: 3, lambda value: False, timeout=0.01, why="the first lesson")


def test_figures_on_screen_but_not_yet_decoded_count_as_undrawn():
    snapshot = {"cells": [
        {"index": 4, "images": [[True, False], [False, False]], "widgets": []},  # on screen, still decoding
        {"index": 7, "images": [[True, True]], "widgets": [[True, False]]},  # drawn; widget still loading
        {"index": 9, "images": [[False, False]], "widgets": []},  # off screen: not waited for
    ]}
    assert lp._undrawn(snapshot) == ["cell 4: 1 figure(s), 0 widget(s)", "cell 7: 0 figure(s), 1 widget(s)"]


def _cells(*specs):
    """Markdown cells from (source, collapsed) pairs and code cells from plain strings, as nbformat dicts."""
    cells = []
    for spec in specs:
        if isinstance(spec, tuple):
            source, collapsed = spec
            metadata = {"jp-MarkdownHeadingCollapsed": True} if collapsed else {}
            cells.append(nbformat.v4.new_markdown_cell(source, metadata=metadata))
        else:
            cells.append(nbformat.v4.new_code_cell(spec))
    return cells


def test_hidden_on_open_follows_the_collapsed_headings():
    cells = _cells(
        ("# Lesson", False),
        "x = 1",
        ("## Deep dive: one", True),  # hides up to the next heading of level <= 2
        "a",
        ("### inside", True),  # a collapsed heading inside a collapsed one: hidden itself, hides nothing more
        "b",
        ("text, not a heading", False),
        ("## Exercises", False),  # ends the deep dive
        "c",
        ("### Deep dive: two", True),
        "d",
        ("# Next part", False),  # a higher level also ends it
        "e",
    )
    assert lp.hidden_on_open(cells) == [
        False, False, False, True, True, True, True, False, False, False, True, False, False,
    ]


def test_a_heading_collapsed_at_the_end_hides_the_rest_and_a_plain_lesson_hides_nothing():
    assert lp.hidden_on_open(_cells(("## Deep dive", True), "a", ("more", False))) == [False, True, True]
    assert lp.hidden_on_open(_cells(("# A", False), "a", ("## B", False))) == [False, False, False]


def test_make_test_opens_the_first_lesson_of_each_edition_and_one_heavy_lesson():
    """`make test` deselects the marker browser_all: what is left is the smoke test the Makefile promises, and
    `make test-browser` (no deselection) opens every lesson."""
    import test_lessons_in_browser as browser

    params = next(m for m in browser.test_lesson_runs_in_browser.pytestmark if m.name == "parametrize").args[1]
    smoke = [p.id for p in params if not any(mark.name == "browser_all" for mark in p.marks)]
    lessons = sorted(p.stem for p in ld.NOTEBOOKS.glob("*.ipynb"))
    firsts = [f"{edition.name}/{lessons[0]}" for edition in sorted(ld.NOTEBOOKS.glob("zh-*"))]
    assert smoke == [lessons[0], "09_visualizing_attention", *firsts], smoke
    assert [p.id for p in params] == [*lessons, *firsts], "make test-browser opens every lesson"
