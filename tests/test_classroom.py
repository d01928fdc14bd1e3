"""Student copies: no solution survives, copies parse and stop at the first exercise, files are protected."""

from __future__ import annotations

import ast
import copy
import re
import runpy
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from attention_lab.teaching import classroom, solution_markup
from attention_lab.teaching.lesson_files import resolve_lessons
from attention_lab.teaching.solution_markup import BEGIN_SOLUTION, END_SOLUTION, MarkupError

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
LESSONS = sorted(NOTEBOOKS.glob("*.ipynb"))
# Parametrise over every lesson present; before any exists, one skipped case says so.
LESSON_PARAMS = [pytest.param(p, id=p.stem[:2]) for p in LESSONS] or [
    pytest.param(None, marks=pytest.mark.skip(reason="no lessons in notebooks/ yet"))
]


# --- helpers ------------------------------------------------------------------------------------------

def _solution_lines(nb: nbformat.NotebookNode) -> set[str]:
    """Stripped lines of every solution region that a student copy must not contain.

    Blank lines, bare brackets/keywords and lines that also appear outside the regions (code the lesson
    itself shows, a placeholder, a comment repeated in the prompt) cannot reveal anything and are ignored.
    """
    inside, outside = set(), set()
    for cell in nb.cells:
        lines = cell.source.split("\n")
        in_region = False
        for line in lines:
            text = line.strip()
            if text in (BEGIN_SOLUTION, END_SOLUTION):
                in_region = text == BEGIN_SOLUTION
                continue
            (inside if in_region else outside).add(text)
    trivial = {"", "pass", "return", "else:", "try:", "finally:", ")", "]", "}", "),", "],", "})", "])"}
    return {line for line in inside - outside - trivial if len(line) > 3}


def _answer_cells(nb: nbformat.NotebookNode) -> list[int]:
    return [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and BEGIN_SOLUTION in c.source]


def _lesson(*cells: tuple[str, str], outputs: bool = True) -> nbformat.NotebookNode:
    """A small notebook: ("md"|"code", source) pairs; code cells get a stored output and count."""
    nb = nbformat.v4.new_notebook()
    for count, (kind, source) in enumerate(cells, start=1):
        if kind == "md":
            nb.cells.append(nbformat.v4.new_markdown_cell(source))
        else:
            cell = nbformat.v4.new_code_cell(source)
            if outputs:
                cell.execution_count = count
                cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=f"out {count}\n")]
            nb.cells.append(cell)
    nb.metadata = nbformat.from_dict({
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python", "version": "3.12.3"},
        "authors": [{"name": "A. Teacher"}],
        "widgets": {"application/vnd.jupyter.widget-state+json": {}},
    })
    return nb


SMALL = _lesson(
    ("md", "# Lesson\nAnswers go between `### BEGIN SOLUTION` and `### END SOLUTION`."),
    ("code", "import math\nx = 2.0"),
    ("md", "## Exercise 1\nCompute the square root of x."),
    ("code", f"{BEGIN_SOLUTION}\nroot = math.sqrt(x)\n{END_SOLUTION}"),
    ("code", "assert abs(root * root - x) < 1e-9\nprint('Correct: root')"),
    ("md", "## Exercise 2"),
    ("code", f"def twice(v):\n    {BEGIN_SOLUTION}\n    doubled = v + v\n    return doubled\n"
             f"    {END_SOLUTION}\n\nprint(twice(3))"),
    ("code", "from attention_lab.teaching.checks import lesson00\nlesson00.weights_shape(twice((2,)), n_tokens=2)"),
    ("md", "## Summary"),
    ("code", "print('figure')"),
)


def _write(nb: nbformat.NotebookNode, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


# --- the stub --------------------------------------------------------------------------------------

def test_stub_replaces_region_keeps_indentation_and_surrounding_code():
    source = f"w = ...\nif True:\n    {BEGIN_SOLUTION}\n    w = 1\n    {END_SOLUTION}\nprint(w)"
    new, count = solution_markup.strip_solutions(source)
    assert count == 1
    assert new.split("\n") == [
        "w = ...",
        "if True:",
        "    # YOUR CODE HERE",
        f"    {solution_markup.CODE_STUB[1]}",
        "print(w)",
    ]
    compile(new, "<stub>", "exec")


def test_a_value_answer_keeps_its_name_and_helpers_of_the_solution_go():
    source = (f"{BEGIN_SOLUTION}\nrows = 7\nn_scores, n_flops = rows * 12, 2 * rows * 12 * 64\n{END_SOLUTION}\n"
              "print(n_flops)")
    new, count = solution_markup.strip_solutions(source, answers={"n_scores"})
    assert count == 1
    assert new.split("\n") == ["n_scores = ...  # YOUR CODE HERE", "n_flops = ...  # YOUR CODE HERE",
                                "print(n_flops)"]  # n_flops: read later in the same cell


def test_a_function_answer_keeps_its_signature_and_docstring():
    source = (f'{BEGIN_SOLUTION}\n@torch.no_grad()\ndef layer_mult_adds(n,\n                    e):\n'
              f'    """Multiply-adds of one layer."""\n    return 4 * n * e * e\n{END_SOLUTION}')
    new, _ = solution_markup.strip_solutions(source, answers={"layer_mult_adds"})
    assert new.split("\n") == [
        "@torch.no_grad()", "def layer_mult_adds(n,", "                    e):",
        '    """Multiply-adds of one layer."""',
        "    # YOUR CODE HERE",
        '    raise NotImplementedError("write the body of layer_mult_adds, then run the check cell below")']
    compile(new.replace("@torch.no_grad()", ""), "<stub>", "exec")


def test_a_region_without_a_known_answer_gets_the_plain_stub():
    source = f"{BEGIN_SOLUTION}\nfor i in range(3):\n    total += i\n{END_SOLUTION}"
    assert solution_markup.strip_solutions(source, answers={"total"})[0].split("\n") == list(solution_markup.CODE_STUB)


def test_names_used_ignores_solution_regions_attributes_and_exponents():
    later = [f"check.f(answer, 1e-5, x.e)\n{BEGIN_SOLUTION}\nhelper = 1\n{END_SOLUTION}"]
    assert solution_markup.names_used(later) == {"check", "answer", "x"}


def test_several_regions_in_one_cell_and_markdown_stub():
    source = f"{BEGIN_SOLUTION}\na = 1\n{END_SOLUTION}\nb = 2\n{BEGIN_SOLUTION}\nc = 3\n{END_SOLUTION}"
    new, count = solution_markup.strip_solutions(source)
    assert count == 2 and "a = 1" not in new and "c = 3" not in new and "b = 2" in new
    prose = f"Why?\n{BEGIN_SOLUTION}\nBecause.\n{END_SOLUTION}"
    text, count = solution_markup.strip_solutions(prose, markdown=True)
    assert (text, count) == ("Why?\nYOUR ANSWER HERE", 1)


def test_a_cell_without_regions_is_unchanged():
    source = "x = 1  # mentions ### BEGIN SOLUTION mid-line\nprint(x)"
    assert solution_markup.strip_solutions(source) == (source, 0)


@pytest.mark.parametrize(("source", "message"), [
    (f"{BEGIN_SOLUTION}\nx = 1", "without a matching"),
    (f"x = 1\n{END_SOLUTION}", "without a '### BEGIN SOLUTION' before it"),
    (f"{BEGIN_SOLUTION}\n{BEGIN_SOLUTION}\nx\n{END_SOLUTION}\n{END_SOLUTION}", "nested"),
    ("## BEGIN SOLUTION\nx = 1\n## END SOLUTION", "looks like a solution delimiter"),
    ("### begin solution\nx = 1\n### end solution", "looks like a solution delimiter"),
    ("# BEGIN SOLUTION\nx = 1\n# END SOLUTION", "looks like a solution delimiter"),
])
def test_broken_markup_is_refused_rather_than_leaked(source, message):
    with pytest.raises(MarkupError, match=message):
        solution_markup.strip_solutions(source, where="lesson.ipynb, cell 3")


# --- a whole notebook ------------------------------------------------------------------------------

def test_student_notebook_clears_exercise_outputs_keeps_the_rest_and_cleans_metadata():
    before = nbformat.writes(SMALL)
    student, count = classroom.student_notebook(SMALL)
    assert nbformat.writes(SMALL) == before  # the solution notebook is untouched
    assert count == 2
    cells = student.cells
    assert cells[1].outputs and cells[1].execution_count == 2  # setup cell kept as it was
    for i in (3, 4, 6, 7):  # answer and check cells
        assert cells[i].outputs == [] and cells[i].execution_count is None, i
    assert cells[9].outputs and cells[9].execution_count == 10  # after the exercises: kept
    assert cells[0].source == SMALL.cells[0].source  # prose that mentions the delimiters stays
    assert cells[3].source == "root = ...  # YOUR CODE HERE"  # the check below reads root: it keeps its name
    assert "    # YOUR CODE HERE" in cells[6].source and "print(twice(3))" in cells[6].source
    assert dict(student.metadata) == {
        "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    }
    nbformat.validate(student)


@pytest.mark.parametrize(("imports", "call", "found"), [
    ("from attention_lab.teaching.checks import lesson00 as check", "check.row_sums(s, w)", True),
    ("from attention_lab.teaching.checks import lesson00 as check", "plotting.plot_attention(w)", False),
    ("import attention_lab.teaching.checks.lesson02 as ex", "ex.stable_softmax(f)", True),
    ("from attention_lab.teaching.checks import lesson05", "lesson05.heads(x)", True),
    ("from attention_lab.teaching.checks.lesson01 import (\n    scores_for_query,\n    softmax_weights as sw,\n)",
     "sw(a, q, k, i=0)", True),
    ("import attention_lab.teaching.checks.lesson03", "attention_lab.teaching.checks.lesson03.layer(m)", True),
    ("from attention_lab.teaching import checks", "checks.lesson03.layer(m)", True),
    ("import attention_lab as al", "al.scaled_dot_product_attention(q, k, v)", False),
])
def test_check_calls_are_found_under_the_names_a_lesson_imports(imports, call, found):
    nb = _lesson(("code", imports), ("code", call))
    assert bool(classroom.check_call_pattern(nb).search(call)) is found


def test_a_failing_check_demo_outside_the_exercises_keeps_its_output():
    nb = _lesson(("code", "from attention_lab.teaching.checks import lesson00 as check"),
                 ("code", "check.row_sums(w.sum(0), w)"), ("code", "check.row_sums(w.sum(-1), w)"))
    nb.cells[1].metadata["tags"] = ["raises-exception"]
    student, _ = classroom.student_notebook(nb)
    assert student.cells[1].outputs and not student.cells[2].outputs  # the hint stays, the success goes


def test_cell_metadata_keeps_tags_and_drops_the_rest():
    nb = _lesson(("code", f"{BEGIN_SOLUTION}\nx = 1\n{END_SOLUTION}"))
    nb.cells[0].metadata = nbformat.from_dict(
        {"tags": ["raises-exception"], "execution": {"iopub.execute_input": "2026-01-01"}, "scrolled": True,
         "nbgrader": {"solution": True, "grade": False, "grade_id": "ex1", "locked": False}})
    student, _ = classroom.student_notebook(nb)
    assert set(student.cells[0].metadata) == {"tags", "nbgrader"}


# --- every lesson -----------------------------------------------------------------------------------

@pytest.mark.parametrize("lesson", LESSON_PARAMS)
def test_lesson_markup_follows_the_convention(lesson):
    """Each lesson has exercises; every answer cell has a check cell after it that calls a check."""
    nb = nbformat.read(lesson, as_version=4)
    answers = _answer_cells(nb)
    check_call = classroom.check_call_pattern(nb)
    assert answers, f"{lesson.name}: no '{BEGIN_SOLUTION}' answer cell"
    for index, cell in enumerate(nb.cells):
        solution_markup.solution_regions(cell.source, where=lesson.name)  # balanced, correctly spelt
        # nbgrader takes ANY line containing "BEGIN SOLUTION" for a delimiter (substring match), so prose
        # or comments that quote the delimiters break `nbgrader generate_assignment`.
        for line in cell.source.split("\n"):
            if "BEGIN SOLUTION" in line or "END SOLUTION" in line:
                assert line.strip() in (BEGIN_SOLUTION, END_SOLUTION), (
                    f"{lesson.name}, cell {index}: {line.strip()!r} quotes a delimiter outside a delimiter "
                    f"line; nbgrader would read it as one. Reword it without BEGIN/END directly before "
                    f"SOLUTION, e.g. 'between the two marker lines (### BEGIN ... and ### END ...)'")
    for i in answers:
        following = []
        for cell in nb.cells[i + 1:]:
            if cell.cell_type == "markdown":
                break
            following.append(cell.source)
        assert any(check_call.search(s) for s in following), (
            f"{lesson.name}: answer cell {i} has no check cell (a call to attention_lab.teaching.checks) before "
            f"the next markdown cell")


@pytest.mark.parametrize("lesson", LESSON_PARAMS)
def test_student_copy_has_no_solution_line_and_still_parses(lesson):
    nb = nbformat.read(lesson, as_version=4)
    student, count = classroom.student_notebook(nb, where=lesson.name)
    nbformat.validate(student)
    assert count >= len(_answer_cells(nb)) >= 1
    secret = _solution_lines(nb)
    assert secret, f"{lesson.name}: solution regions hold nothing but trivial lines"
    for index, cell in enumerate(student.cells):
        survivors = {line.strip() for line in cell.source.split("\n")} & secret
        assert not survivors, f"{lesson.name}, cell {index}: solution lines survive: {sorted(survivors)}"
        for output in cell.get("outputs", []):
            text = str(output.get("text", "")) + str(output.get("data", {}).get("text/plain", ""))
            assert BEGIN_SOLUTION not in text
    for i in _answer_cells(nb):
        cell = student.cells[i]
        assert cell.outputs == [] and cell.execution_count is None
        assert "# YOUR CODE HERE" in cell.source
        assert "raise NotImplementedError(" in cell.source or "= ...  # YOUR CODE HERE" in cell.source
        compile(cell.source, f"{lesson.name}:cell{i}", "exec")  # the stub leaves valid Python
    # Cells outside the exercises are kept as they are (text, figures, their outputs).
    exercise_cells = set()
    for i in _answer_cells(nb):
        j = i
        while j < len(nb.cells) and nb.cells[j].cell_type == "code":
            exercise_cells.add(j)
            j += 1
    check_call = classroom.check_call_pattern(nb)
    for index, (old, new) in enumerate(zip(nb.cells, student.cells, strict=True)):
        demo = "raises-exception" in old.metadata.get("tags", [])
        if index not in exercise_cells and (demo or not check_call.search(old.source)):
            assert new.source == old.source, index
            assert new.get("outputs") == old.get("outputs"), index
    assert student.metadata["kernelspec"]["name"] == "python3"


def _stub_cost(lesson: Path) -> tuple[int, int]:
    """Cells executed before the first exercise stops a student copy (then file size): a cheap pick."""
    nb = nbformat.read(lesson, as_version=4)
    first = _answer_cells(nb)[0] if _answer_cells(nb) else len(nb.cells)
    return sum(c.cell_type == "code" for c in nb.cells[:first]), lesson.stat().st_size


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.stem)
def test_every_answer_a_check_reads_is_defined_by_the_student_copy(lesson):
    """A stub keeps the answer's name: every plain name a check cell passes to its check is bound by an earlier
    cell of the student copy, so a first try meets a hint, never a NameError."""
    student, _ = classroom.student_notebook(nbformat.read(lesson, as_version=4))
    check_call = classroom.check_call_pattern(student)
    bound: set[str] = set(dir(__builtins__)) | {"check"}
    for index, cell in enumerate(student.cells):
        if cell.cell_type != "code":
            continue
        source = "\n".join(line for line in cell.source.split("\n") if not line.lstrip().startswith(("%", "!")))
        tree = ast.parse(source)
        if check_call.search(cell.source):
            for call in ast.walk(tree):
                if isinstance(call, ast.Call) and call.args and isinstance(call.args[0], ast.Name):
                    name = call.args[0].id
                    assert name in bound, f"{lesson.name}, cell {index}: the check reads {name!r}, which no cell " \
                                          f"of the student copy defines"
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                bound.add(node.id)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                bound.add(node.name)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                bound.update((alias.asname or alias.name).split(".")[0] for alias in node.names)


# --- the command -------------------------------------------------------------------------------------

def test_command_writes_copies_and_never_overwrites_without_force(tmp_path, capsys):
    lesson = _write(SMALL, tmp_path / "lessons" / "07_demo.ipynb")
    out = tmp_path / "student"
    assert classroom.main(["student", "--out", str(out), str(lesson)]) == 0
    copy_path = out / "07_demo.ipynb"
    assert "wrote" in capsys.readouterr().out and copy_path.is_file()
    work = copy_path.read_text(encoding="utf-8").replace("# YOUR CODE HERE", "# my own answer")
    copy_path.write_text(work, encoding="utf-8")  # a student's work

    assert classroom.main(["student", "--out", str(out), str(lesson)]) == 0
    printed = capsys.readouterr().out
    assert f"skipped {copy_path}" in printed and "0 written, 1 skipped" in printed
    assert copy_path.read_text(encoding="utf-8") == work

    assert classroom.main(["student", "--out", str(out), "--force", str(lesson)]) == 0
    assert "1 written, 0 skipped" in capsys.readouterr().out
    assert "# my own answer" not in copy_path.read_text(encoding="utf-8")


def test_force_replaces_a_symlink_not_the_file_it_points_to(tmp_path):
    lesson = _write(SMALL, tmp_path / "lessons" / "07_demo.ipynb")
    original = lesson.read_text(encoding="utf-8")
    out = tmp_path / "student"
    out.mkdir()
    (out / "07_demo.ipynb").symlink_to(lesson)
    assert classroom.write_student_copies([lesson], out).skipped == [out / "07_demo.ipynb"]
    classroom.write_student_copies([lesson], out, force=True)
    assert lesson.read_text(encoding="utf-8") == original
    assert not (out / "07_demo.ipynb").is_symlink()


@pytest.mark.parametrize("where", ["inside", "same", "symlink", "dotdot"])
def test_output_folder_among_the_lessons_is_refused(tmp_path, capsys, where):
    lessons = tmp_path / "notebooks"
    lesson = _write(SMALL, lessons / "07_demo.ipynb")
    (tmp_path / "link").symlink_to(lessons, target_is_directory=True)
    out = {"inside": lessons / "student", "same": lessons, "symlink": tmp_path / "link" / "student",
           "dotdot": tmp_path / "elsewhere" / ".." / "notebooks" / "x"}[where]
    assert classroom.main(["student", "--out", str(out), str(lesson)]) == 2
    err = capsys.readouterr().err
    assert "--out must be outside the lessons' folder" in err and str(lessons.resolve()) in err
    assert sorted(p.name for p in lessons.iterdir()) == ["07_demo.ipynb"]  # nothing written


def test_project_notebooks_folder_is_refused_even_for_lessons_elsewhere(tmp_path, capsys):
    lesson = _write(SMALL, tmp_path / "07_demo.ipynb")
    out = NOTEBOOKS / "student-copies"
    assert classroom.main(["student", "--out", str(out), str(lesson)]) == 2
    assert "--out must be outside the lessons' folder" in capsys.readouterr().err
    assert not out.exists()


def test_markup_error_and_unknown_lesson_exit_nonzero_and_write_nothing(tmp_path, capsys):
    broken = _lesson(("code", f"{BEGIN_SOLUTION}\nx = 1"))
    lesson = _write(broken, tmp_path / "lessons" / "08_broken.ipynb")
    out = tmp_path / "student"
    assert classroom.main(["student", "--out", str(out), str(lesson)]) == 2
    assert "08_broken.ipynb, cell 0" in capsys.readouterr().err and not out.exists()
    assert classroom.main(["student", "--out", str(out), "99_no_such_lesson"]) == 2
    assert "no lesson matches '99_no_such_lesson'" in capsys.readouterr().err


@pytest.mark.skipif(not LESSONS, reason="no lessons in notebooks/ yet")
@pytest.mark.filterwarnings("ignore:'attention_lab.teaching.classroom' found in sys.modules:RuntimeWarning")  # re-run
def test_module_entry_point_defaults_to_every_lesson(tmp_path, monkeypatch, capsys):
    """`python -m attention_lab.teaching.classroom student --out DIR` from the project root (runpy is what -m runs;
    in-process, so the test does not pay for a second torch import)."""
    out = tmp_path / "student"
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(sys, "argv", ["classroom", "student", "--out", str(out)])
    with pytest.raises(SystemExit) as done:
        runpy.run_module("attention_lab.teaching.classroom", run_name="__main__", alter_sys=True)
    assert done.value.code == 0, capsys.readouterr().err
    lessons = sorted(NOTEBOOKS.glob("*.ipynb"))  # again: lessons may have landed since collection
    assert sorted(p.name for p in out.iterdir()) == [p.name for p in lessons]
    assert f"{len(lessons)} written, 0 skipped" in capsys.readouterr().out
    assert resolve_lessons([LESSONS[0].stem[:2]]) == [LESSONS[0].resolve()]
    assert resolve_lessons([LESSONS[0].name]) == [LESSONS[0].resolve()]


@pytest.mark.slow
def test_the_command_line_runs_as_the_docs_show_it():
    """`python -m attention_lab.teaching.classroom --help` in a fresh interpreter (the module path of the docs)."""
    done = subprocess.run([sys.executable, "-m", "attention_lab.teaching.classroom", "--help"], capture_output=True,
                          text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: python -m attention_lab.teaching.classroom") and "student" in done.stdout
    assert done.stderr == ""


def test_lessons_are_found_in_the_checkout_from_any_folder(tmp_path, monkeypatch):
    """Run from a folder without notebooks/ (a teacher's own), the lessons of this checkout are still found."""
    monkeypatch.chdir(tmp_path)
    assert resolve_lessons([LESSONS[0].stem[:2]]) == [LESSONS[0].resolve()]


# --- nbgrader, when a teacher has it --------------------------------------------------------------

@pytest.mark.parametrize("lesson", LESSON_PARAMS)
def test_nbgrader_clears_the_same_regions(lesson):
    """nbgrader's own ClearSolutions works on our markup and leaves no solution line either."""
    clearsolutions = pytest.importorskip(
        "nbgrader.preprocessors.clearsolutions",
        reason="nbgrader is optional (a teacher's tool, not in requirements); install it to run this test")
    nb = nbformat.read(lesson, as_version=4)
    # Our answer cells carry no nbgrader cell metadata, so nbgrader must be told not to demand it
    # (docs/teaching.md shows the same setting for `nbgrader generate_assignment`).
    processor = clearsolutions.ClearSolutions(enforce_metadata=False)
    graded, _ = processor.preprocess(copy.deepcopy(nb), {})
    ours, _ = classroom.student_notebook(nb)
    secret = _solution_lines(nb)
    for theirs, mine in zip(graded.cells, ours.cells, strict=True):
        assert not {line.strip() for line in theirs.source.split("\n")} & secret
        stub = [line for line in mine.source.split("\n") if "NotImplementedError" not in line]
        assert stub == [line for line in theirs.source.split("\n") if "NotImplementedError" not in line]


# --- the Chinese editions (notebooks/zh-CN, notebooks/zh-TW): the same guarantees, stubs in their language ----------

from attention_lab.teaching.lesson_files import EDITIONS  # noqa: E402
from attention_lab.teaching.solution_markup import CODE_STUB, code_stub, text_stub  # noqa: E402

EDITION_LESSONS = [pytest.param(p, p.parent.name, id=f"{p.parent.name}-{p.stem[:2]}")
                   for edition in EDITIONS for p in sorted((NOTEBOOKS / edition).glob("*.ipynb"))]


def test_every_edition_has_lessons():
    assert {language for _, language in (p.values for p in EDITION_LESSONS)} == set(EDITIONS)


def test_stubs_come_from_the_package_catalog_in_the_editions_language():
    from attention_lab import i18n

    for language in EDITIONS:
        comment, error = code_stub(language)
        assert comment == f"# {i18n.msg('YOUR CODE HERE').render(language)}" != CODE_STUB_EN[0]
        assert error.startswith('raise NotImplementedError("') and error.endswith('")')
        assert "replace this line" not in error and i18n.translate(
            "replace this line with your answer, then run the check cell below", language) in error
        compile(error, "<stub>", "exec")
        source, count = solution_markup.strip_solutions(f"    {BEGIN_SOLUTION}\n    x = 1\n    {END_SOLUTION}",
                                                  language=language)
        assert count == 1 and source == f"    {comment}\n    {error}"
        assert solution_markup.strip_solutions(f"{BEGIN_SOLUTION}\nBecause.\n{END_SOLUTION}", markdown=True,
                                         language=language)[0] == text_stub(language)[0] != "YOUR ANSWER HERE"
    assert code_stub() == CODE_STUB == CODE_STUB_EN


CODE_STUB_EN = ("# YOUR CODE HERE",
                'raise NotImplementedError("replace this line with your answer, then run the check cell below")')


@pytest.mark.parametrize(("lesson", "language"), EDITION_LESSONS)
def test_edition_student_copy_has_no_solution_line_and_its_stub_speaks_the_edition(lesson, language):
    nb = nbformat.read(lesson, as_version=4)
    student, count = classroom.student_notebook(nb, where=lesson.name, language=language)
    nbformat.validate(student)
    secret = _solution_lines(nb)
    assert count >= len(_answer_cells(nb)) >= 1 and secret
    comment, error = code_stub(language)
    for index, cell in enumerate(student.cells):
        assert not {line.strip() for line in cell.source.split("\n")} & secret, f"{lesson.name}, cell {index}"
    for i in _answer_cells(nb):
        assert comment in student.cells[i].source
        assert error in student.cells[i].source or f"= ...  {comment}" in student.cells[i].source
        assert student.cells[i].outputs == [] and student.cells[i].execution_count is None
        compile(student.cells[i].source, f"{lesson.name}:cell{i}", "exec")


def test_edition_command_writes_the_edition_and_never_overwrites(tmp_path, monkeypatch, capsys):
    lesson = EDITION_LESSONS[0].values[0]
    language = lesson.parent.name
    out = tmp_path / "student" / language
    monkeypatch.chdir(ROOT)
    assert classroom.main(["student", "--edition", language, "--out", str(out), lesson.stem[:2]]) == 0
    copy_path = out / lesson.name
    assert "1 written" in capsys.readouterr().out
    text = copy_path.read_text(encoding="utf-8")
    assert code_stub(language)[0] in text and "# YOUR CODE HERE" not in text
    copy_path.write_text(text.replace(code_stub(language)[0], "# 我的答案"), encoding="utf-8")
    assert classroom.main(["student", "--edition", language, "--out", str(out), lesson.stem[:2]]) == 0
    assert "0 written, 1 skipped" in capsys.readouterr().out and "# 我的答案" in copy_path.read_text("utf-8")
    assert classroom.main(["student", "--edition", language, "--out", str(NOTEBOOKS / "x"), lesson.stem[:2]]) == 2
    assert "--out must be outside the lessons' folder" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        classroom.main(["student", "--edition", "fr", "--out", str(out)])
    assert "invalid choice: 'fr'" in capsys.readouterr().err


@pytest.mark.slow
def test_executed_edition_student_copy_answers_every_check_in_its_language(tmp_path):
    """An edition's copy, run untouched from a student folder, runs to the end: every check answers with one line
    in the edition's language (the placeholder hint), and nothing else fails."""
    from nbclient import NotebookClient

    from attention_lab import i18n
    from attention_lab.teaching.checks import NotYet, lesson00

    lesson, language = min(((p.values[0], p.values[1]) for p in EDITION_LESSONS), key=lambda lv: _stub_cost(lv[0]))
    report = classroom.write_student_copies([lesson], tmp_path / "student", language=language)
    nb = nbformat.read(report.written[0], as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    NotebookClient(nb, timeout=120, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(tmp_path / "student")}}).execute()
    first = _answer_cells(nbformat.read(lesson, as_version=4))[0]
    hints = [(i, o) for i, c in enumerate(nb.cells) for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert all(o["ename"] == "NotYet" for _, o in hints), hints
    i18n.set_language(language)
    try:
        with pytest.raises(NotYet) as untouched:  # what a check says to an untouched answer, in the language
            lesson00.weights_shape(..., n_tokens=5)
    finally:
        i18n.set_language("en")
    placeholder = untouched.value.hint
    after = [o for i, o in hints if i > first]
    assert after and all(placeholder in o["evalue"] for o in after), "every check speaks the edition's placeholder"
    assert i18n.translate("Not yet:", language) in after[0]["traceback"][0]
    demo = [o for i, o in hints if i < first]
    assert demo and re.search(r"[\u4e00-\u9fff]", demo[0]["evalue"]), "the demonstration's hint is in Chinese"
