"""What a learner's function called: the PyTorch functions it ran and the functions of this library it went
through. An exercise that asks for something by hand (a softmax, an attention) uses it to tell a learner who called
the ready-made one that this is the one thing the exercise asks them to write."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torch.overrides import TorchFunctionMode

_PACKAGE = Path(__file__).resolve().parents[2]  # attention_lab/
_TEACHING = _PACKAGE / "teaching"


@dataclass
class Calls:
    """The names of the PyTorch functions called (``softmax``, ``log_softmax``, ``scaled_dot_product_attention``,
    ``matmul``, ...) and of the library functions (outside ``teaching``) the learner's code called directly.

    Shape: no tensors.
    """

    torch: set[str] = field(default_factory=set)
    library: set[str] = field(default_factory=set)

    def any_torch(self, *fragments: str) -> bool:
        """Whether a PyTorch function whose name contains one of ``fragments`` was called."""
        return any(fragment in name for name in self.torch for fragment in fragments)


def _in_library(filename: str) -> bool:
    path = Path(filename)
    return path.is_relative_to(_PACKAGE) and not path.is_relative_to(_TEACHING)


class _Recorder(TorchFunctionMode):
    def __init__(self, calls: Calls) -> None:
        super().__init__()
        self.calls = calls

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        self.calls.torch.add(getattr(func, "__name__", type(func).__name__))
        frame, outermost = sys._getframe(1), None
        while frame is not None:  # the library function the learner's code called, if this call came from one
            if _in_library(frame.f_code.co_filename):
                outermost = frame.f_code.co_name
            elif outermost is not None:
                self.calls.library.add(outermost)
                break
            frame = frame.f_back
        return func(*args, **(kwargs or {}))


@contextmanager
def recording_calls() -> Iterator[Calls]:
    """Record what runs inside the ``with`` block (the calls PyTorch dispatches to ``__torch_function__``: every
    ``torch.*``, ``torch.nn.functional.*`` and tensor method on tensors).

    Shape: no tensors.
    """
    calls = Calls()
    with _Recorder(calls):
        yield calls
