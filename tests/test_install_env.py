"""tools/install_env.py: which PyTorch build it picks, the fall-back when PyTorch's CPU index cannot be reached, and
the fingerprint that skips an install when nothing changed, torch by pip and the rest by uv (pip where uv cannot be
had). pip and uv are replaced by fakes that record their arguments."""

from __future__ import annotations

import http.server
import importlib.util
import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tools" / "install_env.py"

_spec = importlib.util.spec_from_file_location("install_env", SCRIPT)
install_env = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(install_env)

FAKE_TOOL = textwrap.dedent(
    """
    import json, sys
    name, log, fail_on = sys.argv[1], sys.argv[2], sys.argv[3]
    with open(log, "a") as handle:
        handle.write(json.dumps([name, *sys.argv[4:]]) + "\\n")
    sys.exit(1 if fail_on and fail_on in [name, *sys.argv[4:]] else 0)
    """
)
PIP = ["pip", "install", "--disable-pip-version-check"]
UV_INSTALL = [*PIP, install_env.UV]


@pytest.mark.parametrize(
    ("wanted", "platform", "nvidia", "build"),
    [
        ("auto", "linux", False, "cpu"),
        ("auto", "linux", True, "default"),
        ("auto", "darwin", False, "default"),
        ("auto", "win32", False, "default"),
        ("cpu", "darwin", True, "cpu"),
        ("default", "linux", False, "default"),
    ],
)
def test_the_cpu_build_is_chosen_only_on_linux_without_an_nvidia_driver(wanted, platform, nvidia, build):
    chosen, why = install_env.choose_torch(wanted, platform, nvidia)
    assert chosen == build
    assert why  # the script prints the reason


def test_an_unknown_choice_is_refused():
    with pytest.raises(ValueError, match="auto, cpu or default"):
        install_env.choose_torch("cuda", "linux", False)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # nothing listens there once the socket is closed


@pytest.fixture
def project(tmp_path):
    """A requirements file pinning a torch version that is certainly not installed, and a fake pip and uv."""
    (tmp_path / "requirements.txt").write_text("torch==9.9.9  # pinned\neinops==0.8.2\n")
    (tmp_path / "fake_tool.py").write_text(FAKE_TOOL)
    return tmp_path


def _uv_rest(*args: str) -> list[str]:
    """What the script runs to install the requirement files with uv."""
    return ["uv", "pip", "install", "--python", sys.executable, "--compile-bytecode", *args]


def _installs(calls: list[list[str]]) -> int:
    """How many times the requirement files were installed (by uv or pip)."""
    return sum("-r" in call for call in calls)


def _run(project: Path, *args: str, fail_on: str = "", env: dict | None = None):
    """Run the script with the fake pip and uv; the calls they got, each as [tool name, *arguments]."""
    log = project / "pip-calls.jsonl"

    def tool(name: str) -> str:
        # forward slashes: the script splits --pip like a POSIX shell, which would eat Windows' backslashes
        paths = [Path(sys.executable).as_posix(), (project / "fake_tool.py").as_posix()]
        return " ".join([*paths, name, log.as_posix(), fail_on or "-"])

    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--pip", tool("pip"), "--uv", tool("uv"), *args],
        cwd=project, capture_output=True, text=True, timeout=120, env=env,
    )
    calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return result, calls


def test_falls_back_to_the_default_index_when_the_cpu_index_cannot_be_reached(project):
    unreachable = f"http://127.0.0.1:{_closed_port()}/whl/cpu"
    result, calls = _run(project, "--torch", "cpu", "--cpu-index", unreachable, "requirements.txt")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{unreachable} cannot be reached" in result.stdout
    assert "falling back to the default index" in result.stdout
    assert calls == [[*PIP, "torch==9.9.9", "--no-compile"], UV_INSTALL, _uv_rest("-r", "requirements.txt")]
    # what was installed is said from the environment, not guessed: here, the torch of the running interpreter
    assert f"install_env: {install_env.installed_torch_report()}" in result.stdout


def test_the_install_report_names_the_torch_this_environment_holds():
    from importlib import metadata

    report = install_env.installed_torch_report()
    version = metadata.version("torch")
    assert report.startswith(f"installed torch {version}")
    has_cuda = any((d.metadata["Name"] or "").lower().startswith("nvidia-") for d in metadata.distributions())
    assert ("NVIDIA CUDA packages" in report) == has_cuda
    assert ("CPU-only" in report) == (version.endswith("+cpu") and not has_cuda)


class _Index(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path.endswith("/torch/") else 404)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def cpu_index():
    server = http.server.HTTPServer(("127.0.0.1", 0), _Index)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/whl/cpu"
    server.shutdown()
    server.server_close()


def test_installs_the_cpu_build_first_when_the_index_answers(project, cpu_index):
    result, calls = _run(project, "--torch", "cpu", "--cpu-index", cpu_index, "requirements.txt")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "falling back" not in result.stdout
    assert calls == [
        [*PIP, "torch==9.9.9+cpu", "--no-compile", "--extra-index-url", cpu_index],
        [*PIP, "torch==9.9.9", "--no-compile"],  # the fake installed nothing: the script asks pip for the pin again
        UV_INSTALL,
        _uv_rest("-r", "requirements.txt"),
    ]


def test_falls_back_when_pip_cannot_install_from_the_cpu_index(project, cpu_index):
    result, calls = _run(project, "--torch", "cpu", "--cpu-index", cpu_index, "requirements.txt",
                         fail_on="--extra-index-url")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "failed" in result.stdout and "falling back to the default index" in result.stdout
    assert calls[1] == [*PIP, "torch==9.9.9", "--no-compile"]
    assert calls[-1] == _uv_rest("-r", "requirements.txt")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the automatic choice differs only on Linux")
def test_auto_keeps_the_default_build_when_nvidia_smi_is_there(project, tmp_path_factory):
    bin_dir = tmp_path_factory.mktemp("bin")
    fake = bin_dir / "nvidia-smi"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    result, calls = _run(project, "--torch", "auto", "requirements.txt", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "NVIDIA driver is present" in result.stdout
    assert calls == [[*PIP, "torch==9.9.9", "--no-compile"], UV_INSTALL, _uv_rest("-r", "requirements.txt")]


def test_a_failing_install_fails_the_script_and_writes_no_stamp(project):
    for fail_on in ("-r", "torch==9.9.9"):  # uv and pip both fail the requirements; pip fails torch
        result, _ = _run(project, "--torch", "default", "--stamp", "stamp", "requirements.txt", fail_on=fail_on)
        assert result.returncode == 1
        assert not (project / "stamp").exists()


def test_the_requirements_go_to_uv_and_to_pip_where_uv_cannot_be_had(project):
    result, calls = _run(project, "--torch", "default", "requirements.txt", fail_on=install_env.UV)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"could not install {install_env.UV}" in result.stdout
    assert calls == [[*PIP, "torch==9.9.9", "--no-compile"], UV_INSTALL, [*PIP, "-r", "requirements.txt"]]

    (project / "pip-calls.jsonl").unlink()
    result, calls = _run(project, "--torch", "default", "requirements.txt", fail_on="uv")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "uv could not install the requirements" in result.stdout
    assert calls == [[*PIP, "torch==9.9.9", "--no-compile"], UV_INSTALL, _uv_rest("-r", "requirements.txt"),
                     [*PIP, "-r", "requirements.txt"]]


def test_a_torch_already_at_the_pin_is_kept(project):
    from importlib import metadata

    pin = metadata.version("torch").split("+")[0]
    (project / "requirements.txt").write_text(f"torch=={pin}\neinops==0.8.2\n")
    result, calls = _run(project, "--torch", "default", "requirements.txt")
    assert result.returncode == 0, result.stdout + result.stderr
    assert calls == [UV_INSTALL, _uv_rest("-r", "requirements.txt")]


def test_the_stamp_skips_an_install_only_while_the_requirements_are_unchanged(project):
    (project / "requirements.txt").write_text("einops==0.8.2\n-e .\n")
    (project / "pyproject.toml").write_text('[project]\nname = "x"\n\n[tool.ruff]\nline-length = 120\n')
    args = ("--torch", "default", "--stamp", "stamp", "requirements.txt")
    first, calls = _run(project, *args)
    assert first.returncode == 0 and _installs(calls) == 1
    again, calls = _run(project, *args)
    assert "unchanged since the last install" in again.stdout and _installs(calls) == 1

    # tool settings do not decide the install; the project's dependencies do
    (project / "pyproject.toml").write_text('[project]\nname = "x"\n\n[tool.ruff]\nline-length = 100\n')
    _, calls = _run(project, *args)
    assert _installs(calls) == 1
    (project / "pyproject.toml").write_text('[project]\nname = "x"\ndependencies = ["numpy"]\n')
    _, calls = _run(project, *args)
    assert _installs(calls) == 2
    (project / "requirements.txt").write_text("einops==0.8.1\n-e .\n")
    _, calls = _run(project, *args)
    assert _installs(calls) == 3


def test_requirements_files_the_makefile_installs_exist_and_pin_torch():
    assert install_env.torch_pin([ROOT / "requirements.txt"]) is not None
    inputs = install_env.fingerprint_inputs([ROOT / "requirements.txt"])
    assert ROOT / "pyproject.toml" in inputs  # `-e .` installs the package, so its metadata counts


def test_bytecode_is_written_on_every_core_even_where_python_would_not_write_it(tmp_path):
    """pip installs torch with --no-compile; compile_bytecode writes the bytecode instead, also where
    PYTHONDONTWRITEBYTECODE keeps an import from writing it, and leaves a file that does not compile as pip does."""
    package = tmp_path / "site" / "pkg"
    package.mkdir(parents=True)
    (package / "good.py").write_text("x = 1\n")
    (package / "broken.py").write_text("def (:\n")
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    importer = f"import sys; sys.path.insert(0, {str(tmp_path / 'site')!r}); import pkg.good"
    subprocess.run([sys.executable, "-c", importer], check=True, env=env)
    assert not (package / "__pycache__").exists(), "the import wrote bytecode: the test shows nothing"
    install_env.compile_bytecode([tmp_path / "site"])
    compiled = sorted(path.name.split(".")[0] for path in (package / "__pycache__").glob("*.pyc"))
    assert compiled == ["good"], compiled
