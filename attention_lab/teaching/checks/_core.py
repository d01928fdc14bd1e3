"""The shared parts of every exercise check."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable
from typing import Any, NoReturn, TypeVar

import torch
from torch.overrides import TorchFunctionMode

from ...i18n import Message, msg

F = TypeVar("F", bound=Callable[..., Any])

Mistake = tuple[Callable[[torch.Tensor], bool], str]


class NotYet(AssertionError):
    """A failed exercise check: the learner's answer is not right yet, and the message says why.

    It is an ``AssertionError``, so a "Run All", pytest and nbgrader stop on it like on any failed check. IPython
    (JupyterLab, and nbconvert/nbclient when they execute a notebook) shows an exception through its
    ``_render_traceback_()`` when it has one: this one shows the single line "Not yet: <hint>", with no frames of
    the package (they would show the check's logic, and they are not where the learner's mistake is).
    """

    def __init__(self, hint: str | Message, *, generic: bool = False) -> None:
        self.hint = str(hint)
        self.prefix = str(msg("Not yet:"))
        self.generic = generic  # the check's last resort, not a hint about one particular mistake
        self.space = "" if self.prefix.endswith("：") else " "  # no space after a full-width colon
        super().__init__(f"{self.prefix}{self.space}{self.hint}")

    def _render_traceback_(self) -> list[str]:
        # bold red, as IPython colours an error's name
        return [f"\x1b[1;31m{self.prefix}\x1b[0m{self.space}{self.hint}"]


def correct(message: str | Message) -> None:
    """Tell the learner the answer is right (a ``Message`` is rendered in the current language)."""
    print(msg("Correct: {message}", message=message))


def hint(message: str | Message) -> NoReturn:
    """Reject the answer with a hint about the mistake it shows (raises :class:`NotYet`)."""
    raise NotYet(message) from None


def fallback_hint(message: str | Message) -> NoReturn:
    """Reject an answer that matches none of the mistakes a check knows, with the check's general hint about the
    idea (raises :class:`NotYet` marked ``generic``, so the tests can count how often a learner gets only this)."""
    raise NotYet(message, generic=True) from None


def _describe_error(error: BaseException) -> str:
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return f"{type(error).__name__}" + (f" ({text[:160]})" if text else "")


def _short_repr(value: object) -> str:
    """An argument as a hint names it, on one line: a module's repr (several lines) becomes ``SelfAttention(...)``."""
    text = repr(value)
    return f"{type(value).__name__}(...)" if "\n" in text or len(text) > 80 else text


def learner_name(fn: object) -> Message:
    """How a hint names the learner's function: ``your layer_mult_adds`` for a ``def``, ``your function`` for a
    lambda or a callable object."""
    name = getattr(fn, "__name__", "")
    return msg("your {name}", name=name) if name.isidentifier() else msg("your function")


def call_learner(fn: object, *args: Any, what: str | Message | None = None, **kwargs: Any) -> Any:
    """Call the learner's function; an error raised inside it becomes a hint that names the error, not a traceback.

    ``what`` names the function in the hint; by default the learner's own name for it (:func:`learner_name`).

    Shape: whatever ``fn`` takes and returns.
    """
    what = learner_name(fn) if what is None else what
    if not callable(fn):
        hint(msg("{what} should be a function (a def or a lambda), got {type}; pass the function itself, not the "
                 "result of calling it", what=what, type=type(fn).__name__))
    try:
        return fn(*args, **kwargs)
    except NotYet:
        raise
    except NotImplementedError:
        hint(msg("{what} still raises NotImplementedError: replace that line with your code", what=what))
    except Exception as error:  # any error in the learner's code becomes a hint
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        others = [_short_repr(a) for a in args if not isinstance(a, torch.Tensor)]
        others += [f"{name}={_short_repr(value)}" for name, value in kwargs.items()
                   if not isinstance(value, torch.Tensor)]
        shapes, listed = [tuple(a.shape) for a in tensors], ", ".join(others)
        if tensors and others:
            called_with = (msg("inputs of shape {shapes} and the argument {others}", shapes=shapes, others=listed)
                           if len(others) == 1 else
                           msg("inputs of shape {shapes} and the arguments {others}", shapes=shapes, others=listed))
        elif tensors:
            called_with = msg("inputs of shape {shapes}", shapes=shapes)
        elif others:
            called_with = (msg("the argument {others}", others=listed) if len(others) == 1 else
                           msg("the arguments {others}", others=listed))
        else:
            called_with = msg("no arguments")
        if "dtype" in str(error) and any(a.dtype == torch.float64 for a in tensors):
            hint(msg("{what} raised {error} when the check called it with {called_with}; some of them are float64: "
                     "does your function mix in a float32 tensor (one of the notebook's, one it makes, or a .float() "
                     "of only some inputs)?", what=what, error=_describe_error(error), called_with=called_with))
        hint(msg("{what} raised {error} when the check called it with {called_with}; run it on such an input "
                 "yourself and read the error", what=what, error=_describe_error(error), called_with=called_with))


# The torch functions that multiply matrices: what FlopCounterMode counts, so what a measured count must call.
_MATRIX_PRODUCTS = frozenset({"linear", "matmul", "__matmul__", "__rmatmul__", "mm", "bmm", "addmm", "baddbmm",
                              "addbmm", "mv", "addmv", "dot", "einsum", "tensordot", "conv1d", "conv2d",
                              "scaled_dot_product_attention", "multi_head_attention_forward"})


class _NoMatrixProducts(TorchFunctionMode):
    """Refuses every matrix product while a learner's prediction runs (a formula needs none)."""

    def __init__(self, what: str | Message) -> None:
        super().__init__()
        self.what = what

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if getattr(func, "__name__", "") in _MATRIX_PRODUCTS:
            hint(msg("{what} multiplies matrices: the exercise asks you to predict the count from the sizes (a "
                     "formula of its arguments), not to run the layer and measure it", what=self.what))
        return func(*args, **(kwargs or {}))


def call_prediction(fn: object, *args: Any, what: str | Message | None = None) -> Any:
    """:func:`call_learner` for an exercise that asks for a count predicted from sizes: a function that multiplies
    matrices (runs the layer under ``FlopCounterMode``, say) measures instead of predicting, and gets a hint that
    says so. Arithmetic on Python numbers, numpy or tensors made from numbers is allowed.

    Shape: whatever ``fn`` takes and returns (sizes in, a count out).
    """
    what = learner_name(fn) if what is None else what
    with _NoMatrixProducts(what):
        return call_learner(fn, *args, what=what)


def right_for_some_inputs(what: str | Message, right: str, wrong: str) -> Message:
    """The hint for a function that is right on some of a check's inputs and wrong on another one that no common
    mistake explains: it fixes a number that should come from its arguments, or its rule fits some inputs only.

    Shape: no tensors; ``right`` and ``wrong`` describe the inputs in words ("kernel 3 and 4 layers").
    """
    return msg("{what} is right for {right} but not for {wrong}: either it uses a fixed number where its arguments "
               "should go, or its rule only happens to fit the first", what=what, right=right, wrong=wrong)


PLACEHOLDER_HINT = msg("your answer is still empty: the answer cell above still holds the placeholder `...`; write "
                       "your answer in its place, run that cell, then run this check again")
NONE_HINT = msg("your answer is None: a function that ends without a `return` line gives None, and so does a "
                "variable assigned the result of such a function; return (or assign) the value itself")


def is_placeholder(answer: object) -> bool:
    """An answer the learner has not written yet: the stub's ``...`` (or ``NotImplemented``)."""
    return answer is Ellipsis or answer is NotImplemented


def guard_errors(check: F) -> F:
    """Decorator for every exercise check: an error while checking the answer (an answer of the wrong type, a
    function that fails on another input) becomes a hint naming the error, instead of a traceback into the library.
    """

    @functools.wraps(check)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        if args and is_placeholder(args[0]):
            hint(PLACEHOLDER_HINT)
        try:
            return check(*args, **kwargs)
        except NotYet:
            raise
        except Exception as error:  # a learner's answer can fail in any way
            fallback_hint(msg("your answer could not be checked: working with it raised {error}; check its type and "
                              "shape against what the exercise asks for", error=_describe_error(error)))

    return guarded  # type: ignore[return-value]


def as_tensor(answer: object, what: str | Message) -> torch.Tensor:
    """Accept a tensor, or anything ``torch.tensor`` understands (list, number, numpy array)."""
    if is_placeholder(answer):
        hint(PLACEHOLDER_HINT)
    if answer is None:
        hint(NONE_HINT)
    if isinstance(answer, torch.Tensor):
        return answer.detach().to("cpu")
    try:
        return torch.tensor(answer)
    except (TypeError, ValueError, RuntimeError):
        hint(msg("{what} should be a tensor (or a list of numbers), got {type}", what=what,
                 type=type(answer).__name__))


def drop_unit_axes(got: torch.Tensor, shape: torch.Size | tuple[int, ...]) -> torch.Tensor:
    """``got`` reshaped to ``shape`` when the two differ only by axes of size 1 (a keepdim reduction); else
    ``got`` unchanged. Shape: got ``(...)`` -> ``shape`` or unchanged."""
    if tuple(got.shape) != tuple(shape) and [s for s in got.shape if s != 1] == [s for s in shape if s != 1]:
        return got.reshape(shape)  # only size-1 axes move: the order of the entries is kept
    return got


def whole_number(answer: object, what: str | Message) -> int:
    """An integer answer given as an int, a whole float, a numpy or a 0-d tensor; a fraction, a string or a bool
    gets a hint (``int()`` would truncate 4.6 to 4)."""
    if isinstance(answer, torch.Tensor):
        if answer.numel() != 1:
            hint(msg("{what} should be one number, got a tensor of shape {shape}", what=what,
                     shape=tuple(answer.shape)))
        answer = answer.item()
    if is_placeholder(answer):
        hint(PLACEHOLDER_HINT)
    if answer is None:
        hint(NONE_HINT)
    if isinstance(answer, (str, bytes, bool)):
        hint(msg("{what} should be a whole number, got {answer}", what=what, answer=repr(answer)))
    try:
        value = float(answer)  # numpy scalars, fractions, decimals
    except (TypeError, ValueError):
        hint(msg("{what} should be a whole number, got {answer}", what=what, answer=type(answer).__name__))
    if not math.isfinite(value) or value != int(value):
        hint(msg("{what} should be a whole number, got {answer}", what=what, answer=value))
    return int(value)


def close(a: torch.Tensor, b: torch.Tensor, *, atol: float = 1e-4, rtol: float = 1e-4) -> bool:
    """Same shape and the same values within tolerance (compared in float64)."""
    return a.shape == b.shape and torch.allclose(a.double(), b.double(), atol=atol, rtol=rtol)


def check_tensor_answer(answer: object, expected: torch.Tensor, *, success: str | Message, **compare: Any) -> None:
    """:func:`compare_tensor_answer` (its keywords: ``what``, ``mistakes``, ``shape_hint``, ``atol``, ``rtol``,
    ``unit_axes_ok``), then the ``Correct`` line ``success``.

    Shape: answer and expected of one shape (up to size-1 axes with ``unit_axes_ok``).
    """
    compare_tensor_answer(answer, expected, **compare)
    correct(success)


def compare_tensor_answer(
    answer: object,
    expected: torch.Tensor,
    *,
    what: str | Message,
    mistakes: Iterable[tuple[torch.Tensor, str | Message]] = (),
    shape_hint: str | Message | None = None,
    atol: float = 1e-4,
    rtol: float = 1e-4,
    unit_axes_ok: bool = False,
) -> None:
    """Compare an answer with the expected tensor; a known wrong result gets its own hint, and a right one returns
    quietly (so a check can try a function on several inputs before it says ``Correct``).

    ``mistakes`` pairs the result a common mistake produces with a hint about that mistake. With
    ``unit_axes_ok`` an answer that differs from the expected shape only by axes of size 1 (a ``keepdim=True``
    reduction, a row picked with ``q[2:3]``) is compared as if it had the expected shape.

    Shape: answer and expected of one shape (up to size-1 axes with ``unit_axes_ok``).
    """
    got = as_tensor(answer, what)
    expected = expected.detach().to("cpu")
    if got.is_floating_point() or expected.is_floating_point():
        got, expected = got.double(), expected.double()
    if unit_axes_ok:
        got = drop_unit_axes(got, expected.shape)
    if got.shape != expected.shape:
        for wrong, message in mistakes:
            if close(got, wrong.detach().to("cpu").double(), atol=atol, rtol=rtol):
                hint(message)
        hint(shape_hint or msg("{what} should have shape {expected}, yours has {shape}", what=what,
                               expected=tuple(expected.shape), shape=tuple(got.shape)))
    if close(got, expected, atol=atol, rtol=rtol):
        return
    for wrong, message in mistakes:
        if close(got, wrong.detach().to("cpu").double(), atol=atol, rtol=rtol):
            hint(message)
    fallback_hint(msg("right shape but not the right values in {what}; recompute it step by step", what=what))
