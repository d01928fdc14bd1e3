"""The solution markup of an answer cell: a region between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` lines
(the nbgrader convention), read strictly (a misspelt delimiter would leak the solution) and replaced by a stub."""

from __future__ import annotations

import re

__all__ = ["BEGIN_SOLUTION", "CODE_STUB", "END_SOLUTION", "TEXT_STUB", "MarkupError", "solution_regions",
           "strip_solutions"]

BEGIN_SOLUTION = "### BEGIN SOLUTION"
END_SOLUTION = "### END SOLUTION"
CODE_STUB = (
    "# YOUR CODE HERE",
    'raise NotImplementedError("replace this line with your answer, then run the check cell below")',
)
TEXT_STUB = ("YOUR ANSWER HERE",)

# A line that looks like a delimiter without being exactly one (a typo would leak the solution).
# Prose that merely mentions the delimiters (in backticks, mid-sentence) is left alone.
_DELIMITER_LIKE = re.compile(r"^(#+|//)?\s*(BEGIN|END)[ _-]*SOLUTIONS?\b", re.IGNORECASE)


class MarkupError(ValueError):
    """A lesson's exercise markup breaks the convention (unbalanced or misspelt delimiters). Shape: no tensors."""


def solution_regions(source: str, *, where: str = "cell") -> list[list[str]]:
    """The solution regions of one cell's source, each as its list of lines (delimiters excluded).

    Raises ``MarkupError`` for a ``BEGIN`` without ``END``, an ``END`` without ``BEGIN``, nested
    regions, or a line that resembles a delimiter without being exactly one (``## BEGIN SOLUTION``).

    Shape: text in, a list of regions (each a list of lines) out.
    """
    regions: list[list[str]] = []
    current: list[str] | None = None
    for number, line in enumerate(source.split("\n"), start=1):
        text = line.strip()
        here = f"{where}, line {number}"
        if text == BEGIN_SOLUTION:
            if current is not None:
                raise MarkupError(f"{here}: nested {BEGIN_SOLUTION!r}; close the first region "
                                  f"with {END_SOLUTION!r} before opening another")
            current = []
        elif text == END_SOLUTION:
            if current is None:
                raise MarkupError(f"{here}: {END_SOLUTION!r} without a {BEGIN_SOLUTION!r} before it")
            regions.append(current)
            current = None
        elif _DELIMITER_LIKE.search(text):
            raise MarkupError(f"{here}: {text!r} looks like a solution delimiter but is not exactly "
                              f"{BEGIN_SOLUTION!r} or {END_SOLUTION!r}; fix its spelling")
        elif current is not None:
            current.append(line)
    if current is not None:
        raise MarkupError(f"{where}: {BEGIN_SOLUTION!r} without a matching {END_SOLUTION!r}")
    return regions


def strip_solutions(source: str, *, markdown: bool = False, where: str = "cell") -> tuple[str, int]:
    """Replace every solution region of ``source`` by the stub; return the new source and the count.

    The stub takes the indentation of the ``BEGIN`` line; lines outside the regions stay unchanged.

    Shape: text in, (text, number of regions) out.
    """
    solution_regions(source, where=where)  # validate the markup before replacing anything
    stub = TEXT_STUB if markdown else CODE_STUB
    kept: list[str] = []
    inside = False
    count = 0
    for line in source.split("\n"):
        text = line.strip()
        if text == BEGIN_SOLUTION:
            indent = line[: len(line) - len(line.lstrip())]
            kept.extend(indent + stub_line for stub_line in stub)
            inside = True
            count += 1
        elif text == END_SOLUTION:
            inside = False
        elif not inside:
            kept.append(line)
    return "\n".join(kept), count
