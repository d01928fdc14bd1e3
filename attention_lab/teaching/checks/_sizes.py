"""Checks whose answer is a function of the sizes (lessons 06, 10 and 11): call it on several sizes, and name the
mistake.

The sizes are chosen so that the common wrong formulas give numbers different from the right one and from each
other. :func:`check_function` accepts a function that matches the right formula on every size; one that matches a
wrong formula on every size gets that formula's hint; one that ignores an argument (the answer stays the same
when the argument doubles) is told so, and told that it uses the example's value only when it gives the right
answer for that value on every size; one right for the exercise's example only is told so; a function that calls
the library's own answer, or measures (multiplies matrices, as a run under ``FlopCounterMode`` does), is asked for
the arithmetic.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence

from ... import reference
from ...generation import cache_size, interleaved
from ...i18n import Message, msg
from ...measure import cost
from ._core import NotYet, call_prediction, fallback_hint, hint, whole_number

Case = Mapping[str, int]
Formula = Callable[..., float]

# what the exercises ask to work out by hand: the library's answers, known by their code objects, so that a call is
# seen however the learner reached the function (an alias, a helper, getattr)
LIBRARY = {fn.__code__: fn.__name__ for fn in (cost.attention_flops, cost.attention_memory_bytes,
                                               reference.attention_flops, reference.kv_cache_bytes,
                                               cache_size.kv_cache_bytes, interleaved.interleaved_kv_cache_bytes,
                                               reference.interleaved_kv_cache_bytes)}


@contextlib.contextmanager
def _library_calls() -> Iterator[set[str]]:
    """The names of the library's answers called while the block runs (a profile hook sees every Python call)."""
    called: set[str] = set()
    previous = sys.getprofile()

    def watch(frame, event, arg):  # the profile hook's signature; arg is unused
        if event == "call" and frame.f_code in LIBRARY:
            called.add(LIBRARY[frame.f_code])

    sys.setprofile(watch)
    try:
        yield called
    finally:
        sys.setprofile(previous)


def _learner_values(fn: object, cases: Sequence[Case]) -> list[int]:
    """The learner's function on every case (its arguments in the order of the exercise's def line), each result a
    whole number; errors and non-numbers become hints, and so do a call of the library's own answer and a matrix
    product (a measurement, where the exercise asks for the arithmetic)."""
    results = []
    with _library_calls() as called:
        try:
            for case in cases:
                results.append(call_prediction(fn, *case.values()))
        except NotYet:
            if not called:
                raise
    if called:
        hint(msg("your function calls {used}: that is the library's answer; write the arithmetic yourself, from "
                 "the sizes it is given", used=", ".join(sorted(called))))
    return [whole_number(result, msg("what {name} returns", name=_name(fn))) for result in results]


def _name(fn: object) -> str | Message:
    name = getattr(fn, "__name__", "")
    return name if name.isidentifier() else msg("your function")


def _either(names: Sequence[str]) -> str | Message:
    """``a or b or c`` in the learner's language."""
    joined: str | Message = names[0]
    for name in names[1:]:
        joined = msg("{first} or {second}", first=joined, second=name)
    return joined


def _ignores(fn: object, case: Case, key: str, right: Formula) -> bool:
    """Whether the learner's result stays the same when ``key`` doubles, where the right answer changes."""
    doubled = {**case, key: 2 * case[key]}
    if right(**doubled) == right(**case):
        return False
    before, after = _learner_values(fn, [case, doubled])
    return before == after


def _shown(case: Case) -> str:
    return ", ".join(f"{key}={value}" for key, value in case.items())


def check_function(fn: object, cases: Sequence[Case], right: Formula, mistakes: Sequence[tuple[Formula, Message]],
                    *, fallback: Message, also_right: Sequence[Formula] = (), probe: bool = True,
                    more_mistakes: Callable[[list[int]], None] | None = None) -> tuple[list[int], Formula]:
    """Compare ``fn`` with ``right`` (or a formula of ``also_right``) on every case and return the learner's values
    and the formula they follow. Otherwise: a wrong formula matched on every case gets its hint;
    ``more_mistakes(values)`` may give a hint of its own (a mistake it can prove from the values); a function that
    ignores an argument, or is right for the exercise's example only, is told so; else the ``fallback`` hint.
    ``probe`` doubles each argument in turn to find one the function ignores (for exact products; a rounded answer
    such as a batch may stay put when an argument doubles).

    Shape: no tensors; each case maps the function's arguments, in its def line's order, to whole numbers.
    """
    got = _learner_values(fn, cases)
    for formula in (right, *also_right):
        if got == [formula(**case) for case in cases]:
            return got, formula
    for formula, message in mistakes:
        if got == [formula(**case) for case in cases]:
            hint(message)
    if more_mistakes is not None:
        more_mistakes(got)
    ignored = [key for key in cases[0] if probe and _ignores(fn, cases[0], key, right)]
    if ignored:
        for example in ({key: cases[0][key] for key in ignored}, cases[0]):  # those arguments, or all of them
            if got != [right(**{**case, **example}) for case in cases]:
                continue  # else: provably the example's value written in
            hint(msg("{name} gives the same number when {args} doubles: it gives the right answer for {shown}, "
                     "the example's, on every size; use the argument instead of the example's number",
                     name=_name(fn), args=_either(ignored), shown=_shown(example)))
        hint(msg("{name} gives the same number when {args} doubles, and it should not: the right answer changes "
                 "with {args}; check where your formula uses it", name=_name(fn), args=_either(ignored)))
    expected = [right(**case) for case in cases]
    if got[0] == expected[0]:  # the exercise's example is right, another size is not
        miss = next(case for case, mine, want in zip(cases, got, expected) if mine != want)
        hint(msg("{name} is right for the exercise's sizes but not for {miss}: check each factor against the "
                 "arguments", name=_name(fn), miss=_shown(miss)))
    fallback_hint(fallback)
