"""The solution markup of an answer cell: a region between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` lines
(the nbgrader convention), read strictly (a misspelt delimiter would leak the solution) and replaced by a stub.

The stub keeps the answer's name, so that the check cell below meets a placeholder it can explain instead of a
``NameError``: a value the lesson uses later becomes ``n_scores = ...  # YOUR CODE HERE``, a function keeps its
``def`` line and docstring over a body that raises ``NotImplementedError``. Everything else in the region (helper
variables, imports, loops) is dropped: it is part of the solution.
"""

from __future__ import annotations

import ast
import json
import re
import textwrap
from collections.abc import Collection, Sequence

from ..i18n import msg

__all__ = ["BEGIN_SOLUTION", "CODE_STUB", "END_SOLUTION", "TEXT_STUB", "MarkupError", "answer_stub", "code_stub",
           "names_used", "solution_regions", "strip_solutions", "text_stub"]

BEGIN_SOLUTION = "### BEGIN SOLUTION"
END_SOLUTION = "### END SOLUTION"
_STUB_COMMENT = msg("YOUR CODE HERE")
_STUB_ERROR = msg("replace this line with your answer, then run the check cell below")
_TEXT_STUB = msg("YOUR ANSWER HERE")


def _raise_line(message: object, language: str) -> str:
    text = message.render(language) if hasattr(message, "render") else str(message)
    return f"raise NotImplementedError({json.dumps(text, ensure_ascii=False)})"  # a double-quoted Python string


def code_stub(language: str = "en") -> tuple[str, str]:
    """The two lines that replace a code solution with no named answer, in ``language`` (the package catalog's
    translation)."""
    return f"# {_STUB_COMMENT.render(language)}", _raise_line(_STUB_ERROR, language)


def text_stub(language: str = "en") -> tuple[str]:
    """The line that replaces a written (markdown) solution, in ``language``."""
    return (_TEXT_STUB.render(language),)


CODE_STUB = code_stub()
TEXT_STUB = text_stub()

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


def _assigned_names(node: ast.stmt) -> list[str]:
    """The plain names an assignment binds, in order (``a, b = ...`` binds a and b; ``x[0] = ...`` binds none)."""
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    names: list[str] = []
    for target in targets:
        for part in (target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]):
            if isinstance(part, ast.Name) and part.id not in names:
                names.append(part.id)
    return names


def _function_stub(node: ast.FunctionDef | ast.AsyncFunctionDef, lines: list[str], language: str) -> list[str]:
    """A function's decorators, ``def`` line(s) and docstring, over a body that raises ``NotImplementedError``."""
    first = node.body[0]
    has_docstring = (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                     and isinstance(first.value.value, str))
    start = min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 1
    end = first.end_lineno if has_docstring else first.lineno - 1
    body_line = lines[first.lineno - 1]
    indent = body_line[: len(body_line) - len(body_line.lstrip())]
    error = msg("write the body of {name}, then run the check cell below", name=node.name)
    return [*lines[start:end], f"{indent}# {_STUB_COMMENT.render(language)}", indent + _raise_line(error, language)]


def answer_stub(region: Sequence[str], answers: Collection[str] = (), language: str = "en") -> list[str]:
    """The stub for one code region (its lines without the delimiters, not yet indented).

    ``answers`` are the names the rest of the lesson uses (the check cells): each one the region binds at its top
    level keeps its name in the stub. A region with none of them, or one that is not whole statements, gets the
    plain :func:`code_stub`.
    """
    text = textwrap.dedent("\n".join(region))
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return list(code_stub(language))
    lines, stub, named = text.split("\n"), [], set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in answers:
            stub += _function_stub(node, lines, language)
            named.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for name in _assigned_names(node):
                if name in answers and name not in named:
                    stub.append(f"{name} = ...  # {_STUB_COMMENT.render(language)}")
                    named.add(name)
    return stub or list(code_stub(language))


def strip_solutions(source: str, *, markdown: bool = False, where: str = "cell",
                    answers: Collection[str] = (), language: str = "en") -> tuple[str, int]:
    """Replace every solution region of ``source`` by a stub in ``language``; return the new source and the count.

    A code region at the top level of its cell gets :func:`answer_stub` (the names in ``answers``, and those the
    cell uses after the region, keep their names); an indented one (inside a function body) the plain
    :func:`code_stub`. The stub takes the indentation of the ``BEGIN`` line; lines outside the regions stay
    unchanged.

    Shape: text in, (text, number of regions) out.
    """
    regions = solution_regions(source, where=where)  # validate the markup before replacing anything
    kept: list[str] = []
    inside = False
    count = 0
    lines = source.split("\n")
    for number, line in enumerate(lines):
        text = line.strip()
        if text == BEGIN_SOLUTION:
            indent = line[: len(line) - len(line.lstrip())]
            if markdown:
                stub = list(text_stub(language))
            elif indent:
                stub = list(code_stub(language))
            else:
                used_later = set(_IDENTIFIER.findall("\n".join(lines[number:]).split(END_SOLUTION, 1)[-1]))
                stub = answer_stub(regions[count], {*answers, *used_later}, language)
            kept.extend(indent + stub_line for stub_line in stub)
            inside = True
            count += 1
        elif text == END_SOLUTION:
            inside = False
        elif not inside:
            kept.append(line)
    return "\n".join(kept), count


_IDENTIFIER = re.compile(r"(?<![\w.])[A-Za-z_]\w*")  # a name, not an attribute (.e) or an exponent (1e-5)


def names_used(sources: Sequence[str]) -> set[str]:
    """Every identifier-like word in these sources outside their solution regions (the names that later cells of
    a student copy may read)."""
    names: set[str] = set()
    for source in sources:
        inside = False
        for line in source.split("\n"):
            text = line.strip()
            if text in (BEGIN_SOLUTION, END_SOLUTION):
                inside = text == BEGIN_SOLUTION
            elif not inside:
                names.update(_IDENTIFIER.findall(line))
    return names
