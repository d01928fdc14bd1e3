"""docs/glossary.md: each key term is rendered the same way throughout each Chinese edition (lessons and the package's
messages), no listed wrong variant appears, and the 繁體 column is what the zh-TW derivation makes of the 简体 one."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import edition_catalogs as cat  # noqa: E402

GLOSSARY = ROOT / "docs" / "glossary.md"


def _forms(cell: str) -> list[str]:
    return [form.strip() for form in cell.split(" / ") if form.strip()]


def read_glossary(text: str) -> list[dict]:
    """The rows of the glossary's terms table."""
    rows = []
    lines = text.split("## Terms", 1)[1].splitlines()
    for line in lines:
        if not line.startswith("| ") or line.startswith("| English") or set(line) <= set("|- "):
            if rows and not line.startswith("|"):
                break
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        english, simplified, traditional, lee, checked, avoid = cells
        rows.append({"english": _forms(english), "zh-CN": _forms(simplified), "zh-TW": _forms(traditional),
                     "lee": lee, "checked": checked == "yes", "avoid": _forms(avoid)})
    return rows


TERMS = read_glossary(GLOSSARY.read_text(encoding="utf-8"))


def _english_pattern(forms: list[str]) -> re.Pattern[str]:
    return re.compile(r"(?<![\w-])(?:" + "|".join(re.escape(f) for f in forms) + r")(?![\w-])", re.IGNORECASE)


def term_problems(entries: list[tuple[str, str, str]], language: str, terms: list[dict] = TERMS) -> list[str]:
    """(where, English, translation) entries that render a checked term otherwise, or use an avoided variant."""
    problems = []
    for where, english, translation in entries:
        prose = re.sub(r"(`+).+?\1|\{[^{}]*\}", " ", english, flags=re.S)  # code spans and placeholders are code
        for term in terms:
            if term["checked"] and _english_pattern(term["english"]).search(prose) and not any(
                    form in translation for form in term[language]):
                problems.append(f"{where}: {term['english'][0]!r} must be {' or '.join(term[language])}")
            for wrong in term["avoid"]:
                if wrong in translation:
                    problems.append(f"{where}: {wrong!r} is not the glossary's {term['english'][0]!r}")
    return problems


def _entries(language: str) -> list[tuple[str, str, str]]:
    found = [(f"package {m.id[:40]!r}", m.id, m.string) for m in cat.read(cat.package_catalog_path(language))
             if m.id and m.string]
    for path in sorted((cat.LESSON_LOCALE / cat.folder(language) / "lessons").glob("*.po")):
        found += [(f"{path.stem}, cell {m.context}", m.id, m.string) for m in cat.read(path) if m.id and m.string]
    return found


def test_the_glossary_is_read_whole():
    assert len(TERMS) >= 50 and sum(t["checked"] for t in TERMS) >= 40
    assert {"self-attention", "query", "key", "token", "row"} <= {t["english"][0] for t in TERMS}
    assert all(t["zh-CN"] and t["zh-TW"] for t in TERMS)


def test_the_traditional_column_is_what_the_derivation_writes():
    wrong = [(t["english"][0], t["zh-CN"], t["zh-TW"], [cat.to_traditional(f) for f in t["zh-CN"]]) for t in TERMS
             if [cat.to_traditional(f) for f in t["zh-CN"]] != t["zh-TW"]]
    assert not wrong, f"docs/glossary.md: the 繁體 column differs from the derivation of the 简体 one: {wrong}"


@pytest.mark.parametrize("language", cat.EDITIONS)
def test_each_term_is_rendered_the_same_way_throughout_the_edition(language):
    problems = term_problems(_entries(language), language)
    assert not problems, "\n".join(problems)


def test_the_term_rule_can_fail():
    terms = read_glossary("## Terms\n| English | a | b | c | d | e |\n|---|---|---|---|---|---|\n"
                          "| key / keys | 键 | 鍵 | K | yes | 钥匙 |\n")
    ok = [("c1", "the keys are matched", "键与查询相匹配")]
    missing = [("c2", "each key gets one column", "每个钥匙一列")]
    assert term_problems(ok, "zh-CN", terms) == []
    assert term_problems(missing, "zh-CN", terms) == ["c2: 'key' must be 键", "c2: '钥匙' is not the glossary's 'key'"]
    assert term_problems([("c3", "a monkey", "猴子")], "zh-CN", terms) == []  # whole words only
    assert term_problems([("c4", "see `keys` and {key}", "见")], "zh-CN", terms) == []  # code is not prose
