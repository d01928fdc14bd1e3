"""Lessons 08 and 09 keep the promises every lesson makes: the stated reading time is the measured one, deep dives
are collapsed, exercises sit under their heading, no solution line shows anywhere else in the lesson, and layers
and heads are counted from 0."""

from __future__ import annotations

import math
import re
from pathlib import Path

import nbformat
import pytest

from attention_lab.teaching.classroom import solution_regions, strip_solutions
from attention_lab.teaching.lesson_stats import lesson_stats, stated_minutes

NOTEBOOKS = Path(__file__).parent.parent / "notebooks"
LESSONS = [NOTEBOOKS / "08_training_stability.ipynb", NOTEBOOKS / "09_visualizing_attention.ipynb"]
_IMPORT = re.compile(r"^(import\s|from\s+\S+\s+import\s)")


def load(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)


def solution_lines(nb: nbformat.NotebookNode) -> list[tuple[int, str]]:
    """(cell index, stripped line) of every solution line that is not blank and not an import."""
    found = []
    for index, cell in enumerate(nb.cells):
        for region in solution_regions(cell.source):
            found += [(index, line.strip()) for line in region if line.strip() and not _IMPORT.match(line.strip())]
    return found


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.name)
def test_stated_reading_time_is_the_measured_core_rounded_up_to_five(path):
    stats = lesson_stats(path)
    measured = math.ceil(stats.minutes("core"))
    assert measured <= 25, f"{path.name}: the core path reads in {measured} minutes; move detail into deep dives"
    assert stated_minutes(path) == 5 * math.ceil(measured / 5), (
        f"{path.name} states {stated_minutes(path)} minutes, the core path measures {measured}")


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.name)
def test_deep_dives_are_collapsed_and_exercises_have_their_heading(path):
    stats = lesson_stats(path)
    assert stats.collapsed_deep_dives == stats.deep_dives
    assert stats.words["exercises"] > 0, f"{path.name}: no heading containing 'Exercises' before the exercises"
    nb = load(path)
    first_answer = next(i for i, c in enumerate(nb.cells) if solution_regions(c.source))
    headings = [c.source.splitlines()[0] for c in nb.cells[:first_answer] if c.cell_type == "markdown"
                and c.source.startswith("#")]
    assert "exercises" in headings[-1].lower(), f"{path.name}: the last heading before exercise 1 is {headings[-1]!r}"


def test_lesson_08_has_collapsed_deep_dives():
    assert lesson_stats(LESSONS[0]).deep_dives >= 2


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.name)
def test_no_solution_line_appears_elsewhere_in_the_lesson(path):
    nb = load(path)
    lines = solution_lines(nb)
    assert len({index for index, _ in lines}) >= 3, f"{path.name}: fewer than three answer cells"
    for index, line in lines:
        for other_index, cell in enumerate(nb.cells):
            visible, _ = strip_solutions(cell.source, markdown=cell.cell_type == "markdown")
            outside = [text.strip() for text in visible.splitlines()]
            if other_index == index:
                assert line not in outside, f"{path.name} cell {index}: {line!r} also outside its solution region"
            else:
                assert not any(line in text for text in outside), (
                    f"{path.name}: solution line {line!r} (cell {index}) also appears in cell {other_index}")


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.name)
def test_layers_and_heads_are_counted_from_zero(path):
    """Both models have 2 layers of 2 heads: counted from 0, no text or output may name a layer 2 or a head 2."""
    nb = load(path)
    texts = [cell.source for cell in nb.cells]
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            texts.append("".join(out.get("text", "")) + "".join(out.get("data", {}).get("text/plain", "")))
    for text in texts:
        assert not re.search(r"\b(layer|head) 2\b", text), f"{path.name}: 1-based count in {text[:200]!r}"
