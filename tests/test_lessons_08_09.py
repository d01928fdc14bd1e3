"""Lessons 08 and 09, beyond the rules test_notebook_hygiene.py checks for every lesson: their exercises sit under an
"Exercises" heading, lesson 08's implementation detail is in collapsed deep dives, and layers and heads are counted
from 0 in every text and output."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat
import pytest

from attention_lab.teaching.solution_markup import solution_regions

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))  # lesson_stats, the reading-time counter
from lesson_stats import lesson_stats

NOTEBOOKS = Path(__file__).parent.parent / "notebooks"
LESSONS = [NOTEBOOKS / "08_training_stability.ipynb", NOTEBOOKS / "09_visualizing_attention.ipynb"]


def load(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.name)
def test_exercises_sit_under_their_heading(path):
    assert lesson_stats(path).words["exercises"] > 0, f"{path.name}: no heading containing 'Exercises'"
    nb = load(path)
    first_answer = next(i for i, c in enumerate(nb.cells) if solution_regions(c.source))
    headings = [c.source.splitlines()[0] for c in nb.cells[:first_answer]
                if c.cell_type == "markdown" and c.source.startswith("#")]
    assert "exercises" in headings[-1].lower(), f"{path.name}: the last heading before exercise 1 is {headings[-1]!r}"


def test_lesson_08_keeps_its_detail_in_collapsed_deep_dives():
    stats = lesson_stats(LESSONS[0])
    assert stats.deep_dives >= 2 and stats.collapsed_deep_dives == stats.deep_dives


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.name)
def test_layers_and_heads_are_counted_from_zero(path):
    """Both lessons' models have 2 layers of 2 heads: counted from 0, no text or output names a layer 2 or head 2."""
    nb = load(path)
    texts = [cell.source for cell in nb.cells]
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            texts.append("".join(out.get("text", "")) + "".join(out.get("data", {}).get("text/plain", "")))
    for text in texts:
        assert not re.search(r"\b(layer|head) 2\b", text), f"{path.name}: 1-based count in {text[:200]!r}"


def test_lesson_09_leads_on_to_lessons_10_and_11():
    """Issue 20: lesson 09 called itself "the end of the series' main path", written before lessons 10 and 11."""
    summary = next(c.source for c in load(LESSONS[1]).cells if c.source.startswith("## Summary"))
    assert "end of the series" not in summary and "lesson 10" in summary and "lesson 11" in summary


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.name)
def test_the_core_path_is_at_most_1500_words(path):
    assert lesson_stats(path).words["core"] <= 1500
