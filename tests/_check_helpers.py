"""What every exercise-check test does: accept a right answer, reject a wrong one with the hint meant for it."""

import functools

import pytest

from attention_lab import set_language


def accepts(capsys, check, *args, **kwargs):
    """``check`` prints its ``Correct: ...`` line for this answer."""
    check(*args, **kwargs)
    assert capsys.readouterr().out.startswith("Correct")


def rejects(check, *args, hint=None, match=None, **kwargs):
    """``check`` refuses this answer with a hint matching ``hint`` (or ``match``: a regex)."""
    pattern = hint if hint is not None else match
    if pattern is None:
        raise TypeError("rejects() needs the expected hint: hint=... or match=...")
    with pytest.raises(AssertionError, match="Not yet: .*" + pattern):
        check(*args, **kwargs)


def hint_in(language, check, *args, **kwargs) -> str:
    """The hint ``check`` gives this wrong answer with the package's messages in ``language`` (then English again)."""
    set_language(language)
    try:
        with pytest.raises(AssertionError) as error:
            check(*args, **kwargs)
    finally:
        set_language("en")
    return str(error.value)


def inputs_tried(check, right, *args, **kwargs) -> list[tuple]:
    """The inputs ``check`` gives the learner's function, in order: ``right`` (a right answer) runs behind a recorder,
    so a test sees the cases a check tries (its first: the exercise's example) as a learner's function would, without
    reading the check's private tables. The check must accept ``right``."""
    tried = []

    @functools.wraps(right)
    def recorder(*inputs):
        tried.append(inputs)
        return right(*inputs)

    check(recorder, *args, **kwargs)
    return tried


def only_on(example, wrong, right):
    """A learner's function that gives ``wrong``'s answer on ``example`` (a tuple of inputs) and ``right``'s elsewhere:
    a check whose example tells ``wrong`` from ``right`` refuses it; one whose example cannot, accepts it."""

    @functools.wraps(right)
    def answer(*inputs):
        return (wrong if inputs == tuple(example) else right)(*inputs)

    return answer
