"""Masks as answers: read what a learner returns as a bool mask (True = may attend), naming an additive float mask
or values that are not 0/1, and, where the exercise is about the convention itself (lesson 04), name a mask whose
entries are right but whose dtype is not bool."""

from __future__ import annotations

import torch

from ...i18n import Message, msg
from ._core import as_tensor, hint


def as_bool_mask(answer: object, what: str | Message) -> torch.Tensor:
    """The answer as a bool tensor; an additive (0 / -inf) mask or values other than 0 and 1 get a hint.

    Shape: whatever the answer's shape is.
    """
    got = as_tensor(answer, what)
    if got.dtype != torch.bool:
        if got.is_floating_point() and bool(torch.isinf(got).any()):
            hint(msg("that is an additive float mask (0 / -inf); this exercise wants a bool mask, True = may attend"))
        if not bool(((got == 0) | (got == 1)).all()):
            hint(msg("a mask holds True (may attend) and False (may not); make it a bool tensor (dtype=torch.bool)"))
        got = got != 0  # right or wrong values are named first; only_bool then asks for the dtype
    return got


def only_bool(answer: object) -> None:
    """A mask with the right entries but not bool gets a hint: a float one would be read as additive, a 0/1 one is
    the older tutorials' convention.

    Shape: any.
    """
    got = as_tensor(answer, msg("your mask"))
    if got.is_floating_point():
        hint(msg("the right entries, but as floats: a float mask is additive (0 keeps, -inf removes), so its 1s and "
                 "0s would hide nothing; this exercise asks for a bool mask, True = may attend"))
    if got.dtype != torch.bool:
        hint(msg("the right entries, as a 0/1 mask (the older tutorials' convention, which the library refuses); "
                 "this exercise asks for a bool mask, True = may attend"))
