"""A learner's first try: the untouched student copy of a lesson answers every check with the one line "Not yet: ...",
and no other exercise cell fails (no NameError from a stub that lost its name, no traceback from a line the answer
cell adds). To stay fast this runs the setup cell and the exercises only, which also proves that the exercises need
nothing from the lesson's other cells; tests/test_classroom.py runs one whole copy. A lesson joins FIRST_TRY once its
exercises stand alone like this."""

from pathlib import Path

import nbformat
from nbclient import NotebookClient

from attention_lab.teaching import classroom

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
FIRST_TRY = ("03", "04", "05")


def _exercises_only(student: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The setup cell (the first code cell) and every cell from the "## Exercises" heading to the summary."""
    cells = student.cells
    start = next(i for i, c in enumerate(cells) if c.cell_type == "markdown" and c.source.startswith("## Exercises"))
    end = next((i for i, c in enumerate(cells) if i > start and c.cell_type == "markdown"
                and c.source.startswith("## ")), len(cells))
    setup = next(c for c in cells if c.cell_type == "code")
    kept = nbformat.v4.new_notebook(metadata=student.metadata)
    kept.cells = [setup, *cells[start:end]]
    for cell in kept.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    return kept


def test_an_untouched_student_copy_meets_a_one_line_hint_at_every_check(tmp_path):
    """One kernel runs the lessons one after another (each from its own setup cell): a kernel start costs seconds."""
    nb, owner = nbformat.v4.new_notebook(), []
    for number in FIRST_TRY:
        lesson = next(NOTEBOOKS.glob(f"{number}_*.ipynb"))
        student, _ = classroom.student_notebook(nbformat.read(lesson, as_version=4), where=lesson.name)
        part = _exercises_only(student)
        nb.metadata = part.metadata
        nb.cells += part.cells
        owner += [(lesson.name, classroom.check_call_pattern(part))] * len(part.cells)
    NotebookClient(nb, timeout=180, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    checks = dict.fromkeys([name for name, _ in owner], 0)
    for cell, (name, check_call) in zip(nb.cells, owner):
        if cell.cell_type != "code":
            continue
        errors = [o for o in cell.outputs if o.output_type == "error"]
        if check_call.search(cell.source):
            assert [e.ename for e in errors] == ["NotYet"], f"{name}: {cell.source!r}: {errors}"
            assert len(errors[0].traceback) == 1 and "Not yet:" in errors[0].traceback[0]
            assert "NotImplementedError" in errors[0].evalue or "still empty" in errors[0].evalue
            checks[name] += 1
        else:
            assert not errors, f"{name}: {cell.source!r} failed: {errors[0].ename}: {errors[0].evalue}"
    assert all(count >= 3 for count in checks.values()), checks
