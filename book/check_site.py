"""Checks of a built static site, read from its files: it loads nothing from another host, and every internal link,
anchor and resource resolves.

- A resource (``<script src>``, ``<link rel="stylesheet" href>``, ``<img src>``, ``srcset``, ``<iframe>``, ...,
  ``url(...)`` and ``@import`` in CSS and in ``style``) with a scheme or ``//`` host is a request to another host:
  a problem. ``data:`` URLs are fine. A local one must exist.
- A link (``<a href>``) to another host is not followed (it is not loaded with the page). A relative link inside
  the site must reach a file, and its ``#anchor`` an element with that ``id`` (or ``name``). A relative link that
  leaves the site is a link into the repository (``outside_root``): its file must exist there.
- HTML files under ``_static/`` are a theme's template fragments, not pages: not checked.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

LOADING_LINK_RELS = {"stylesheet", "preload", "prefetch", "modulepreload", "icon", "apple-touch-icon", "manifest",
                     "preconnect", "dns-prefetch"}
RESOURCE_ATTRIBUTES = {"script": ["src"], "img": ["src", "srcset"], "source": ["src", "srcset"],
                       "iframe": ["src"], "video": ["src", "poster"], "audio": ["src"], "embed": ["src"],
                       "object": ["data"], "track": ["src"], "input": ["src"]}
CSS_URL = re.compile(r"""url\(\s*['"]?([^'")]+)|@import\s+['"]([^'"]+)""")


def is_remote(url: str) -> bool:
    scheme = urlsplit(url).scheme
    return url.startswith("//") or (scheme not in ("", "data", "blob", "about", "javascript") and scheme != "")


def _srcset(value: str) -> list[str]:
    return [part.strip().split()[0] for part in value.split(",") if part.strip()]


class _Page(HTMLParser):
    """The ids, links and loaded resources of one HTML page."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.links: list[str] = []
        self.resources: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        for key in ("id", "name") if tag == "a" else ("id",):
            if attributes.get(key):
                self.ids.add(attributes[key])
        if tag == "a" and attributes.get("href") is not None:
            self.links.append(attributes["href"])
        if tag == "link" and attributes.get("href"):
            rels = set((attributes.get("rel") or "").lower().split())
            (self.resources if rels & LOADING_LINK_RELS else self.links).append(attributes["href"])
        for key in RESOURCE_ATTRIBUTES.get(tag, []):
            value = attributes.get(key)
            if value:
                self.resources.extend(_srcset(value) if key == "srcset" else [value])
        if attributes.get("style"):
            self.resources.extend(css_urls(attributes["style"]))
        self._in_style = tag == "style"

    def handle_endtag(self, tag):
        self._in_style = False

    def handle_data(self, data):
        if self._in_style:
            self.resources.extend(css_urls(data))


def css_urls(text: str) -> list[str]:
    return [a or b for a, b in CSS_URL.findall(text)]


def _target(page: Path, url: str) -> tuple[Path, str]:
    parts = urlsplit(url)
    path = (page.parent / unquote(parts.path)).resolve() if parts.path else page.resolve()
    if path.is_dir():
        path = path / "index.html"
    return path, unquote(parts.fragment)


def check(root: Path, outside_root: Path | None = None) -> list[str]:
    """Every problem of the site in ``root`` (an empty list when there is none), as 'page: what' lines."""
    root = root.resolve()
    pages: dict[Path, _Page] = {}
    for path in sorted(root.rglob("*.html")):
        if "_static" in path.relative_to(root).parts:  # a theme's template fragments, not pages
            continue
        parsed = _Page()
        parsed.feed(path.read_text(encoding="utf-8", errors="replace"))
        pages[path.resolve()] = parsed
    problems = []
    for path, page in pages.items():
        name = path.relative_to(root).as_posix()
        for url in page.resources:
            if is_remote(url):
                problems.append(f"{name}: loads {url} from another host")
            elif not url.startswith(("data:", "blob:")):
                target, _ = _target(path, url)
                if not target.exists():
                    problems.append(f"{name}: loads {url}, which does not exist")
        for url in page.links:
            if is_remote(url) or urlsplit(url).scheme:
                continue
            target, fragment = _target(path, url)
            if not target.is_relative_to(root):
                in_repository = outside_root is not None and target.is_relative_to(outside_root.resolve())
                if not (in_repository and target.exists()):
                    problems.append(f"{name}: link to {url}, which is not a file of the site or the repository")
                continue
            if not target.exists():
                problems.append(f"{name}: link to {url}, which does not exist")
            elif fragment and target.suffix == ".html" and fragment not in pages[target].ids:
                problems.append(f"{name}: link to {url}: no element with id {fragment!r} there")
    for css in sorted(root.rglob("*.css")):
        for url in css_urls(css.read_text(encoding="utf-8", errors="replace")):
            if is_remote(url):
                problems.append(f"{css.relative_to(root).as_posix()}: loads {url} from another host")
    return problems
