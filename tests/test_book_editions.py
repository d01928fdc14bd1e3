"""book/build.py on a small repository made here: two editions (English and a fake zh-CN, a copied lesson with its
title changed) become two sections of the site, each with its own pages, landing page and sidebar, and a language
switch that leads to the same lesson in the other edition (or to its landing page where that lesson is missing);
a doc without a translation is shown in English and says so. And a page with a broken anchor fails the build."""

from __future__ import annotations

import json
import shutil

import nbformat
import pytest
from _book import ROOT
from bs4 import BeautifulSoup

from book import build as book_build
from book.editions import WORDS

pytestmark = pytest.mark.slow  # builds small books with Sphinx (make test-fast leaves it out)


def _write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _translated_copy(source, target, title):
    """The lesson ``source`` with its first heading replaced: a stand-in for a translated edition, one folder
    deeper (notebooks/zh-CN/), so its relative links climb one folder more."""
    nb = nbformat.read(source, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = cell.source.replace("](../", "](../../")
    first = nb.cells[0]
    first.source = "\n".join([f"# {title}", *first.source.splitlines()[1:]])
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, target)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    repo = tmp_path_factory.mktemp("repo")
    notebooks = repo / "notebooks"
    notebooks.mkdir()
    shutil.copy(ROOT / "notebooks" / "00_start_here.ipynb", notebooks / "00_first.ipynb")
    # a small English-only lesson (the switch falls back to the landing page), with lesson 00's kernel and language
    second = nbformat.v4.new_notebook(metadata=nbformat.read(notebooks / "00_first.ipynb", as_version=4).metadata)
    second.cells = [nbformat.v4.new_markdown_cell("# 01 · A second lesson\n\nOnly in English."),
                    nbformat.v4.new_code_cell("x = 1")]
    nbformat.write(second, notebooks / "01_second.ipynb")
    _translated_copy(ROOT / "notebooks" / "00_start_here.ipynb", notebooks / "zh-CN" / "00_first.ipynb",
                     "00 · 从这里开始")
    (repo / "docs").mkdir()
    shutil.copy(ROOT / "docs" / "notation.md", repo / "docs" / "notation.md")
    _write(repo / "docs" / "notation.zh-CN.md", "# 符号表\n\n每一课都使用下列符号。\n")
    _write(repo / "docs" / "teaching.md", "# Teaching\n\nThe teacher's guide, in English only.\n")
    _write(repo / "CONTRIBUTING.md", "# Contributing\n")
    _write(repo / "README.md", "# Demo\n\nStart with [the first lesson](notebooks/00_first.ipynb), keep "
                               "[the notation](docs/notation.md) at hand; see [CONTRIBUTING](CONTRIBUTING.md).\n")
    _write(repo / "README.zh-CN.md", "# 演示\n\n从[第一课](notebooks/zh-CN/00_first.ipynb)开始，"
                                     "[符号表](docs/notation.zh-CN.md)。\n")
    report = book_build.build(repo / "build" / "book", repo)
    assert report.ok, f"failed: {report.failed}, problems: {report.problems}"
    return report


def _soup(report, page):
    return BeautifulSoup((report.html / page).read_text(encoding="utf-8"), "html.parser")


def _switch(soup):
    return {a["hreflang"]: a["href"] for a in soup.select("nav.book-language-switch a")}


def test_each_edition_is_its_own_section_with_its_own_lessons(site):
    assert [e.tag for e in site.editions] == ["en", "zh-CN"]
    en, zh = _soup(site, "en/index.html"), _soup(site, "zh-CN/index.html")
    assert en.html["lang"] == "en" and zh.html["lang"] == "zh-CN"
    assert {a["href"] for a in en.select("article table a")} == {"lessons/00_first.html", "lessons/01_second.html"}
    assert {a["href"] for a in zh.select("article table a")} == {"lessons/00_first.html"}
    sidebar = [a.get_text(strip=True) for a in zh.select("nav.bd-links a")]
    assert "00 · 从这里开始" in sidebar and not any("second lesson" in text for text in sidebar), sidebar
    assert WORDS["zh-CN"]["route"] in zh.get_text() and WORDS["zh-CN"]["name"] in zh.get_text()
    assert not (site.html / "zh-CN" / "lessons" / "01_second.html").exists()
    front = _soup(site, "index.html")
    assert [a["href"] for a in front.select("ul.editions a")] == ["en/index.html", "zh-CN/index.html"]


def test_the_language_switch_leads_to_the_same_lesson_in_the_other_edition(site):
    en_lesson = _soup(site, "en/lessons/00_first.html")
    assert _switch(en_lesson) == {"zh-CN": "../../zh-CN/lessons/00_first.html"}
    zh_lesson = _soup(site, "zh-CN/lessons/00_first.html")
    assert _switch(zh_lesson) == {"en": "../../en/lessons/00_first.html"}
    assert zh_lesson.h1.get_text().startswith("00 · 从这里开始")
    current = zh_lesson.select_one("nav.book-language-switch [aria-current=page]")
    assert current.get_text() == "简体中文"
    # lesson 01 has no zh-CN edition: the switch goes to that edition's landing page
    assert _switch(_soup(site, "en/lessons/01_second.html")) == {"zh-CN": "../../zh-CN/index.html"}
    assert _switch(_soup(site, "zh-CN/index.html")) == {"en": "../en/index.html"}


def test_each_edition_uses_its_own_words_and_docs(site):
    zh_lesson = _soup(site, "zh-CN/lessons/00_first.html")
    assert zh_lesson.select_one("div.lesson-source .admonition-title").get_text() == WORDS["zh-CN"][
        "lesson_note_title"]
    assert {s.get_text() for s in zh_lesson.select("details.above-input summary .collapsed")} == {"显示答案"}
    assert any(a["href"].endswith("notebooks/zh-CN/00_first.ipynb") for a in zh_lesson.select("div.lesson-source a"))
    assert _soup(site, "zh-CN/docs/notation.html").h1.get_text().startswith("符号表")
    teaching = _soup(site, "zh-CN/docs/teaching.html").get_text()
    assert WORDS["zh-CN"]["english_only"] in teaching and "in English only" in teaching
    assert WORDS["en"]["english_only"] not in _soup(site, "en/docs/teaching.html").get_text()


def test_readme_links_lead_to_book_pages_or_into_the_repository(site):
    readme = {a.get_text(): a["href"] for a in _soup(site, "en/readme.html").select("article a")}
    assert readme["the first lesson"] == "lessons/00_first.html"
    assert readme["the notation"] == "docs/notation.html"
    assert readme["CONTRIBUTING"].endswith("/CONTRIBUTING.md") and readme["CONTRIBUTING"].startswith("../")
    zh = {a.get_text(): a["href"] for a in _soup(site, "zh-CN/readme.html").select("article a")}
    assert zh["第一课"] == "lessons/00_first.html" and zh["符号表"] == "docs/notation.html"
    stamp = json.loads((site.html.parent / book_build.STAMP).read_text())
    assert stamp["editions"] == ["en", "zh-CN"]


def test_a_warning_fails_the_build_and_leaves_no_stamp(tmp_path, capfd):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# 00 · A lesson\n\nSee [the missing part](#no-such-part).")]
    (tmp_path / "notebooks").mkdir()
    nbformat.write(nb, tmp_path / "notebooks" / "00_broken.ipynb")
    _write(tmp_path / "README.md", "# Demo\n")
    report = book_build.build(tmp_path / "out", tmp_path)
    assert report.failed == ["en"] and not report.ok
    assert "no-such-part" in capfd.readouterr().err
    assert not (tmp_path / "out" / book_build.STAMP).exists()
    assert book_build.current_build(tmp_path / "out", tmp_path) is None
