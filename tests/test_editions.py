"""The Chinese editions (notebooks/zh-CN, notebooks/zh-TW) and their catalogs stay in step with the English.

Every lesson that has a zh_CN catalog (locale/zh_CN/lessons/NN_topic.po) is covered: adding a lesson's catalog is the
only step that brings its editions under these tests. Failures name the lesson, the cell and the English text.
"""

from __future__ import annotations

import importlib.util
import io
import json
import re
import shutil
import sys
import tokenize
from pathlib import Path

import nbformat
import pytest

from attention_lab.measure.results import read_results

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
_spec = importlib.util.spec_from_file_location("editions", ROOT / "tools" / "editions.py")
editions = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(editions)
cat = editions.cat
lesson_text = editions.lesson_text

LESSONS = editions.translated_lessons()
EDITION_CASES = [pytest.param(lesson, language, id=f"{lesson.stem[:2]}-{language}")
                 for lesson in LESSONS for language in cat.EDITIONS]
CJK = "\u4e00-\u9fff"


def test_the_pilot_lesson_has_editions():
    assert "00_start_here" in {p.stem for p in LESSONS}


# ---- catalogs in step ----

@pytest.mark.parametrize("language", cat.EDITIONS)
def test_package_template_and_catalogs_are_complete(language):
    """The .pot holds every msg() of the package; each catalog translates every one, none fuzzy, with exactly the
    placeholders of its English; zh_TW is what the derivation writes."""
    problems = editions.package_problems(language)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(("lesson", "language"), EDITION_CASES)
def test_lesson_catalog_is_in_step_with_the_english(lesson, language):
    problems = editions.lesson_problems(lesson, language)
    assert not problems, "\n".join(problems)


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    """A copy of lesson 00 and its catalogs, which a test may break: notebooks/ and locale/ point there."""
    notebooks, locale = tmp_path / "notebooks", tmp_path / "locale"
    notebooks.mkdir()
    shutil.copy(ROOT / "notebooks" / "00_start_here.ipynb", notebooks)
    shutil.copytree(ROOT / "locale", locale)
    monkeypatch.setattr(editions, "NOTEBOOKS", notebooks)
    monkeypatch.setattr(cat, "LESSON_LOCALE", locale)
    monkeypatch.setattr(cat, "ROOT", tmp_path)
    return notebooks / "00_start_here.ipynb"


def _edit_cell(path: Path, cell_id: str, change) -> str:
    nb = nbformat.read(path, as_version=4)
    cell = next(c for c in nb.cells if c["id"] == cell_id)
    cell.source = change(cell.source)
    nbformat.write(nb, path)
    return cell.source


def test_a_changed_english_cell_is_stale_until_translated_again(sandbox):
    assert editions.lesson_problems(sandbox, "zh-CN") == []
    new = _edit_cell(sandbox, "00-006", lambda s: s.replace("The weights of one token are positive",
                                                            "The weights of one query are positive"))
    problems = editions.lesson_problems(sandbox, "zh-CN")
    assert len(problems) == 2, problems  # the changed entry, and the old one still in the catalog
    assert problems[0].startswith("00_start_here.ipynb: cell 00-006 (markdown): the English changed")
    assert "In Lee's lecture each input token" in problems[0] and "stale" in problems[0]
    assert editions.lesson_problems(sandbox, "zh-TW")[:1] == [problems[0]]
    # update keeps the old translation, marks it fuzzy and records the old English; still a failure
    assert editions.update_lessons() == 0
    catalog = cat.read(cat.lesson_catalog_path("zh-CN", "00_start_here"))
    entry = next(m for m in catalog if m.context == "00-006")
    assert entry.id == new and entry.fuzzy and entry.string
    assert "English changed: was 'token', now 'query'" in entry.auto_comments
    assert any("fuzzy" in p and "cell 00-006" in p for p in editions.lesson_problems(sandbox, "zh-CN"))
    assert editions.build(["00"], execute=False) == 1  # the build refuses a stale lesson


def test_a_new_comment_and_a_new_cell_have_no_translation(sandbox):
    _edit_cell(sandbox, "00-020", lambda s: s + "  # one total per key")
    nb = nbformat.read(sandbox, as_version=4)
    extra = nbformat.v4.new_markdown_cell("A new paragraph.")
    extra["id"] = "00-new"
    nb.cells.insert(5, extra)
    nbformat.write(nb, sandbox)
    problems = "\n".join(editions.lesson_problems(sandbox, "zh-CN"))
    assert "cell 00-020 (comment): new English with no translation: 'one total per key'" in problems
    assert "cell 00-new (markdown): new English with no translation: 'A new paragraph.'" in problems


def test_a_translation_that_drops_code_math_or_numbers_is_refused(sandbox):
    path = cat.lesson_catalog_path("zh-CN", "00_start_here")
    catalog = cat.read(path)
    entry = next(m for m in catalog if m.context == "00-004")
    entry.string = entry.string.replace("`al.device()`", "设备函数")
    cat.write(catalog, path)
    problems = editions.lesson_problems(sandbox, "zh-CN")
    assert any("cell 00-004" in p and "`al.device()`" in p for p in problems), problems
    assert any("is not what the derivation" in p for p in editions.lesson_problems(sandbox, "zh-TW"))


def test_a_hand_edited_zh_tw_catalog_is_refused(sandbox):
    path = cat.lesson_catalog_path("zh-TW", "00_start_here")
    catalog = cat.read(path)
    next(m for m in catalog if m.context == "00-004").string = "手改的譯文"
    cat.write(catalog, path)
    assert any("is not what the derivation from zh_CN writes" in p
               for p in editions.lesson_problems(sandbox, "zh-TW"))


def test_placeholders_are_compared_with_their_conversion_and_spec():
    assert cat.placeholders("row {query} ({token!r}) {weight:.2f} {{literal}}") == [
        "{query}", "{token!r}", "{weight:.2f}"]
    assert cat.placeholders("第 {query} 行 {weight:.3f}") != cat.placeholders("row {query} {weight:.2f}")


def test_a_translation_with_other_placeholders_is_refused(monkeypatch):
    catalog = cat.read(cat.package_catalog_path("zh-CN"))
    english = "an index counts tokens from 0 to {last}, got {index}"
    catalog[english].string = "索引从 0 数到 {last}，你给的是 {answer}"
    monkeypatch.setattr(cat, "read", lambda path: catalog if path == cat.package_catalog_path("zh-CN")
                        else cat.read_po(path.open("rb")))
    problems = editions.package_problems("zh-CN")
    assert any("placeholders ['{answer}', '{last}']" in p for p in problems), problems


def test_a_package_message_without_an_entry_is_refused(monkeypatch):
    template = cat.package_template()
    template.add("a message added to the source", None, [("attention_lab/x.py", None)])
    monkeypatch.setattr(cat, "package_template", lambda: template)
    problems = "\n".join(editions.package_problems("zh-CN"))
    assert "attention_lab.pot is out of date" in problems
    assert "'a message added to the source' (attention_lab/x.py): no entry" in problems


# ---- the built notebooks ----

@pytest.mark.parametrize(("lesson", "language"), EDITION_CASES)
def test_built_edition_has_the_sources_the_build_writes(lesson, language):
    path = editions.edition_path(lesson, language)
    assert path.exists(), f"{path.relative_to(ROOT)} is missing: run make editions"
    built = nbformat.read(path, as_version=4)
    expected = editions.build_notebook(lesson, language)
    assert [c["id"] for c in built.cells] == [c["id"] for c in expected.cells], f"{path.name}: cells differ"
    for ours, wanted in zip(built.cells, expected.cells):
        assert (ours.cell_type, ours.source, ours.metadata.get("tags")) == (
            wanted.cell_type, wanted.source, wanted.metadata.get("tags")), (
            f"{language}/{lesson.name}: cell {ours['id']} differs from what python tools/editions.py build writes")


def _code_without_comments(source: str) -> list[str]:
    """Non-blank lines of code with comments removed (read with tokenize, independently of the build)."""
    masked = "\n".join(" " * len(line) if re.match(r"^\s*[%!]", line) else line for line in source.split("\n"))
    lines = source.split("\n")
    for token in reversed(list(tokenize.generate_tokens(io.StringIO(masked + "\n").readline))):
        if token.type == tokenize.COMMENT:
            row, col = token.start
            lines[row - 1] = lines[row - 1][:col]
    return [line.rstrip() for line in lines if line.strip()]


@pytest.mark.parametrize(("lesson", "language"), EDITION_CASES)
def test_code_cells_differ_only_in_comments_and_the_language_line(lesson, language):
    english = nbformat.read(lesson, as_version=4)
    edition = nbformat.read(editions.edition_path(lesson, language), as_version=4)
    code = [(a, b) for a, b in zip(english.cells, edition.cells) if a.cell_type == "code"]
    assert len(code) == sum(c.cell_type == "code" for c in edition.cells)
    for index, (a, b) in enumerate(code):
        ours, theirs = _code_without_comments(b.source), _code_without_comments(a.source)
        if index == 0:
            line = f'al.set_language("{language}")'
            assert ours.count(line) == 1, f"{language}/{lesson.name}: the setup cell must set the language once"
            ours.remove(line)
        assert ours == theirs, f"{language}/{lesson.name}: cell {a['id']}: code differs beyond its comments"


def test_the_code_comparison_can_fail():
    assert _code_without_comments("x = 1  # one\n# two\ny = 2") == ["x = 1", "y = 2"]
    assert _code_without_comments("x = 2  # one") != _code_without_comments("x = 1  # 一")


@pytest.mark.parametrize(("lesson", "language"), EDITION_CASES)
def test_edition_is_executed_and_its_links_resolve(lesson, language):
    path = editions.edition_path(lesson, language)
    nb = json.loads(path.read_text(encoding="utf-8"))
    code = [c for c in nb["cells"] if c["cell_type"] == "code" and "".join(c["source"]).strip()]
    assert [c["execution_count"] for c in code] == list(range(1, len(code) + 1)), f"{path.name}: run make editions"
    for cell in code:
        tags = cell.get("metadata", {}).get("tags", [])
        for out in cell.get("outputs", []):
            assert out["output_type"] != "error" or "raises-exception" in tags, f"{path.name} {cell['id']}: error"
            assert out.get("name") != "stderr" or "nbval-ignore-output" in tags, f"{path.name} {cell['id']}: stderr"
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            for target in re.findall(r"\]\(([^)\s#]+)", "".join(cell["source"])):
                if not re.match(r"^[a-z]+:", target):
                    assert (path.parent / target).exists(), f"{path.name} {cell['id']}: broken link {target}"


def test_checks_speak_the_edition_language():
    """The pilot's check cells print the zh-CN / zh-TW catalog's text (the language line took effect)."""
    for language in cat.EDITIONS:
        nb = json.loads(editions.edition_path(ROOT / "notebooks" / "00_start_here.ipynb", language)
                        .read_text(encoding="utf-8"))
        printed = "".join("".join(o.get("text", "")) for c in nb["cells"] if c["cell_type"] == "code"
                          for o in c.get("outputs", []))
        assert re.search(rf"正确：[{CJK}]" if language == "zh-CN" else rf"正確：[{CJK}]", printed), language
        wanted = editions.package_translations(language)[
            "one row per query and one column per key: {n_queries} x {n_keys} = {n_weights} weights"]
        assert wanted.format(n_queries=7, n_keys=12, n_weights=84) in printed


def test_editions_exist_only_for_lessons_with_a_catalog():
    for language in cat.EDITIONS:
        built = {p.stem for p in (ROOT / "notebooks" / language).glob("*.ipynb")}
        assert built == {p.stem for p in LESSONS}, f"notebooks/{language}: editions without a catalog, or missing"


def test_build_skips_a_lesson_without_a_catalog_and_says_so(sandbox, capsys):
    other = sandbox.with_name("01_dot_product_similarity.ipynb")
    shutil.copy(ROOT / "notebooks" / other.name, other)
    for language in cat.EDITIONS:  # the sandbox's locale/ is a copy: there lesson 01 has no catalog
        cat.lesson_catalog_path(language, other.stem).unlink(missing_ok=True)
    assert editions.build(["01"], execute=False) == 0
    assert "skipped 01_dot_product_similarity.ipynb: no catalog yet" in capsys.readouterr().out
    assert not (sandbox.parent / "zh-CN").exists()
    assert editions.build(["00"], execute=False) == 0  # sources only, into the sandbox
    assert (sandbox.parent / "zh-TW" / "00_start_here.ipynb").exists()


# ---- comments and links ----

def test_comments_are_read_as_blocks_and_trailing_comments_code_never():
    source = ("%matplotlib inline  # a magic's comment stays\n# first line\n# second line\nx = '# not a comment'"
              "  # after code\n    # indented\n### BEGIN SOLUTION\ny = 1  # noqa: E741\n### END SOLUTION\n#\n")
    comments = lesson_text.code_comments(source)
    assert [(c.text, c.trailing) for c in comments] == [
        ("first line\nsecond line", False), ("after code", True), ("indented", False)]
    translated = lesson_text.translate_code(source, "c", lambda _ctx, text: text.upper().replace("\n", "\n"))
    assert "# FIRST LINE\n# SECOND LINE\nx = '# not a comment'  # AFTER CODE\n    # INDENTED" in translated
    assert "### BEGIN SOLUTION" in translated and "# noqa: E741" in translated


def test_a_multi_line_translation_of_a_trailing_comment_is_refused():
    with pytest.raises(ValueError, match="must be one line"):
        lesson_text.translate_code("x = 1  # one", "c", lambda _c, _t: "一\n二")


def test_links_are_rewritten_for_the_edition_folder(tmp_path):
    (tmp_path / "01_next.ipynb").write_text("{}", encoding="utf-8")
    text = "[card](../docs/notation.md), [next](01_next.ipynb), [gone](02_x.ipynb), [web](https://x.org), [top](#a)"
    assert lesson_text.rewrite_links(text, tmp_path) == (
        "[card](../../docs/notation.md), [next](01_next.ipynb), [gone](../02_x.ipynb), [web](https://x.org), "
        "[top](#a)")


def test_the_language_line_needs_the_al_import():
    with pytest.raises(ValueError, match="must import attention_lab as al"):
        lesson_text.add_language_line("import torch\nx = 1", "zh-CN", "setup")
    assert lesson_text.add_language_line("import attention_lab as al\n\nal.seed_everything(0)", "zh-TW", "s") == (
        'import attention_lab as al\n\nal.set_language("zh-TW")\nal.seed_everything(0)')


# ---- zh-TW from zh-CN ----

def test_exception_table_is_well_formed_and_each_row_is_needed():
    rows = cat.exception_table()
    # 29 rows from the first derivation, the rest from the native review of lessons 00-02 (Taiwanese terms) and the
    # translators of later lessons (and README.zh-TW's 指令 and 相依套件, issue 34); every row must change some
    # catalog (below), so the cap only stops a runaway table; 82 since lesson 12's row 標準庫 -> 標準函式庫
    assert len(rows) <= 82, "keep the reviewed exception table short"
    sources = [source for source, _, _ in rows]
    assert len(sources) == len(set(sources)), "a row appears twice"
    corrections = {"引數": "参数", "單元格": "单元格", "全域性": "全局", "區域性": "局部", "視訊記憶體": "显存",
                   "整陣列成": "整数组成", "列印": "打印", "單元格里": "单元格里"}
    for source, _target, reason in rows:
        assert len(reason) > 10, f"{source}: give the reason"
        if source in corrections:  # a correction of OpenCC: it must still write what the row corrects
            assert source in cat._opencc().convert(corrections[source]), f"{source}: row no longer needed?"
    assert set(corrections) <= set(sources)


def test_derivation_applies_opencc_then_the_table_and_swaps_rows_and_columns():
    assert cat.to_traditional("内存和参数") == "記憶體和參數"  # OpenCC's 記憶體, the table's 參數 (OpenCC: 引數)
    assert cat.to_traditional("第 i 行是查询，第 j 列是键") == "第 i 列是查詢，第 j 行是鍵"
    assert cat.to_traditional("运行这个序列，打印结果") == "執行這個序列，印出結果"  # 行 and 列 of other words kept
    assert cat.to_traditional("列出各行") == "列出各列"


def test_a_row_or_column_the_table_cannot_classify_is_reported():
    assert cat.unclassified_rows_columns("第 i 行和每一列的和") == []
    assert cat.unclassified_rows_columns("这种做法很流行") == ["做法很流行"]


def _zh_texts(language):
    texts = [(f"package: {m.id[:40]!r}", m.string) for m in cat.read(cat.package_catalog_path(language)) if m.id]
    for lesson in LESSONS:
        texts += [(f"{lesson.stem}, cell {m.context}", m.string)
                  for m in cat.read(cat.lesson_catalog_path(language, lesson.stem)) if m.id]
    return texts


def test_every_row_and_column_of_the_zh_cn_text_is_classified():
    found = [(where, cat.unclassified_rows_columns(text)) for where, text in _zh_texts("zh-CN")]
    found = [(where, places) for where, places in found if places]
    assert not found, ("行/列 that the zh-TW derivation cannot tell row from column (or another word): "
                       f"{found}; add the word to locale/zh_TW_exceptions.tsv, mapped to itself, or reword")


# ---- printed conclusions ----

_CONCLUDING = re.compile(r"\b(crossover|fit_slope|growth|with_committed)\(|\.speed\(")
# The machine a committed benchmark ran on, quoted as its CSV records it ("AMD EPYC, 2 logical cores, 2 threads, ...")
_MACHINES = sorted({read_results(path).machine for path in (ROOT / "benchmarks" / "results").glob("*.csv")} - {""},
                   key=len, reverse=True)
_KEPT_LATIN = {"torch", "Performer", "softmax"}  # names written in Latin in Chinese text too (docs/glossary.md)


def untranslated_words(line: str) -> list[str]:
    """The English words of a printed line of Chinese text: what is left once code (a name with _ or .), acronyms
    (SDPA, RNN), single letters (n, x, r^2), the names kept in Latin and the machine label of a committed benchmark (a
    record, quoted as its file has it) are set aside. A line without Chinese is the lesson's own print, English in
    every edition."""
    if not re.search(rf"[{CJK}]", line):
        return []
    for machine in _MACHINES:
        line = line.replace(machine, " ")
    words = re.findall(r"[A-Za-z][A-Za-z0-9_.'-]*", line)
    return [word for word in words if not (len(word) == 1 or "_" in word or "." in word.rstrip(".")
                                           or re.fullmatch(r"[A-Z]{2,}s?", word) or word in _KEPT_LATIN)]


@pytest.mark.parametrize(("lesson", "language"), EDITION_CASES)
def test_printed_conclusions_name_what_they_compare_in_chinese(lesson, language):
    """A cell that prints a conclusion (crossover, fit_slope, growth, a comparison's speed) prints it in Chinese, the
    names of what it compares included: the English names a lesson passes are translated through
    attention_lab/measure/labels.py."""
    nb = json.loads(editions.edition_path(lesson, language).read_text(encoding="utf-8"))
    found = []
    for cell in nb["cells"]:
        if cell["cell_type"] == "code" and _CONCLUDING.search("".join(cell["source"])):
            for out in cell.get("outputs", []):
                text = "".join(out.get("text", "")) + "".join(out.get("data", {}).get("text/plain", ""))
                found += [f"{cell['id']}: {words} in {line.strip()!r}" for line in text.splitlines()
                          if (words := untranslated_words(line))]
    assert not found, (f"{language}/{lesson.name}: English left in a printed conclusion; add the name the lesson "
                       "passes to attention_lab/measure/labels.py, translate it in the zh_CN catalog, rebuild: "
                       + "; ".join(found[:10]))


def test_the_untranslated_word_rule_can_fail():
    assert untranslated_words("在 n = 32 ... 512 上，the RNN loop's time 按 n^1.00 增长（r^2 = 1.000）") == [
        "the", "loop's", "time"]
    assert untranslated_words("线性注意力在 n = 512 处超过稠密 SDPA（n=256: 0.83x, n=512: 2.37x）") == []
    assert untranslated_words("F.scaled_dot_product_attention 都快于 block_sparse_attention（滑动窗口）") == []
    assert untranslated_words("naive grows as n^2.00 over n = 256 ... 1024") == []  # English: the lesson's print
    assert untranslated_words("在 n = 512 ... 2048 上，naive 按 n^2.69 增长") == ["naive"]


# ---- register (d2l-zh's typography) ----

def _plain(text: str) -> str:
    """Text without code spans, math, link targets and code-looking parts: what the typography rules read."""
    text = re.sub(r"(`+).+?\1", " ", text, flags=re.S)
    text = re.sub(r"\$[^$]+\$|\]\([^)]*\)|\{[a-z_]+(![rs])?(:[^}]*)?\}", " ", text)
    return text


@pytest.mark.parametrize("language", cat.EDITIONS)
def test_chinese_text_uses_full_width_punctuation_and_spaces_around_latin(language):
    problems = []
    for where, text in _zh_texts(language):
        plain = _plain(text)
        for match in re.finditer(rf"[{CJK}][,.:;?!](?=\s|$)|[{CJK}][A-Za-z0-9]|[A-Za-z0-9][{CJK}]", plain):
            problems.append(f"{where}: {plain[max(0, match.start() - 6):match.end() + 6]!r}")
    assert not problems, ("Chinese text: use ，。：；？！ after Chinese, and a space between Chinese and Latin "
                          "letters or digits (d2l-zh's register): " + "; ".join(problems[:20]))


def test_the_typography_rule_can_fail():
    assert re.search(rf"[{CJK}][A-Za-z0-9]", _plain("这是PyTorch")) and not re.search(
        rf"[{CJK}][A-Za-z0-9]", _plain("这是 `x`的"))


def test_the_zh_tw_readme_is_derived_from_the_zh_cn_one():
    assert (ROOT / "README.zh-TW.md").read_text(encoding="utf-8") == editions.derived_readme(), (
        "README.zh-TW.md is generated: edit README.zh-CN.md, then run python tools/editions.py update")
    text = (ROOT / "README.zh-CN.md").read_text(encoding="utf-8")
    assert cat.unclassified_rows_columns(text) == []
    derived = editions.derived_readme()
    assert "make lab EDITION=zh-TW" in derived and "[簡體中文](README.zh-CN.md)" in derived
    for readme in ("README.md", "README.zh-CN.md", "README.zh-TW.md"):
        others = {"README.md", "README.zh-CN.md", "README.zh-TW.md"} - {readme}
        links = set(re.findall(r"\]\((README[^)]*\.md)\)", (ROOT / readme).read_text(encoding="utf-8")))
        assert others <= links, f"{readme} should link to {sorted(others)}"
