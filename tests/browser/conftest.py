"""One headless JupyterLab server and one Chromium page for the whole browser test session.

Environment knobs (all optional):
  ATTENTION_LAB_CHROMIUM         Chromium executable (default /usr/bin/chromium)
  ATTENTION_LAB_SCREENSHOTS      folder for the screenshots (default browser-screenshots/, git-ignored)
  ATTENTION_LAB_BROWSER_BUDGET_S time budget of the whole browser session (default 300 s + 240 s per lesson opened)
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import labdriver as ld
import pytest

SCREENSHOTS = Path(os.environ.get("ATTENTION_LAB_SCREENSHOTS", ld.REPO / "browser-screenshots"))


# Budgets in seconds for what happens once per session, before the first lesson. Each is several times what it
# took on a cold 2-core machine (first start after Chromium was installed; see summary_lines for the figures).
FONT_CACHE_S = 120  # matplotlib reads every installed font once per machine (a fresh CI machine)
LAB_START_S = 120  # JupyterLab imports its server extensions, from a cold disk the first time
CHROMIUM_START_S = 90  # the first launch of a freshly installed Chromium: its files read from disk, a new profile
FIRST_PAGE_S = 120  # JupyterLab's page and its JavaScript (several MB) into an empty browser cache

REPORT = ld.REPORT
REPORT.screenshots = SCREENSHOTS


SUMMARY_TITLE = "browser test (JupyterLab in headless Chromium)"


def summary_lines() -> list[str]:
    """The browser session's timings and where its screenshots are; empty when no browser test ran."""
    if REPORT.started is None:
        return []
    end = REPORT.finished or time.monotonic()
    lines = [f"screenshots: {REPORT.screenshots}  (open the PNG files in any image viewer)"]
    if REPORT.font_cache_s is not None:
        lines.append(f"matplotlib's font cache ready (built first if missing): {REPORT.font_cache_s:.1f} s")
    if REPORT.lab_start_s is not None:
        lines.append(f"JupyterLab server answering: {REPORT.lab_start_s:.1f} s")
    if REPORT.chromium_start_s is not None:
        lines.append(f"Chromium launched (empty profile): {REPORT.chromium_start_s:.1f} s")
    if REPORT.ready_s is not None:
        lines.append(f"JupyterLab and Chromium up, file browser shown: {REPORT.ready_s:.1f} s")
    for name, phases in REPORT.lessons.items():
        detail = ", ".join(f"{phase} {seconds:.1f}" for phase, seconds in phases.items())
        lines.append(f"  {name}: {sum(phases.values()):.1f} s ({detail})")
    lines.append(f"browser session wall time: {end - REPORT.started:.1f} s for {len(REPORT.lessons)} lesson(s)")
    return lines


def pytest_terminal_summary(terminalreporter):
    lines = summary_lines()
    if lines:
        terminalreporter.section(SUMMARY_TITLE)
        for line in lines:
            terminalreporter.write_line(line)


def pytest_sessionfinish(session):
    """Under pytest-xdist this runs in the worker, which has no terminal: hand the lines to the controller
    (tests/conftest.py prints them)."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None and summary_lines():
        workeroutput["terminal_sections"] = [[SUMMARY_TITLE, *summary_lines()]]


@pytest.fixture(scope="session")
def chromium_executable() -> str:
    missing = []
    executable = ld.chromium_path()
    if executable is None:
        missing.append(f"no Chromium at {os.environ.get(ld.CHROMIUM_ENV, ld.DEFAULT_CHROMIUM)}")
    reason = ld.playwright_missing()
    if reason:
        missing.append(reason)
    if missing:
        pytest.skip(f"browser test: {'; '.join(missing)}. To enable it: {ld.ENABLE_HINT}.")
    return executable


@pytest.fixture(scope="session")
def session_deadline(chromium_executable, request) -> ld.Deadline:
    # the lessons this session opens: all, or what `make test` leaves after deselecting the marker browser_all
    n_lessons = sum(getattr(item, "originalname", None) == "test_lesson_runs_in_browser"
                    for item in request.session.items)  # nbval's notebook cells are items too
    seconds = float(os.environ.get("ATTENTION_LAB_BROWSER_BUDGET_S", 300 + 240 * n_lessons))
    REPORT.started = time.monotonic()
    return ld.Deadline(seconds)


@pytest.fixture(scope="session")
def screenshot_dir(chromium_executable) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for old in SCREENSHOTS.glob("*.png"):  # the folder only ever holds this test's pictures
        old.unlink()
    print(f"\nbrowser test screenshots go to {SCREENSHOTS}")
    return SCREENSHOTS


@pytest.fixture(scope="session")
def workdir(chromium_executable):
    """Private settings, workspaces, runtime files and the Chromium profile; removed at the end."""
    path = Path(tempfile.mkdtemp(prefix="attention-lab-browser-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def lab_server(workdir, session_deadline, screenshot_dir):
    lab = ld.LabServer(root=ld.REPO, workdir=workdir)
    REPORT.font_cache_s = ld.build_font_cache(lab._environment(), timeout=session_deadline.cap(FONT_CACHE_S))
    try:
        started = time.monotonic()
        lab.start(timeout=session_deadline.cap(LAB_START_S))
        REPORT.lab_start_s = time.monotonic() - started
        yield lab
    finally:
        problems = lab.stop()
        if lab.log_path is not None and lab.log_path.exists():
            shutil.copy(lab.log_path, screenshot_dir / "jupyterlab.log")
        assert not problems, f"JupyterLab teardown left: {problems}"


@pytest.fixture(scope="session")
def chromium(chromium_executable, workdir, session_deadline):
    browser = ld.ChromiumSession(chromium_executable, workdir)
    try:
        started = time.monotonic()
        budget = session_deadline.cap(CHROMIUM_START_S)
        try:
            browser.start(timeout=budget)
        except Exception as error:
            raise RuntimeError(f"Chromium did not start within {budget:.0f} s, the budget for its first launch on a "
                               f"machine (binary and libraries read from disk, an empty profile created): {error}"
                               ) from error
        REPORT.chromium_start_s = time.monotonic() - started
        yield browser
    finally:
        problems = browser.stop()
        assert not problems, f"Chromium teardown left: {problems}"


@dataclass
class LabPage:
    page: object
    lab: ld.LabServer
    landed_url: str
    outside_requests: list[str]
    file_writes: list[str]  # PUT / PATCH / DELETE on /api/contents: JupyterLab saving, renaming or deleting a file


@pytest.fixture(scope="session")
def lab_page(chromium, lab_server, session_deadline):
    """Chromium on the lab's front door (``/?token=...``), as a learner opens the link ``make lab`` prints."""
    watchdog = ld.Watchdog(session_deadline.left() + 60, chromium.kill_now, lab_server.kill_now).start()
    try:
        yield _open_lab(chromium, lab_server, session_deadline)
    finally:
        watchdog.cancel()
        assert not watchdog.fired, f"the browser session overran its {session_deadline.seconds:.0f} s budget"


def _open_lab(chromium, lab_server, session_deadline) -> LabPage:
    context = chromium.context
    page = context.pages[0] if context.pages else context.new_page()
    page.set_default_timeout(30_000)
    outside: list[str] = []

    writes: list[str] = []

    def note_request(request):
        if not request.url.startswith((lab_server.base_url, "data:", "blob:", "about:")):
            outside.append(request.url)
        elif request.method in ("PUT", "PATCH", "DELETE") and "/api/contents/" in request.url:
            writes.append(f"{request.method} {request.url.split('?')[0]}")

    page.on("request", note_request)
    page.on("dialog", lambda dialog: dialog.accept())  # a "leave page?" prompt must never block teardown
    timeout = session_deadline.cap(FIRST_PAGE_S)
    started = time.monotonic()
    try:
        page.goto(f"{lab_server.base_url}/?token={lab_server.token}", timeout=timeout * 1000)
        page.locator(".jp-FileBrowser .jp-DirListing-item").first.wait_for(
            timeout=max(1.0, timeout - (time.monotonic() - started)) * 1000
        )
    except Exception as error:
        raise RuntimeError(f"JupyterLab's file browser did not show within {timeout:.0f} s, the budget for the first "
                           f"page load (JupyterLab's JavaScript into an empty browser cache): {error}") from error
    REPORT.ready_s = time.monotonic() - REPORT.started
    return LabPage(page=page, lab=lab_server, landed_url=page.url, outside_requests=outside, file_writes=writes)
