"""Answers that are functions: the learner writes ``f(...)`` and the check calls it on several inputs, so that an
answer written in for the example, or a formula that agrees with the right one on one example only, fails.

:func:`check_formula` is the check of a formula that returns one whole number (a window, a count of operations):
a common mistake is named only when the learner's function gives that mistake's numbers on every input, so a hint
is never shown to an answer that only shares one value with the mistake it names.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ...i18n import Message, msg
from ._core import call_learner, correct, fallback_hint, hint, learner_name, right_for_some_inputs, whole_number


def expect_function(answer: object, signature: str) -> Callable[..., object]:
    """The learner's function, or a hint that says what to define (a value or ``None`` where a function belongs).

    Shape: no tensors.
    """
    if not callable(answer):
        hint(msg("define a function {signature} and pass the function itself (its name, without brackets)",
                 signature=signature))
    return answer  # type: ignore[return-value]


def check_formula(answer: object, *, signature: str, inputs: Sequence[tuple[int, ...]], rule: Callable[..., int],
                  mistakes: Sequence[tuple[Callable[..., int], str | Message]],
                  describe: Callable[..., str | Message], last_hint: str | Message, success: str | Message,
                  call: Callable[..., object] = call_learner) -> None:
    """Call the learner's function on every input, then: ``success`` when it agrees with ``rule`` on all of them;
    the hint of the first mistake it agrees with on all of them; a hint naming an input where it was right and one
    where it was not; or ``last_hint`` (rendered with ``where=describe(*input)`` of the first wrong input).

    ``call`` calls the learner's function (:func:`~._core.call_prediction` refuses a measured count).

    Shape: no tensors; each input a tuple of whole numbers, each result one whole number.
    """
    fn = expect_function(answer, signature)
    name = learner_name(fn)
    got = [whole_number(call(fn, *args), msg("what {name} returns for {where}", name=name, where=describe(*args)))
           for args in inputs]
    right = [rule(*args) for args in inputs]
    if got == right:
        correct(success)
        return
    for formula, message in mistakes:
        if got == [formula(*args) for args in inputs]:
            hint(message)
    wrong = next(index for index, (a, b) in enumerate(zip(got, right)) if a != b)
    fine = next((index for index, (a, b) in enumerate(zip(got, right)) if a == b), None)
    if fine is not None:
        hint(right_for_some_inputs(name, describe(*inputs[fine]), describe(*inputs[wrong])))
    fallback_hint(msg("for {where}: {hint}", where=describe(*inputs[wrong]), hint=last_hint))
