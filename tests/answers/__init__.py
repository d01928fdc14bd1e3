"""Answers a learner might give, for every exercise of every lesson: the corpus that tests/test_answers.py puts
through the lessons' own checks and tools/answer_report.py counts. One module per lesson (``lessonNN.py``), each
with a list ``ATTEMPTS`` of :class:`Attempt`."""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from attention_lab.teaching.checks import NotYet

GENERIC = "<the check's general hint>"  # a wrong answer that no specific hint is expected to name


@dataclass(frozen=True)
class Attempt:
    """One try at one exercise: the check cell's call with this answer, and what the learner should see.

    ``hint`` is a regular expression the hint of a wrong answer must match (it names the mistake); ``GENERIC``
    when only the check's general hint fits. A right answer has ``right=True`` and no hint.
    """

    exercise: str  # "00/1": lesson, exercise (and part: "10/1b")
    label: str  # what the learner did, in a few words: "rows and columns swapped"
    check: Callable[..., Any]
    answer: object
    args: tuple = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    right: bool = False
    hint: str | None = None

    def __post_init__(self) -> None:
        if self.right == (self.hint is not None):
            raise TypeError(f"{self.exercise} {self.label!r}: a right answer has no hint, a wrong one needs one")


@dataclass(frozen=True)
class Outcome:
    kind: str  # "accepted", "rejected", "generic" (the general hint) or "traceback" (any other exception)
    text: str  # what the learner saw: the printed line, the hint, or the exception

    def verdict(self, attempt: Attempt) -> str:
        """"ok", or what went wrong: "right rejected", "wrong accepted", "traceback", "misleading", "generic"."""
        if self.kind == "traceback":
            return "traceback"
        if attempt.right:
            return "ok" if self.kind == "accepted" else "right rejected"
        if self.kind == "accepted":
            return "wrong accepted"
        if attempt.hint == GENERIC:
            return "ok" if self.kind == "generic" else "misleading"
        if re.search(attempt.hint, self.text):
            return "ok"
        return "generic" if self.kind == "generic" else "misleading"


def run(attempt: Attempt, capsys_read: Callable[[], str]) -> Outcome:
    """Put one attempt through its check; ``capsys_read`` returns what the check printed."""
    try:
        attempt.check(attempt.answer, *attempt.args, **attempt.kwargs)
    except NotYet as failed:
        return Outcome("generic" if failed.generic else "rejected", str(failed))
    except BaseException as error:
        return Outcome("traceback", f"{type(error).__name__}: {error}")
    printed = capsys_read()
    return Outcome("accepted" if printed.startswith("Correct") else "traceback", printed.strip())


def lessons() -> dict[str, list[Attempt]]:
    """Every lesson's attempts, by module name (``lesson00`` ...)."""
    found = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("lesson"):
            found[info.name] = importlib.import_module(f"{__name__}.{info.name}").ATTEMPTS
    return dict(sorted(found.items()))
