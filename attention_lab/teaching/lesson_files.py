"""Which files a student copy is made from and written to: lessons named on the command line, and an output folder
that must lie outside the lessons' folder."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

__all__ = ["EDITIONS", "check_output_dir", "resolve_lessons"]

_PROJECT_ROOT = Path(__file__).resolve().parents[2]  # attention_lab/teaching/<this file> -> the checkout
EDITIONS = ("zh-CN", "zh-TW")  # the Chinese editions, in notebooks/<edition>/ (built by tools/editions.py)


def _notebook_dirs(edition: str | None = None) -> list[Path]:
    """Where lessons live: ``notebooks/`` (or ``notebooks/<edition>/``) in the current folder and in this checkout
    (if present)."""
    dirs = []
    for base in (Path.cwd(), _PROJECT_ROOT):
        candidate = (base / "notebooks" / (edition or "")).resolve()
        if candidate.is_dir() and candidate not in dirs:
            dirs.append(candidate)
    return dirs


def resolve_lessons(names: Sequence[str], *, edition: str | None = None) -> list[Path]:
    """Lessons from paths, file names or number prefixes (``02``); every ``notebooks/*.ipynb`` if empty. With an
    ``edition`` (``"zh-CN"``), names and the default are looked up in ``notebooks/<edition>/``.

    Shape: names in, resolved paths out.
    """
    dirs = _notebook_dirs(edition)
    if not names:
        if not dirs:
            folder = f"notebooks/{edition}/" if edition else "notebooks/"
            raise FileNotFoundError(f"classroom student: no {folder} folder here or in the project; "
                                    f"run it from the project root or name the lessons"
                                    + ("; the editions are built by make editions" if edition else ""))
        lessons = sorted(dirs[0].glob("*.ipynb"))
        if not lessons:
            raise FileNotFoundError(f"classroom student: no lessons (*.ipynb) in {dirs[0]}")
        return lessons
    lessons = []
    for name in names:
        path = Path(name)
        found: list[Path] = []
        if path.is_file():
            found = [path.resolve()]
        else:
            stem = path.name.removesuffix(".ipynb")
            for folder in dirs:
                found = sorted(p for p in folder.glob("*.ipynb")
                               if p.stem == stem or p.stem.startswith(stem + "_"))
                if found:
                    break
        if not found:
            looked = ", ".join(map(str, dirs)) or "no notebooks/ folder"
            raise FileNotFoundError(f"classroom student: no lesson matches {name!r} (looked in {looked}); "
                                    f"give a path, a file name or a number such as 02")
        if len(found) > 1:
            names_found = ", ".join(p.name for p in found)
            raise FileNotFoundError(f"classroom student: {name!r} matches several lessons ({names_found}); "
                                    f"give the full name")
        if found[0] not in lessons:
            lessons.append(found[0])
    return lessons


def check_output_dir(out: Path, lessons: Iterable[Path]) -> Path:
    """``out`` resolved, or a ValueError when it lies inside a lessons' folder or is a file. Shape: a path in and
    out."""
    resolved = out.expanduser().resolve()  # follows symlinks, also when only part of the path exists
    protected = set(_notebook_dirs()) | {lesson.resolve().parent for lesson in lessons}
    for folder in sorted(protected):
        if resolved == folder or folder in resolved.parents:
            raise ValueError(f"classroom student: --out must be outside the lessons' folder {folder}, "
                             f"got {out} (resolves to {resolved}); copies there would mix with, and "
                             f"could replace, the solution notebooks; use e.g. --out student/")
    if resolved.exists() and not resolved.is_dir():
        raise ValueError(f"classroom student: --out must be a folder, got the file {out}")
    return resolved
