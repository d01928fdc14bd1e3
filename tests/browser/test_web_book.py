"""The web book (book/) in headless Chromium, served on 127.0.0.1 as GitHub Pages would serve it: for each edition
its landing page and three lessons draw their figures and their math, their deep dives and solutions open on a click,
the language switch leads to the same lesson in the other editions, and no page asks anything of another host.

The book is the one `make test` built just before pytest, or a fresh build (tests/_book.py). Screenshots go to
browser-screenshots/book/ (the browser test's folder, ATTENTION_LAB_SCREENSHOTS). Skipped, with the reason, when
Chromium or playwright is missing (tests/browser/conftest.py)."""

from __future__ import annotations

import functools
import http.server
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import labdriver as ld
import pytest
from _book import ROOT, book_html, discover

pytestmark = pytest.mark.browser

EDITIONS = discover(ROOT)
PREFERRED = ("02", "07", "09")  # a deep dive and a figure; four deep dives and an error; a widget and five figures
SHOTS = Path(os.environ.get("ATTENTION_LAB_SCREENSHOTS", ld.REPO / "browser-screenshots")) / "book"
PAGE_S = 30  # one page: load, images, MathJax; seconds on a busy 2-core machine are a few


def _three_lessons(edition) -> list[str]:
    stems = [lesson.stem for lesson in edition.lessons]
    chosen = [s for s in stems if s[:2] in PREFERRED]
    return (chosen + [s for s in stems if s not in chosen])[:3]


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):
        pass


@pytest.fixture(scope="module")
def server(tmp_path_factory, chromium_executable):
    html = book_html(tmp_path_factory)
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(html)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()
    thread.join(10)


@dataclass
class Tab:
    page: object
    requests: list[str] = field(default_factory=list)  # every URL the page asked for
    failures: list[str] = field(default_factory=list)  # requests that failed or were answered >= 400


@pytest.fixture(scope="module")
def tab(chromium, server):
    """A tab of the browser test's Chromium (its session fixture) that records every request."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    for old in SHOTS.glob("*.png"):
        old.unlink()
    tab = Tab(chromium.context.new_page())
    tab.page.set_default_timeout(PAGE_S * 1000)
    tab.page.on("request", lambda request: tab.requests.append(request.url))
    tab.page.on("requestfailed", lambda request: tab.failures.append(f"{request.url} ({request.failure})"))
    tab.page.on("response", lambda r: tab.failures.append(f"{r.url} ({r.status})") if r.status >= 400 else None)
    yield tab
    tab.page.close()
    # the browser session's summary (tests/browser/conftest.py) times the session up to its last test: this one,
    # when no lesson test ran after it in this worker
    ld.REPORT.finished = time.monotonic()


def _figures_drawn(page) -> list[str]:
    """The images of the article that did not load (an empty list when all did)."""
    page.wait_for_function("() => [...document.images].every(img => img.complete)", timeout=PAGE_S * 1000)
    return page.evaluate("""() => [...document.querySelectorAll('article img')]
        .filter(img => !(img.naturalWidth > 0)).map(img => img.getAttribute('src'))""")


def _math_drawn(page) -> tuple[int, int, int]:
    """(math elements, those MathJax typeset, MathJax errors) in the article, once MathJax is done."""
    count = page.locator("article .math").count()
    if count:
        page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise")
        page.evaluate("() => MathJax.startup.promise")
    typeset = page.locator("article .math mjx-container").count()
    return count, typeset, page.locator("article mjx-merror").count()


def _opens_on_click(page, selector: str) -> int:
    """Click the summary of every ``selector`` fold: each is closed, hides its content, and shows it once opened."""
    folds = page.locator(selector)
    for index in range(folds.count()):
        fold = folds.nth(index)
        content = fold.locator(":scope > :not(summary)").first
        assert fold.get_attribute("open") is None and not content.is_visible(), f"{selector} #{index} starts open"
        fold.locator(":scope > summary").click()
        assert fold.get_attribute("open") is not None and content.is_visible(), f"{selector} #{index} did not open"
    return folds.count()


# `make test` opens the first edition's book (a smoke test); the other editions and the language switch carry the
# marker browser_all, which `make test` deselects and `make test-browser` (CI runs it after `make test`) selects.
@pytest.mark.parametrize("edition", [pytest.param(e, marks=() if i == 0 else pytest.mark.browser_all, id=e.tag)
                                     for i, e in enumerate(EDITIONS)])
def test_landing_page_and_three_lessons_draw_and_open(edition, tab, server):
    page = tab.page
    tab.requests.clear()
    tab.failures.clear()
    page.goto(f"{server}/index.html")
    assert page.locator(f"ul.editions a[href='{edition.tag}/index.html']").count() == 1

    page.goto(f"{server}/{edition.tag}/index.html")
    assert _figures_drawn(page) == []
    count, typeset, errors = _math_drawn(page)
    assert count >= 1 and typeset == count and errors == 0, f"{typeset} of {count} formulas typeset, {errors} errors"
    assert page.locator("article table a").count() == len(edition.lessons)
    page.screenshot(path=str(SHOTS / f"{edition.tag}-index.png"))

    for stem in _three_lessons(edition):
        page.goto(f"{server}/{edition.tag}/lessons/{stem}.html")
        assert page.locator("article img").count() >= 1, f"{stem}: the lesson's figures"
        assert _figures_drawn(page) == [], f"{stem}: figures that did not load"
        count, typeset, errors = _math_drawn(page)
        assert typeset == count and errors == 0, f"{stem}: {typeset} of {count} formulas typeset, {errors} errors"
        assert page.locator("div.lesson-source").is_visible()
        solutions = _opens_on_click(page, "details.hide.above-input")
        assert solutions >= 1, f"{stem}: its exercises' solutions"
        deep_dives = _opens_on_click(page, "details.deep-dive")
        if deep_dives:
            page.locator("details.deep-dive").first.scroll_into_view_if_needed()
        page.screenshot(path=str(SHOTS / f"{edition.tag}-{stem}.png"))

    outside = sorted({url for url in tab.requests if not url.startswith((server, "data:", "blob:", "about:"))})
    assert outside == [], f"requests to other hosts: {outside}"
    assert tab.failures == [], f"requests that failed: {tab.failures}"
    assert len(tab.requests) > 10, "the requests were recorded (theme, scripts, fonts, figures)"


@pytest.mark.browser_all
@pytest.mark.skipif(len(EDITIONS) < 2, reason="one edition: no language switch (tests/test_book_editions.py "
                                               "proves the switch on a fake second edition)")
def test_the_language_switch_leads_to_the_same_lesson(tab, server):
    page = tab.page
    for edition in EDITIONS:
        stem = _three_lessons(edition)[0]
        for other in EDITIONS:
            if other is edition:
                continue
            page.goto(f"{server}/{edition.tag}/lessons/{stem}.html")
            page.locator(f"nav.book-language-switch a[hreflang='{other.tag}']").click()
            page.wait_for_load_state()
            has_it = any(lesson.stem == stem for lesson in other.lessons)
            wanted = f"/{other.tag}/lessons/{stem}.html" if has_it else f"/{other.tag}/index.html"
            assert page.url.endswith(wanted), f"{edition.tag} -> {other.tag}: landed on {page.url}"
