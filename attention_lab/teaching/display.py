"""How the lessons print small tensors: one row per line, a fixed number of decimals, a bool mask as 0/1.

A fixed format prints the same text on every CPU (a raw tensor's repr would not, in its last digits), which is what
lets nbval compare a lesson's printed numbers with its committed outputs.
"""

from __future__ import annotations

import torch

from .._validation import check_positive_int, fail

__all__ = ["show"]


def show(name: str, t: torch.Tensor, *, decimals: int = 4) -> None:
    """Print ``name``, the shape of ``t`` and its values, one row of the last axis per line.

    Numbers get ``decimals`` decimals in a column of ``decimals + 3`` characters (``[ 0.2500, -1.0000]``); a bool
    tensor (a mask) prints as rows of 1 (may attend) and 0. Leading axes are flattened into rows.

    Shape: ``t`` of any shape; a 0-D or 1-D tensor prints as one row.
    """
    if not isinstance(t, torch.Tensor):
        fail("show", f"t must be a torch.Tensor, got {type(t).__name__}; wrap numbers with torch.tensor(...)",
             TypeError)
    check_positive_int("show", "decimals", decimals, minimum=0)
    rows = t.reshape(-1, t.shape[-1]) if t.dim() > 1 else t.reshape(1, -1)  # (rows, last axis)
    if t.dtype == torch.bool:
        body = "\n".join("  " + " ".join("1" if v else "0" for v in row) for row in rows.tolist())
    else:
        width = decimals + 3
        body = "\n".join("  [" + ", ".join(f"{v:{width}.{decimals}f}" for v in row) + "]" for row in rows.tolist())
    print(f"{name} {tuple(t.shape)}:\n{body}")
