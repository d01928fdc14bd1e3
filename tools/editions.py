"""The Chinese editions of the lessons (简体 zh-CN, 繁體 zh-TW), built from the English lessons and gettext catalogs.

    python tools/editions.py update              # catalogs in line with the source (then translate in zh_CN)
    python tools/editions.py start 05            # a new, empty zh_CN catalog for a lesson (then translate it)
    python tools/editions.py status              # what is missing, stale or fuzzy, per catalog; exit 1 if anything
    python tools/editions.py build [00 ...]      # write and execute notebooks/zh-CN/ and notebooks/zh-TW/
    python tools/editions.py build --no-execute  # write the sources only (outputs come from the next execution)

``update`` extracts every ``msg("...")`` of the package into ``attention_lab/locale/attention_lab.pot``, merges it
into the package's zh_CN catalog, merges each lesson that has a catalog into ``locale/zh_CN/lessons/NN_topic.po``
(new text untranslated, changed text fuzzy with the old English as ``#| msgid``, removed text obsolete), and writes
every zh_TW catalog from its zh_CN one (OpenCC ``s2twp`` + ``locale/zh_TW_exceptions.tsv``). Translators edit zh_CN
catalogs only (a text editor, Poedit or Weblate), then run ``update`` and ``build``.

``build`` refuses a lesson whose catalog is stale, naming the cell and the English; a lesson without a catalog is
skipped (and said so). ``make editions`` runs ``update`` then ``build``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent))

import edition_catalogs as cat
import lesson_text

NOTEBOOKS = cat.ROOT / "notebooks"


def english_lessons() -> list[Path]:
    return sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))


def translated_lessons() -> list[Path]:
    """English lessons that have a zh-CN catalog: the ones with editions."""
    return [p for p in english_lessons() if cat.lesson_catalog_path(cat.SOURCE, p.stem).exists()]


def edition_path(lesson: Path, language: str) -> Path:
    return NOTEBOOKS / language / lesson.name


def resolve(names: list[str]) -> list[Path]:
    lessons = english_lessons()
    if not names:
        return lessons
    chosen = []
    for name in names:
        stem = Path(name).name.removesuffix(".ipynb")
        found = [p for p in lessons if p.stem == stem or p.stem.startswith(stem + "_")]
        if len(found) != 1:
            raise SystemExit(f"editions: {name!r} matches {len(found)} lessons in notebooks/; give a number like 00")
        chosen.append(found[0])
    return chosen


# ---- catalogs ----

def lesson_template(lesson: Path) -> list[cat.Message]:
    nb = nbformat.read(lesson, as_version=4)
    return [cat.Message(e.text, "", locations=[(f"notebooks/{lesson.name}", None)], context=e.context,
                        auto_comments=[f"{e.kind} of cell {e.context}"])
            for e in lesson_text.lesson_entries(nb, lesson.name)]


def package_translations(language: str) -> dict[str, str]:
    path = cat.package_catalog_path(language)
    if not path.exists():
        return {}
    return {m.id: m.string for m in cat.read(path) if m.id and m.string and not m.fuzzy}


def _say_counts(path: Path, counts: dict[str, int]) -> None:
    todo = counts["new"] + counts["fuzzy"]
    print(f"{path.relative_to(cat.ROOT)}: {counts['kept']} kept, {counts['new']} new, {counts['fuzzy']} fuzzy "
          f"(changed English), {counts['obsolete']} obsolete" + (f"; {todo} to translate" if todo else ""))


README_SOURCE, README_DERIVED = cat.ROOT / "README.zh-CN.md", cat.ROOT / "README.zh-TW.md"
_README_NOTE = "<!-- GENERATED from README.zh-CN.md by python tools/editions.py update; edit that file instead. -->\n"


def derived_readme() -> str:
    """README.zh-TW.md: the zh-CN README through the same derivation as the catalogs."""
    return _README_NOTE + cat.to_traditional(README_SOURCE.read_text(encoding="utf-8"))


def update() -> int:
    README_DERIVED.write_text(derived_readme(), encoding="utf-8")
    template = cat.package_template()
    cat.write(template, cat.PACKAGE_TEMPLATE)
    print(f"{cat.PACKAGE_TEMPLATE.relative_to(cat.ROOT)}: {len(template)} messages")
    source = cat.package_catalog_path(cat.SOURCE)
    catalog = cat.read(source) if source.exists() else cat.new_catalog(cat.SOURCE, "attention_lab messages, 简体中文")
    merged, counts = cat.merge(catalog, template)
    cat.write(merged, source)
    _say_counts(source, counts)
    cat.write(cat.derive(merged), cat.package_catalog_path(cat.DERIVED))
    return update_lessons()


def update_lessons() -> int:
    """Merge each lesson that has a zh_CN catalog into it, and derive its zh_TW catalog."""
    for lesson in translated_lessons():
        path = cat.lesson_catalog_path(cat.SOURCE, lesson.stem)
        merged, counts = cat.merge(cat.read(path), lesson_template(lesson))
        cat.write(merged, path)
        _say_counts(path, counts)
        cat.write(cat.derive(merged), cat.lesson_catalog_path(cat.DERIVED, lesson.stem))
    return 0


def start(names: list[str]) -> int:
    for lesson in resolve(names):
        path = cat.lesson_catalog_path(cat.SOURCE, lesson.stem)
        if path.exists():
            print(f"{path.relative_to(cat.ROOT)}: already there (update merges the English into it)")
            continue
        catalog = cat.new_catalog(cat.SOURCE, f"Lesson {lesson.stem}, 简体中文")
        merged, counts = cat.merge(catalog, lesson_template(lesson))
        cat.write(merged, path)
        cat.write(cat.derive(merged), cat.lesson_catalog_path(cat.DERIVED, lesson.stem))
        print(f"{path.relative_to(cat.ROOT)}: started, {counts['new']} entries to translate")
    return 0


def _fragment_problems(english: str, translation: str, package: dict[str, str]) -> list[str]:
    missing = []
    for fragment in cat.protected_fragments(english):
        expected = fragment
        inner = fragment.strip("`")
        if fragment.startswith("`") and inner in package:  # `Correct` quoting a package message
            expected = f"`{package[inner]}`"
        elif fragment.startswith("`") and inner.startswith("# ") and inner[2:] in package:  # `# YOUR CODE HERE`
            expected = f"`# {package[inner[2:]]}`"
        if expected not in translation:
            missing.append(expected)
    return missing


def _short(text: str) -> str:
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= 90 else flat[:87] + "...")


def lesson_problems(lesson: Path, language: str) -> list[str]:
    """Why the ``language`` catalog of a lesson does not match the English lesson (empty: it does)."""
    path = cat.lesson_catalog_path(language, lesson.stem)
    if not path.exists():
        return [f"{lesson.name}: no {language} catalog ({path.relative_to(cat.ROOT)}); run tools/editions.py update"]
    catalog = cat.read(path)
    problems = []
    if language == cat.DERIVED:
        source = cat.read(cat.lesson_catalog_path(cat.SOURCE, lesson.stem))
        if cat.entries(cat.derive(source)) != cat.entries(catalog):
            problems.append(f"{lesson.name}: {path.relative_to(cat.ROOT)} is not what the derivation from zh_CN "
                            f"writes; run python tools/editions.py update (never edit zh_TW catalogs)")
    live = {(m.context, m.id): m for m in catalog if m.id}
    by_cell: dict[str, list[str]] = {}
    for context, english in live:
        by_cell.setdefault(context, []).append(english)
    package = package_translations(language)
    wanted = lesson_text.lesson_entries(nbformat.read(lesson, as_version=4), lesson.name)
    for entry in wanted:
        where = f"{lesson.name}: cell {entry.context} ({entry.kind})"
        message = live.get((entry.context, entry.text))
        if message is None:
            if entry.context in by_cell:
                problems.append(f"{where}: the English changed and its translation did not (stale): now "
                                f"{_short(entry.text)}; run tools/editions.py update and translate it")
            else:
                problems.append(f"{where}: new English with no translation: {_short(entry.text)}")
        elif message.fuzzy:
            problems.append(f"{where}: translation marked fuzzy (the English changed): {_short(entry.text)}; "
                            f"check it against the English and remove the fuzzy flag")
        elif not message.string:
            problems.append(f"{where}: not translated yet: {_short(entry.text)}")
        else:
            missing = _fragment_problems(entry.text, message.string, package)
            if missing:
                problems.append(f"{where}: the translation must keep {missing} unchanged (code, math, links, "
                                f"numbers): {_short(entry.text)}")
    extra = set(live) - {(e.context, e.text) for e in wanted}
    for context, english in sorted(extra):
        problems.append(f"{lesson.name}: cell {context}: catalog entry no longer in the English lesson: "
                        f"{_short(english)}; run tools/editions.py update (it becomes obsolete)")
    return problems


def package_problems(language: str) -> list[str]:
    """Why the package's template or its ``language`` catalog is not in step with the source (empty: it is)."""
    template = cat.package_template()
    problems = []
    if not cat.PACKAGE_TEMPLATE.exists() or (cat.template_entries(cat.read(cat.PACKAGE_TEMPLATE))
                                             != cat.template_entries(template)):
        problems.append(f"{cat.PACKAGE_TEMPLATE.relative_to(cat.ROOT)} is out of date with the msg() calls of the "
                        f"package; run python tools/editions.py update")
    path = cat.package_catalog_path(language)
    if not path.exists():
        return [*problems, f"no {language} package catalog ({path.relative_to(cat.ROOT)}); run update"]
    catalog = cat.read(path)
    if language == cat.DERIVED and (cat.entries(cat.derive(cat.read(cat.package_catalog_path(cat.SOURCE))))
                                    != cat.entries(catalog)):
        problems.append(f"{path.relative_to(cat.ROOT)} is not what the derivation from zh_CN writes; run update")
    live = {m.id: m for m in catalog if m.id}
    for message in template:
        if not message.id:
            continue
        where = f"{path.relative_to(cat.ROOT)}: {_short(message.id)} ({message.locations[0][0]})"
        entry = live.get(message.id)
        if entry is None:
            problems.append(f"{where}: no entry; run update, then translate it")
        elif entry.fuzzy:
            problems.append(f"{where}: marked fuzzy (the English changed); check and remove the flag")
        elif not entry.string:
            problems.append(f"{where}: not translated yet")
        elif cat.placeholders(entry.string) != cat.placeholders(message.id):
            problems.append(f"{where}: the translation has the placeholders {cat.placeholders(entry.string)}, the "
                            f"English {cat.placeholders(message.id)}; use exactly the English ones")
    for english in sorted(set(live) - {m.id for m in template if m.id}):
        problems.append(f"{path.relative_to(cat.ROOT)}: {_short(english)} is no longer in the source; run update")
    return problems


def build_notebook(lesson: Path, language: str) -> nbformat.NotebookNode:
    """The edition's notebook, sources only (what ``build`` writes before executing it)."""
    translations = {(m.context, m.id): m.string for m in cat.read(cat.lesson_catalog_path(language, lesson.stem))
                    if m.id and m.string and not m.fuzzy}

    def lookup(context: str, english: str) -> str:
        return translations[(context, english)]

    nb = nbformat.read(lesson, as_version=4)
    return lesson_text.translated_notebook(nb, lookup, language=language, edition_dir=NOTEBOOKS / language,
                                           where=lesson.name)


def build(names: list[str], execute: bool) -> int:
    chosen = resolve(names)
    lessons = [p for p in chosen if p in translated_lessons()]
    for skipped in sorted(set(chosen) - set(lessons)):
        print(f"skipped {skipped.name}: no catalog yet (python tools/editions.py start {skipped.stem[:2]})")
    problems = [p for lesson in lessons for language in cat.EDITIONS for p in lesson_problems(lesson, language)]
    if problems:
        print("editions: not built, the catalogs are not in step with the English:\n  " + "\n  ".join(problems),
              file=sys.stderr)
        return 1
    if execute:
        from run_notebooks import execute as run
    for lesson in lessons:
        for language in cat.EDITIONS:
            target = edition_path(lesson, language)
            target.parent.mkdir(parents=True, exist_ok=True)
            nb = build_notebook(lesson, language)
            if execute:
                print(f"{target.relative_to(cat.ROOT)}: executed in {run(target, nb):.1f} s")
            else:
                nbformat.write(nb, target)
                print(f"{target.relative_to(cat.ROOT)}: written (not executed)")
    return 0


def status() -> int:
    bad = 0
    for language in cat.EDITIONS:
        for lesson in translated_lessons():
            problems = lesson_problems(lesson, language)
            total = len(lesson_text.lesson_entries(nbformat.read(lesson, as_version=4)))
            print(f"{language} {lesson.stem}: {total - len(problems)}/{total} entries in step")
            for problem in problems:
                print(f"  {problem}")
            bad += bool(problems)
    untranslated = [name for name in (p.stem for p in english_lessons())
                    if name not in {p.stem for p in translated_lessons()}]
    if untranslated:
        print(f"no catalog yet: {', '.join(untranslated)}")
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("update", help="bring every catalog in line with the source; derive zh_TW")
    commands.add_parser("status", help="what is missing, stale or fuzzy in each catalog")
    starting = commands.add_parser("start", help="start the zh_CN catalog of a lesson")
    starting.add_argument("lessons", nargs="+")
    building = commands.add_parser("build", help="write (and execute) the editions of lessons with catalogs")
    building.add_argument("lessons", nargs="*", help="numbers such as 00 (default: every lesson with a catalog)")
    building.add_argument("--no-execute", action="store_true", help="write the sources only")
    args = parser.parse_args(argv)
    if args.command == "update":
        return update()
    if args.command == "start":
        return start(args.lessons)
    if args.command == "status":
        return status()
    return build(args.lessons, execute=not args.no_execute)


if __name__ == "__main__":
    sys.exit(main())
