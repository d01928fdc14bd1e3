"""What every exercise-check test does: accept a right answer, reject a wrong one with the hint meant for it."""

import pytest


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
