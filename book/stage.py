"""The book's source tree of one edition, written from the committed lessons and docs (never executed, never
committed): each lesson tagged for the web, each doc and the README with their links pointed at the book's pages.

The committed notebooks are not changed. In the staged copy of a lesson:
- a deep dive (a heading cell with ``"jp-MarkdownHeadingCollapsed": true``) gets a ``deep-dive`` marker, which
  book/sphinx_ext.py turns into a toggle around the cells under it up to the next heading of its level or above;
- an exercise's solution cell (``### BEGIN SOLUTION``) is folded whole (``hide-cell``), and the output of the check
  cell after it (``hide-output``), so that neither answer nor message shows at a glance;
- a cell whose output belongs to the computer that ran it (tag ``nbval-ignore-output``: timings, memory, threads,
  progress bars) gets a note before it, and a widget output, which needs a kernel, is replaced by a note;
- a note after the title links to the notebook in the repository and names the commands that run it.

A link to a file of the repository that is not a page of the book becomes ``repo:<path>``, which the Sphinx
extension turns into a link to the repository (a URL, or a relative path into the checkout).
"""

from __future__ import annotations

import copy
import json
import posixpath
import re
from pathlib import Path

import nbformat

from book.editions import Edition, english_docs

BEGIN_SOLUTION = "### BEGIN SOLUTION"
MACHINE_TAG = "nbval-ignore-output"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$", re.M)
# an inline markdown link's target: [text](target) or [text](target "title"); images too
LINK = re.compile(r"(\]\()(<[^>]*>|[^)\s]+)((?:\s+\"[^\"]*\")?\))")
LESSON_NUMBER = re.compile(r"^\d\d\s*·\s*")  # "02 · Scaled dot-product attention": the table has the number
# the formula the landing page shows (MathJax): Lee's b^i and alpha'_{i,j}, the scores scaled by sqrt(d)
FORMULA = r"""$$
b^i = \sum_j \alpha'_{i,j} \, v^j, \qquad
\alpha'_{i,j} = \frac{\exp(q^i \cdot k^j / \sqrt{d})}{\sum_{j'} \exp(q^i \cdot k^{j'} / \sqrt{d})}
$$"""
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def heading_level(cell) -> int | None:
    """The level of a markdown cell's first heading (as JupyterLab reads it), or None."""
    if cell.cell_type != "markdown":
        return None
    match = HEADING.search(cell.source)
    return len(match.group(1)) if match else None


def title_of(path: Path) -> str:
    """The first heading of a notebook or a markdown file."""
    if path.suffix == ".ipynb":
        nb = nbformat.read(path, as_version=4)
        text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    else:
        text = path.read_text(encoding="utf-8")
    match = HEADING.search(text)
    return match.group(2).strip() if match else path.stem


def _note(text: str, classes: str, title: str | None = None):
    head = f"```{{admonition}} {title}" if title else "```{note}"
    body = f"{head}\n:class: {classes}\n\n{text}\n```"
    return nbformat.v4.new_markdown_cell(body)


def _hide(cell, tag: str, show: str, hide: str) -> None:
    cell.metadata.setdefault("tags", [])
    if tag not in cell.metadata["tags"]:
        cell.metadata["tags"].append(tag)
    cell.metadata["mystnb"] = {**cell.metadata.get("mystnb", {}), "code_prompt_show": show, "code_prompt_hide": hide}


def _mark_deep_dives(cells, words) -> None:
    for index, cell in enumerate(cells):
        if not cell.metadata.get("jp-MarkdownHeadingCollapsed"):
            continue
        level = heading_level(cell)
        if level is None:
            continue
        end = next((j for j in range(index + 1, len(cells))
                    if (heading_level(cells[j]) or 99) <= level), len(cells))
        hidden = end - index - 1
        show = words["show_deep_dive_1" if hidden == 1 else "show_deep_dive"].format(cells=hidden)
        cell.source = (f"{cell.source.rstrip()}\n\n```{{deep-dive}}\n:show: {show}\n"
                       f":hide: {words['hide_deep_dive']}\n```\n")


def _fold_exercises(cells, words) -> None:
    for index, cell in enumerate(cells):
        if cell.cell_type == "code" and BEGIN_SOLUTION in cell.source:
            _hide(cell, "hide-cell", words["show_solution"], words["hide_solution"])
            check = next((c for c in cells[index + 1:] if c.cell_type == "code"), None)
            if check is not None:
                _hide(check, "hide-output", words["show_check"], words["hide_check"])


def _notes_for_machine_outputs(cells, words) -> list:
    """The cells with a note before each one whose output a web page cannot reproduce."""
    result = []
    for cell in cells:
        if cell.cell_type == "code":
            widgets = [o for o in cell.get("outputs", []) if WIDGET_MIME in o.get("data", {})]
            if widgets:
                cell.outputs = [o for o in cell.outputs if WIDGET_MIME not in o.get("data", {})]
                result.append(_note(words["widget_output"], "book-note no-kernel"))
            elif MACHINE_TAG in cell.metadata.get("tags", []) and cell.get("outputs"):
                result.append(_note(words["machine_output"], "book-note machine-output"))
        result.append(cell)
    return result


def stage_lesson(nb, words: dict[str, str], notebook_link: str):
    """A copy of the lesson ``nb`` tagged for the web page (see the module docstring)."""
    nb = copy.deepcopy(nb)
    nb.metadata.pop("widgets", None)  # the widgets' saved state: the page shows no widget (no kernel)
    _mark_deep_dives(nb.cells, words)
    _fold_exercises(nb.cells, words)
    cells = _notes_for_machine_outputs(nb.cells, words)
    note = _note(words["lesson_note"].format(notebook=notebook_link), "tip book-note lesson-source",
                 words["lesson_note_title"])
    nb.cells = [cells[0], note, *cells[1:]]  # the notes are new cells, each with a fresh id
    return nb


def rewrite_links(text: str, source: str, page: str, pages: dict[str, str]) -> str:
    """``text`` of the repository file ``source`` (a posix path), staged as the book page ``page``: each relative
    link to a staged file points at its page, each other relative link at the repository (``repo:<path>``)."""

    def replace(match: re.Match) -> str:
        target = match.group(2).strip("<>")
        if target.startswith("#") or SCHEME.match(target):
            return match.group(0)
        path, _, fragment = target.partition("#")
        resolved = posixpath.normpath(posixpath.join(posixpath.dirname(source), path))
        if resolved in pages:
            new = posixpath.relpath(pages[resolved], posixpath.dirname(page) or ".")
        else:
            new = f"repo:{resolved}"
        return f"{match.group(1)}{new}{'#' + fragment if fragment else ''}{match.group(3)}"

    return LINK.sub(replace, text)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def landing_page(edition: Edition, lessons: list[tuple[str, str]], docs: list[tuple[str, str]]) -> str:
    """The edition's front page: the formula, the route (every lesson), the reference pages, how to run."""
    w = edition.words
    rows = "\n".join(f"| {page.split('/')[-1][:2]} | [{LESSON_NUMBER.sub('', title)}]({page}.ipynb) |"
                     for page, title in lessons)
    refs = "\n".join(f"- [{title}]({page}.md)" for page, title in docs)
    lesson_toc = "\n".join(page for page, _ in lessons)
    doc_toc = "\n".join(f"{title} <{page}>" for page, title in docs)
    return f"""# {w['book_title']}

{w['formula']}

{FORMULA}

## {w['route']}

{w['route_intro'].format(count=len(lessons))}

| # | {w['lessons']} |
|---|---|
{rows}

## {w['reference']}

{refs}

## {w['run_here']}

{w['run_body']}

```bash
make lab    # {w['make_lab']}
make test   # {w['make_test']}
```

```{{toctree}}
:hidden:
:caption: {w['lessons']}

{lesson_toc}
```

```{{toctree}}
:hidden:
:caption: {w['reference']}

{doc_toc}
```
"""


def stage_edition(edition: Edition, repo: Path, dest: Path) -> list[str]:
    """Write the book's sources of ``edition`` into ``dest``; return its page names (Sphinx docnames)."""
    rel = lambda path: path.relative_to(repo).as_posix()
    docs = [(edition.doc(doc), doc.stem) for doc in english_docs(repo)]
    pages = {rel(lesson): f"lessons/{lesson.stem}.ipynb" for lesson in edition.lessons}
    pages.update({rel(source): f"docs/{stem}.md" for source, stem in docs})
    pages[rel(edition.readme)] = "readme.md"
    w = edition.words

    for lesson in edition.lessons:
        page = pages[rel(lesson)]
        nb = nbformat.read(lesson, as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "markdown":
                cell.source = rewrite_links(cell.source, rel(lesson), page, pages)
        link = f"[{rel(lesson)}](repo:{rel(lesson)})"
        out = dest / page
        out.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(stage_lesson(nb, w, link), out)

    for source, stem in docs:
        text = rewrite_links(source.read_text(encoding="utf-8"), rel(source), f"docs/{stem}.md", pages)
        if edition.tag != "en" and source == repo / "docs" / f"{stem}.md":
            title_end = text.find("\n") + 1
            text = f"{text[:title_end]}\n```{{note}}\n{w['english_only']}\n```\n{text[title_end:]}"
        _write(dest / "docs" / f"{stem}.md", text)
    _write(dest / "readme.md", rewrite_links(edition.readme.read_text(encoding="utf-8"), rel(edition.readme),
                                             "readme.md", pages))

    lesson_pages = [(f"lessons/{lesson.stem}", title_of(lesson)) for lesson in edition.lessons]
    doc_pages = [(f"docs/{stem}", title_of(source)) for source, stem in docs] + [("readme", w["readme"])]
    _write(dest / "index.md", landing_page(edition, lesson_pages, doc_pages))
    return ["index", *(p for p, _ in lesson_pages), *(p for p, _ in doc_pages)]


def write_editions_file(path: Path, editions: list[Edition], pages: dict[str, list[str]]) -> None:
    """What the language switch needs: each edition's tag, name and pages."""
    data = [{"tag": e.tag, "name": e.name, "language": e.words["language"], "pages": pages[e.tag]}
            for e in editions]
    _write(path, json.dumps(data, ensure_ascii=False, indent=1))

