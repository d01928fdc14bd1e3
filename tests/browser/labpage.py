"""Helpers for tests/browser: what a lesson should show (read from the committed notebook) and the JupyterLab page
actions a learner takes (open from the file browser, menus, scrolling), with bounded waits.

Only the JupyterLab DOM is used (class names of JupyterLab 4), never its JavaScript API, so the test sees what a
learner sees.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
STDERR_MIME = "application/vnd.jupyter.stderr"
IMAGE_MIMES = ("image/png", "image/jpeg", "image/gif")
PANEL = ".jp-NotebookPanel:not(.lm-mod-hidden)"


@dataclass
class CellExpectation:
    index: int
    cell_type: str
    tags: tuple[str, ...]
    images: int  # image outputs stored in the committed notebook (rendered as <img>)
    widgets: int  # ipywidgets outputs stored in the committed notebook
    has_code: bool
    hidden_on_open: bool = False  # under a heading the notebook stores collapsed (a deep dive)


@dataclass
class LessonExpectation:
    path: Path
    cells: list[CellExpectation]

    @property
    def hidden_on_open(self) -> int:
        return sum(c.hidden_on_open for c in self.cells)

    @property
    def images(self) -> int:
        return sum(c.images for c in self.cells)

    @property
    def widgets(self) -> int:
        return sum(c.widgets for c in self.cells)


_HEADING = re.compile(r"^(#{1,6})\s")


def heading_level(cell: dict) -> int | None:
    """The level of a markdown cell's first line when it is a heading (``## x`` -> 2), else None."""
    if cell["cell_type"] != "markdown":
        return None
    source = "".join(cell.get("source", []))
    match = _HEADING.match(source.lstrip("\n"))
    return len(match.group(1)) if match else None


def hidden_on_open(cells: list[dict]) -> list[bool]:
    """Which cells JupyterLab hides when it opens the notebook: those after a heading whose metadata has
    ``jp-MarkdownHeadingCollapsed: true``, up to the next heading of the same or a higher level."""
    hidden, collapsed_level = [], None
    for cell in cells:
        level = heading_level(cell)
        if collapsed_level is not None and level is not None and level <= collapsed_level:
            collapsed_level = None
        hidden.append(collapsed_level is not None)
        if collapsed_level is None and level is not None and cell.get("metadata", {}).get(
            "jp-MarkdownHeadingCollapsed"
        ):
            collapsed_level = level
    return hidden


def expected_from_notebook(path: Path) -> LessonExpectation:
    """Figures, widgets and tags per cell, from the stored outputs of the committed (executed) notebook."""
    notebook = json.loads(path.read_text())
    hidden = hidden_on_open(notebook["cells"])
    cells = []
    for index, cell in enumerate(notebook["cells"]):
        outputs = cell.get("outputs", [])
        data = [o.get("data", {}) for o in outputs if o.get("output_type") in ("display_data", "execute_result")]
        source = "".join(cell.get("source", []))
        cells.append(
            CellExpectation(
                index=index,
                cell_type=cell["cell_type"],
                tags=tuple(cell.get("metadata", {}).get("tags", [])),
                images=sum(any(m in d for m in IMAGE_MIMES) and WIDGET_MIME not in d for d in data),
                widgets=sum(WIDGET_MIME in d for d in data),
                has_code=cell["cell_type"] == "code" and bool(source.strip()),
                hidden_on_open=hidden[index],
            )
        )
    return LessonExpectation(path=path, cells=cells)


@dataclass
class CellSeen:
    """What the browser showed for one cell, gathered while scrolling."""

    prompt: str = ""
    images_shown: set = field(default_factory=set)  # positions of <img> seen on screen and decoded
    images_in_dom: int = 0
    widgets_shown: set = field(default_factory=set)
    widget_outputs: int = 0
    widgets_closed: int = 0  # widgets the kernel closed (left as an empty hidden output), e.g. tqdm leave=False
    errors: list = field(default_factory=list)


# Gathers, for every cell attached to the DOM, its prompt, images, widget outputs and stderr outputs, and whether
# each image / widget is inside the scroll viewport right now (JupyterLab skips rendering cells off screen).
COLLECT_JS = """
([panelSelector, stderrMime]) => {
  const panel = document.querySelector(panelSelector);
  if (!panel) return null;
  const scroller = panel.querySelector('.jp-WindowedPanel-outer');
  const view = scroller.getBoundingClientRect();
  const onScreen = (el) => {
    const r = el.getBoundingClientRect();
    return r.width > 0 && r.height > 0 && r.bottom > view.top && r.top < view.bottom;
  };
  const cells = [...panel.querySelectorAll('.jp-Notebook .jp-Cell')];
  return {
    scrollTop: scroller.scrollTop, scrollHeight: scroller.scrollHeight, clientHeight: scroller.clientHeight,
    cells: cells.map((cell, position) => {
      const attr = cell.getAttribute('data-windowed-list-index');
      const outputs = [...cell.querySelectorAll('.jp-OutputArea-output')];
      // outputs of the cell itself, not those drawn inside a widget (an ipywidgets Output holds its own)
      const own = outputs.filter((o) => o.parentElement.closest('.jupyter-widgets') === null);
      // the ipywidgets renderer puts the widget's own element (class jupyter-widgets) in the output ...
      const widgets = own.filter((o) => o.querySelector(':scope > .jupyter-widgets') !== null);
      // ... and leaves an empty hidden panel once the kernel closes the widget (tqdm with leave=False)
      const closed = own.filter((o) => o.classList.contains('lm-Panel') && o.classList.contains('lm-mod-hidden')
        && o.childElementCount === 0);
      return {
        index: attr === null ? position : Number(attr),
        prompt: (cell.querySelector('.jp-InputPrompt') || {}).textContent || '',
        images: [...cell.querySelectorAll('.jp-OutputArea-output img')]
          .filter((img) => img.closest('.jupyter-widgets') === null).map(
          (img) => [onScreen(img), img.complete && img.naturalWidth > 0]),
        closedWidgets: closed.length,
        widgets: widgets.map((o) => [onScreen(o), !/Loading widget|Error displaying widget/.test(o.textContent)]),
        errors: outputs.filter((o) => o.getAttribute('data-mime-type') === stderrMime)
          .map((o) => o.textContent.trim().slice(-300)),
      };
    }),
  };
}
"""

# Run state: code prompts ("[ ]:", "[*]:", "[7]:") and the kernel status of the execution indicator.
RUN_STATE_JS = """
(panelSelector) => {
  const panel = document.querySelector(panelSelector);
  if (!panel) return null;
  const prompts = [...panel.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputPrompt')]
    .map((p) => p.textContent.trim());
  const indicator = panel.querySelector('.jp-Notebook-ExecutionIndicator');
  const kernel = panel.querySelector('.jp-KernelName');
  return {
    queued: prompts.filter((p) => p.includes('*')).length,
    numbered: prompts.filter((p) => /[0-9]/.test(p)).length,
    status: indicator ? indicator.getAttribute('data-status') : null,
    kernel: kernel ? kernel.textContent.trim() : null,
    cells: panel.querySelectorAll('.jp-Notebook .jp-Cell').length,
    outputs: panel.querySelectorAll('.jp-Notebook .jp-OutputArea-output').length,
  };
}
"""


def wait_until(what: str, probe, done, timeout: float, interval: float = 0.25, stable: int = 1, why: str = ""):
    """Poll ``probe()`` until ``done(value)`` holds ``stable`` times in a row and return that value; after
    ``timeout`` seconds raise TimeoutError naming ``what``, why the budget is what it is, and the last value seen."""
    end = time.monotonic() + timeout
    streak = 0
    while True:
        last = probe()
        streak = streak + 1 if done(last) else 0
        if streak >= stable:
            return last
        if time.monotonic() > end:
            budget = f"{timeout:.0f} s" + (f", the budget for {why}" if why else "")
            raise TimeoutError(f"waited {budget}, for {what}; last seen: {last!r}")
        time.sleep(interval)


def run_state(page) -> dict | None:
    return page.evaluate(RUN_STATE_JS, PANEL)


def use_menu(page, menu: str, item: str, timeout: float) -> None:
    """Click ``menu`` in the menu bar, then ``item`` in the menu that opens (as a learner does)."""
    bar = page.locator(".lm-MenuBar-item").filter(
        has=page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(rf"^{re.escape(menu)}$"))
    )
    bar.click(timeout=timeout * 1000)
    entry = page.locator(".lm-Menu .lm-Menu-item").filter(
        has=page.locator(".lm-Menu-itemLabel", has_text=re.compile(rf"^{re.escape(item)}$"))
    )
    entry.first.click(timeout=timeout * 1000)


def listing(page) -> list[str]:
    """Names shown in the file browser, top to bottom."""
    return page.eval_on_selector_all(
        ".jp-FileBrowser .jp-DirListing-content .jp-DirListing-item .jp-DirListing-itemText",
        "els => els.map(e => e.textContent.trim())",
    )


# The label of the current main-area tab, or null while there is none (read at once: no waiting, no exception).
CURRENT_TAB_JS = """
() => {
  const label = document.querySelector('.lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current .lm-TabBar-tabLabel');
  return label ? label.textContent : null;
}
"""


def enter_folder(page, name: str, timeout: float) -> None:
    """Double-click the folder ``name`` in the file browser; wait until the breadcrumbs end with it."""
    page.locator(".jp-FileBrowser .jp-DirListing-item").filter(
        has=page.locator(".jp-DirListing-itemText", has_text=re.compile(rf"^{re.escape(name)}$"))
    ).dblclick(timeout=timeout * 1000)
    wait_until(f"the file browser to open the folder {name}", lambda: breadcrumbs(page),
               lambda crumbs: crumbs[-1:] == [name], timeout)


def leave_folder(page, parent: str, timeout: float) -> None:
    """Click the breadcrumb ``parent``; wait until the file browser shows that folder again."""
    page.locator(".jp-FileBrowser .jp-BreadCrumbs-item", has_text=re.compile(rf"^{re.escape(parent)}$")).last.click(
        timeout=timeout * 1000)
    wait_until(f"the file browser to go back to {parent}", lambda: breadcrumbs(page),
               lambda crumbs: crumbs[-1:] == [parent], timeout)


def breadcrumbs(page) -> list[str]:
    """The folder names of the file browser's breadcrumbs, from the root folder down."""
    return [text.strip() for text in page.locator(".jp-FileBrowser .jp-BreadCrumbs-item").all_text_contents()
            if text.strip()]


def open_from_file_browser(page, name: str, n_cells: int, timeout: float, why: str = "") -> None:
    """Double-click ``name`` in the file browser; wait for all its cells and an idle kernel."""
    item = page.locator(".jp-FileBrowser .jp-DirListing-item").filter(
        has=page.locator(".jp-DirListing-itemText", has_text=re.compile(rf"^{re.escape(name)}$"))
    )
    item.dblclick(timeout=timeout * 1000)

    def state():
        # no tab may be current for a moment while JupyterLab builds the notebook panel (longest the first time,
        # when it also loads the notebook's code into a fresh Chromium profile): that is "not ready yet"
        return {"tab": page.evaluate(CURRENT_TAB_JS), **(run_state(page) or {})}

    def ready(s):
        return (
            s["tab"] == name
            and s.get("kernel") not in (None, "", "No Kernel")
            and s.get("status") == "idle"
            and s.get("cells") == n_cells
        )

    wait_until(f"{name} to open with an idle kernel and {n_cells} cells", state, ready, timeout, stable=2, why=why)


# Cells hidden under a collapsed heading, and the "N cells hidden" buttons JupyterLab shows below such a heading.
HIDDEN_JS = """
(panelSelector) => {
  const panel = document.querySelector(panelSelector);
  if (!panel) return null;
  return {
    hidden: panel.querySelectorAll('.jp-Notebook .jp-Cell.lm-mod-hidden').length,
    buttons: [...panel.querySelectorAll('.jp-Notebook .jp-showHiddenCellsButton')].map((b) => b.textContent.trim()),
  };
}
"""


def hidden_cells(page) -> dict:
    """``{"hidden": cells hidden now, "buttons": labels of the "N cells hidden" buttons}`` of the open lesson."""
    return page.evaluate(HIDDEN_JS, PANEL) or {"hidden": 0, "buttons": []}


def expand_deep_dives(page, timeout: float, why: str = "") -> int:
    """Open every collapsed section as a learner does, by clicking its "N cells hidden" button (a section nested
    in a collapsed one shows its button once the outer one is open); return how many buttons were clicked.
    Cells under a collapsed heading still run with Run All, but their outputs are not drawn, so the figures and
    widgets of a deep dive can only be checked once it is open."""
    end = time.monotonic() + timeout
    clicked = 0
    button = page.locator(f"{PANEL} .jp-Notebook .jp-showHiddenCellsButton")
    while button.count():
        left = end - time.monotonic()
        if left <= 0:
            break
        button.first.click(timeout=left * 1000)
        clicked += 1
    wait_until("every collapsed section to open (no hidden cell, no \"cells hidden\" button)",
               lambda: hidden_cells(page), lambda s: s["hidden"] == 0 and not s["buttons"],
               max(1.0, end - time.monotonic()), why=why)
    return clicked


def run_all_from_menu(page, timeout: float, why: str = "") -> dict:
    """Edit > Clear Outputs of All Cells (so only fresh outputs count), then Run > Run All Cells; wait until
    nothing is queued and the kernel is idle."""
    use_menu(page, "Edit", "Clear Outputs of All Cells", timeout=30)
    wait_until(
        "outputs to clear", lambda: run_state(page), lambda s: bool(s) and s["outputs"] == s["numbered"] == 0, 30
    )
    use_menu(page, "Run", "Run All Cells", timeout=30)

    def finished(s):
        return bool(s) and s["numbered"] > 0 and s["queued"] == 0 and s["status"] == "idle"

    # idle between two cells must not pass for the end of the run: ask for 1 s of quiet
    return wait_until(
        "Run All Cells to finish (no [*] prompt, kernel idle)", lambda: run_state(page), finished, timeout,
        stable=4, why=why,
    )


@dataclass
class Scrolled:
    """What scrolling through a lesson saw, and what it could not wait for."""

    cells: dict[int, CellSeen]
    reached_bottom: bool = True
    undrawn: list[str] = field(default_factory=list)  # "cell 12: 1 figure" still not drawn when its wait ran out


def _undrawn(snapshot) -> list[str]:
    """Figures and widgets on screen now that the browser has not drawn yet (an image still decoding, a widget
    still "Loading widget...")."""
    late = []
    for cell in snapshot["cells"]:
        images = sum(shown and not ok for shown, ok in cell["images"])
        widgets = sum(shown and not ok for shown, ok in cell["widgets"])
        if images or widgets:
            late.append(f"cell {cell['index']}: {images} figure(s), {widgets} widget(s)")
    return late


def scroll_through(page, timeout: float, pause: float = 0.15, draw_wait: float = 20.0) -> Scrolled:
    """Scroll the notebook from top to bottom a screen at a time, noting at each stop what is on screen.

    At each stop, figures and widgets on screen get up to ``draw_wait`` seconds to be drawn before the scroll goes
    on: decoding an image or loading the widget code can take a moment, the first time most of all, and a figure
    scrolled past before it was drawn would count as missing."""
    seen: dict[int, CellSeen] = {}
    scroller = page.locator(f"{PANEL} .jp-WindowedPanel-outer")
    scroller.evaluate("el => { el.scrollTop = 0; }")
    end = time.monotonic() + timeout
    undrawn: list[str] = []
    while True:
        page.wait_for_timeout(pause * 1000)  # lets the browser lay out and paint what scrolled in
        snapshot = page.evaluate(COLLECT_JS, [PANEL, STDERR_MIME])
        drawn_by = min(end, time.monotonic() + draw_wait)
        while _undrawn(snapshot) and time.monotonic() < drawn_by:
            page.wait_for_timeout(250)
            snapshot = page.evaluate(COLLECT_JS, [PANEL, STDERR_MIME])
        undrawn.extend(_undrawn(snapshot))
        for cell in snapshot["cells"]:
            entry = seen.setdefault(cell["index"], CellSeen())
            entry.prompt = cell["prompt"]
            entry.images_in_dom = max(entry.images_in_dom, len(cell["images"]))
            entry.images_shown.update(k for k, (shown, ok) in enumerate(cell["images"]) if shown and ok)
            entry.widget_outputs = max(entry.widget_outputs, len(cell["widgets"]))
            entry.widgets_closed = max(entry.widgets_closed, cell["closedWidgets"])
            entry.widgets_shown.update(k for k, (shown, ok) in enumerate(cell["widgets"]) if shown and ok)
            for text in cell["errors"]:
                if text not in entry.errors:
                    entry.errors.append(text)
        at_bottom = snapshot["scrollTop"] + snapshot["clientHeight"] >= snapshot["scrollHeight"] - 2
        if at_bottom or time.monotonic() > end:
            return Scrolled(cells=seen, reached_bottom=at_bottom, undrawn=undrawn)
        step = max(100, int(snapshot["clientHeight"] * 0.8))
        scroller.evaluate("(el, step) => { el.scrollTop = el.scrollTop + step; }", step)


def scroll_to_output(page, index: int) -> None:
    """Scroll so that the first output of cell ``index`` (else the cell) sits near the top of the view, with a
    few lines of the code that made it above."""
    page.evaluate(
        """([panelSel, index]) => {
          const panel = document.querySelector(panelSel);
          const scroller = panel.querySelector('.jp-WindowedPanel-outer');
          const cells = [...panel.querySelectorAll('.jp-Notebook .jp-Cell')];
          const cell = cells.find((c, pos) =>
            Number(c.getAttribute('data-windowed-list-index') ?? pos) === index);
          if (!cell) return;
          const drawn = (sel) => [...cell.querySelectorAll(sel)].find((e) => e.getBoundingClientRect().height > 0);
          const target = drawn('.jp-OutputArea-output img') || drawn('.jp-OutputArea-output') || cell;
          const above = target === cell ? 0 : 120;
          scroller.scrollTop += target.getBoundingClientRect().top - scroller.getBoundingClientRect().top - above;
        }""",
        [PANEL, index],
    )


def close_and_shut_down(page, timeout: float) -> None:
    """File > Close and Shut Down Notebook…, confirming the dialog; the re-run notebook is never saved."""
    use_menu(page, "File", "Close and Shut Down Notebook…", timeout=timeout)
    page.locator(".jp-Dialog .jp-mod-accept.jp-mod-warn, .jp-Dialog button.jp-mod-warn").first.click(
        timeout=timeout * 1000
    )
    page.locator(".jp-NotebookPanel").first.wait_for(state="detached", timeout=timeout * 1000)


def compare(expected: LessonExpectation, seen: dict[int, CellSeen]) -> list[str]:
    """Differences between what the lesson should show and what the browser showed, one line each."""
    problems = []
    for cell in expected.cells:
        got = seen.get(cell.index)
        where = f"cell {cell.index}"
        if got is None:
            problems.append(f"{where}: never attached to the page while scrolling")
            continue
        if cell.has_code and not re.search(r"\d", got.prompt):
            problems.append(f"{where}: did not run (prompt {got.prompt!r})")
        # tracebacks and stderr streams look alike to a learner (red output); CONTRIBUTING allows neither
        if got.errors and "raises-exception" not in cell.tags:
            problems.append(f"{where}: error output (not tagged raises-exception): {got.errors[0]!r}")
        if len(got.images_shown) != cell.images:
            problems.append(
                f"{where}: {len(got.images_shown)} figure(s) shown as <img> on screen "
                f"({got.images_in_dom} in the page), the committed lesson has {cell.images}"
            )
        # a widget the kernel closed during the run (a finished tqdm bar with leave=False) is gone for the
        # learner too; the committed notebook still lists its output
        if len(got.widgets_shown) + got.widgets_closed != cell.widgets:
            problems.append(
                f"{where}: {len(got.widgets_shown)} widget(s) drawn ({got.widget_outputs} widget outputs, "
                f"{got.widgets_closed} closed by the kernel), the committed lesson has {cell.widgets}"
            )
    return problems
