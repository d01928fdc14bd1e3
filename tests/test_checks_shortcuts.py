"""No shortcut passes a function check (issue 34, part 3). For every exercise whose answer is a function, built
from the corpus's first right answer (tests/answers/) and the inputs the check gives it (``inputs_tried``):

- an answer typed in from the example (the example's result, returned whatever the input) is refused;
- each number argument written in at the example's value, dropped (1 in its place) or swapped with another is
  refused, wherever that changes the answer at all (checked on other sizes: 05/2's head count and 06/3's layer
  count do not enter the answer, and a product does not change when two factors swap);
- every size of every tensor input takes two values or more over the inputs tried, so no size of the example can be
  written in either (a size that is 1 everywhere is the axis a keepdim reduction leaves, not a size).
"""

import copy
import functools
import itertools
import random

import pytest
import torch
from _check_helpers import inputs_tried
from answers import lessons

from attention_lab.teaching.checks import NotYet


def _function_checks():
    """(exercise, check, a right answer, its attempt's args and kwargs), one per check whose answer is a function."""
    found = {}
    for attempts in lessons().values():
        for attempt in attempts:
            if attempt.right and callable(attempt.answer) and attempt.check not in found:
                found[attempt.check] = attempt
    return [pytest.param(a, id=f"{a.exercise} {a.check.__name__}") for a in found.values()]


CHECKS = _function_checks()


def _verdict(attempt, answer) -> bool:
    """Whether the check accepts ``answer`` in place of the attempt's (a refusal is a NotYet, nothing else)."""
    try:
        attempt.check(answer, *attempt.args, **attempt.kwargs)
    except NotYet:
        return False
    return True


def _tried(attempt) -> list[tuple]:
    return inputs_tried(attempt.check, attempt.answer, *attempt.args, **attempt.kwargs)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def test_every_lesson_has_its_function_checks_here():
    exercises = {param.values[0].exercise for param in CHECKS}
    assert {"03/4", "05/2", "05/3", "06/1b", "06/3", "09/1", "10/2", "11/1", "11/2", "12/1", "12/2",
            "12/3", "13/1", "13/2", "13/3", "14/1", "14/2", "14/3"} <= exercises
    assert len(CHECKS) >= 30, sorted(exercises)


@pytest.mark.parametrize("attempt", CHECKS)
def test_an_answer_typed_in_from_the_example_is_refused(attempt, capsys):
    right = attempt.answer
    first = []

    @functools.wraps(right)
    def typed_in(*inputs):
        if not first:
            first.append(right(*inputs))  # the example's result, worked out once
        return copy.deepcopy(first[0])

    assert not _verdict(attempt, typed_in), f"{attempt.exercise}: the example's result, typed in, passes"


def _shortcuts(example, right):
    """(what it is, the learner's function) for each number argument written in, dropped or swapped."""
    numbers = [p for p, value in enumerate(example) if _is_number(value)]
    for p in numbers:
        yield f"argument {p} written in as {example[p]!r}", lambda *x, p=p: right(*x[:p], example[p], *x[p + 1:])
        yield f"argument {p} left out", lambda *x, p=p: right(*x[:p], type(example[p])(1), *x[p + 1:])
    for p, q in itertools.combinations(numbers, 2):
        if type(example[p]) is type(example[q]):
            yield f"arguments {p} and {q} swapped", lambda *x, p=p, q=q: right(
                *[x[q] if i == p else x[p] if i == q else v for i, v in enumerate(x)])


def _same_everywhere(shortcut, right, tried) -> bool:
    """Whether ``shortcut`` agrees with ``right`` on every input tried with its numbers drawn at random: then it is
    not a mistake (an argument the answer does not depend on, two factors of a product)."""
    generator = random.Random(0)
    for _ in range(4):
        for inputs in tried:
            drawn = tuple((generator.randint(2, 40) if isinstance(v, int) else generator.uniform(0.05, 2.0))
                          if _is_number(v) else v for v in inputs)
            try:
                mine, want = shortcut(*drawn), right(*drawn)
            except Exception:  # sizes that do not fit the tensors, say: not comparable, so not the same
                return False
            if not _equal(mine, want):
                return False
    return True


def _equal(a, b) -> bool:
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        a, b = torch.as_tensor(a), torch.as_tensor(b)
        return a.shape == b.shape and torch.equal(a, b)
    return a == b


@pytest.mark.parametrize("attempt", CHECKS)
def test_a_number_argument_written_in_dropped_or_swapped_is_refused(attempt, capsys):
    tried = _tried(attempt)
    right = attempt.answer
    passed = []
    for label, shortcut in _shortcuts(tried[0], right):
        functools.update_wrapper(shortcut, right)
        if not _same_everywhere(shortcut, right, tried) and _verdict(attempt, shortcut):
            passed.append(label)
    assert not passed, f"{attempt.exercise} accepts: {passed}"


def _sizes(value) -> list[tuple[str, int]]:
    """(which size, how big) of a tensor (each axis counted from the last) or a list of tensors (its length too)."""
    if isinstance(value, torch.Tensor):
        return [(f"axis -{k}", value.shape[-k]) for k in range(1, value.dim() + 1)]
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, torch.Tensor) for v in value):
        return [("length", len(value))] + [(f"item {i} {name}", size) for i, item in enumerate(value)
                                          for name, size in _sizes(item)]
    return []


@pytest.mark.parametrize("attempt", CHECKS)
def test_every_size_of_a_tensor_input_takes_two_values(attempt, capsys):
    tried = _tried(attempt)
    constant = []
    for position in range(len(tried[0])):
        seen = {}
        for inputs in tried:
            for name, size in _sizes(inputs[position]):
                seen.setdefault(name, set()).add(size)
        constant += [f"input {position} {name} = {sizes.pop()}" for name, sizes in seen.items()
                     if len(sizes) == 1 and sizes != {1} and all(name in dict(_sizes(i[position])) for i in tried)]
    assert not constant, f"{attempt.exercise}: the same size on every input: {constant}"
