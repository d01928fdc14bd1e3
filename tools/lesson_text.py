"""What of a lesson is translated, and how a translation is put back: the text side of ``tools/editions.py``.

A lesson's translatable text is a list of entries, each keyed by the nbformat id of its cell (the gettext
``msgctxt``) and holding the English (the ``msgid``):

- a markdown cell: its whole source;
- a code cell: the text of each comment, without its ``#`` (a run of comment lines at one indentation on
  consecutive lines is one entry, its lines joined by newlines; a comment after code on the same line is one entry).

Never translated: code, the solution delimiters (``### BEGIN SOLUTION``), tool comments (``# noqa``, ``# type:``,
``# fmt:``, ``# pragma``), empty comments. Relative links of a markdown cell are rewritten for the edition's folder,
one level below ``notebooks/`` (a link to another lesson stays inside the edition when the edition has it).
"""

from __future__ import annotations

import copy
import io
import re
import tokenize
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import nbformat

SOLUTION_DELIMITERS = ("### BEGIN SOLUTION", "### END SOLUTION")
_TOOL_COMMENT = re.compile(r"^#+\s*(noqa\b|type:|fmt:|pragma\b|ruff:|%%)|^#!")
_MAGIC = re.compile(r"^\s*[%!]")
_LINK = re.compile(r"(!?\[[^\]]*\]\()([^)\s]+)(\))")
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
_PREFIX = re.compile(r"^(#+\s*)(.*?)\s*$")


@dataclass(frozen=True)
class Entry:
    """One translatable text of a lesson: ``context`` is the cell id, ``text`` the English."""

    context: str
    text: str
    kind: str  # "markdown" or "comment"


@dataclass(frozen=True)
class Comment:
    """A comment (or a run of comment lines) in a code cell: lines ``first``..``last`` (0-based), column ``col``."""

    first: int
    last: int
    col: int
    prefixes: tuple[str, ...]  # "# " or "#    " (the spaces that align a comment are kept)
    text: str
    trailing: bool  # after code on the same line


def _comment_tokens(source: str, where: str) -> list[tuple[int, int, str, bool]]:
    """(line, column, comment, after code?) for every comment token; IPython magics are masked first."""
    lines = source.split("\n")
    masked = "\n".join(" " * len(line) if _MAGIC.match(line) else line for line in lines)
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(masked + "\n").readline))
    except (tokenize.TokenError, IndentationError, SyntaxError) as error:
        raise ValueError(f"{where}: cannot read the comments of this code cell ({error})") from error
    found = []
    for token in tokens:
        if token.type == tokenize.COMMENT:
            row, col = token.start
            line = lines[row - 1]
            found.append((row - 1, col, token.string, bool(line[:col].strip())))
    return found


def code_comments(source: str, where: str = "cell") -> list[Comment]:
    """The translatable comments of a code cell's source, in order."""
    comments: list[Comment] = []
    block: list[tuple[int, int, str, str]] = []  # (line, col, prefix, text) of the run being read

    def close() -> None:
        if block:
            comments.append(Comment(block[0][0], block[-1][0], block[0][1], tuple(p for _, _, p, _ in block),
                                    "\n".join(t for _, _, _, t in block), trailing=False))
            block.clear()

    for line, col, token, trailing in _comment_tokens(source, where):
        prefix, text = _PREFIX.match(token).groups()
        skip = not text or token.strip() in SOLUTION_DELIMITERS or _TOOL_COMMENT.match(token)
        if trailing or skip:
            close()
            if not skip:
                comments.append(Comment(line, line, col, (prefix,), text, trailing=True))
            continue
        if block and (line != block[-1][0] + 1 or col != block[-1][1]):
            close()
        block.append((line, col, prefix, text))
    close()
    return comments


def lesson_entries(nb: nbformat.NotebookNode, where: str = "lesson") -> list[Entry]:
    """Every translatable text of a lesson, in cell order; one entry per distinct (cell id, English)."""
    entries: list[Entry] = []
    seen: set[tuple[str, str]] = set()
    for index, cell in enumerate(nb.cells):
        cell_id = cell.get("id")
        if not cell_id:
            raise ValueError(f"{where}: cell {index} has no id; re-execute the lesson (make notebooks) to give it one")
        if cell.cell_type == "markdown" and cell.source.strip():
            found = [Entry(cell_id, cell.source, "markdown")]
        elif cell.cell_type == "code":
            found = [Entry(cell_id, c.text, "comment") for c in code_comments(cell.source, f"{where}, cell {cell_id}")]
        else:
            found = []
        for entry in found:
            if (entry.context, entry.text) not in seen:
                seen.add((entry.context, entry.text))
                entries.append(entry)
    return entries


Lookup = Callable[[str, str], str]  # (cell id, English) -> translation


def translate_code(source: str, cell_id: str, lookup: Lookup, where: str = "cell") -> str:
    """A code cell's source with each comment replaced by its translation; the code is left as it is."""
    lines = source.split("\n")
    for comment in reversed(code_comments(source, where)):  # from the end, so line numbers stay valid
        translated = lookup(cell_id, comment.text).split("\n")
        if comment.trailing:
            if len(translated) != 1:
                raise ValueError(f"{where}: the translation of the comment {comment.text!r} after code must be "
                                 f"one line, got {len(translated)}")
            line = lines[comment.first]
            lines[comment.first] = line[:comment.col] + comment.prefixes[0] + translated[0]
            continue
        indent = lines[comment.first][:comment.col]
        prefixes = comment.prefixes if len(comment.prefixes) == len(translated) else (comment.prefixes[0],) * len(
            translated)
        new = [(indent + prefix + text).rstrip() for prefix, text in zip(prefixes, translated)]
        lines[comment.first:comment.last + 1] = new
    return "\n".join(lines)


def rewrite_links(markdown: str, edition_dir: Path) -> str:
    """Relative links and images made to work from ``edition_dir`` (``notebooks/zh-CN``); lessons the edition has
    stay inside it, everything else is reached one folder up. URLs, anchors and absolute paths are unchanged."""
    def fix(match: re.Match[str]) -> str:
        target = match[2]
        if _SCHEME.match(target) or target.startswith(("#", "/")):
            return match[0]
        path = target.split("#", 1)[0]
        if path and (edition_dir / path).exists() and path.endswith(".ipynb") and "/" not in path:
            return match[0]
        return f"{match[1]}../{target}{match[3]}"

    return _LINK.sub(fix, markdown)


def language_line(language: str) -> str:
    return f'al.set_language("{language}")'


def add_language_line(source: str, language: str, where: str) -> str:
    """The setup cell with one more line, ``al.set_language("zh-CN")``: the first statement after the imports (after
    the blank line that follows them, where ruff's import rule wants one)."""
    lines = source.split("\n")
    if not any(re.match(r"^import attention_lab as al\s*(#.*)?$", line) for line in lines):
        raise ValueError(f"{where}: the setup cell (the first code cell) must import attention_lab as al, so that "
                         f"the edition can add {language_line(language)!r}")
    last_import = max(i for i, line in enumerate(lines) if re.match(r"^(import|from)\s", line))
    rest = [i for i in range(last_import + 1, len(lines)) if lines[i].strip()]
    if not rest:
        return "\n".join([*lines[:last_import + 1], "", language_line(language)])
    return "\n".join([*lines[:rest[0]], language_line(language), *lines[rest[0]:]])


def translated_notebook(nb: nbformat.NotebookNode, lookup: Lookup, *, language: str, edition_dir: Path,
                        where: str = "lesson") -> nbformat.NotebookNode:
    """The edition of a lesson: markdown and comments translated, the language line added, outputs dropped (the
    build executes the notebook); code, cell ids, cell metadata and the order of cells as in English."""
    edition = copy.deepcopy(nb)
    setup_done = False
    for cell in edition.cells:
        label = f"{where}, cell {cell['id']}"
        if cell.cell_type == "markdown" and cell.source.strip():
            cell.source = rewrite_links(lookup(cell["id"], cell.source), edition_dir)
        elif cell.cell_type == "code":
            cell.source = translate_code(cell.source, cell["id"], lookup, label)
            if not setup_done:
                cell.source = add_language_line(cell.source, language, label)
                setup_done = True
            cell.outputs, cell.execution_count = [], None
    return edition
