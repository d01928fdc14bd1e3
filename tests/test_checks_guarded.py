"""Every exercise check of every lesson is guarded: an error while checking (here, a call without its arguments)
becomes the package's one-line hint, never a traceback; and every check module holds only checks its lesson calls."""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import nbformat
import pytest

from attention_lab.teaching import checks

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
LESSON_MODULES = sorted(info.name for info in pkgutil.iter_modules(checks.__path__) if re.fullmatch(r"lesson\d\d",
                                                                                                   info.name))


def _public_functions(name: str) -> dict[str, object]:
    module = importlib.import_module(f"{checks.__name__}.{name}")
    return {key: value for key, value in vars(module).items()
            if callable(value) and not key.startswith("_") and getattr(value, "__module__", "") == module.__name__}


CHECKS = [(module, name, fn) for module in LESSON_MODULES for name, fn in _public_functions(module).items()]


def test_every_lesson_has_a_check_module():
    lessons = sorted(path.name[:2] for path in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    assert [module[-2:] for module in LESSON_MODULES] == lessons


@pytest.mark.parametrize(("module", "name", "check"), CHECKS, ids=[f"{m}.{n}" for m, n, _ in CHECKS])
def test_every_check_turns_an_error_into_a_hint(module, name, check):
    with pytest.raises(AssertionError) as error:
        check()  # no answer at all: the check itself fails with a TypeError, which the guard must turn into a hint
    message = str(error.value)
    assert message.startswith("Not yet") and "\n" not in message, f"{module}.{name}: {message!r}"
    assert "TypeError" in message  # the hint names the error it caught


@pytest.mark.parametrize("module", LESSON_MODULES)
def test_every_check_is_called_by_its_lesson(module):
    lesson = next(NOTEBOOKS.glob(f"{module[-2:]}_*.ipynb"))
    code = "\n".join(cell.source for cell in nbformat.read(lesson, as_version=4).cells if cell.cell_type == "code")
    called = set(re.findall(r"\bcheck\.(\w+)\s*\(", code))
    defined = set(_public_functions(module))
    assert defined == called, (f"{module} defines {sorted(defined - called)} that {lesson.name} never calls; "
                               f"{lesson.name} calls {sorted(called - defined)} that {module} lacks")
