"""Every lesson opens, runs and renders in a real JupyterLab, in headless Chromium, as a learner sees it (and the
first lesson of each Chinese edition, from its folder).

nbval proves the kernel side; this proves the browser side: the lab opens on the lessons, Run > Run All Cells works
from the menu, and every figure, widget and (only the expected) error shows up. One JupyterLab server and one
Chromium page serve all lessons (fixtures in conftest.py). Screenshots: browser-screenshots/ (printed at the end).
Skipped, with the reason and the way to enable it, when Chromium or playwright is missing.
"""

from __future__ import annotations

import re
import time
import urllib.parse

import labdriver as ld
import labpage as lp
import pytest

pytestmark = pytest.mark.browser

LESSONS = sorted(ld.NOTEBOOKS.glob("*.ipynb"))
# the first lesson of each Chinese edition too, opened from its folder as a learner of that edition would
EDITION_LESSONS = [first for folder in sorted(ld.NOTEBOOKS.glob("zh-*"))
                   for first in sorted(folder.glob("*.ipynb"))[:1]]
# What `make test` opens (a smoke test): the first lesson of each edition, and the lesson with the most for the
# browser to draw (figures, widgets that need the kernel, folded deep dives). The others carry the marker
# browser_all, which `make test` deselects and `make test-browser` (CI runs it after `make test`) selects.
HEAVY_LESSON = ld.NOTEBOOKS / "09_visualizing_attention.ipynb"
SMOKE_LESSONS = [LESSONS[0], HEAVY_LESSON, *EDITION_LESSONS]
# Budgets in seconds. A lesson opens in a few seconds and runs in < 30 s of cell time on 2 cores; the budgets leave
# room for a machine that also runs the unit tests and nbval (`make test` runs them beside this session) and, for
# the first lesson, for what only the first one waits for (COLD_START).
OPEN_S, RUN_S, SCROLL_S, DRAW_WAIT_S, EXPAND_S = 60, 240, 90, 10, 30
FIRST_OPEN_S, FIRST_RUN_S, FIRST_DRAW_WAIT_S = 180, 360, 30
COLD_START = (
    "the first lesson of the session, which also waits for the first kernel start (Python, torch and matplotlib "
    "read from disk for the first time), for JupyterLab to load its notebook code into Chromium's empty profile "
    "and for Chromium's first figure decode and font setup"
)


def test_lab_opens_on_the_lessons(lab_page, screenshot_dir):
    page = lab_page.page
    landed = urllib.parse.urlparse(lab_page.landed_url).path
    assert landed == ld.LESSONS_URL, (
        f"the front door should redirect to --LabApp.default_url={ld.LESSONS_URL}, landed on {landed}"
    )
    crumbs = page.locator(".jp-FileBrowser .jp-BreadCrumbs-item").all_text_contents()
    assert crumbs[-1:] == ["notebooks"], f"file browser should be in notebooks/, breadcrumbs: {crumbs}"

    shown = [name for name in lp.listing(page) if name.endswith(".ipynb")]
    assert shown == [p.name for p in LESSONS], "the file browser should list the lessons in order"
    page.screenshot(path=str(screenshot_dir / "lab-home.png"))

    # Network calls off on the server side too: news and update checks answer empty without fetching.
    assert lab_page.lab.api("GET", "/lab/api/news") == {"news": []}
    assert lab_page.lab.api("GET", "/lab/api/update") == {"notification": None}


# Kernels closed by File > Close and Shut Down whose end is still to be seen: a kernel takes a few seconds to exit,
# so each lesson checks the previous lesson's kernel once its own has started, instead of idling while it exits.
CLOSING: dict[str, str] = {}  # kernel id -> lesson
KERNEL_EXIT_S = 30


def _kernel_ids(lab) -> set[str]:
    return {kernel["id"] for kernel in lab.api("GET", "/api/kernels") or []}


def _closed_kernels_gone(lab, timeout: float) -> None:
    """Wait until every kernel in CLOSING has left the server's kernel list; the timeout names their lessons."""
    if CLOSING:
        lessons = ", ".join(sorted(set(CLOSING.values())))
        lp.wait_until(f"the kernel of {lessons} to shut down after Close and Shut Down", lambda: _kernel_ids(lab),
                      lambda ids: not ids & CLOSING.keys(), timeout,
                      why="a kernel to exit (jupyter_client asks it to stop, then waits for the process to end)")
        CLOSING.clear()


def _recover(page, lab) -> None:
    """After a failure: shut kernels down and reload, so the next lesson starts from a clean lab."""
    for session in lab.api("GET", "/api/sessions") or []:
        lab.api("DELETE", f"/api/sessions/{session['id']}")
    page.reload(timeout=60_000)
    page.locator(".jp-FileBrowser .jp-DirListing-item").first.wait_for(timeout=60_000)
    if page.locator(".jp-NotebookPanel").count():
        lp.close_and_shut_down(page, 30)


@pytest.mark.parametrize("lesson", [
    pytest.param(p, id=p.stem if p.parent == ld.NOTEBOOKS else f"{p.parent.name}/{p.stem}",
                 marks=() if p in SMOKE_LESSONS else pytest.mark.browser_all)
    for p in LESSONS + EDITION_LESSONS])
def test_lesson_runs_in_browser(lesson, lab_page, screenshot_dir, session_deadline):
    if session_deadline.left() < 30:
        pytest.fail(f"the browser session's time budget ({session_deadline.seconds:.0f} s) is spent")
    page, lab = lab_page.page, lab_page.lab
    cap = session_deadline.cap
    expected = lp.expected_from_notebook(lesson)
    edition = "" if lesson.parent == ld.NOTEBOOKS else lesson.parent.name
    shot = screenshot_dir / f"{edition + '-' if edition else ''}{lesson.stem}.png"
    phases: dict[str, float] = {}
    mark = time.monotonic()

    def phase(name: str) -> None:
        nonlocal mark
        phases[name] = time.monotonic() - mark
        mark = time.monotonic()

    first = not ld.REPORT.lessons
    why = COLD_START if first else "one lesson"
    closed = False
    try:
        if edition:
            lp.enter_folder(page, edition, cap(OPEN_S))
        lp.open_from_file_browser(page, lesson.name, len(expected.cells), cap(FIRST_OPEN_S if first else OPEN_S), why)
        phase("open")
        _closed_kernels_gone(lab, cap(KERNEL_EXIT_S))  # the previous lesson's kernel, exiting while this one opened
        phase("previous kernel gone")
        # deep dives are collapsed when a learner opens the lesson; the test opens them to see their outputs
        hidden_at_open = lp.hidden_cells(page)["hidden"]
        lp.expand_deep_dives(page, cap(EXPAND_S), why="opening the collapsed sections")
        phase("expand")
        lp.run_all_from_menu(page, cap(FIRST_RUN_S if first else RUN_S), why)
        phase("run all")
        lab.remember_children()  # the kernel, so teardown can be sure it is gone
        scrolled = lp.scroll_through(page, cap(SCROLL_S), draw_wait=FIRST_DRAW_WAIT_S if first else DRAW_WAIT_S)
        seen = scrolled.cells

        # one picture per lesson, as the learner sees it: its first problem if any, else its first widget still
        # on the page (the part only a browser can show), else its first figure, else its top
        problems = lp.compare(expected, seen)
        with_problem = [int(m.group(1)) for p in problems if (m := re.match(r"cell (\d+):", p))]
        with_widget = [i for i, cell in sorted(seen.items()) if cell.widgets_shown]
        with_figure = [c.index for c in expected.cells if c.images]
        shown_first = (with_problem or with_widget or with_figure or [0])[0]
        lp.scroll_to_output(page, shown_first)
        page.wait_for_timeout(300)
        page.screenshot(path=str(shot))
        phase("scroll+shot")

        running = _kernel_ids(lab)
        lp.close_and_shut_down(page, timeout=cap(30))
        closed = True
        CLOSING.update(dict.fromkeys(running, lesson.stem))  # checked by the next lesson, or by the last test
        phase("close")
    finally:
        if not closed:
            _recover(page, lab)
            phase("recover")
        if edition and lp.breadcrumbs(page)[-1:] == [edition]:
            lp.leave_folder(page, ld.NOTEBOOKS.name, cap(OPEN_S))
        ld.REPORT.lessons[f"{edition}/{lesson.stem}" if edition else lesson.stem] = phases
        ld.REPORT.finished = time.monotonic()

    # the committed lesson must stay as it is: autosave is off and the re-run notebook is closed unsaved
    assert not lab_page.file_writes, f"JupyterLab wrote to the lessons: {lab_page.file_writes}"
    notes = []
    if not scrolled.reached_bottom:
        notes.append(f"the scroll ran out of its {SCROLL_S} s budget before the end of the lesson")
    if scrolled.undrawn:
        wait = FIRST_DRAW_WAIT_S if first else DRAW_WAIT_S
        notes.append(f"still not drawn after {wait} s on screen ({why}): " + "; ".join(scrolled.undrawn))
    if hidden_at_open != expected.hidden_on_open:
        problems.insert(0, f"{hidden_at_open} cell(s) hidden when the lesson opened, the committed lesson has "
                           f"{expected.hidden_on_open} under headings marked collapsed (jp-MarkdownHeadingCollapsed)")
    assert not problems, (
        f"{lesson.name} in the browser ({expected.images} figure(s), {expected.widgets} widget(s) expected):\n  "
        + "\n  ".join(problems + notes)
        + f"\nscreenshot: {shot}"
    )


def test_nothing_asked_outside_the_machine(lab_page, session_deadline):
    """Runs last: the last lesson's kernel is gone, and no request from the lab page left 127.0.0.1 (no news,
    fonts, CDNs or telemetry)."""
    _closed_kernels_gone(lab_page.lab, session_deadline.cap(KERNEL_EXIT_S))
    assert _kernel_ids(lab_page.lab) == set(), "kernels still running after every lesson was closed"
    outside = sorted({re.sub(r"\?.*", "", url) for url in lab_page.outside_requests})
    assert not outside, f"requests left the machine: {outside}"
