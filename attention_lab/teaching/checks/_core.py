"""The shared parts of every exercise check."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch

Mistake = tuple[Callable[[torch.Tensor], bool], str]


def correct(message: str) -> None:
    """Tell the learner the answer is right."""
    print(f"Correct: {message}")


def hint(message: str) -> None:
    """Reject the answer with a hint about the idea behind the exercise."""
    raise AssertionError(f"Not yet. Hint: {message}")


def as_tensor(answer: object, what: str) -> torch.Tensor:
    """Accept a tensor, or anything ``torch.tensor`` understands (list, number, numpy array)."""
    if answer is None or answer is Ellipsis:
        hint(f"{what} is still empty: replace the placeholder with your code")
    if isinstance(answer, torch.Tensor):
        return answer.detach().to("cpu")
    try:
        return torch.tensor(answer)
    except (TypeError, ValueError, RuntimeError):
        hint(f"{what} should be a tensor (or a list of numbers), got {type(answer).__name__}")
    raise AssertionError("unreachable")


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
    success: str,
) -> None:
    """Compare an answer with the expected tensor; a known wrong result gets its own hint.

    ``mistakes`` pairs the result a common mistake produces with a hint about that mistake.
    """
    got = as_tensor(answer, what)
    expected = expected.detach().to("cpu")
    if got.is_floating_point() or expected.is_floating_point():
        got, expected = got.double(), expected.double()
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
    hint(f"{what} has the right shape but not the right values; recompute it step by step")
