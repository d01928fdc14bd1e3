"""Helpers for tests/browser: a headless JupyterLab server and Debian's Chromium driven by playwright.

The server is started with the options of the Makefile's ``lab`` recipe (what ``make lab`` runs), landing in
notebooks/ instead of student/, plus what a headless, offline, throw-away run needs: 127.0.0.1, a free port, a
token, no news or update checks, a read-only extension manager, no autosave (the committed notebooks must not
change) and private settings, workspace and runtime folders. Both processes are torn down by ``stop()``
whatever state they are in.
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO / "notebooks"

CHROMIUM_ENV = "ATTENTION_LAB_CHROMIUM"
DEFAULT_CHROMIUM = "/usr/bin/chromium"
ENABLE_HINT = (
    "`sudo apt-get install -y chromium` (or set ATTENTION_LAB_CHROMIUM to a Chromium binary) and "
    "`pip install -r requirements-dev.txt` (playwright, which drives that Chromium: no `playwright install`); "
    "`.ci/run` does both"
)

# Playwright adds its own automation flags; these keep an offline machine quiet (no refused-connection floods)
# and let Chromium run as root in a container. The empty profile is passed as user_data_dir (playwright refuses
# --user-data-dir in args).
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]

# Settings a learner would leave alone but an unattended run must not have: network calls (news, update checks,
# extension manager) and autosave, which would write the re-executed lesson over the committed one.
USER_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    "@jupyterlab/extensionmanager-extension/plugin.jupyterlab-settings": {"enabled": False},
}

HEADLESS_OPTIONS = [
    "--no-browser",
    "--ServerApp.ip=127.0.0.1",
    "--ServerApp.port_retries=0",
    "--LabApp.news_url=None",
    "--LabApp.check_for_updates_class=jupyterlab.handlers.announcements.NeverCheckForUpdate",
    "--LabApp.extension_manager=readonly",
]


def chromium_path() -> str | None:
    """The Chromium executable to drive, or None when there is none."""
    wanted = os.environ.get(CHROMIUM_ENV, DEFAULT_CHROMIUM)
    found = shutil.which(wanted)
    return found


def playwright_missing() -> str | None:
    """Why playwright cannot be used, or None when it can."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError as exc:
        return f"the playwright package is not installed ({exc})"
    return None


# `make lab` opens the learner's copies (student/); this test runs the solution notebooks, whose stored outputs
# say what each lesson must show, so its lab lands in notebooks/ instead. Every other option is the Makefile's.
LESSONS_URL = "/lab/tree/notebooks"


def lab_options_for_the_lessons(makefile: Path = REPO / "Makefile") -> list[str]:
    """The options of ``make lab`` with the landing folder set to the solution notebooks (``LESSONS_URL``)."""
    options = [o for o in make_lab_options(makefile) if not o.startswith("--LabApp.default_url=")]
    return [*options, f"--LabApp.default_url={LESSONS_URL}"]


def make_lab_options(makefile: Path = REPO / "Makefile") -> list[str]:
    """The ``--options`` of the ``jupyter lab`` command in the Makefile's ``lab`` recipe (what ``make lab`` runs)."""
    lines = makefile.read_text().splitlines()
    for start, line in enumerate(lines):
        if line.startswith("lab:"):
            for recipe in lines[start + 1 :]:
                if not recipe.startswith("\t"):
                    break
                words = shlex.split(recipe)
                if "lab" in words and any(w.endswith("jupyter") for w in words):
                    return [w for w in words if w.startswith("--")]
    raise LookupError(f"no `jupyter lab` command under the `lab:` target of {makefile}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def port_in_use(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def build_font_cache(env: dict[str, str], timeout: float) -> float:
    """Have matplotlib build its font cache now, in the kernels' environment; return the seconds it took.

    matplotlib builds the cache on its first import on a machine (a fresh CI machine, a wiped ~/.cache/matplotlib)
    and, when that takes more than 5 s (many fonts, a busy or cold machine), says so on stderr: in the first
    lesson's first figure cell, which this test would report as an error output. ``make lab`` builds it at install
    time for the same reason (tools/install_env.py)."""
    start = time.monotonic()
    try:
        subprocess.run([sys.executable, "-c", "import matplotlib.font_manager"], env=env, check=True,
                       capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired as error:
        raise RuntimeError(f"matplotlib did not build its font cache within {timeout:.0f} s (it does so once "
                           f"per machine, reading every installed font)") from error
    return time.monotonic() - start


@dataclass
class BrowserReport:
    """Timings and the screenshot folder, filled in by the tests and printed at the end of the pytest run."""

    screenshots: Path | None = None
    started: float | None = None
    ready_s: float | None = None
    font_cache_s: float | None = None
    lab_start_s: float | None = None  # JupyterLab server answering /api/status
    chromium_start_s: float | None = None  # Chromium launched with an empty profile, playwright connected
    lessons: dict[str, dict[str, float]] = field(default_factory=dict)  # lesson -> phase -> seconds
    finished: float | None = None


REPORT = BrowserReport()


@dataclass
class Deadline:
    """One time budget for the whole browser session, so the test's total time stays bounded."""

    seconds: float
    start: float = field(default_factory=time.monotonic)

    def left(self) -> float:
        return self.seconds - (time.monotonic() - self.start)

    def cap(self, seconds: float) -> float:
        """``seconds``, shortened to what is left of the budget (at least 1 s so calls can still fail cleanly)."""
        return max(1.0, min(seconds, self.left()))


class Watchdog:
    """Kills the browser and the server when the session overruns its budget, so that even a call without a
    timeout of its own (a hung page) cannot hang the test run: the call then fails and teardown goes on."""

    def __init__(self, seconds: float, *kill_functions):
        self.fired = False
        self._kill_functions = kill_functions
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True

    def _fire(self) -> None:
        self.fired = True
        for kill in self._kill_functions:
            try:
                kill()
            except Exception:  # the other kill functions must still run
                pass

    def start(self) -> Watchdog:
        self._timer.start()
        return self

    def cancel(self) -> None:
        self._timer.cancel()


@dataclass
class LabServer:
    """``jupyter lab`` as ``make lab`` starts it, headless on 127.0.0.1 with a random port and a token."""

    root: Path
    workdir: Path
    token: str = field(default_factory=lambda: secrets.token_hex(16))
    port: int = 0
    proc: subprocess.Popen | None = None
    log_path: Path | None = None
    _log: object = None
    _seen: dict = field(default_factory=dict)  # pid -> psutil.Process of everything the server started

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        settings_dir = self.workdir / "user-settings"
        return [
            sys.executable,
            "-m",
            "jupyterlab",
            *lab_options_for_the_lessons(),
            *HEADLESS_OPTIONS,
            f"--ServerApp.port={self.port}",
            f"--IdentityProvider.token={self.token}",
            f"--LabApp.user_settings_dir={settings_dir}",
            f"--LabApp.workspaces_dir={self.workdir / 'workspaces'}",
            # an absolute folder: no .ipynb_checkpoints/ appears next to the lessons
            f"--FileCheckpoints.checkpoint_dir={self.workdir / 'checkpoints'}",
            # containers and CI run as root; jupyter refuses to start as root without this
            *(["--allow-root"] if getattr(os, "geteuid", lambda: 1)() == 0 else []),
        ]

    def _environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env.pop("MPLBACKEND", None)  # lessons must show inline PNG figures, as for a learner
        env["JUPYTER_CONFIG_DIR"] = str(self.workdir / "jupyter-config")  # ignore the user's ~/.jupyter
        env["JUPYTER_RUNTIME_DIR"] = str(self.workdir / "jupyter-runtime")
        env["JUPYTER_DATA_DIR"] = str(self.workdir / "jupyter-data")  # notebook trust database, signing key
        env["PYTHONUNBUFFERED"] = "1"
        return env

    def start(self, timeout: float) -> None:
        for name, values in USER_SETTINGS.items():
            path = self.workdir / "user-settings" / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(values, indent=2))
        self.log_path = self.workdir / "jupyterlab.log"
        self._log = open(self.log_path, "wb")  # closed in stop()
        for attempt in range(3):  # another process may take the free port between free_port() and the bind
            self.port = free_port()
            self.proc = subprocess.Popen(
                self.command(),
                cwd=self.root,
                env=self._environment(),
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # own process group: stop() can signal the whole group
            )
            if self._wait_ready(timeout):
                return
            if attempt < 2 and "address already in use" in self.log_tail().lower():
                self._terminate()
                continue
            raise RuntimeError(f"JupyterLab did not answer within {timeout:.0f} s; log:\n{self.log_tail()}")

    def _wait_ready(self, timeout: float) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                return False
            try:
                self.api("GET", "/api/status", timeout=2)
                return True
            except (OSError, urllib.error.URLError):
                time.sleep(0.25)
        return False

    def api(self, method: str, path: str, timeout: float = 10) -> object:
        request = urllib.request.Request(
            self.base_url + path, method=method, headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = response.read()
        return json.loads(body) if body else None

    def remember_children(self) -> None:
        """Note every process the server has started so far (kernels), to be sure stop() ends them."""
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            for child in psutil.Process(self.proc.pid).children(recursive=True):
                self._seen.setdefault(child.pid, child)
        except psutil.Error:
            pass

    def log_tail(self, n: int = 40) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])

    def _terminate(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
                try:
                    os.killpg(self.proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    self.proc.wait(wait)
                    break
                except subprocess.TimeoutExpired:
                    continue

    def kill_now(self) -> None:
        self.remember_children()
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)

    def stop(self) -> list[str]:
        """Shut the server and its kernels down; return what could not be cleaned up (empty when all is gone)."""
        if self.proc is None:
            return []
        self.remember_children()
        if self.proc.poll() is None:
            try:  # the polite way first: the server shuts its kernels down itself
                self.api("POST", "/api/shutdown", timeout=5)
                self.proc.wait(20)
            except (OSError, urllib.error.URLError, subprocess.TimeoutExpired):
                pass
        self._terminate()
        # Kernels run in their own process groups; end any the server left behind, by pid.
        _kill([p for p in self._seen.values() if _alive(p)])
        if self._log is not None:
            self._log.close()
        problems = [f"process {p.pid} still running" for p in self._seen.values() if _alive(p)]
        if self.proc.poll() is None:
            problems.append(f"JupyterLab (pid {self.proc.pid}) still running")
        end = time.monotonic() + 10
        while port_in_use(self.port) and time.monotonic() < end:
            time.sleep(0.2)
        if port_in_use(self.port):
            problems.append(f"port {self.port} still in use")
        return problems


def _kill(procs: list[psutil.Process]) -> None:
    """Kill each process (ignoring those already gone) and wait up to 5 s for them to end."""
    for proc in procs:
        try:
            proc.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(procs, timeout=5)


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


@dataclass
class ChromiumSession:
    """Debian's Chromium, headless, with an empty profile, driven through playwright's sync API."""

    executable: str
    workdir: Path
    viewport: tuple[int, int] = (1400, 1000)
    context: object = None
    _playwright: object = None

    @property
    def profile(self) -> Path:
        return self.workdir / "chromium-profile"

    def start(self, timeout: float) -> None:
        from playwright.sync_api import sync_playwright

        self.profile.mkdir(parents=True, exist_ok=True)
        self._playwright = sync_playwright().start()
        self.context = self._playwright.chromium.launch_persistent_context(
            str(self.profile),
            executable_path=self.executable,
            headless=True,
            args=CHROMIUM_FLAGS,
            viewport={"width": self.viewport[0], "height": self.viewport[1]},
            timeout=timeout * 1000,
        )

    def _our_processes(self) -> list[psutil.Process]:
        """Chromium processes using our profile, and the playwright driver, among this process's children."""
        ours = []
        for child in psutil.Process().children(recursive=True):
            try:
                cmdline = " ".join(child.cmdline())
            except psutil.Error:
                continue
            if str(self.profile) in cmdline or "run-driver" in cmdline:
                ours.append(child)
        return ours

    def kill_now(self) -> None:
        for proc in self._our_processes():
            try:
                proc.kill()
            except psutil.Error:
                pass

    def stop(self) -> list[str]:
        """Close the browser and playwright; return what could not be cleaned up."""
        before = self._our_processes()
        if self.context is not None:
            try:
                self.context.close()
            except Exception:  # teardown goes on whatever state the browser is in
                pass
        if self._playwright is not None:
            try:
                self._playwright.stop()
            except Exception:
                pass
        _, alive = psutil.wait_procs(before, timeout=5)
        _kill(alive)
        return [f"browser process {p.pid} still running" for p in before if _alive(p)]
