"""Student copies of the lessons: solutions replaced by stubs, ready to hand out.

    python -m attention_lab.teaching.classroom student --out student/           # every lesson in notebooks/
    python -m attention_lab.teaching.classroom student --out student/ 02 03     # some (number, name or path)
    python -m attention_lab.teaching.classroom student --out student/ --force   # overwrite copies already there
    python -m attention_lab.teaching.classroom student --edition zh-CN --out student/zh-CN/   # 简体中文 edition

Answer cells hold their solution between a ``### BEGIN SOLUTION`` line and a ``### END SOLUTION`` line
(the nbgrader convention). In a student copy each region becomes ``# YOUR CODE HERE`` plus
``raise NotImplementedError(...)`` at the indentation of the ``BEGIN`` line; code outside the region
(a placeholder such as ``weights = ...``) stays. Outputs and execution counts of the answer cells and of
the check cells after them are cleared; every other cell (text, figures, checks) is kept as it is.
Notebook metadata is reduced to the ``python3`` kernelspec and the language name, cell metadata to the
keys Jupyter and nbgrader use (tags, nbgrader, editable, ...).

Files already in the output folder (a student's work) are never overwritten without ``--force``; the
command says which it skipped. An output folder inside the lessons' folder is refused: the copies would
sit among, and could replace, the solution notebooks. Only ``nbformat`` is needed (JupyterLab brings it).

The solution markup is read in :mod:`.solution_markup`; the lessons named on the command line and the output folder
are found in :mod:`.lesson_files`.
"""

from __future__ import annotations

import argparse
import copy
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from .lesson_files import EDITIONS, check_output_dir, resolve_lessons
from .solution_markup import names_used, strip_solutions

__all__ = ["KEPT_CELL_METADATA", "CopyReport", "check_call_pattern", "main", "student_notebook", "write_student_copies"]

# How lessons import their checks: `from attention_lab.teaching.checks import lesson00 as check`, `import
# attention_lab.teaching.checks.lesson02 as ex`, `from attention_lab.teaching.checks.lesson01 import scores_for_query`.
_CHECK_MODULE_IMPORT = re.compile(
    r"from\s+attention_lab\.teaching(?:\.checks)?\s+import\s+(?:\((?P<paren>[^)]*)\)|(?P<names>[\w \t,]+))"
    r"|import\s+attention_lab\.teaching\.checks(?:\.\w+)?\s+as\s+(?P<alias>\w+)"
)
_CHECK_FUNCTION_IMPORT = re.compile(
    r"from\s+attention_lab\.teaching\.checks\.\w+\s+import\s+(?:\((?P<paren>[^)]*)\)|(?P<names>[\w \t,]+))"
)
# The cell metadata a student copy keeps: the keys Jupyter and nbgrader read (a deep dive stays folded in the copy).
KEPT_CELL_METADATA = ("tags", "nbgrader", "editable", "deletable", "jupyter", "slideshow", "collapsed",
                      "jp-MarkdownHeadingCollapsed")
_KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}


@dataclass
class CopyReport:
    """What ``write_student_copies`` did: files written, files skipped, regions replaced per file."""

    written: list[Path] = field(default_factory=list)
    skipped: list[Path] = field(default_factory=list)
    regions: dict[Path, int] = field(default_factory=dict)


def _clean_cell_metadata(cell: nbformat.NotebookNode) -> None:
    kept = {key: value for key, value in cell.metadata.items() if key in KEPT_CELL_METADATA}
    cell.metadata = nbformat.from_dict(kept)


def check_call_pattern(nb: nbformat.NotebookNode) -> re.Pattern[str]:
    """A pattern matching a call to an exercise check, under the names this notebook imports checks as."""
    modules = {"checks"}  # `attention_lab.teaching.checks.lesson02.fn(...)`, `checks.lesson02.fn(...)`
    functions: set[str] = set()
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for match in _CHECK_MODULE_IMPORT.finditer(cell.source):
            if match["alias"]:
                modules.add(match["alias"])
                continue
            from_checks = ".checks" in match.group(0).split("import")[0]
            for item in (match["paren"] or match["names"]).split(","):
                words = item.split()
                if not words:
                    continue
                name, bound = words[0], words[-1]  # `lesson00 as check` -> ("lesson00", "check")
                if name == "checks" or name.startswith("lesson"):
                    modules.add(bound)
                elif from_checks:
                    functions.add(bound)
        for match in _CHECK_FUNCTION_IMPORT.finditer(cell.source):
            listed = match["paren"] or match["names"]
            functions.update(item.split()[-1] for item in listed.split(",") if item.split())
    names = "|".join(sorted(map(re.escape, modules)))
    called = rf"\b(?:{names})\s*\.\s*(?:\w+\s*\.\s*)?\w+\s*\("
    if functions:
        called += rf"|(?<![\w.])(?:{'|'.join(sorted(map(re.escape, functions)))})\s*\("
    return re.compile(called)


def student_notebook(
    nb: nbformat.NotebookNode, *, where: str = "notebook", language: str = "en"
) -> tuple[nbformat.NotebookNode, int]:
    """A student copy of one lesson (``nb`` is not modified) and the number of regions replaced; the stubs are
    in ``language`` (a Chinese edition's copy: ``"zh-CN"`` or ``"zh-TW"``).

    An exercise is an answer cell (one with a solution region) and the code cells after it up to the
    next markdown cell (its check cells). Any other cell that calls a check is cleared as well (a success
    line can give the answer away), except one tagged ``raises-exception``: a lesson's demonstration of
    what a failing check looks like, which shows only a hint.
    """
    student = copy.deepcopy(nb)
    check_call = check_call_pattern(nb)
    total = 0
    in_exercise = False
    for index, cell in enumerate(student.cells):
        label = f"{where}, cell {index} (id {cell.get('id', '?')})"
        _clean_cell_metadata(cell)
        if cell.cell_type == "markdown":
            in_exercise = False
            cell.source, count = strip_solutions(cell.source, markdown=True, where=label, language=language)
            total += count
        elif cell.cell_type == "code":
            later = names_used([c.source for c in student.cells[index + 1:] if c.cell_type == "code"])
            cell.source, count = strip_solutions(cell.source, where=label, answers=later, language=language)
            total += count
            in_exercise = in_exercise or count > 0
            demo = "raises-exception" in cell.metadata.get("tags", [])
            if in_exercise or (check_call.search(cell.source) and not demo):
                cell.outputs = []
                cell.execution_count = None
    metadata = {"kernelspec": dict(_KERNELSPEC), "language_info": {"name": "python"}}
    student.metadata = nbformat.from_dict(metadata)
    return student, total


def write_student_copies(lessons: Sequence[Path], out: Path, *, force: bool = False,
                         language: str = "en") -> CopyReport:
    """Write a student copy of each lesson into ``out`` (created if needed), with stubs in ``language``.

    Existing files are replaced only with ``force``. Every lesson is converted before anything is
    written, so a markup error leaves ``out`` untouched.
    """
    lessons = [Path(p) for p in lessons]
    folder = check_output_dir(Path(out), lessons)
    copies = []
    for lesson in lessons:
        student, count = student_notebook(nbformat.read(lesson, as_version=4), where=lesson.name,
                                          language=language)
        nbformat.validate(student)
        copies.append((lesson.name, student, count))
    folder.mkdir(parents=True, exist_ok=True)
    report = CopyReport()
    for name, student, count in copies:
        target = folder / name
        text = nbformat.writes(student) + "\n"
        if force:
            if target.is_symlink():
                target.unlink()  # replace the link itself, never the file it points to
            tmp = target.with_name(f".{name}.tmp")
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, target)
        else:
            try:
                with open(target, "x", encoding="utf-8") as handle:  # "x" fails if anything is there
                    handle.write(text)
            except FileExistsError:
                report.skipped.append(target)
                continue
        report.written.append(target)
        report.regions[target] = count
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m attention_lab.teaching.classroom",
                                     description="Classroom tools for the attention-lab lessons.")
    commands = parser.add_subparsers(dest="command", required=True)
    student = commands.add_parser(
        "student", help="write student copies (solutions replaced by stubs)",
        description="Write student copies of lessons: every solution region is replaced by a stub, "
                    "exercise outputs are cleared, the rest is kept.")
    student.add_argument("--out", required=True, type=Path, help="output folder (outside notebooks/)")
    student.add_argument("--force", action="store_true", help="overwrite copies already in --out")
    student.add_argument("--edition", choices=EDITIONS, default=None,
                         help="a Chinese edition: lessons from notebooks/EDITION/, stubs in that language "
                              "(default: the English lessons)")
    student.add_argument("lessons", nargs="*",
                         help="lesson paths, names or numbers such as 02 (default: notebooks/*.ipynb)")
    args = parser.parse_args(argv)

    try:
        report = write_student_copies(resolve_lessons(args.lessons, edition=args.edition), args.out,
                                      force=args.force, language=args.edition or "en")
    except (OSError, ValueError) as error:  # MarkupError is a ValueError
        print(f"error: {error}", file=sys.stderr)
        return 2
    for path in report.written:
        count = report.regions[path]
        print(f"wrote   {path}  ({count} solution region{'s' * (count != 1)} replaced)")
    for path in report.skipped:
        print(f"skipped {path}  (already there, maybe a student's work; --force overwrites it)")
    print(f"{len(report.written)} written, {len(report.skipped)} skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
