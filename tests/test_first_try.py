"""A learner's first try: the untouched student copy of every lesson with exercises after the first three answers
every check with the one line "Not yet: ...", and no other exercise cell fails (no NameError from a stub that lost
its name, no traceback from a line the answer cell adds). To stay fast this runs, for each lesson, the setup cell,
the few earlier cells its exercises need (NEEDED) and the exercises, all lessons in one kernel whose namespace is
cleared between lessons (a kernel start costs seconds). tests/test_lessons_00_02.py runs the whole copies of lessons
00-02 from a student's folder, tests/test_classroom.py a whole copy of a Chinese edition's first lesson."""

from pathlib import Path

import nbformat
import pytest
from _student_exercises import NOTEBOOKS, untouched_exercises
from nbclient import NotebookClient

from attention_lab.teaching import classroom

pytestmark = pytest.mark.slow  # one kernel runs every lesson's exercises (make test-fast leaves it out)

# The earlier cells each lesson's exercises use (by cell id), and how many check cells its exercises have.
NEEDED = {"06": ("06-003", "06-005"), "08": ("08-007",), "09": ("09-003", "09-009"), "10": ("10-003",)}
CHECK_CELLS = {"03": 4, "04": 3, "05": 3, "06": 3, "07": 4, "08": 4, "09": 3, "10": 4, "11": 3, "12": 3, "13": 3,
               "14": 3}


def _lesson(number: str) -> Path:
    return next(NOTEBOOKS.glob(f"{number}_*.ipynb"))


@pytest.fixture(scope="module")
def first_tries(tmp_path_factory) -> dict[str, list[nbformat.NotebookNode]]:
    """Each lesson's code cells as they ran, after ``%reset -f`` (nothing of the lesson before it is left)."""
    nb, owner = nbformat.v4.new_notebook(), []
    for number in CHECK_CELLS:
        part = untouched_exercises(_lesson(number).name, NEEDED.get(number, ()))
        nb.metadata = part.metadata
        nb.cells += [nbformat.v4.new_code_cell("%reset -f"), *part.cells]
        owner += [None] + [number] * len(part.cells)
    NotebookClient(nb, timeout=600, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(tmp_path_factory.mktemp("student"))}}).execute()
    ran: dict[str, list[nbformat.NotebookNode]] = {number: [] for number in CHECK_CELLS}
    for cell, number in zip(nb.cells, owner, strict=True):
        if number is not None:
            ran[number].append(cell)
    return ran


@pytest.mark.parametrize("number", list(CHECK_CELLS))
def test_an_untouched_student_copy_meets_a_one_line_hint_at_every_check(number, first_tries):
    lesson = _lesson(number)
    check_call = classroom.check_call_pattern(nbformat.read(lesson, as_version=4))
    checks = 0
    for cell in first_tries[number]:
        errors = [o for o in cell.outputs if o.output_type == "error"]
        if check_call.search(cell.source):
            assert [e.ename for e in errors] == ["NotYet"], f"{lesson.name}: {cell.source!r}: {errors}"
            assert len(errors[0].traceback) == 1 and "Not yet:" in errors[0].traceback[0], cell.source
            assert "NotImplementedError" in errors[0].evalue or "still empty" in errors[0].evalue, errors[0].evalue
            checks += 1
        else:
            assert not errors, f"{lesson.name}: {cell.source!r} failed: {errors[0].ename}: {errors[0].evalue}"
    assert checks == CHECK_CELLS[number], f"{lesson.name}: {checks} check cells ran"
