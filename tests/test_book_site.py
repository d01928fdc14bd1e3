"""The built web book (book/): every lesson of every edition is a page, folded where JupyterLab folds (deep dives)
and where answers would show (solutions, check messages), linked to its notebook, honest about what a page cannot
run, and the whole site loads nothing from another host and has no broken link or anchor (book/check_site.py).

The book is the one `make test` built just before pytest, or a fresh build (tests/_book.py)."""

from __future__ import annotations

import functools
import re
from pathlib import Path

import nbformat
import pytest
from _book import ROOT, book_html, discover
from bs4 import BeautifulSoup

from book import check_site
from book.stage import BEGIN_SOLUTION, MACHINE_TAG, WIDGET_MIME, heading_level

pytestmark = pytest.mark.slow  # reads the whole built book, or builds one (make test-fast leaves it out)

EDITIONS = discover(ROOT)
LESSONS = [(edition, lesson) for edition in EDITIONS for lesson in edition.lessons]


def _id(pair) -> str:
    edition, lesson = pair
    return f"{edition.tag}-{lesson.stem[:2]}"


@pytest.fixture(scope="session")
def html(tmp_path_factory):
    return book_html(tmp_path_factory)


@functools.cache
def _parsed(path: Path) -> BeautifulSoup:
    return BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")  # read only: shared by the tests


def _page(html, edition, lesson) -> BeautifulSoup:
    path = html / edition.tag / "lessons" / f"{lesson.stem}.html"
    assert path.exists(), f"no page for {lesson.relative_to(ROOT)} in the book"
    return _parsed(path)


def test_the_site_loads_nothing_from_another_host_and_every_link_resolves(html):
    assert check_site.check(html, outside_root=ROOT) == []


def test_the_front_page_and_each_edition_list_their_lessons(html):
    front = BeautifulSoup((html / "index.html").read_text(encoding="utf-8"), "html.parser")
    assert [a["href"] for a in front.select("ul.editions a")] == [f"{e.tag}/index.html" for e in EDITIONS]
    for edition in EDITIONS:
        landing = BeautifulSoup((html / edition.tag / "index.html").read_text(encoding="utf-8"), "html.parser")
        linked = {a["href"] for a in landing.select("article table a")}
        assert linked == {f"lessons/{lesson.stem}.html" for lesson in edition.lessons}, edition.tag
        assert landing.select("div.math"), "the landing page shows the formula as math"
        commands = landing.select_one("article div.highlight-bash").get_text()
        assert "make lab" in commands and "make test" in commands


def _words(markdown: str) -> list[str]:
    """A few words of a markdown cell as a page shows them: runs of letters (a run of Chinese is one), link targets
    left out."""
    return re.findall(r"[^\W\d_]{4,}", re.sub(r"\]\([^)]*\)", "]", markdown))[:6]


@pytest.mark.parametrize("pair", LESSONS, ids=_id)
def test_deep_dives_are_folded_below_their_heading_as_in_jupyterlab(html, pair):
    edition, lesson = pair
    nb = nbformat.read(lesson, as_version=4)
    headings = [i for i, c in enumerate(nb.cells)
                if c.metadata.get("jp-MarkdownHeadingCollapsed") and heading_level(c)]
    page = _page(html, edition, lesson)
    folds = page.select("details.deep-dive")
    assert len(folds) == len(headings), f"{len(headings)} collapsed headings, {len(folds)} folded deep dives"
    for fold, index in zip(folds, headings):
        cell, below = nb.cells[index], nb.cells[index + 1]
        section = fold.find_parent("section")
        heading = section.find(re.compile("^h[1-6]$"))
        title = re.sub(r"[`*]", "", cell.source.splitlines()[0].lstrip("#").strip())
        assert heading.get_text().rstrip("#").strip() == title, "the fold belongs to the deep dive's own section"
        assert "open" not in fold.attrs
        assert fold.select("div.cell, p"), "the fold holds the cells under the heading"
        # what JupyterLab folds is what the book folds: the heading cell's text outside, the cells below it inside
        shown = " ".join(t.get_text(" ") for t in fold.find_previous_siblings())
        assert all(word in shown for word in _words(cell.source)), "the heading cell's text is outside the fold"
        inside = _words(below.source) if below.cell_type == "markdown" else []
        assert all(word in fold.get_text(" ") for word in inside), f"the cell below the heading is folded: {inside}"


@pytest.mark.parametrize("pair", LESSONS, ids=_id)
def test_each_solution_and_its_checks_message_are_behind_a_toggle(html, pair):
    edition, lesson = pair
    nb = nbformat.read(lesson, as_version=4)
    solutions = [c for c in nb.cells if c.cell_type == "code" and BEGIN_SOLUTION in c.source]
    page = _page(html, edition, lesson)
    words = edition.words
    folded = page.select("details.hide.above-input")
    assert [f.select_one("summary .collapsed").get_text() for f in folded] == [words["show_solution"]] * len(solutions)
    for fold, cell in zip(folded, solutions):
        answer = cell.source.split(BEGIN_SOLUTION, 1)[1].strip().splitlines()[0]
        assert answer.split("#")[0].strip() in fold.get_text()
    for block in page.select("pre"):
        if BEGIN_SOLUTION in block.get_text():
            assert block.find_parent("details", class_="above-input"), "a solution outside its toggle"
    messages = page.select("details.hide.below-input")
    assert len(messages) == len(solutions)
    assert all(m.select_one("summary .collapsed").get_text() == words["show_check"] for m in messages)
    for output in page.select("div.cell_output"):
        demo = output.find_parent("div", class_="tag_raises-exception")  # what a failed check looks like, shown
        if re.match(r"\s*(Correct|Not yet\b|正确|正確|还不对|還不對)", output.get_text()) and not demo:
            assert output.find_parent("details"), f"a check's message shows at a glance: {output.get_text()[:60]!r}"


@pytest.mark.parametrize("pair", LESSONS, ids=_id)
def test_each_lesson_page_links_its_notebook_and_says_what_it_cannot_run(html, pair):
    edition, lesson = pair
    page = _page(html, edition, lesson)
    note = page.select_one("div.lesson-source")
    assert note is not None, "the note under the title"
    notebook = lesson.relative_to(ROOT).as_posix()
    assert any(a["href"].endswith(notebook) for a in note.select("a")), f"no link to {notebook}"
    assert "make lab" in note.get_text() and "make test" in note.get_text()

    nb = nbformat.read(lesson, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    widgets = [c for c in code if any(WIDGET_MIME in o.get("data", {}) for o in c.get("outputs", []))]
    machine = [c for c in code if MACHINE_TAG in c.metadata.get("tags", []) and c.get("outputs") and c not in widgets]
    assert len(page.select("div.no-kernel")) == len(widgets)
    assert len(page.select("div.machine-output")) == len(machine)
    assert not page.find_all(string=re.compile(r"(VBox|HBox|IntSlider)\(children")), "a widget's text stand-in"
