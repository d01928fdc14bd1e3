"""Sphinx settings of the web book, the same for every edition: book/build.py runs Sphinx once per edition on a
staged copy of its lessons and docs, and passes the edition with -D (language, title, edition, repository)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout, so that `book.sphinx_ext` imports

project = "attention-lab"
author = "attention-lab"
language = "en"
extensions = ["myst_nb", "sphinx.ext.mathjax", "book.sphinx_ext"]
exclude_patterns = ["**/.ipynb_checkpoints"]
templates_path = ["_templates"]

# The lessons are committed executed: the book shows those outputs and never runs a cell.
nb_execution_mode = "off"
# no ipywidgets manager from a CDN: the staged lessons carry no widget state, and a page says so where a widget was
nb_ipywidgets_js = {}
nb_merge_streams = True
# A failed check shows one line, "Not yet: <hint>" (in the edition's language), not a Python traceback: no
# traceback lexer, which stumbles on full-width punctuation
nb_render_error_lexer = "text"
# $...$ and $$...$$ are math in JupyterLab's markdown, so they are here
myst_enable_extensions = ["dollarmath"]
myst_heading_anchors = 4  # GitHub's anchors for headings (the README links to its own sections)
smartquotes = False  # the text as the notebook has it: alpha'_{i,j} keeps its prime, code its quotes
myst_url_schemes = ["http", "https", "mailto", "repo"]  # repo: links into the repository (book/sphinx_ext.py)

# MathJax from the site itself (book/sphinx_ext.py copies it into _static/mathjax), not from a CDN
mathjax_path = "mathjax/tex-chtml.js"

html_theme = "sphinx_book_theme"
# Nothing in these options asks another host for anything: no launch buttons (Binder, Colab and Thebe would run
# the lessons elsewhere), no analytics, no announcement or version switcher fetched from a URL (book/check_site.py
# and the browser test check every page).
html_theme_options = {
    "home_page_in_toc": True,
    # the staged copy of a lesson is not the committed notebook: each lesson page links the committed one
    "use_download_button": False,
    "article_header_end": ["language-switch.html", "article-header-buttons.html"],
}
html_static_path = ["_static"]
html_css_files = ["book.css"]
html_js_files = ["book.js"]
html_copy_source = False
html_show_sourcelink = False
html_last_updated_fmt = None
