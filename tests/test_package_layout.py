"""Imports point one way between the package's folders (CONTRIBUTING "Layout"), read from the source with ast, so a
lazy import inside a function (or one only for type checkers) counts too: only plotting imports matplotlib, nothing
imports plotting, no module imports itself back through others (no loop), and every module stays under 300 lines."""

import ast
import functools
import importlib
import re
import sys
from pathlib import Path

import pytest

import attention_lab

PACKAGE = Path(attention_lab.__file__).parent

# What each part may import from the rest of the package (its own folder is always allowed).
ALLOWED = {
    "_validation": set(),
    "reference": {"_validation"},
    "runtime": {"_validation"},
    "i18n": {"_validation"},  # the language of messages: a bottom layer every other part may use
    "analysis": {"_validation"},
    "core": {"_validation"},
    "efficient": {"_validation", "core"},
    "generation": {"_validation", "core"},
    "models": {"_validation", "core", "efficient", "generation"},
    "measure": {"_validation", "core", "efficient", "models"},
    "teaching": {"_validation", "analysis", "core", "efficient", "generation", "measure", "models", "reference",
                 "runtime"},
    "plotting": {"_validation", "analysis", "core", "efficient", "generation", "measure", "models", "reference",
                 "runtime"},
    "__init__": {"_validation", "core", "efficient", "generation", "reference", "runtime"},
}
for _part_name in ALLOWED.keys() - {"_validation", "reference", "runtime", "i18n", "analysis"}:
    ALLOWED[_part_name] = ALLOWED[_part_name] | {"i18n"}


def _part(path: Path) -> str:
    """The part of the package a module belongs to: its top folder, or its own name at the top level."""
    rel = path.relative_to(PACKAGE).with_suffix("").parts
    return rel[0]


def imported_modules(path: Path, source: str | None = None) -> set[str]:
    """Dotted names of every module ``path`` (or ``source``, read as if it were that file) imports, relative imports
    resolved, at any depth in the file."""
    package = ["attention_lab", *path.relative_to(PACKAGE).parent.parts]
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8") if source is None else source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            module = [*base, *(node.module.split(".") if node.module else [])]
            if node.module:
                names.add(".".join(module))
            else:  # from . import x: each x is a module of the package
                names.update(".".join([*module, alias.name]) for alias in node.names)
    return names


@functools.cache
def _edges() -> dict[Path, set[str]]:
    """Each module's imports of other parts of the package (by part name) and of matplotlib."""
    edges = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        own = _part(path)
        found = set()
        for name in imported_modules(path):
            parts = name.split(".")
            if parts[0] == "matplotlib":
                found.add("matplotlib")
            elif parts[0] == "attention_lab" and len(parts) > 1 and parts[1] != own:
                found.add(parts[1])
        edges[path] = found
    return edges


def test_every_part_is_known():
    assert {_part(path) for path in PACKAGE.rglob("*.py")} <= set(ALLOWED)


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_point_one_way(path):
    own = _part(path)
    others = _edges()[path] - {"matplotlib"}
    assert others <= ALLOWED[own], f"{path.relative_to(PACKAGE)} imports {sorted(others - ALLOWED[own])}"


def test_only_plotting_imports_matplotlib_and_nothing_imports_plotting():
    edges = _edges()
    matplotlib_users = {path.relative_to(PACKAGE).parts[0] for path, found in edges.items() if "matplotlib" in found}
    plotting_users = [str(path.relative_to(PACKAGE)) for path, found in edges.items() if "plotting" in found]
    assert matplotlib_users == {"plotting"}
    assert plotting_users == []


def test_the_import_reader_resolves_relative_imports():
    # the reader itself must see what the tests above rely on: relative, absolute and in-function imports
    source = ("from .memory import measure_peak_memory\nfrom ..models import tasks\nimport attention_lab.core.masks\n"
              "def f():\n    from ..plotting._base import WEIGHTS_CMAP\n    import matplotlib.pyplot\n")
    names = imported_modules(PACKAGE / "measure" / "example.py", source)
    assert names == {"attention_lab.measure.memory", "attention_lab.models",
                     "attention_lab.core.masks", "attention_lab.plotting._base", "matplotlib.pyplot"}


def test_the_parts_form_layers_without_a_loop():
    # each part may import only parts below it: a topological order of ALLOWED exists, and the edges seen obey it
    order, left = [], {part: set(needs) for part, needs in ALLOWED.items()}
    while left:
        ready = sorted(part for part, needs in left.items() if needs <= set(order))
        assert ready, f"the allowed imports loop between {sorted(left)}"
        order += ready
        for part in ready:
            del left[part]
    seen = {(_part(path), other) for path, found in _edges().items() for other in found - {"matplotlib"}}
    assert all(order.index(other) < order.index(part) for part, other in seen)


@pytest.mark.parametrize("short", ["model", "training", "classroom", "checks", "memory", "bench", "masks"])
def test_every_module_has_one_import_path(short):
    # the folder path is the only one: no alias finder, no lazy module attributes on the package
    assert not any(type(finder).__module__.startswith("attention_lab") for finder in sys.meta_path)
    with pytest.raises(ModuleNotFoundError, match=f"No module named 'attention_lab.{short}'"):
        importlib.import_module(f"attention_lab.{short}")
    assert not hasattr(attention_lab, short)


MAX_LINES = 300


def _module_file(name: str) -> Path | None:
    """The file of a dotted module name of the package (``a.b`` is ``a/b.py`` or ``a/b/__init__.py``)."""
    parts = name.split(".")[1:]
    for candidate in (PACKAGE.joinpath(*parts).with_suffix(".py") if parts else None,
                      PACKAGE.joinpath(*parts, "__init__.py")):
        if candidate is not None and candidate.exists():
            return candidate
    return None


def import_loops() -> list[list[str]]:
    """Every loop of imports between the package's modules (each module's own imports, not its parents'), one
    path per loop found by a depth-first walk."""
    graph = {path: {_module_file(name) for name in imported_modules(path) if name.split(".")[0] == "attention_lab"}
             - {None, path} for path in PACKAGE.rglob("*.py")}
    loops, state = [], {}  # state: 1 = on the current path, 2 = done

    def walk(path: Path, trail: list[Path]) -> None:
        state[path] = 1
        for target in sorted(graph[path]):
            if state.get(target) == 1:
                loop = trail[trail.index(target):] + [target]
                loops.append([str(p.relative_to(PACKAGE)) for p in loop])
            elif target not in state:
                walk(target, [*trail, target])
        state[path] = 2

    for path in sorted(graph):
        if path not in state:
            walk(path, [path])
    return loops


def test_no_import_loop():
    assert import_loops() == []


def test_the_loop_finder_finds_a_loop(tmp_path, monkeypatch):
    # two modules that import each other (one of them only for type checkers) must be reported
    package = tmp_path / "attention_lab"
    (package / "part").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "part" / "__init__.py").write_text("")
    (package / "part" / "a.py").write_text("from .b import thing\n")
    (package / "part" / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import a\n")
    monkeypatch.setattr(__import__(__name__), "PACKAGE", package)
    assert import_loops() == [["part/a.py", "part/b.py", "part/a.py"]]


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_modules_stay_short(path):
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines < MAX_LINES, f"{path.relative_to(PACKAGE)} has {lines} lines; split it by job (CONTRIBUTING)"


FAST_PATHS = sorted(path for folder in ("efficient", "generation") for path in (PACKAGE / folder).rglob("*.py")
                    if path.name != "__init__.py")


@pytest.mark.parametrize("path", FAST_PATHS, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_every_fast_path_names_its_reference_and_how_it_differs(path):
    """CONTRIBUTING "Adding an attention variant": a module of efficient/ or generation/ opens with a docstring that
    names its plain version in attention_lab.reference and says how it differs and what that buys."""
    docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    named = re.findall(r"attention_lab\.reference\.(\w+)", docstring)
    assert named, f"{path.relative_to(PACKAGE)}: the module docstring names no function of attention_lab.reference"
    missing = set(named) - set(attention_lab.reference.__all__)
    assert not missing, (f"{path.relative_to(PACKAGE)} names {sorted(missing)}, which attention_lab.reference does "
                         f"not have")
    assert re.search(r"differ", docstring) and re.search(r"\bbuy", docstring), (
        f"{path.relative_to(PACKAGE)}: say how it differs from the reference and what that buys")


# ---- tests use the package as its users do: through public names -------------------------------------------------

TESTS = Path(__file__).parent


def _private(name: str) -> bool:
    """``_x`` is private; a dunder such as ``__file__`` or ``__all__`` is not."""
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _package_names(node: ast.Import | ast.ImportFrom) -> list[tuple[str, str]]:
    """(dotted name reached, local name bound) for each name an import takes from attention_lab; [] otherwise."""
    if isinstance(node, ast.Import):
        return [(alias.name, alias.asname or alias.name.split(".")[0]) for alias in node.names
                if alias.name.split(".")[0] == "attention_lab"]
    if node.level or not node.module or node.module.split(".")[0] != "attention_lab":
        return []
    return [(f"{node.module}.{alias.name}", alias.asname or alias.name) for alias in node.names]


def private_reaches(source: str) -> list[str]:
    """Every place ``source`` reaches a private module or name of attention_lab, in line order: an import whose dotted
    path has a part starting with ``_``, an attribute starting with ``_`` read from a name imported from the package,
    an ``import_module`` of such a path, and the same inside any string that is itself Python (a notebook cell)."""
    found: list[tuple[int, str]] = []
    tree = ast.parse(source)
    bound = {local for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
             for _, local in _package_names(node)}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found += [(node.lineno, f"imports {dotted}") for dotted, _ in _package_names(node)
                      if any(_private(part) for part in dotted.split("."))]
        elif isinstance(node, ast.Attribute) and _private(node.attr):
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in bound:
                found.append((node.lineno, f"reads {ast.unparse(node)}"))
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str) and ast.unparse(node.func).endswith("import_module")):
            dotted = node.args[0].value
            if dotted.split(".")[0] == "attention_lab" and any(_private(part) for part in dotted.split(".")):
                found.append((node.lineno, f"imports {dotted}"))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "attention_lab" in node.value:
            try:
                inner = private_reaches(node.value)
            except SyntaxError:  # text, not code
                continue
            found += [(node.lineno, f"in a string: {reach}") for reach in inner]
    return [f"line {line}: {what}" for line, what in sorted(found)]


@pytest.mark.parametrize("path", sorted(TESTS.rglob("*.py")), ids=lambda p: str(p.relative_to(TESTS)))
def test_tests_use_only_public_modules_and_names(path):
    """A test goes through the names the package documents, as a learner or a teacher would: a private module or
    name it needs is either tested through the public one that uses it or made public (CONTRIBUTING "Tests")."""
    reaches = private_reaches(path.read_text(encoding="utf-8"))
    assert not reaches, f"tests/{path.relative_to(TESTS)} reaches private parts of attention_lab: {reaches}"


def test_the_private_reach_finder_finds_each_kind():
    cell = "from attention_lab.teaching.checks import _core\\n_core.correct('x')"
    source = ("import attention_lab\nimport attention_lab._validation\nfrom attention_lab.plotting import _fonts\n"
              "from attention_lab.teaching.checks._core import NotYet\n"
              "from attention_lab.teaching.checks import lesson06 as check\n"
              "import importlib\n"
              "check._peak(1)\nattention_lab.core._mask_checks\nimportlib.import_module('attention_lab.core._x')\n"
              f'CELLS = ["{cell}"]\n')
    assert private_reaches(source) == [
        "line 2: imports attention_lab._validation", "line 3: imports attention_lab.plotting._fonts",
        "line 4: imports attention_lab.teaching.checks._core.NotYet", "line 7: reads check._peak",
        "line 8: reads attention_lab.core._mask_checks", "line 9: imports attention_lab.core._x",
        "line 10: in a string: line 1: imports attention_lab.teaching.checks._core"]
    clean = ("import attention_lab\nimport torch\nfrom attention_lab.teaching.checks import NotYet, lesson06\n"
             "PACKAGE = attention_lab.__file__\nkeys = torch.zeros(3)[:2]\nassert keys._base is not None\n"
             "error = NotYet('x')\nerror._render_traceback_()\n'Not yet: attention_lab is _not code'\n"
             "ORDER = {'attention_lab.plotting._base'}\n")
    assert private_reaches(clean) == []
