"""The shared parts of every exercise check."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable
from typing import Any, NoReturn, TypeVar

import torch

from ...i18n import Message

F = TypeVar("F", bound=Callable[..., Any])

Mistake = tuple[Callable[[torch.Tensor], bool], str]


def correct(message: str | Message) -> None:
    """Tell the learner the answer is right (a ``Message`` is rendered in the current language)."""
    print(f"Correct: {str(message)}")


def hint(message: str | Message) -> NoReturn:
    """Reject the answer with a hint about the idea behind the exercise (a ``Message``: in the current language)."""
    raise AssertionError(f"Not yet. Hint: {str(message)}")


def _describe_error(error: BaseException) -> str:
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return f"{type(error).__name__}" + (f" ({text[:160]})" if text else "")


def call_learner(fn: object, *args: Any, what: str = "your function", **kwargs: Any) -> Any:
    """Call the learner's function; an error raised inside it becomes a hint that names the error, not a traceback.

    Shape: whatever ``fn`` takes and returns.
    """
    if not callable(fn):
        hint(f"{what} should be a function (a def or a lambda), got {type(fn).__name__}; pass the function "
             f"itself, not the result of calling it")
    try:
        return fn(*args, **kwargs)
    except AssertionError:
        raise
    except NotImplementedError:
        hint(f"{what} still raises NotImplementedError: replace that line with your code")
    except Exception as error:  # any error in the learner's code becomes a hint
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        others = [repr(a) for a in args if not isinstance(a, torch.Tensor)]
        others += [f"{name}={value!r}" for name, value in kwargs.items() if not isinstance(value, torch.Tensor)]
        called_with = " and ".join(
            ([f"inputs of shape {[tuple(a.shape) for a in tensors]}"] if tensors else [])
            + ([f"the argument{'s' if len(others) > 1 else ''} {', '.join(others)}"] if others else [])
        ) or "no arguments"
        own_dtype = ("; the check passes its own float64 tensors: does your function use a tensor of the notebook "
                     "instead of its arguments?"
                     if "dtype" in str(error) and any(a.dtype == torch.float64 for a in tensors) else "")
        hint(f"{what} raised {_describe_error(error)} when the check called it with {called_with}{own_dtype}; "
             f"run it on such an input yourself and read the error")


def guard_errors(check: F) -> F:
    """Decorator for every exercise check: an error while checking the answer (an answer of the wrong type, a
    function that fails on another input) becomes a hint naming the error, instead of a traceback into the library.
    """

    @functools.wraps(check)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            return check(*args, **kwargs)
        except AssertionError:
            raise
        except Exception as error:  # a learner's answer can fail in any way
            hint(f"your answer could not be checked: working with it raised {_describe_error(error)}; check its "
                 f"type and shape against what the exercise asks for")

    return guarded  # type: ignore[return-value]


def as_tensor(answer: object, what: str) -> torch.Tensor:
    """Accept a tensor, or anything ``torch.tensor`` understands (list, number, numpy array)."""
    if answer is None or answer is Ellipsis:
        hint(f"still empty: no answer in {what} yet; replace the placeholder with your code")
    if isinstance(answer, torch.Tensor):
        return answer.detach().to("cpu")
    try:
        return torch.tensor(answer)
    except (TypeError, ValueError, RuntimeError):
        hint(f"{what} should be a tensor (or a list of numbers), got {type(answer).__name__}")


def drop_unit_axes(got: torch.Tensor, shape: torch.Size | tuple[int, ...]) -> torch.Tensor:
    """``got`` reshaped to ``shape`` when the two differ only by axes of size 1 (a keepdim reduction); else
    ``got`` unchanged. Shape: got ``(...)`` -> ``shape`` or unchanged."""
    if tuple(got.shape) != tuple(shape) and [s for s in got.shape if s != 1] == [s for s in shape if s != 1]:
        return got.reshape(shape)  # only size-1 axes move: the order of the entries is kept
    return got


def whole_number(answer: object, what: str) -> int:
    """An integer answer given as an int, a whole float, a numpy or a 0-d tensor; a fraction, a string or a bool
    gets a hint (``int()`` would truncate 4.6 to 4)."""
    if isinstance(answer, torch.Tensor):
        if answer.numel() != 1:
            hint(f"{what} should be one number, got a tensor of shape {tuple(answer.shape)}")
        answer = answer.item()
    if isinstance(answer, (str, bytes, bool)) or answer is None:
        hint(f"{what} should be a whole number, got {answer!r}")
    try:
        value = float(answer)  # numpy scalars, fractions, decimals
    except (TypeError, ValueError):
        hint(f"{what} should be a whole number, got {type(answer).__name__}")
    if not math.isfinite(value) or value != int(value):
        hint(f"{what} should be a whole number, got {value}")
    return int(value)


def close(a: torch.Tensor, b: torch.Tensor, *, atol: float = 1e-4, rtol: float = 1e-4) -> bool:
    """Same shape and the same values within tolerance (compared in float64)."""
    return a.shape == b.shape and torch.allclose(a.double(), b.double(), atol=atol, rtol=rtol)


def check_tensor_answer(
    answer: object,
    expected: torch.Tensor,
    *,
    what: str,
    mistakes: Iterable[tuple[torch.Tensor, str]] = (),
    shape_hint: str | None = None,
    atol: float = 1e-4,
    rtol: float = 1e-4,
    unit_axes_ok: bool = False,
    success: str,
) -> None:
    """Compare an answer with the expected tensor; a known wrong result gets its own hint.

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
        hint(shape_hint or f"{what} should have shape {tuple(expected.shape)}, yours has {tuple(got.shape)}")
    if close(got, expected, atol=atol, rtol=rtol):
        correct(success)
        return
    for wrong, message in mistakes:
        if close(got, wrong.detach().to("cpu").double(), atol=atol, rtol=rtol):
            hint(message)
    hint(f"right shape but not the right values in {what}; recompute it step by step")
