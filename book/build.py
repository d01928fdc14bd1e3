"""Build the web book of the executed lessons, every edition that exists, and check it: ``make book``.

    python -m book.build [--out build/book] [--repo-url URL]

For each edition (book/editions.py) it stages the lessons, the docs and the README into ``<out>/sources/<tag>``
(book/stage.py: the committed files are never changed), runs Sphinx on them with warnings as errors
(``-W --keep-going``, a fresh environment: the build never executes a lesson), writes ``<out>/html/<tag>/``, and a
front page ``<out>/html/index.html`` that lists the editions. Then book/check_site.py checks the whole site: no page
loads anything from another host, every internal link and anchor resolves. Exit status 1 on any warning or problem.

``--repo-url`` (or ``BOOK_REPO_URL``) is where the links to the notebooks and other repository files point, e.g.
``https://github.com/OWNER/attention-lab/blob/main`` for a published book; without it they are relative paths into
this checkout, which work when the book is opened from ``build/book/html`` in a browser.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from html import escape
from pathlib import Path

from book import check_site
from book.editions import Edition, discover
from book.stage import stage_edition, write_editions_file

BOOK = Path(__file__).resolve().parent
REPO = BOOK.parent


def inputs(repo: Path) -> list[Path]:
    """Every file the book is built from: the book's own files, the lessons of every edition, READMEs and docs."""
    found = [p for p in BOOK.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    found += [p for p in (repo / "notebooks").rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts]
    found += [*repo.glob("README*.md"), *(repo / "docs").glob("*.md")]
    return sorted(found)


def fingerprint(repo: Path) -> str:
    """A hash of the book's inputs: a build whose stamp has it is the book of these files."""
    digest = hashlib.sha256()
    for path in inputs(repo):
        digest.update(path.relative_to(BOOK.parent if path.is_relative_to(BOOK) else repo).as_posix().encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


STAMP = "book-build.json"  # in the build folder, beside html/: written after a build that passed its checks


def current_build(out: Path, repo: Path = REPO) -> Path | None:
    """``out/html`` when the stamp there says it was built and checked from the files as they are now, else None."""
    try:
        stamp = json.loads((out / STAMP).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return out / "html" if stamp.get("fingerprint") == fingerprint(repo) else None


@dataclass
class BuildReport:
    html: Path
    editions: list[Edition]
    seconds: dict[str, float] = field(default_factory=dict)  # step -> seconds
    failed: list[str] = field(default_factory=list)  # editions whose Sphinx build failed
    problems: list[str] = field(default_factory=list)  # what check_site found

    @property
    def ok(self) -> bool:
        return not self.failed and not self.problems


def sphinx_arguments(edition: Edition, source: Path, html: Path, doctrees: Path, editions_file: Path,
                     repo: Path, repo_url: str) -> list[str]:
    settings = {
        "language": edition.sphinx_language,
        "html_title": edition.words["book_title"],
        "book_edition": edition.tag,
        "book_editions_file": str(editions_file),
        "book_language_label": edition.words["language"],
        "book_repo_root": str(repo),
        "book_repo_url": repo_url,
    }
    defines = [arg for key, value in settings.items() for arg in ("-D", f"{key}={value}")]
    return ["-b", "html", "-W", "--keep-going", "-E", "-q", "-c", str(BOOK), "-d", str(doctrees), *defines,
            str(source), str(html)]


def front_page(editions: list[Edition]) -> str:
    items = []
    for e in editions:
        tagline = e.words["tagline"].format(count=len(e.lessons))
        items.append(f'  <li lang="{e.tag}"><a href="{e.tag}/index.html" hreflang="{e.tag}">{escape(e.name)}: '
                     f'{escape(e.words["book_title"])}</a>\n    <p>{escape(tagline)}</p></li>')
    items = "\n".join(items)
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>attention-lab</title>
<style>body {{ font-family: system-ui, sans-serif; max-width: 40rem; margin: 3rem auto; padding: 0 1rem; }}
ul {{ list-style: none; padding: 0; }} li {{ margin: 1.5rem 0; }} a {{ font-weight: 600; font-size: 1.15rem; }}
p {{ margin: 0.3rem 0; color: #444; }}</style>
</head>
<body>
<h1>attention-lab</h1>
<ul class="editions">
{items}
</ul>
</body>
</html>
"""


def run_sphinx(arguments: list[str]) -> tuple[int, float]:
    """Sphinx's exit status for one edition's build, and the seconds it took (in a worker process of ``build``)."""
    from sphinx.cmd.build import build_main

    started = time.monotonic()
    status = build_main(arguments)
    return status, time.monotonic() - started


def build(out: Path, repo: Path = REPO, repo_url: str = "") -> BuildReport:
    """Stage, build and check every edition of ``repo`` into ``out``; see the module docstring."""
    sources, html, doctrees = out / "sources", out / "html", out / "doctrees"
    (out / STAMP).unlink(missing_ok=True)
    for folder in (sources, html, doctrees):
        shutil.rmtree(folder, ignore_errors=True)
    inputs_hash = fingerprint(repo)
    editions = discover(repo)
    report = BuildReport(html=html, editions=editions)

    started = time.monotonic()
    pages = {e.tag: stage_edition(e, repo, sources / e.tag) for e in editions}
    editions_file = sources / "editions.json"
    write_editions_file(editions_file, editions, pages)
    report.seconds["stage"] = time.monotonic() - started

    # one Sphinx process per edition, as many at once as the machine has cores: the editions share nothing but the
    # staged editions file, and Sphinx's own parallel mode splits too few pages to pay for its workers
    jobs = {e.tag: sphinx_arguments(e, sources / e.tag, html / e.tag, doctrees / e.tag, editions_file, repo, repo_url)
            for e in editions}
    with ProcessPoolExecutor(max_workers=max(1, min(len(jobs), os.cpu_count() or 1))) as pool:
        done = {tag: pool.submit(run_sphinx, arguments) for tag, arguments in jobs.items()}
        for tag, future in done.items():
            status, seconds = future.result()
            if status != 0:
                report.failed.append(tag)
            report.seconds[f"sphinx {tag}"] = seconds

    html.mkdir(parents=True, exist_ok=True)
    (html / "index.html").write_text(front_page(editions), encoding="utf-8")
    (html / ".nojekyll").touch()  # GitHub Pages: serve _static/ and _images/ as they are

    started = time.monotonic()
    report.problems = check_site.check(html, outside_root=repo)
    report.seconds["check"] = time.monotonic() - started
    if report.ok:
        stamp = {"fingerprint": inputs_hash, "editions": [e.tag for e in editions], "seconds": report.seconds}
        (out / STAMP).write_text(json.dumps(stamp, indent=1), encoding="utf-8")
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "build" / "book", help="build folder (default build/book)")
    parser.add_argument("--repo-url", default=os.environ.get("BOOK_REPO_URL", ""),
                        help="base URL of the repository's files (default: relative links into this checkout)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    report = build(args.out.resolve(), REPO, args.repo_url)
    steps = ", ".join(f"{step} {seconds:.1f} s" for step, seconds in report.seconds.items())
    names = ", ".join(f"{e.tag} ({len(e.lessons)} lessons)" for e in report.editions)
    print(f"book: {names}; {steps}; total {time.monotonic() - started:.1f} s")
    for problem in report.problems:
        print(f"book: {problem}", file=sys.stderr)
    if report.failed:
        print(f"book: Sphinx reported warnings or errors for {', '.join(report.failed)} (above)", file=sys.stderr)
    if not report.ok:
        return 1
    print(f"book: open {report.html / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
