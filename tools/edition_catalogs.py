"""The gettext catalogs of the Chinese editions: where they live, how they are read, merged, derived and checked.

Read and written with Babel (``babel.messages``); zh-TW derived from zh-CN with OpenCC (``s2twp``) and the reviewed
table ``locale/zh_TW_exceptions.tsv``. Used by ``tools/editions.py`` and by the tests.
"""

from __future__ import annotations

import datetime
import difflib
import functools
import re
import string
from collections.abc import Iterable
from pathlib import Path

from babel.messages.catalog import Catalog, Message
from babel.messages.extract import extract_from_dir
from babel.messages.pofile import read_po, write_po

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "attention_lab"
PACKAGE_TEMPLATE = PACKAGE / "locale" / "attention_lab.pot"
LESSON_LOCALE = ROOT / "locale"
EXCEPTIONS = LESSON_LOCALE / "zh_TW_exceptions.tsv"
SOURCE, DERIVED = "zh-CN", "zh-TW"
EDITIONS = (SOURCE, DERIVED)
# A fixed creation date keeps the template and the generated files byte-for-byte reproducible.
CREATION_DATE = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)


def folder(language: str) -> str:
    return language.replace("-", "_")


def package_catalog_path(language: str) -> Path:
    return PACKAGE / "locale" / folder(language) / "LC_MESSAGES" / "attention_lab.po"


def lesson_catalog_path(language: str, lesson_stem: str) -> Path:
    return LESSON_LOCALE / folder(language) / "lessons" / f"{lesson_stem}.po"


def read(path: Path) -> Catalog:
    with path.open("rb") as handle:
        return read_po(handle, abort_invalid=True)


def write(catalog: Catalog, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as handle:
        write_po(handle, catalog, width=100, include_lineno=False)


def new_catalog(language: str | None, title: str) -> Catalog:
    catalog = Catalog(locale=folder(language) if language else None, project="attention-lab", version="0.1",
                      copyright_holder="the attention-lab authors", charset="utf-8", fuzzy=False,
                      creation_date=CREATION_DATE, revision_date=CREATION_DATE,
                      header_comment=f"# {title}\n#")
    return catalog


# ---- the package's messages ----

def package_template() -> Catalog:
    """Every ``msg("...")`` template of the package, extracted with Babel, in source order."""
    template = new_catalog(None, "Messages of the attention_lab package (extracted by tools/editions.py update).")
    found = extract_from_dir(str(PACKAGE), method_map=[("**.py", "python")], keywords={"msg": None},
                             comment_tags=("TRANSLATORS:",), strip_comment_tags=True)
    for filename, _line, message, comments, context in found:
        location = (f"attention_lab/{Path(filename).as_posix()}", None)
        if message in template:
            template[message].locations.append(location)
            continue
        template.add(message, None, [location], auto_comments=comments, context=context)
    return template


def entries(catalog: Catalog) -> list[tuple[str | None, str, str, bool]]:
    """What a catalog says, for comparisons: (context, English, translation, fuzzy) of each live entry."""
    return [(m.context, m.id, m.string, m.fuzzy) for m in catalog if m.id]


def template_entries(catalog: Catalog) -> list[tuple[str | None, str, tuple]]:
    return [(m.context, m.id, tuple(sorted({loc for loc, _ in m.locations}))) for m in catalog if m.id]


_CHANGED = "English changed: "


def changes(old: str, new: str) -> list[str]:
    """What changed between two versions of an English text, word by word, for the translator's comments."""
    a, b = old.split(), new.split()
    found = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op != "equal":
            found.append(f"{_CHANGED}was {' '.join(a[i1:i2])!r}, now {' '.join(b[j1:j2])!r}")
    return found[:12]


def merge(catalog: Catalog, template: Iterable[Message]) -> tuple[Catalog, dict[str, int]]:
    """``catalog`` brought in line with ``template``: entries the template has and the catalog lacks are added
    untranslated; an entry whose English changed keeps its old translation, marked fuzzy, with what changed in
    ``#.`` comments (matched within the same cell, or by similarity for the package's messages; Babel cannot read
    a multi-line ``#| msgid`` back); entries no longer in the template become obsolete (``#~``). Returns the new
    catalog and counts of what happened."""
    old = {(m.context, m.id): m for m in catalog if m.id}
    used: set[tuple[str | None, str]] = set()
    merged = new_catalog(None, "")
    merged.locale = catalog.locale_identifier
    merged.header_comment = catalog.header_comment
    merged.revision_date = catalog.revision_date
    merged.last_translator, merged.language_team = catalog.last_translator, catalog.language_team
    counts = {"kept": 0, "new": 0, "fuzzy": 0, "obsolete": 0}
    template = [m for m in template if m.id]
    exact = {(m.context, m.id) for m in template}
    for message in template:
        key = (message.context, message.id)
        entry = Message(message.id, "", locations=list(message.locations), context=message.context,
                        auto_comments=list(message.auto_comments))
        if key in old:
            previous = old[key]
            entry.string, entry.flags = previous.string, set(previous.flags) - {"python-format"}
            entry.user_comments = list(previous.user_comments)
            if previous.fuzzy:  # still to review: keep the note of what changed
                entry.auto_comments += [c for c in previous.auto_comments if c.startswith(_CHANGED)]
            counts["kept"] += 1
        else:
            candidates = [k for k in old if k not in used and k not in exact and old[k].string
                          and (k[0] == message.context if message.context else True)]
            close = difflib.get_close_matches(message.id, [k[1] for k in candidates], 1,
                                              0.0 if message.context else 0.6)
            if close:
                match = next(k for k in candidates if k[1] == close[0])
                used.add(match)
                entry.string, entry.flags = old[match].string, {"fuzzy"}
                entry.auto_comments += changes(old[match].id, message.id)
                entry.user_comments = list(old[match].user_comments)
                counts["fuzzy"] += 1
            else:
                counts["new"] += 1
        used.add(key)
        merged[message.id] = entry  # keyed by (English, cell id) when the entry has a context
    live = {(m.context, m.id) for m in merged if m.id}
    for key, message in [*old.items(), *(((m.context, m.id), m) for m in catalog.obsolete.values())]:
        if key not in used and key not in live:
            merged.obsolete[merged._key_for(message.id, message.context)] = message
            counts["obsolete"] += key in old
    return merged, counts


# ---- zh-TW from zh-CN ----

@functools.cache
def _opencc():
    import opencc  # a test tool (requirements-dev.txt): only deriving zh-TW needs it

    return opencc.OpenCC("s2twp")


def exception_table(path: Path = EXCEPTIONS) -> list[tuple[str, str, str]]:
    """(OpenCC's output, the Taiwanese technical term, why) from the reviewed table, longest first."""
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) != 3 or not all(f.strip() for f in fields):
            raise ValueError(f"{path.name}, line {number}: expected 3 tab-separated fields (OpenCC output, "
                             f"Taiwanese term, reason), got {line!r}")
        rows.append(tuple(f.strip() for f in fields))
    return sorted(rows, key=lambda row: -len(row[0]))


def _table_pattern(rows: list[tuple[str, str, str]]) -> re.Pattern[str]:
    return re.compile("|".join(re.escape(source) for source, _, _ in rows))  # longest first: rows are sorted


def to_traditional(text: str, table: list[tuple[str, str, str]] | None = None) -> str:
    """zh-CN text in Taiwanese Traditional Chinese: OpenCC ``s2twp``, then the exception table (one pass, longest
    match first, so a row that maps a word to itself protects it from the shorter rows)."""
    converted = _opencc().convert(text)
    rows = exception_table() if table is None else table
    if not rows:
        return converted
    replacement = {source: target for source, target, _ in rows}
    return _table_pattern(rows).sub(lambda m: replacement[m[0]], converted)


# 行 and 列 swap between the scripts' conventions: in mainland writing 行 is a row and 列 a column, in Taiwan 列 is
# a row and 行 a column. The table swaps every 行 and 列 that no longer row claims (執行, 序列, ...). So that no other
# sense is swapped unseen, a swapped character must stand next to a word that marks rows and columns.
_ROW_COLUMN = "行列"
_BEFORE = set("一每第這那各同幾按佔沿兩和或(（、*`}") | set("0123456789")
_AFTER = set("和或數向、,，)）*")


def unclassified_rows_columns(text: str, table: list[tuple[str, str, str]] | None = None) -> list[str]:
    """Places in zh-CN ``text`` where a 行 or 列 is swapped for zh-TW without a neighbour that marks a row or a
    column: each is another sense of the character (add the word to the exception table, mapped to itself) or a
    row or column the sentence should make plain (第 i 行, 每一列, 行和列)."""
    converted = _opencc().convert(text)
    rows = exception_table() if table is None else table
    covered = set()
    for match in _table_pattern(rows).finditer(converted):
        if len(match[0]) > 1:
            covered.update(range(match.start(), match.end()))
    found = []
    for index, char in enumerate(converted):
        if char not in _ROW_COLUMN or index in covered:
            continue
        before = converted[:index].rstrip(" ")[-1:]
        after = converted[index + 1:].lstrip(" ")[:1]
        if not ((before in _BEFORE or (before.isascii() and before.isalnum())) or after in _AFTER):
            found.append(converted[max(0, index - 4):index + 5].replace("\n", " "))
    return found


def derive(catalog: Catalog) -> Catalog:
    """The zh-TW catalog of a zh-CN one: every translation converted, everything else (flags, comments) kept."""
    title = catalog.header_comment.splitlines()[0].lstrip("# ") if catalog.header_comment else ""
    derived = new_catalog(DERIVED, title)
    derived.header_comment = (catalog.header_comment or "") + (
        "\n# GENERATED from the zh_CN catalog by tools/editions.py (OpenCC s2twp + locale/zh_TW_exceptions.tsv);"
        "\n# do not edit: translate in zh_CN, then run python tools/editions.py update.\n#")
    derived.revision_date = catalog.revision_date
    for message in catalog:
        if not message.id:
            continue
        copy_ = Message(message.id, to_traditional(message.string) if message.string else "",
                        locations=list(message.locations), flags=set(message.flags),
                        auto_comments=list(message.auto_comments), user_comments=list(message.user_comments),
                        context=message.context)
        derived[message.id] = copy_
    return derived


# ---- what a translation must keep ----

def placeholders(text: str) -> list[str]:
    """The ``{name!conversion:spec}`` fields of a ``str.format`` template, sorted (``{{`` is not a field)."""
    fields = []
    for _literal, name, spec, conversion in string.Formatter().parse(text):
        if name is not None:
            fields.append("{" + name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "") + "}")
    return sorted(fields)


_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
_MATH = re.compile(r"\$\$.+?\$\$|\$[^$\n]+\$", re.S)
_LINK_TARGET = re.compile(r"\]\(([^)\s]+)\)")
_INDEX = r"(?:\^(?:\{[^}]*\}|[\w·]+)|_(?:\{[^}]*\}|[a-z0-9·](?![\w])))"  # ^q, ^{...}, _{i,j}, _j
_NOTATION = re.compile(rf"(?<![\w^])[A-Za-zα-ωΑ-ΩΣ]'?{_INDEX}+")
_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.]*[A-Za-z])")


def protected_fragments(english: str) -> list[str]:
    """What a translation must contain unchanged: code spans, math, link targets, Lee's notation (a^i,
    α'_{i,j}, W^q), numbers and the solution delimiters."""
    found = [m[0] for m in _CODE_SPAN.finditer(english)]
    rest = _CODE_SPAN.sub(" ", english)
    found += _MATH.findall(rest) + [f"]({t})" for t in _LINK_TARGET.findall(rest)]
    rest = _MATH.sub(" ", rest)
    found += _NOTATION.findall(rest) + _NUMBER.findall(_LINK_TARGET.sub(" ", rest))
    found += [line.strip() for line in english.split("\n") if line.strip() in ("### BEGIN SOLUTION",
                                                                               "### END SOLUTION")]
    return sorted(set(found))
