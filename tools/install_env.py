"""Install the project's requirements into the running Python environment, with the right PyTorch build.

    python tools/install_env.py requirements.txt                       # what `make lab` runs
    python tools/install_env.py --torch cpu requirements.txt           # CPU-only torch whatever the machine
    python tools/install_env.py --stamp .venv/.dev.stamp requirements-dev.txt

Which PyTorch (``--torch``, or ``make lab TORCH=...``):
  auto     (default) on Linux without an NVIDIA driver (no ``nvidia-smi``, no /proc/driver/nvidia), the CPU-only
           build; everywhere else the default one. On Linux the default wheel bundles CUDA libraries (several GB);
           on macOS and Windows the default wheel has no CUDA and is small already.
  cpu      the CPU-only build, from PyTorch's CPU wheel index (``--cpu-index``).
  default  whatever the default index gives (CUDA on Linux).
For the CPU build, ``torch==X+cpu`` is installed alone first, with the CPU index added to the default one; then
``pip install -r`` sees the pinned ``torch==X`` satisfied and leaves it. When the CPU index cannot be reached
(offline, a proxy, a mirror-only network), the script says so and installs torch from the default index instead:
the environment still works, it is only larger.

torch is installed by pip (pip reads this machine's pip configuration: a local wheel, a mirror, constraints); the
rest of the requirements by uv (``UV``, installed into the environment by pip first), which resolves, downloads and
installs in parallel: measured on a 2-core machine, the requirements and the test tools took 12 s with uv and about
70 s with pip, of the same packages, bytecode compiled by both. When uv cannot be installed or fails (a network that
only pip's configuration knows how to reach, say), the script says so and pip installs the rest. pip installs torch
with ``--no-compile`` and ``python -m compileall -j 0`` then compiles it on every core (pip compiles one file at a
time: torch took 56 s with pip's compile and 16 + 22 s this way on a loaded 2-core machine); the bytecode is written
at install time, as before, so no lesson pays for it (and none can where PYTHONDONTWRITEBYTECODE is set).

After an install that includes matplotlib, its font cache is built (see ``build_font_cache``).

``--stamp PATH`` records a fingerprint of the requirement files (and of pyproject.toml without its ``[tool.*]``
tables, which configure tools, not the install); when the fingerprint is unchanged the install is skipped, so a
``git checkout`` or a change to ruff's settings does not cost a full re-install.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import urllib.error
import urllib.request
from pathlib import Path

CPU_INDEX = "https://download.pytorch.org/whl/cpu"
UV = "uv==0.13.9"  # the installer for everything but torch, pinned like the requirements
PROBE_TIMEOUT_S = 10.0
ROOT = Path(__file__).resolve().parent.parent

_TORCH_PIN = re.compile(r"^\s*torch\s*==\s*([\w.+!-]+)\s*(?:#.*)?$")


def say(message: str) -> None:
    print(f"install_env: {message}", flush=True)


def nvidia_driver_present() -> bool:
    """True when this machine has an NVIDIA driver (its ``nvidia-smi`` tool, or the Linux driver's /proc entry)."""
    return shutil.which("nvidia-smi") is not None or Path("/proc/driver/nvidia").exists()


def choose_torch(wanted: str, platform: str, has_nvidia: bool) -> tuple[str, str]:
    """Which build to install, ``"cpu"`` or ``"default"``, and why, in words."""
    if wanted in ("cpu", "default"):
        return wanted, f"asked for (--torch {wanted})"
    if wanted != "auto":
        raise ValueError(f"--torch must be auto, cpu or default, got {wanted!r}")
    if not platform.startswith("linux"):
        return "default", f"on {platform} the default PyTorch wheel has no CUDA libraries"
    if has_nvidia:
        return "default", "an NVIDIA driver is present, so the default (CUDA) build can use the GPU"
    return "cpu", "Linux without an NVIDIA driver (no nvidia-smi): the CUDA libraries would be unused"


def torch_pin(requirement_files: list[Path]) -> str | None:
    """The version in a ``torch==X`` line of the requirement files, or None when there is none."""
    for path in requirement_files:
        for line in path.read_text().splitlines():
            match = _TORCH_PIN.match(line)
            if match:
                return match.group(1)
    return None


def installed_version(distribution: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def index_reachable(url: str, timeout: float = PROBE_TIMEOUT_S) -> tuple[bool, str]:
    """Whether a package index answers at ``url`` within ``timeout`` seconds, and what went wrong if not."""
    probe = url.rstrip("/") + "/torch/"
    try:
        with urllib.request.urlopen(probe, timeout=timeout) as response:
            response.read(1)
        return True, ""
    except urllib.error.HTTPError as error:
        return False, f"HTTP {error.code} from {probe}"
    except (OSError, ValueError) as error:  # URLError, timeouts, refused connections, a malformed URL
        reason = getattr(error, "reason", error)
        return False, f"{type(error).__name__}: {reason}"


def fingerprint(files: list[Path]) -> str:
    """A hash of what decides the install: each requirement file, and pyproject.toml less its ``[tool.*]``."""
    digest = hashlib.sha256()
    for path in sorted(files, key=str):
        text = path.read_text()
        if path.name == "pyproject.toml":
            kept, in_tool = [], False
            for line in text.splitlines():
                if line.startswith("["):
                    in_tool = line.strip("[] \t").startswith("tool.")
                if not in_tool:
                    kept.append(line)
            text = "\n".join(kept)
        digest.update(path.name.encode() + b"\0" + text.encode() + b"\0")
    return digest.hexdigest()


def fingerprint_inputs(requirement_files: list[Path]) -> list[Path]:
    """The requirement files, the files they include with ``-r``, and pyproject.toml when one installs ``.``."""
    inputs: list[Path] = []
    pending = list(requirement_files)
    while pending:
        path = pending.pop()
        if path in inputs:
            continue
        inputs.append(path)
        for line in path.read_text().splitlines():
            words = line.split("#", 1)[0].split()
            if len(words) == 2 and words[0] in ("-r", "--requirement"):
                pending.append(path.parent / words[1])
            if len(words) >= 1 and words[-1] == "." and (path.parent / "pyproject.toml").exists():
                inputs.append(path.parent / "pyproject.toml")
    return inputs


def run_pip(pip: list[str], args: list[str]) -> int:
    command = [*pip, "install", "--disable-pip-version-check", *args]
    say("running " + " ".join(shlex.quote(word) for word in command))
    return subprocess.call(command)


def compile_bytecode(folders: list[Path]) -> None:
    """Write the bytecode of every Python file under ``folders`` that has none yet (torch and its dependencies, which
    pip installed with ``--no-compile``), one process per core. A file that does not compile is left, as pip leaves
    it (a test file written for another Python, say)."""
    say("compiling torch and its dependencies to bytecode on every core (python -m compileall -j 0)")
    subprocess.call([sys.executable, "-m", "compileall", "-qq", "-j", "0", *map(str, folders)])


def install_rest(args: list[str], pip: list[str], uv: list[str]) -> int:
    """Install the requirement files (``args``: ``-r FILE`` pairs) with uv, or with pip where uv cannot be had."""
    if run_pip(pip, [UV]) != 0:
        say(f"could not install {UV} (pip's message is above); pip installs the requirements instead")
        return run_pip(pip, args)
    command = [*uv, "pip", "install", "--python", sys.executable, "--compile-bytecode", *args]
    say("running " + " ".join(shlex.quote(word) for word in command))
    if subprocess.call(command) == 0:
        return 0
    say("uv could not install the requirements (its message is above); pip installs them instead")
    return run_pip(pip, args)


def install(requirement_files: list[Path], torch: str, cpu_index: str, pip: list[str], uv: list[str]) -> int:
    build, why = choose_torch(torch, sys.platform, nvidia_driver_present())
    pin = torch_pin(requirement_files)
    torch_before = installed_version("torch")
    if build == "cpu" and pin is not None:
        wanted = f"{pin}+cpu"  # the CPU index's label; a plain `torch==X` would accept an installed CUDA build
        if installed_version("torch") == wanted:
            say(f"torch {wanted} is installed already; keeping it")
        else:
            say(f"CPU-only torch {wanted}: {why}")
            reachable, problem = index_reachable(cpu_index)
            if not reachable:
                say(f"PyTorch's CPU wheel index {cpu_index} cannot be reached ({problem}); falling back to the "
                    f"default index. PyPI's Linux torch wheel brings CUDA libraries (several GB); a local wheel "
                    f"may not: which build was installed is said when pip is done.")
            elif run_pip(pip, [f"torch=={wanted}", "--no-compile", "--extra-index-url", cpu_index]) != 0:
                say(f"installing torch from {cpu_index} failed (pip's message is above); falling back to the "
                    f"default index (which build was installed is said when pip is done)")
    elif pin is not None:
        say(f"torch {pin} from the default index: {why}")
    if pin is not None and (installed_version("torch") or "").split("+")[0] != pin:
        # torch alone, by pip: a torch already installed (the CPU build above, or an earlier one) is kept by pip and uv
        if run_pip(pip, [f"torch=={pin}", "--no-compile"]) != 0:
            return 1
    torch_now = installed_version("torch")
    if pin is not None and torch_now != torch_before and (torch_now or "").split("+")[0] == pin:
        compile_bytecode([Path(sysconfig.get_paths()["purelib"])])  # only after pip installed torch here
    args = [arg for path in requirement_files for arg in ("-r", str(path))]
    status = install_rest(args, pip, uv)
    if status == 0 and pin is not None:
        say(installed_torch_report())
    if status == 0 and any("matplotlib" in path.read_text() for path in requirement_files):
        build_font_cache()
    return status


def installed_torch_report() -> str:
    """What torch this environment holds now, said from its metadata (not from what was asked for): the version,
    and whether NVIDIA's CUDA libraries came with it."""
    from importlib import metadata

    version = installed_version("torch")
    if version is None:
        return "torch is not installed in this environment"
    cuda = sorted({d.metadata["Name"] for d in metadata.distributions()
                   if (d.metadata["Name"] or "").lower().startswith("nvidia-")})
    if cuda:
        return (f"installed torch {version} with {len(cuda)} NVIDIA CUDA packages ({', '.join(cuda[:3])}, ...): "
                f"several GB, of use only with an NVIDIA GPU")
    build = "the CPU-only build" if version.endswith("+cpu") else "no CUDA libraries"
    return f"installed torch {version} ({build})"


def build_font_cache() -> None:
    """matplotlib builds a cache of the machine's fonts on its first import, and says so in red (stderr) when that
    takes over 5 s: in a learner's first lesson. Build it now, where a wait is expected."""
    say("building matplotlib's font cache (once per machine)")
    result = subprocess.run([sys.executable, "-c", "import matplotlib.font_manager"],
                            capture_output=True, text=True)
    if result.returncode != 0:
        say(f"could not import matplotlib to build its font cache (the first figure will build it):\n"
            f"{result.stderr.strip()}")


def default_pip() -> list[str]:
    return [sys.executable, "-m", "pip"]


def default_uv() -> list[str]:
    return [sys.executable, "-m", "uv"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python tools/install_env.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("requirements", nargs="+", type=Path, help="requirement files to install (pip -r)")
    parser.add_argument("--torch", default="auto", choices=["auto", "cpu", "default"],
                        help="which PyTorch build (default: auto)")
    parser.add_argument("--cpu-index", default=CPU_INDEX, help=f"PyTorch's CPU wheel index (default {CPU_INDEX})")
    parser.add_argument("--pip", default=None, help="the pip command to run (default: this Python's pip)")
    parser.add_argument("--uv", default=None, help="the uv command to run (default: this Python's uv, which the "
                        "script installs with pip)")
    parser.add_argument("--stamp", type=Path, default=None,
                        help="skip the install when this file holds the requirements' current fingerprint")
    args = parser.parse_args(argv)

    missing = [str(path) for path in args.requirements if not path.is_file()]
    if missing:
        parser.error(f"no such requirement file: {', '.join(missing)}")
    pip = shlex.split(args.pip) if args.pip else default_pip()
    uv = shlex.split(args.uv) if args.uv else default_uv()
    current = fingerprint(fingerprint_inputs(args.requirements))
    if args.stamp is not None and args.stamp.is_file() and args.stamp.read_text().strip() == current:
        say(f"{', '.join(map(str, args.requirements))} unchanged since the last install; nothing to do")
        args.stamp.touch()
        return 0
    status = install(args.requirements, args.torch, args.cpu_index, pip, uv)
    if status == 0 and args.stamp is not None:
        args.stamp.write_text(current + "\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
