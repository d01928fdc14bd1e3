"""How long a lesson takes to read: words and code lines of its core path, its deep dives and its exercises.

    python tools/lesson_stats.py notebooks/*.ipynb

A lesson is split by its markdown headings:

- a heading that contains "Deep dive" starts a deep dive, which runs until the next heading of the same or a higher
  level; JupyterLab shows it collapsed when the heading cell's metadata has ``"jp-MarkdownHeadingCollapsed": true``;
- a heading that names "Exercises" (or "Exercise N") starts the exercises, likewise;
- everything else is the core path.

Reading time is words at 200 a minute plus code at 20 lines a minute (non-blank lines). The first cell states
``**Time:** N minutes to read`` for the core path; :func:`stated_minutes` reads it back so a test can compare.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import nbformat

WORDS_PER_MINUTE = 200
CODE_LINES_PER_MINUTE = 20
_HEADING = re.compile(r"^(#{1,6})\s+(.*)$")


@dataclass(frozen=True)
class LessonStats:
    """Words and non-blank code lines per part of a lesson (``core``, ``deep_dive``, ``exercises``)."""

    words: dict[str, int]
    code_lines: dict[str, int]
    collapsed_deep_dives: int
    deep_dives: int

    def minutes(self, part: str = "core") -> float:
        """Reading time of one part: words / 200 + code lines / 20. Shape: a float, in minutes."""
        return self.words[part] / WORDS_PER_MINUTE + self.code_lines[part] / CODE_LINES_PER_MINUTE


def _heading(cell) -> tuple[int, str] | None:
    if cell.cell_type != "markdown":
        return None
    first = cell.source.lstrip().splitlines()[0] if cell.source.strip() else ""
    match = _HEADING.match(first)
    return (len(match[1]), match[2]) if match else None


def lesson_stats(path: str | Path) -> LessonStats:
    """Count the words and code lines of each part of the lesson at ``path``. Shape: a :class:`LessonStats`."""
    nb = nbformat.read(str(path), as_version=4)
    words = {"core": 0, "deep_dive": 0, "exercises": 0}
    code = dict.fromkeys(words, 0)
    part, level = "core", 0
    deep, collapsed = 0, 0
    for cell in nb.cells:
        heading = _heading(cell)
        if heading is not None:
            h_level, title = heading
            if part != "core" and h_level <= level:
                part, level = "core", 0
            if "deep dive" in title.lower():
                part, level = "deep_dive", h_level
                deep += 1
                collapsed += bool(cell.metadata.get("jp-MarkdownHeadingCollapsed"))
            elif re.search(r"\bexercises?\b", title.lower()) and part == "core":
                part, level = "exercises", h_level
        if cell.cell_type == "markdown":
            words[part] += len(re.findall(r"\S+", cell.source))
        elif cell.cell_type == "code":
            code[part] += sum(1 for line in cell.source.splitlines() if line.strip())
    return LessonStats(words=words, code_lines=code, collapsed_deep_dives=collapsed, deep_dives=deep)


def stated_minutes(path: str | Path) -> int | None:
    """The reading time the lesson's first cell states (``**Time:** N minutes to read``), or None."""
    nb = nbformat.read(str(path), as_version=4)
    match = re.search(r"\*\*Time:\*\*\s*(?:about\s*)?(\d+)\s*min\w*\s*to\s*read", nb.cells[0].source)
    return int(match[1]) if match else None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python tools/lesson_stats.py",
                                     description="Words, code lines and reading minutes of each lesson's parts.")
    parser.add_argument("paths", nargs="+", metavar="LESSON.ipynb", help="the lessons to count")
    paths = parser.parse_args(sys.argv[1:] if argv is None else argv).paths
    print(f"{'lesson':<40} {'core words':>10} {'code':>5} {'min':>5} {'stated':>6} "
          f"{'deep words':>10} {'code':>5} {'min':>5} {'exercise words':>14}")
    for path in paths:
        s = lesson_stats(path)
        stated = stated_minutes(path)
        print(f"{Path(path).name:<40} {s.words['core']:>10} {s.code_lines['core']:>5} "
              f"{math.ceil(s.minutes('core')):>5} {stated if stated is not None else '-':>6} "
              f"{s.words['deep_dive']:>10} {s.code_lines['deep_dive']:>5} {math.ceil(s.minutes('deep_dive')):>5} "
              f"{s.words['exercises']:>14}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
