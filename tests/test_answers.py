"""Every answer of the corpus in tests/answers/ through the lessons' own checks: right answers accepted, wrong
ones rejected with the hint that names their mistake, never a traceback (tools/answer_report.py counts them)."""

import importlib
import inspect
import pkgutil

import pytest
from answers import Attempt, lessons, run

import attention_lab.teaching.checks as checks_package

ATTEMPTS = [attempt for attempts in lessons().values() for attempt in attempts]


@pytest.mark.parametrize("attempt", ATTEMPTS, ids=lambda a: f"{a.exercise} {a.label}")
def test_the_learner_sees_the_right_verdict_and_a_hint_of_one_line(attempt: Attempt, capsys):
    """One run of the check per answer (some checks train or measure a model): its verdict, and for a wrong answer
    that the hint is one line."""
    outcome = run(attempt, lambda: capsys.readouterr().out)
    assert outcome.verdict(attempt) == "ok", f"{attempt.exercise} {attempt.label!r}: {outcome.kind}: {outcome.text}"
    if not attempt.right:
        assert "\n" not in outcome.text, (f"{attempt.exercise} {attempt.label!r}: a hint of several lines: "
                                          f"{outcome.text!r}")


def _checks_of(module_name: str) -> list[str]:
    """The exercise checks a lesson's check module offers: the public functions it defines itself."""
    module = importlib.import_module(f"attention_lab.teaching.checks.{module_name}")
    return [name for name in getattr(module, "__all__", dir(module)) if not name.startswith("_")
            and callable(getattr(module, name)) and inspect.isfunction(getattr(module, name))
            and getattr(module, name).__module__ == module.__name__]  # its own checks, not _core's helpers


CHECK_MODULES = sorted(m.name for m in pkgutil.iter_modules(checks_package.__path__) if m.name.startswith("lesson"))


@pytest.mark.parametrize("module_name", CHECK_MODULES)
def test_every_check_of_every_lesson_is_tried_right_and_wrong(module_name):
    corpus = lessons().get(module_name, [])
    for check in _checks_of(module_name):
        tries = [a for a in corpus if a.check.__name__ == check]
        assert any(a.right for a in tries), f"{module_name}.{check}: no right answer in tests/answers/{module_name}.py"
        assert any(not a.right for a in tries), f"{module_name}.{check}: no wrong answer in tests/answers/"
