"""Execute lessons top to bottom, in place, the way they are committed (with outputs, counts 1, 2, 3, ...).

    python tools/run_notebooks.py notebooks/02_scaled_dot_product_attention.ipynb
    python tools/run_notebooks.py --from-py draft.py notebooks/03_self_attention_layer.ipynb

``--from-py`` first builds the notebook from a draft in "percent" format: cells start with ``# %%`` (code) or
``# %% [markdown]`` (markdown, each line prefixed by ``# ``); ``# %% tags=["nbval-ignore-output"]`` tags a code cell.
The kernel runs in ``notebooks/`` as a learner's would, with the default inline backend (figures as PNG).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import uuid
from pathlib import Path

import nbformat
from nbclient import NotebookClient

_HEADER = re.compile(r"^# %%(?P<markdown> \[markdown\])?(?:\s+tags=(?P<tags>\[.*\]))?\s*$")


def notebook_from_percent(text: str) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    cells: list[tuple[bool, list[str], list[str]]] = []
    for line in text.splitlines():
        match = _HEADER.match(line)
        if match:
            tags = json.loads(match["tags"]) if match["tags"] else []
            cells.append((bool(match["markdown"]), tags, []))
        elif cells:
            cells[-1][2].append(line)
    for is_markdown, tags, lines in cells:
        while lines and not lines[-1].strip():
            lines.pop()
        while lines and not lines[0].strip():
            lines.pop(0)
        if is_markdown:
            source = "\n".join(re.sub(r"^# ?", "", line) for line in lines)
            cell = nbformat.v4.new_markdown_cell(source)
        else:
            cell = nbformat.v4.new_code_cell("\n".join(lines))
        if tags:
            cell.metadata["tags"] = tags
        nb.cells.append(cell)
    return nb


def execute(path: Path, nb: nbformat.NotebookNode | None = None) -> float:
    nb = nb if nb is not None else nbformat.read(path, as_version=4)
    nb.metadata = {
        "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    }
    seen: set[str] = set()
    for cell in nb.cells:
        # A cell keeps its id for life: translation catalogs (locale/) key each entry by it, so inserting a cell
        # must not renumber the ones after it. A new cell (or a duplicate, after a copy and paste) gets a fresh one.
        if not cell.get("id") or cell["id"] in seen:
            cell["id"] = f"{path.stem[:2]}-{uuid.uuid4().hex[:8]}"
        seen.add(cell["id"])
    start = time.perf_counter()
    NotebookClient(nb, timeout=600, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    seconds = time.perf_counter() - start
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        if errors and "raises-exception" not in cell.metadata.get("tags", []):
            print(f"{path}: unexpected error in cell {cell['id']}: {errors[0]['ename']}: {errors[0]['evalue']}",
                  file=sys.stderr)
    nbformat.write(nb, path)
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--from-py", type=Path, help="build the (single) notebook from this percent-format draft")
    args = parser.parse_args(argv)
    if args.from_py and len(args.notebooks) != 1:
        parser.error("--from-py takes exactly one output notebook")
    for path in args.notebooks:
        nb = notebook_from_percent(args.from_py.read_text(encoding="utf-8")) if args.from_py else None
        print(f"{path}: executed in {execute(path, nb):.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
