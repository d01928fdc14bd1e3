"""tools/check_numerics.py (make test-numerics) on a tiny lesson: it names the cell whose float32 digits another
numeric path changes, under each path, and the cell that raises; it passes the exact outputs and the tagged cell;
and under the native path (nothing changed) it finds no difference, so what it reports comes from the path."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import nbformat
import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its dataclass, and the worker processes it starts, look it up by name
    spec.loader.exec_module(module)
    return module


check_numerics = _load("check_numerics")
run_notebooks = _load("run_notebooks")

# Twenty steps that feed each product's last bits into the next, like a training loop: the printed digits depend
# on how this machine rounds (ATen's softmax kernel, MKL's product), not on the mathematics.
FRAGILE = """\
x = torch.randn(64, 100)
for _ in range(20):
    x = torch.softmax(x @ w, dim=-1) * 100
print(f"mean square after 20 steps: {float((x ** 2).mean()):.3f}")"""


@pytest.fixture(scope="module")
def lesson(tmp_path_factory):
    """A lesson committed executed on this machine: exact outputs, a fragile print, the same print tagged, and a
    cell that raises."""
    path = tmp_path_factory.mktemp("notebooks") / "00_fixture.ipynb"
    nb = nbformat.v4.new_notebook()
    cells = [
        ("setup", "import torch\n_ = torch.manual_seed(0)\nw = torch.randn(100, 100) / 10", []),
        ("exact", "print(int((torch.ones(3, 4) @ torch.ones(4, 5)).sum()), tuple(w.shape))", []),
        ("fragile", FRAGILE, []),
        ("tagged", FRAGILE, ["nbval-ignore-output"]),
        ("raises", "assert False, 'a claim that does not hold'", []),
    ]
    for cell_id, source, tags in cells:
        cell = nbformat.v4.new_code_cell(source, id=cell_id)
        if tags:
            cell.metadata["tags"] = tags
        nb.cells.append(cell)
    nbformat.write(nb, path)
    run_notebooks.execute(path)
    return path


@pytest.mark.slow
def test_names_the_fragile_cell_under_each_other_path_and_the_cell_that_raises(capsys, lesson):
    status = check_numerics.main([str(lesson), "--paths", "native", "avx2", "plain"])
    out = capsys.readouterr().out
    assert status == 1, out
    # On a CPU without AVX-512, ATen's native kernels are its AVX2 ones: that path changes nothing there.
    avx2_is_native = torch.backends.cpu.get_cpu_capability() == "AVX2"
    for path in ("plain",) if avx2_is_native else ("avx2", "plain"):
        assert f"00_fixture.ipynb, cell fragile (nbval's Cell 2), numeric path {path}" in out, out
    for path in ("native", "avx2") if avx2_is_native else ("native",):
        assert f"cell fragile (nbval's Cell 2), numeric path {path}" not in out, "nothing changed, nothing differs"
    assert "-mean square after 20 steps" in out and "+mean square after 20 steps" in out, "shows the diff"
    for path in ("native", "avx2", "plain"):
        assert f"cell raises (nbval's Cell 4), numeric path {path} " in out, out
    assert "raised AssertionError: a claim that does not hold" in out
    for passing in ("cell setup", "cell exact", "cell tagged"):
        assert passing not in out, out
    assert "1 cell(s) changed a compared output, 1 cell(s) raised" in out
