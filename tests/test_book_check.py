"""book/check_site.py finds each kind of problem a built page can have (here on small hand-written sites), and
nothing on a clean one: a script, a stylesheet, a font or an image from another host, a missing page or resource,
a broken anchor, a link out of the site to a file the repository does not have."""

from __future__ import annotations

from _book import ROOT  # noqa: F401  (puts the checkout on sys.path for `book`)

from book import check_site

CLEAN = """<!DOCTYPE html><html><head>
<link rel="stylesheet" href="_static/site.css"><script src="_static/site.js"></script>
<link rel="canonical" href="https://example.org/lesson.html">
</head><body>
<section id="top"><h1>Lesson</h1><a name="old-anchor"></a>
<a href="#top">up</a> <a href="other.html#part">other</a> <a href="https://example.org/">a link, not a load</a>
<a href="mailto:someone@example.org">mail</a> <a href="../repo/notebooks/00.ipynb">the notebook</a>
<img src="_images/figure.png" srcset="_images/figure.png 1x, _images/figure.png 2x">
<img src="data:image/png;base64,iVBORw0KGgo=" alt="inline"><div style="background: url(_images/figure.png)"></div>
</section></body></html>"""


def _site(tmp_path, page: str = CLEAN, css: str = "body { font-family: serif; }"):
    site = tmp_path / "html"
    (site / "_static").mkdir(parents=True)
    (site / "_images").mkdir()
    (site / "_images" / "figure.png").write_bytes(b"\x89PNG")
    (site / "_static" / "site.js").write_text("// local")
    (site / "_static" / "site.css").write_text(css)
    (site / "other.html").write_text('<html><body><h2 id="part">Part</h2></body></html>')
    (site / "lesson.html").write_text(page)
    (tmp_path / "repo" / "notebooks").mkdir(parents=True)
    (tmp_path / "repo" / "notebooks" / "00.ipynb").write_text("{}")
    return site


def _problems(tmp_path, **kwargs):
    site = _site(tmp_path, **kwargs)
    return check_site.check(site, outside_root=tmp_path / "repo")


def test_a_clean_site_has_no_problem(tmp_path):
    assert _problems(tmp_path) == []


def test_a_script_from_another_host(tmp_path):
    page = CLEAN.replace('<script src="_static/site.js">', '<script src="https://cdn.example.org/mathjax.js">')
    assert _problems(tmp_path, page=page) == ["lesson.html: loads https://cdn.example.org/mathjax.js from another host"]


def test_a_protocol_relative_stylesheet_and_an_image_from_another_host(tmp_path):
    page = CLEAN.replace('href="_static/site.css"', 'href="//fonts.example.org/css"').replace(
        'src="_images/figure.png"', 'src="http://example.org/figure.png"')
    problems = _problems(tmp_path, page=page)
    assert len(problems) == 2 and all("from another host" in p for p in problems)


def test_a_font_imported_by_a_stylesheet_or_a_style_attribute(tmp_path):
    css = "@import 'https://fonts.example.org/inter.css';\n@font-face { src: url(https://x.example.org/f.woff2); }"
    page = CLEAN.replace("url(_images/figure.png)", "url('https://example.org/bg.png')")
    problems = _problems(tmp_path, page=page, css=css)
    assert sorted(problems) == sorted([
        "_static/site.css: loads https://fonts.example.org/inter.css from another host",
        "_static/site.css: loads https://x.example.org/f.woff2 from another host",
        "lesson.html: loads https://example.org/bg.png from another host",
    ])


def test_a_broken_anchor(tmp_path):
    page = CLEAN.replace('href="other.html#part"', 'href="other.html#no-such-part"')
    assert _problems(tmp_path, page=page) == [
        "lesson.html: link to other.html#no-such-part: no element with id 'no-such-part' there"]


def test_a_broken_anchor_on_the_same_page(tmp_path):
    page = CLEAN.replace('href="#top"', 'href="#bottom"')
    assert _problems(tmp_path, page=page) == ["lesson.html: link to #bottom: no element with id 'bottom' there"]


def test_a_missing_page_and_a_missing_resource(tmp_path):
    page = CLEAN.replace("other.html#part", "gone.html").replace("_static/site.js", "_static/gone.js")
    assert sorted(_problems(tmp_path, page=page)) == [
        "lesson.html: link to gone.html, which does not exist",
        "lesson.html: loads _static/gone.js, which does not exist",
    ]


def test_a_link_out_of_the_site_to_a_file_the_repository_lacks(tmp_path):
    page = CLEAN.replace("notebooks/00.ipynb", "notebooks/99.ipynb")
    assert _problems(tmp_path, page=page) == [
        "lesson.html: link to ../repo/notebooks/99.ipynb, which is not a file of the site or the repository"]


def test_theme_fragments_under_static_are_not_pages(tmp_path):
    site = _site(tmp_path)
    (site / "_static" / "macros.html").write_text("<script src=\"{{ pathto('x.js', 1) }}\"></script>")
    assert check_site.check(site, outside_root=tmp_path / "repo") == []
