"""The workflow's web-book jobs: on a push to main, `make book` builds the book with its links pointing at that
commit on GitHub and uploads the Makefile's output folder; a second job, the only one allowed to write Pages,
publishes it after every test job passed. (actionlint checks the whole file: tests/test_ci_workflow.py.)"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = yaml.safe_load((ROOT / ".github" / "workflows" / "tests.yml").read_text())
JOBS = WORKFLOW["jobs"]


def _book_output() -> str:
    """The folder `make book` writes its site to, from the Makefile."""
    makefile = (ROOT / "Makefile").read_text()
    return re.search(r"^BOOK := .*-m book\.build --out (\S+)", makefile, re.M).group(1) + "/html"


def test_the_book_is_built_by_make_book_from_main_only_and_uploaded():
    job = JOBS["book"]
    assert job["if"] == "github.event_name == 'push' && github.ref == 'refs/heads/main'"
    steps = job["steps"]
    build = next(s for s in steps if "run" in s and re.search(r"\bmake\b.*\bbook$", s["run"]))
    assert "github.sha" in build["env"]["BOOK_REPO_URL"], "links to the notebooks of the published commit"
    upload = next(s for s in steps if s.get("uses", "").startswith("actions/upload-pages-artifact@"))
    assert upload["with"]["path"] == _book_output()
    assert "permissions" not in job, "the build keeps the workflow's read-only token"
    assert WORKFLOW["permissions"] == {"contents": "read"}


def test_only_the_publishing_job_may_write_pages_after_every_test_job():
    job = JOBS["pages"]
    assert set(job["needs"]) == {"book"} | {name for name in JOBS if name not in ("book", "pages")}
    assert job["permissions"] == {"pages": "write", "id-token": "write"}
    assert job["environment"]["name"] == "github-pages"
    assert [s["uses"].split("@")[0] for s in job["steps"]] == ["actions/deploy-pages"]
    assert job["concurrency"]["cancel-in-progress"] is False
    others = [name for name, other in JOBS.items() if name != "pages" and "pages" in other.get("permissions", {})]
    assert others == []
