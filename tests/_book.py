"""The web book for the tests: the build that `make book` (or `make test`, before pytest) left in build/book when it
is the book of the files as they are now, else a fresh build into a temporary folder (book/build.py either way)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # book/ sits beside the package in the checkout; `pytest` alone does not add it

from book import build as book_build  # noqa: E402
from book.editions import discover  # noqa: E402, F401  (re-exported for the tests)


def book_html(tmp_path_factory) -> Path:
    """The folder of the built site (``index.html`` and one folder per edition)."""
    current = book_build.current_build(ROOT / "build" / "book", ROOT)
    if current is not None:
        return current
    report = book_build.build(tmp_path_factory.mktemp("book"), ROOT)
    assert report.ok, f"the book did not build cleanly: {report.failed} {report.problems}"
    return report.html
