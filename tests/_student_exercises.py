"""Run a lesson's exercises as a student first meets them: its student copy, untouched, with only the cells the
exercises need (the setup cell and the cells named) and every cell from the "Exercises" heading on. What each cell
showed comes back, so a test can check that every check answers the untouched stubs with one line."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat

from attention_lab.teaching import classroom

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def run_untouched_exercises(lesson: str, needed: tuple[str, ...], tmp_path: Path) -> list[tuple[str, list[dict]]]:
    """(source, outputs) of each code cell run, in order: the first code cell, the cells whose ids are ``needed``,
    then every code cell from the Exercises heading to the end, of the student copy of ``notebooks/<lesson>``."""
    from nbclient import NotebookClient

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
    NotebookClient(run, timeout=120, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    return [(cell.source, cell.outputs) for cell in run.cells]


def check_cell_errors(cells: list[tuple[str, list[dict]]], pattern) -> tuple[list[list[dict]], list[str]]:
    """The errors of each check cell (a call that ``pattern`` matches), and the sources of other cells that
    failed."""
    checks, failed = [], []
    for source, outputs in cells:
        errors = [o for o in outputs if o.get("output_type") == "error"]
        if pattern.search(source):
            checks.append(errors)
        elif errors:
            failed.append(source)
    return checks, failed


def assert_every_check_answers_an_untouched_copy(lesson: str, needed: tuple[str, ...], tmp_path: Path,
                                                 checks_expected: int) -> None:
    """The untouched student copy of ``notebooks/<lesson>``: every check cell (``checks_expected`` of them) shows
    the one line "Not yet: ... NotImplementedError ...", and no other cell fails."""
    from attention_lab.teaching.classroom import check_call_pattern

    cells = run_untouched_exercises(lesson, needed, tmp_path)
    checks, failed = check_cell_errors(cells, check_call_pattern(nbformat.read(NOTEBOOKS / lesson, as_version=4)))
    assert not failed, failed
    assert len(checks) == checks_expected
    for errors in checks:
        assert [e["ename"] for e in errors] == ["NotYet"] and len(errors[0]["traceback"]) == 1
        assert "Not yet:" in errors[0]["traceback"][0] and "NotImplementedError" in errors[0]["traceback"][0]
