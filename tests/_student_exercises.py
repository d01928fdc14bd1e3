"""A lesson's exercises as a student first meets them: its student copy, untouched, with only the cells the
exercises need (the setup cell and the cells named) and every cell from the "Exercises" heading on
(tests/test_first_try.py runs them)."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat

from attention_lab.teaching import classroom

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def untouched_exercises(lesson: str, needed: tuple[str, ...]) -> nbformat.NotebookNode:
    """The code cells of the student copy of ``notebooks/<lesson>`` that its exercises run, outputs cleared: the
    first code cell, the cells whose ids are ``needed``, then every code cell from the Exercises heading to the end."""
    solution = nbformat.read(NOTEBOOKS / lesson, as_version=4)
    student, _ = classroom.student_notebook(solution)
    start = next(i for i, c in enumerate(student.cells)  # "## Exercises", or numbered: "## 7. Exercises"
                 if c.cell_type == "markdown" and re.match(r"## (\d+\. )?Exercises", c.source.lstrip()))
    first_code = next(i for i, c in enumerate(student.cells) if c.cell_type == "code")
    keep = [c for i, c in enumerate(student.cells)
            if c.cell_type == "code" and (i == first_code or c.get("id") in needed or i > start)]
    run = nbformat.v4.new_notebook(cells=keep, metadata=student.metadata)
    for cell in run.cells:
        cell.outputs, cell.execution_count = [], None
    return run
