"""Every lesson is committed the way nbval and learners need it: executed top to bottom, no stray errors or
warnings, kernel python3, figures stored as images, exercises in the nbgrader markup, small files."""

import json
import re
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))
MAX_BYTES = 1_000_000


def load(path):
    return json.loads(path.read_text(encoding="utf-8"))


def code_cells(nb):
    return [c for c in nb["cells"] if c["cell_type"] == "code"]


def test_lessons_are_numbered_in_order():
    names = [p.name for p in NOTEBOOKS]
    assert names, "no notebooks found"
    numbers = [int(re.match(r"(\d\d)_[a-z0-9_]+\.ipynb$", n).group(1)) for n in names]
    assert numbers == list(range(len(numbers))), f"lessons must be 00, 01, 02, ... without gaps: {names}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_executed_top_to_bottom(path):
    counts = [c["execution_count"] for c in code_cells(load(path)) if "".join(c["source"]).strip()]
    assert counts == list(range(1, len(counts) + 1)), f"{path.name}: re-run it top to bottom (make notebooks)"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_error_or_stderr_outside_tagged_cells(path):
    for index, cell in enumerate(code_cells(load(path))):
        tags = cell.get("metadata", {}).get("tags", [])
        for out in cell.get("outputs", []):
            if out["output_type"] == "error":
                assert "raises-exception" in tags, f"{path.name} code cell {index}: error {out['ename']}"
            if out.get("name") == "stderr":
                assert "nbval-ignore-output" in tags, f"{path.name} code cell {index} wrote to stderr"
        if "raises-exception" in tags:
            assert any(o["output_type"] == "error" for o in cell["outputs"]), (
                f"{path.name} code cell {index} is tagged raises-exception but raised nothing")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_kernel_size_and_volatile_text(path):
    nb = load(path)
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
    assert path.stat().st_size < MAX_BYTES, f"{path.name} is {path.stat().st_size:,d} bytes; shrink its figures"
    for cell in code_cells(nb):
        for out in cell.get("outputs", []):
            text = "".join(out.get("text", "")) + "".join(out.get("data", {}).get("text/plain", ""))
            assert not re.search(r" at 0x[0-9a-f]+", text), f"{path.name}: an object address in the output"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_figures_are_stored_as_images(path):
    for cell in code_cells(load(path)):
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if "".join(data.get("text/plain", "")).startswith("<Figure"):
                assert "image/png" in data, f"{path.name}: a figure was stored as text only"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_exercises_use_the_solution_markup(path):
    """At least three exercises; each solution region is closed and followed by a check cell."""
    cells = code_cells(load(path))
    answers = 0
    for index, cell in enumerate(cells):
        source = "".join(cell["source"])
        begins, ends = source.count("### BEGIN SOLUTION"), source.count("### END SOLUTION")
        assert begins == ends, f"{path.name} code cell {index}: unbalanced solution markers"
        if begins:
            answers += 1
            rest = "".join("".join(c["source"]) for c in cells[index:index + 2])
            assert "check." in rest or "checks." in rest, f"{path.name} code cell {index}: no check follows"
    assert answers >= 3, f"{path.name}: {answers} exercises; lessons have at least three"
