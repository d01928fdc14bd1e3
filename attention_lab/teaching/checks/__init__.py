"""Checks for the lessons' exercises: one module per lesson (``from attention_lab.teaching.checks import lesson01``).

Each check prints one line starting with ``Correct`` when the answer is right, and otherwise raises an
``AssertionError`` whose message is a hint about the concept (never the answer). Checks accept every correct
answer: tensors are compared with tolerances, and equivalent representations (a bool mask or its 0/1 float twin,
a list or a tensor) are accepted where the exercise allows them.

That exception is :class:`NotYet` (``from attention_lab.teaching.checks import NotYet``): a subclass of
``AssertionError`` whose ``hint`` is the hint alone and whose IPython display is the one line "Not yet: <hint>".
"""

from ._core import NotYet

__all__ = ["NotYet"]
