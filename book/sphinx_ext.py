"""What the book adds to Sphinx: deep dives folded as in JupyterLab, links into the repository, the language switch,
and MathJax served from the site itself.

- ``deep-dive`` (a directive that book/stage.py puts at the end of a deep dive's heading cell) folds the rest of the
  heading's section, up to the next heading of its level or above, into a ``<details>`` toggle: the cells below the
  heading cell, as JupyterLab folds them; the heading cell (its heading and summary line) stays visible.
- ``repo:<path>`` links become links to the repository: ``book_repo_url`` + path when that is set (a published
  book), else a relative path from the built page into this checkout (a file: URL where no relative path leads
  there: another drive on Windows); a path that does not exist is a warning.
- Every page gets ``book_editions`` (each edition's name and the URL of this page in it) for the language switch.
- MathJax 3 comes from the sphinx-mathjax-offline wheel and is copied into ``_static/mathjax``: no CDN.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from html import escape
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import Directive, directives
from sphinx.transforms import SphinxTransform
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util import logging

logger = logging.getLogger(__name__)

# What tex-chtml.js loads: TeX extensions on first use, the CHTML fonts, the menu and its accessibility parts.
MATHJAX_PARTS = ["tex-chtml.js", "input/tex", "output/chtml", "ui", "a11y", "sre"]


class deep_dive_marker(nodes.General, nodes.Element):
    """Where a deep dive starts: the end of its heading cell."""


class deep_dive(nodes.General, nodes.Element):
    """The folded part of a deep dive."""


class DeepDive(Directive):
    has_content = False
    option_spec = {"show": directives.unchanged_required, "hide": directives.unchanged_required}

    def run(self):
        return [deep_dive_marker(show=self.options.get("show", "Show"), hide=self.options.get("hide", "Hide"))]


class FoldDeepDives(SphinxTransform):
    """Everything after a marker in its section (cells and sub-sections) goes into one ``deep_dive`` node."""

    default_priority = 700

    def apply(self, **kwargs):
        for marker in list(self.document.findall(deep_dive_marker)):
            section = marker.parent
            if not isinstance(section, nodes.section):
                logger.warning("deep-dive: the marker must follow a heading, not sit inside %s",
                               type(section).__name__, location=marker)
                section.remove(marker)
                continue
            index = section.index(marker)
            folded = deep_dive(show=marker["show"], hide=marker["hide"])
            folded.extend(section.children[index + 1:])
            section.children = section.children[:index]
            section.append(folded)


def visit_deep_dive(self, node):
    self.body.append(f'<details class="deep-dive">\n<summary><span class="deep-dive-show">{escape(node["show"])}'
                     f'</span><span class="deep-dive-hide">{escape(node["hide"])}</span></summary>\n')


def depart_deep_dive(self, node):
    self.body.append("</details>\n")


class RepositoryLinks(SphinxPostTransform):
    """``repo:<path>`` references become links to the repository (see the module docstring)."""

    default_priority = 400
    formats = ("html",)

    def run(self, **kwargs):
        config = self.app.config
        page = Path(self.app.outdir) / self.app.builder.get_target_uri(self.env.docname)
        for ref in self.document.findall(nodes.reference):
            uri = ref.get("refuri", "")
            if not uri.startswith("repo:"):
                continue
            path, _, fragment = uri[len("repo:"):].partition("#")
            target = Path(config.book_repo_root) / path
            if not target.exists():
                logger.warning("link to %s: no such file in the repository", path, location=ref)
            if config.book_repo_url:
                new = f"{config.book_repo_url.rstrip('/')}/{path}"
            else:
                try:
                    new = Path(os.path.relpath(target, page.parent)).as_posix()
                except ValueError:  # Windows: the build on another drive than the checkout
                    new = target.resolve().as_uri()
            ref["refuri"] = new + (f"#{fragment}" if fragment else "")


def add_language_switch(app, pagename, templatename, context, doctree):
    up = "../" * (pagename.count("/") + 1)
    context["book_language_label"] = app.config.book_language_label
    context["book_editions"] = [
        {"tag": e["tag"], "name": e["name"], "current": e["tag"] == app.config.book_edition,
         "href": f"{up}{e['tag']}/{pagename if pagename in e['pages'] else 'index'}.html"}
        for e in app.env.book_editions
    ]


def load_editions(app):
    path = app.config.book_editions_file
    app.env.book_editions = json.loads(Path(path).read_text(encoding="utf-8")) if path else []


def copy_mathjax(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    spec = importlib.util.find_spec("sphinx-mathjax-offline")  # the wheel's package name has hyphens
    source = Path(next(iter(spec.submodule_search_locations))) / "static" / "mathjax"
    target = Path(app.outdir) / "_static" / "mathjax"
    for part in MATHJAX_PARTS:
        if (source / part).is_dir():
            shutil.copytree(source / part, target / part, dirs_exist_ok=True)
        else:
            target.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source / part, target / part)


def setup(app):
    app.add_config_value("book_repo_root", "", "env")
    app.add_config_value("book_repo_url", "", "env")
    app.add_config_value("book_edition", "en", "html")
    app.add_config_value("book_editions_file", "", "html")
    app.add_config_value("book_language_label", "Language", "html")
    app.add_node(deep_dive, html=(visit_deep_dive, depart_deep_dive))
    app.add_node(deep_dive_marker)
    app.add_directive("deep-dive", DeepDive)
    app.add_transform(FoldDeepDives)
    app.add_post_transform(RepositoryLinks)
    app.connect("builder-inited", load_editions)
    app.connect("html-page-context", add_language_switch)
    app.connect("build-finished", copy_mathjax)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
