"""The Makefile's learner path: `make student` writes each missing student copy once and never touches one that
is there (a learner's work), and `make lab` opens those copies, not the solution notebooks.

The targets run for real in a scratch copy of the project (the Makefile, tools/ and a few small lessons), with a
stand-in .venv whose python is this one and whose stamps are current, so nothing is installed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from attention_lab.teaching.solution_markup import BEGIN_SOLUTION, END_SOLUTION

ROOT = Path(__file__).resolve().parent.parent
MAKE = shutil.which("make")

pytestmark = pytest.mark.skipif(MAKE is None or sys.platform == "win32", reason="needs make (macOS, Linux)")


def _lesson(path: Path, answer: str) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# A lesson\n\n## Exercises"),
        nbformat.v4.new_code_cell(f"x = ...\n{BEGIN_SOLUTION}\nx = {answer}\n{END_SOLUTION}"),
        nbformat.v4.new_code_cell("assert x is not None"),
    ]
    nbformat.write(nb, path)


@pytest.fixture
def scratch(tmp_path):
    """A copy of the project's Makefile and tools with two lessons and a ready (stand-in) environment."""
    for name in ("Makefile", "requirements.txt", "requirements-dev.txt", "pyproject.toml"):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "tools", tmp_path / "tools")
    (tmp_path / "notebooks").mkdir()
    _lesson(tmp_path / "notebooks" / "00_first.ipynb", "41 + 1")
    _lesson(tmp_path / "notebooks" / "01_second.ipynb", "'forty-two'")
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')  # this environment's python
    (bin_dir / "python").chmod(0o755)
    earlier = time.time() - 3600  # the stamps are newer than every input: make sees an installed environment
    for path in tmp_path.rglob("*"):
        os.utime(path, (earlier, earlier))
    for stamp in (".requirements.stamp", ".dev.stamp"):
        (tmp_path / ".venv" / stamp).touch()
    return tmp_path


def _make(project: Path, *targets: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    result = subprocess.run([MAKE, "--no-print-directory", *targets], cwd=project, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    return result


@pytest.mark.slow
def test_make_student_writes_only_missing_copies_and_keeps_the_learners_work(scratch):
    # a learner's answered copy of lesson 00 is there already; lesson 01 has no copy yet (it came with a git pull)
    (scratch / "student").mkdir()
    mine = scratch / "student" / "00_first.ipynb"
    _lesson(mine, "6 * 7  # my answer")
    before = mine.read_bytes()

    written = _make(scratch, "student")  # one run of the real command (it imports torch: seconds)
    assert mine.read_bytes() == before, "make student overwrote a learner's copy"
    new = scratch / "student" / "01_second.ipynb"
    assert new.exists(), written.stdout
    assert "'forty-two'" not in new.read_text() and "YOUR CODE HERE" in new.read_text()
    assert "01_second" in written.stdout and "00_first" not in written.stdout

    again = _make(scratch, "student")  # nothing missing: make does not even start Python
    assert "copy of every lesson" in again.stdout and "classroom" not in again.stdout
    assert mine.read_bytes() == before


def test_make_lab_opens_the_student_copies(scratch):
    plan = _make(scratch, "-n", "lab").stdout  # -n: print the commands, run none
    assert "attention_lab.teaching.classroom student --out student/" in plan
    jupyter = [line for line in plan.splitlines() if "jupyter lab" in line]
    assert len(jupyter) == 1 and "--LabApp.default_url=/lab/tree/student" in jupyter[0], plan


def test_make_test_skips_the_install_when_the_environment_is_current(scratch):
    plan = _make(scratch, "-n", "test").stdout
    assert "install_env.py" not in plan and "pip" not in plan, plan
    assert "pytest" in plan and "-n 2 --dist loadfile" in plan


def test_make_lab_edition_opens_that_editions_student_copies(scratch):
    (scratch / "notebooks" / "zh-CN").mkdir()
    _lesson(scratch / "notebooks" / "zh-CN" / "00_first.ipynb", "41 + 1")
    plan = _make(scratch, "-n", "lab", "EDITION=zh-CN").stdout
    assert "classroom student --edition zh-CN --out student/zh-CN/" in plan and 'missing="00_first.ipynb"' in plan
    jupyter = [line for line in plan.splitlines() if "jupyter lab" in line]
    assert len(jupyter) == 1 and "--LabApp.default_url=/lab/tree/student/zh-CN " in jupyter[0] + " ", plan
    wrong = subprocess.run([MAKE, "-n", "lab", "EDITION=fr"], cwd=scratch, capture_output=True, text=True)
    assert wrong.returncode != 0 and "EDITION must be zh-CN or zh-TW" in wrong.stderr


def test_make_test_numerics_runs_every_lesson_under_other_numeric_paths_apart_from_make_test(scratch):
    plan = _make(scratch, "-n", "test-numerics").stdout
    assert "install_env.py" not in plan, plan
    assert "tools/check_numerics.py --jobs 2 notebooks/*.ipynb" in plan, plan
    one = _make(scratch, "-n", "test-numerics", "NB=notebooks/00_first.ipynb").stdout
    assert "tools/check_numerics.py --jobs 2 notebooks/00_first.ipynb" in one, one
    assert "check_numerics" not in _make(scratch, "-n", "test").stdout, "make test keeps its time budget"


def test_make_test_opens_a_few_lessons_in_the_browser_and_test_browser_every_lesson(scratch):
    plan = _make(scratch, "-n", "test").stdout
    assert '-m "not browser_all"' in plan and plan.rstrip().endswith("tests notebooks"), plan
    browser = _make(scratch, "-n", "test-browser").stdout
    pytest_line = next(line for line in browser.splitlines() if "-m pytest" in line)
    assert pytest_line.endswith(" tests/browser/test_lessons_in_browser.py tests/browser/test_web_book.py"), browser
    assert "browser_all" not in browser, browser
    assert "install_env.py" not in browser, browser


def test_make_test_fast_runs_the_unit_tests_and_the_english_lessons_only(scratch):
    (scratch / "notebooks" / "zh-CN").mkdir()
    _lesson(scratch / "notebooks" / "zh-CN" / "00_first.ipynb", "41 + 1")
    plan = _make(scratch, "-n", "test-fast").stdout
    pytest_line = next(line for line in plan.splitlines() if "-m pytest" in line)
    assert '-m "not browser and not slow"' in pytest_line, plan
    assert pytest_line.endswith("tests notebooks/00_first.ipynb notebooks/01_second.ipynb"), plan
    assert "book.build" not in plan, plan
