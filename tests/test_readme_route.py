"""The READMEs' first screen, the learner's route: each lesson's prerequisites and minutes, the core path's and the
whole course's time, all as docs/teaching.md's lesson map states them, so that neither can drift from the other."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORE = ("00", "01", "02", "03", "04", "05")


def lesson_map() -> dict[str, tuple[str, int, int]]:
    """docs/teaching.md's lesson map: lesson number -> (what it needs first, stated reading and exercise minutes)."""
    guide = (ROOT / "docs" / "teaching.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| (\d\d) \| `[^`]+` \| .* \| (.*?) \| (\d+) / \d+ \| (\d+) / \d+ \|$", guide, re.M)
    return {number: (needs, int(read), int(do)) for number, needs, read, do in rows}


def route_table(readme: str) -> dict[str, tuple[str, int]]:
    """The README's lesson table: lesson number -> (what it needs first, minutes)."""
    rows = re.findall(r"^\| (\d\d) \| `[^`]+` \| [^|]* \| ([^|]*) \| (\d+) \|", readme, re.M)
    return {number: (needs.strip(), int(minutes)) for number, needs, minutes in rows}


def total(numbers) -> tuple[int, int]:
    lessons = lesson_map()
    return sum(lessons[n][1] for n in numbers), sum(lessons[n][2] for n in numbers)


def hours(minutes: int) -> tuple[int, int]:
    return divmod(minutes, 60)


def test_the_lesson_map_covers_every_lesson():
    lessons = {path.name[:2] for path in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")}
    assert set(lesson_map()) == lessons


@pytest.mark.parametrize("readme", ["README.md", "README.zh-CN.md", "README.zh-TW.md"])
def test_each_lesson_row_gives_its_prerequisites_and_minutes(readme):
    table, lessons = route_table((ROOT / readme).read_text(encoding="utf-8")), lesson_map()
    assert set(table) == set(lessons), f"{readme}'s lesson table should list every lesson"
    for number, (needs, read, do) in lessons.items():
        shown_needs, minutes = table[number]
        assert minutes == read + do, f"{readme}, lesson {number}: {minutes} min, docs/teaching.md says {read + do}"
        if number != "00":  # lesson 00 needs Python and PyTorch, said in each language
            assert shown_needs == needs, f"{readme}, lesson {number} needs {needs}, not {shown_needs}"


def test_the_english_readme_states_the_core_and_whole_course_times():
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    for numbers, what in ((CORE, "lessons **00-05**: about"), (sorted(lesson_map()), "takes about")):
        read, do = total(numbers)
        h, m = hours(read + do)
        sentence = f"{what} **{h} h {m} min** ({read} min of reading, {do} min of exercises)"
        assert sentence in readme, f"README.md should say: {sentence}"


@pytest.mark.parametrize("readme", ["README.zh-CN.md", "README.zh-TW.md"])
def test_the_chinese_readmes_state_the_core_and_whole_course_times(readme):
    text = (ROOT / readme).read_text(encoding="utf-8")
    for numbers in (CORE, sorted(lesson_map())):
        read, do = total(numbers)
        h, m = hours(read + do)
        minutes = "分[钟鐘]"
        expected = re.compile(rf"\*\*{h} 小[时時] {m} {minutes}\*\*"
                              rf"（[阅閱][读讀] {read} {minutes}，[练練][习習] {do} {minutes}）")
        assert expected.search(text), f"{readme} should state {h} h {m} min ({read} + {do})"


def test_the_first_screen_comes_before_the_contributors_command():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert readme.index("**Your route.**") < readme.index("| 11 |") < readme.index("make lab") < readme.index(
        "make test"), "the learner's route and make lab come before make test"
    assert "youtube.com/watch?v=hYdO9CscNes" in readme, "the first screen links the lecture's recording"
