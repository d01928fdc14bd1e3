"""Every lesson is committed the way nbval and learners need it: executed top to bottom, no stray errors or
warnings, kernel python3, figures stored as images, exercises in the nbgrader markup, small files."""

import json
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))  # lesson_stats, the reading-time counter

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))
MAX_BYTES = 1_000_000


def load(path):
    return json.loads(path.read_text(encoding="utf-8"))


def code_cells(nb):
    return [c for c in nb["cells"] if c["cell_type"] == "code"]


def test_lessons_are_numbered_in_order():
    names = [p.name for p in NOTEBOOKS]
    assert names, "no notebooks found"
    numbers = [int(re.match(r"(\d\d)_[a-z0-9_]+\.ipynb$", n).group(1)) for n in names]
    assert numbers == list(range(len(numbers))), f"lessons must be 00, 01, 02, ... without gaps: {names}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_executed_top_to_bottom(path):
    counts = [c["execution_count"] for c in code_cells(load(path)) if "".join(c["source"]).strip()]
    assert counts == list(range(1, len(counts) + 1)), f"{path.name}: re-run it top to bottom (make notebooks)"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_error_or_stderr_outside_tagged_cells(path):
    for index, cell in enumerate(code_cells(load(path))):
        tags = cell.get("metadata", {}).get("tags", [])
        for out in cell.get("outputs", []):
            if out["output_type"] == "error":
                assert "raises-exception" in tags, f"{path.name} code cell {index}: error {out['ename']}"
            if out.get("name") == "stderr":
                assert "nbval-ignore-output" in tags, f"{path.name} code cell {index} wrote to stderr"
        if "raises-exception" in tags:
            assert any(o["output_type"] == "error" for o in cell["outputs"]), (
                f"{path.name} code cell {index} is tagged raises-exception but raised nothing")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_kernel_size_and_volatile_text(path):
    nb = load(path)
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
    assert path.stat().st_size < MAX_BYTES, f"{path.name} is {path.stat().st_size:,d} bytes; shrink its figures"
    for cell in code_cells(nb):
        for out in cell.get("outputs", []):
            text = "".join(out.get("text", "")) + "".join(out.get("data", {}).get("text/plain", ""))
            assert not re.search(r" at 0x[0-9a-f]+", text), f"{path.name}: an object address in the output"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_figures_are_stored_as_images(path):
    for cell in code_cells(load(path)):
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if "".join(data.get("text/plain", "")).startswith("<Figure"):
                assert "image/png" in data, f"{path.name}: a figure was stored as text only"


# Lee's notation is plain text (α'_{i,j}, Σ_j, L_i). In Markdown (CommonMark: JupyterLab and the web book alike) an
# underscore after a prime or a bracket can open emphasis and one after a letter close it, so a formula turns into
# italics and loses its underscores. The lessons emphasise with * only, so any _-emphasis is a formula gone wrong:
# write it α'\_{i,j}.
ROOT = Path(__file__).parent.parent
EDITION_NOTEBOOKS = sorted((ROOT / "notebooks").glob("zh-*/*.ipynb"))
PAGES = sorted(ROOT.glob("*.md")) + sorted((ROOT / "docs").glob("*.md"))


def underscore_emphasis(markdown: str) -> list[str]:
    """The text that ``markdown`` would put in italics or bold because of an underscore (``_x_``, ``__x__``)."""
    from markdown_it import MarkdownIt

    found = []
    for token in MarkdownIt("commonmark").parse(markdown):
        children = token.children or []
        for at, child in enumerate(children):
            if child.type in ("em_open", "strong_open") and child.markup.startswith("_"):
                found.append("".join(c.content for c in children[at + 1:at + 4])[:60])
    return found


@pytest.mark.parametrize("path", NOTEBOOKS + EDITION_NOTEBOOKS + PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_formula_turns_into_italics(path):
    if path.suffix == ".md":
        sources = {path.name: path.read_text(encoding="utf-8")}
    else:
        sources = {c.get("id"): "".join(c["source"]) for c in load(path)["cells"] if c["cell_type"] == "markdown"}
    found = {where: italics for where, source in sources.items() if (italics := underscore_emphasis(source))}
    assert not found, (f"{path.name}: an underscore opens emphasis, so a formula shows in italics without its "
                       f"underscores (escape it: α'\\_{{i,j}}): {found}")


def test_an_underscore_that_opens_emphasis_is_found():
    assert underscore_emphasis("weights α'_{i,j} = exp(α_{i,j}) / Σ_j exp(α_{i,j})") == [
        "{i,j} = exp(α{i,j}) / Σ_j exp(α_{i,j})"]
    assert underscore_emphasis("weights α'\\_{i,j} = exp(α_{i,j}) / Σ_j exp(α_{i,j})") == []
    assert underscore_emphasis("L_i, Σ_j, `α'_{i,j}` and *emphasis*") == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_exercises_use_the_solution_markup(path):
    """At least three exercises; each solution region is closed and followed by a check cell."""
    cells = code_cells(load(path))
    answers = 0
    for index, cell in enumerate(cells):
        source = "".join(cell["source"])
        begins, ends = source.count("### BEGIN SOLUTION"), source.count("### END SOLUTION")
        assert begins == ends, f"{path.name} code cell {index}: unbalanced solution markers"
        if begins:
            answers += 1
            rest = "".join("".join(c["source"]) for c in cells[index:index + 2])
            assert "check." in rest or "checks." in rest, f"{path.name} code cell {index}: no check follows"
    assert answers >= 3, f"{path.name}: {answers} exercises; lessons have at least three"


# ---- what a lesson promises a learner: answers only in their answer cells, deep dives folded, honest reading
# times, and exercises. Each rule is a function that lists a lesson's problems, so that it can be tried on a
# small notebook made to break it (tests at the end). ----

_TRIVIAL_LINE = re.compile(r"^(pass|\.\.\.|return|[A-Za-z_]\w*)$")  # a bare name or keyword gives nothing away
_HEADING = re.compile(r"^#{1,6}\s+(.*)$")


def _norm(text):
    return " ".join(text.split())


def _text(cell_or_output):
    value = cell_or_output.get("source", cell_or_output.get("text", ""))
    return "".join(value) if isinstance(value, list) else value


def _without_comment(line):
    """The code of one line, without a trailing comment (a ``#`` inside a string stays)."""
    import io
    import tokenize

    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(line).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return line
    comments = [t for t in tokens if t.type == tokenize.COMMENT]
    return line[:comments[0].start[1]] if comments else line


def solution_lines(source):
    """The lines of a cell's solution regions that could give the answer away: not blank, not a comment, not an
    import, not trivial (``pass``, ``...``, a bare name)."""
    from attention_lab.teaching.solution_markup import solution_regions

    lines = []
    for region in solution_regions(source):
        for line in region:
            text = _norm(_without_comment(line.strip()))
            if (not text or text.startswith("#") or text.startswith(("import ", "from "))
                    or _TRIVIAL_LINE.match(text)):
                continue
            lines.append(text)
    return lines


def _shown_texts(cell):
    """Everything a learner sees of a cell: its source and its outputs (text, HTML, error messages)."""
    texts = [_text(cell)]
    for out in cell.get("outputs", []):
        texts.append(_text(out))
        for key in ("text/plain", "text/markdown", "text/html"):
            value = out.get("data", {}).get(key, "")
            texts.append("".join(value) if isinstance(value, list) else value)
        if out.get("output_type") == "error":
            texts += [out.get("evalue", ""), *out.get("traceback", [])]
    return [_norm(t) for t in texts if t]


def solution_leaks(nb):
    """Solution lines that appear in another cell of the same lesson (its source or its output)."""
    cells = nb["cells"]
    shown = [_shown_texts(cell) for cell in cells]
    leaks = []
    for index, cell in enumerate(cells):
        if cell["cell_type"] != "code":
            continue
        for line in solution_lines(_text(cell)):
            for other, texts in enumerate(shown):
                if other != index and any(line in text for text in texts):
                    leaks.append(f"cell {index}: solution line {line!r} also appears in cell {other}")
    return leaks


def deep_dive_problems(nb):
    """Deep-dive headings that JupyterLab would show open, in the lesson or in its student copy."""
    import nbformat

    from attention_lab.teaching.classroom import student_notebook

    problems = []
    student, _ = student_notebook(nbformat.reads(json.dumps(nb), as_version=4))
    for index, (cell, copy) in enumerate(zip(nb["cells"], student.cells)):
        first = _text(cell).lstrip().split("\n", 1)[0]
        heading = _HEADING.match(first) if cell["cell_type"] == "markdown" else None
        if heading and "deep dive" in heading[1].lower():
            if cell.get("metadata", {}).get("jp-MarkdownHeadingCollapsed") is not True:
                problems.append(f"cell {index}: deep dive {heading[1]!r} is not collapsed "
                                f"(metadata jp-MarkdownHeadingCollapsed: true)")
            elif copy.metadata.get("jp-MarkdownHeadingCollapsed") is not True:
                problems.append(f"cell {index}: the student copy drops the collapsed state of {heading[1]!r}")
    return problems


# A collapsed heading hides the cells below it in JupyterLab (and the web book folds them), not its own text: a
# deep dive's heading cell holds its heading and at most one summary line of SUMMARY_WORDS words, and the body
# goes in the cells below it (CONTRIBUTING, "Writing a deep dive"). Chinese is not written with spaces, so there a
# character counts as CJK_WORD of a word: over the lesson catalogs 23,994 English words became 39,475 Chinese
# characters (punctuation included) beside 6,192 untranslated tokens (code, numbers, names), 0.45 a character;
# 0.4 lets a translation run a little longer than its English.
SUMMARY_WORDS = 30
CJK_WORD = 0.4
_CJK = re.compile(r"[\u3000-\u303f\u3400-\u9fff\uff00-\uffef]")


def summary_words(text):
    """How many words ``text`` reads as: its space-separated words, plus CJK_WORD for each Chinese character."""
    return len(_CJK.sub(" ", text).split()) + CJK_WORD * len(_CJK.findall(text))


def collapsed_heading_problems(nb):
    """Collapsed heading cells that hold more than their heading and one short summary line."""
    problems = []
    for index, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "markdown" or not cell.get("metadata", {}).get("jp-MarkdownHeadingCollapsed"):
            continue
        where = f"cell {index} (id {cell.get('id')})"
        heading, _, rest = _text(cell).strip().partition("\n")
        if not _HEADING.match(heading):
            problems.append(f"{where} is marked collapsed but does not start with a heading")
            continue
        lines = [line for line in rest.splitlines() if line.strip()]
        words = summary_words(rest)
        if len(lines) > 1 or words > SUMMARY_WORDS:
            problems.append(f"{where}: the collapsed heading {heading!r} also holds {len(lines)} line(s) "
                            f"of {words:.0f} words, which stay visible when it is folded; keep at most one summary "
                            f"line of {SUMMARY_WORDS} words and move the rest into markdown cells below it")
    return problems


def reading_time_problems(path, limit=25):
    """The first cell's stated reading time must be the measured core minutes rounded up to the next 5, and at
    most ``limit``."""
    import math

    from lesson_stats import lesson_stats, stated_minutes

    measured = lesson_stats(path).minutes("core")
    expected = 5 * math.ceil(measured / 5)
    stated = stated_minutes(path)
    problems = []
    if stated != expected:
        problems.append(f"states {stated} minutes to read; the core path measures {measured:.1f} minutes, "
                        f"so it should state {expected}")
    if expected > limit:
        problems.append(f"core path of {measured:.1f} minutes is over {limit}; move detail into a deep dive")
    return problems


def exercise_count(nb):
    """Calls into the exercise checks, outside a cell that shows a failing check on purpose."""
    import nbformat

    from attention_lab.teaching.classroom import check_call_pattern

    pattern = check_call_pattern(nbformat.reads(json.dumps(nb), as_version=4))
    return sum(len(pattern.findall(_text(cell))) for cell in code_cells(nb)
               if "raises-exception" not in cell.get("metadata", {}).get("tags", []))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_solution_line_appears_outside_its_answer_cell(path):
    leaks = solution_leaks(load(path))
    assert not leaks, f"{path.name}: " + "; ".join(leaks)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_deep_dives_are_collapsed_also_in_student_copies(path):
    problems = deep_dive_problems(load(path))
    assert not problems, f"{path.name}: " + "; ".join(problems)


@pytest.mark.parametrize("path", NOTEBOOKS + EDITION_NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT)))
def test_collapsed_headings_hold_only_a_heading_and_a_summary(path):
    problems = collapsed_heading_problems(load(path))
    assert not problems, f"{path.relative_to(ROOT)}: " + "; ".join(problems)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_stated_reading_time_matches_the_core_path(path):
    problems = reading_time_problems(path)
    assert not problems, f"{path.name}: " + "; ".join(problems)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_at_least_two_exercises(path):
    assert exercise_count(load(path)) >= 2, f"{path.name}: fewer than two check calls"


# ---- the rules above can fail: a small notebook that breaks each one ----

def _synthetic(*, leak=False, open_deep_dive=False, minutes=5, words=300, checks=2):
    import nbformat

    v4 = nbformat.v4
    cells = [v4.new_markdown_cell(f"# 99 · synthetic\n\n**Time:** {minutes} minutes to read, 5 to do."),
             v4.new_markdown_cell(" ".join(["word"] * words)),
             v4.new_code_cell("from attention_lab.teaching.checks import lesson00 as check\nimport torch")]
    dive = v4.new_markdown_cell("## Deep dive: details\n\nMore.")
    if not open_deep_dive:
        dive.metadata["jp-MarkdownHeadingCollapsed"] = True
    cells.append(dive)
    cells.append(v4.new_markdown_cell("## Exercises"))
    cells.append(v4.new_code_cell("### BEGIN SOLUTION\nanswer = torch.ones(3).sum(dim=0)\nanswer\n"
                                  "### END SOLUTION"))
    for _ in range(checks):
        cells.append(v4.new_code_cell("check.weights_shape(answer, n_tokens=3)"))
    demo = v4.new_code_cell("check.weights_shape((1,), n_tokens=3)")
    demo.metadata["tags"] = ["raises-exception"]
    cells.append(demo)
    if leak:
        shown = v4.new_code_cell("print('ok')")
        shown.outputs = [v4.new_output("stream", name="stdout", text="answer = torch.ones(3).sum(dim=0)\n")]
        cells.append(shown)
    nb = v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return json.loads(nbformat.writes(nb))


def _write(tmp_path, nb):
    path = tmp_path / "99_synthetic.ipynb"
    path.write_text(json.dumps(nb), encoding="utf-8")
    return path


def test_the_rules_pass_a_lesson_that_keeps_them(tmp_path):
    nb = _synthetic()
    assert solution_leaks(nb) == [] and deep_dive_problems(nb) == [] and exercise_count(nb) == 2
    assert reading_time_problems(_write(tmp_path, nb)) == []  # 300 + 5 words, 2 code lines: 1.6 -> 5


def test_a_solution_line_in_an_output_or_another_cell_is_found(tmp_path):
    assert "also appears in cell" in solution_leaks(_synthetic(leak=True))[0]
    nb = _synthetic()
    nb["cells"][1]["source"] = "Hint: write `answer = torch.ones(3).sum(dim=0)` in the cell below."
    assert solution_leaks(nb)
    nb = _synthetic()
    nb["cells"][2]["source"] += "\nanswer\npass"  # trivial lines give nothing away
    assert solution_leaks(nb) == []


def test_an_open_deep_dive_or_one_the_student_copy_opens_is_found(monkeypatch):
    assert "is not collapsed" in deep_dive_problems(_synthetic(open_deep_dive=True))[0]
    from attention_lab.teaching import classroom

    monkeypatch.setattr(classroom, "KEPT_CELL_METADATA", ("tags",))
    assert "student copy drops" in deep_dive_problems(_synthetic())[0]


def test_a_collapsed_heading_that_holds_its_body_is_found():
    import nbformat

    def problems(source, collapsed=True):
        cell = nbformat.v4.new_markdown_cell(source, id="99-001")
        if collapsed:
            cell.metadata["jp-MarkdownHeadingCollapsed"] = True
        return collapsed_heading_problems(json.loads(nbformat.writes(nbformat.v4.new_notebook(cells=[cell]))))

    line = " ".join(["word"] * SUMMARY_WORDS)
    assert problems("## Deep dive: details") == []
    assert problems(f"## Deep dive: details\n\n{line}") == []
    assert problems(f"## Deep dive: details\n\n{line}\n\nMore.", collapsed=False) == []  # not folded: no rule
    assert "2 line(s)" in problems(f"## Deep dive: details\n\n{line[:20]}\n\nThe body.")[0]
    assert "2 line(s)" in problems(f"## Deep dive: details\n\n{line[:20]}\nwrapped onto a second line.")[0]
    assert "31 words" in problems(f"## Deep dive: details\n\n{line} more")[0]
    assert "does not start with a heading" in problems("A paragraph.")[0]
    chinese = "深入" * 37  # 74 characters: 29.6 words
    assert problems(f"## 深入探讨：细节\n\n{chinese}") == []
    assert "30 words" in problems(f"## 深入探讨：细节\n\n{chinese}内容")[0]  # 76 characters: 30.4 words
    assert summary_words("softmax 注意力（`attention`）") == 2 + 5 * CJK_WORD


def test_a_wrong_or_too_long_reading_time_is_found(tmp_path):
    assert "should state 5" in reading_time_problems(_write(tmp_path, _synthetic(minutes=10)))[0]
    assert "should state 5" in reading_time_problems(_write(tmp_path, _synthetic(minutes=1)))[0]
    too_long = reading_time_problems(_write(tmp_path, _synthetic(minutes=30, words=5200)))
    assert too_long == ["core path of 26.2 minutes is over 25; move detail into a deep dive"]


def test_a_lesson_with_one_exercise_is_found():
    assert exercise_count(_synthetic(checks=1)) == 1  # the raises-exception demonstration does not count


def test_lesson_stats_command_prints_one_row_per_lesson_and_a_usage(tmp_path, capsys):
    import lesson_stats

    path = _write(tmp_path, _synthetic())
    assert lesson_stats.main([str(path)]) == 0
    row = capsys.readouterr().out.splitlines()[-1].split()
    assert row[0] == path.name and row[1] == str(lesson_stats.lesson_stats(path).words["core"])
    with pytest.raises(SystemExit) as stopped:
        lesson_stats.main(["--help"])
    assert stopped.value.code == 0 and "LESSON.ipynb" in capsys.readouterr().out


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_teaching_guide_states_the_measured_reading_figures(path):
    """docs/teaching.md gives each lesson's words and code lines per part, and its stated and measured reading
    minutes, as lesson_stats measures them now."""
    import math

    from lesson_stats import lesson_stats, stated_minutes

    guide = (path.parent.parent / "docs" / "teaching.md").read_text(encoding="utf-8")
    number, stats = path.name[:2], lesson_stats(path)

    def part(name: str) -> str:
        if not stats.words[name] and not stats.code_lines[name]:
            return "none"
        return f"{stats.words[name]:,}, {stats.code_lines[name]} ({stats.minutes(name):.1f})"

    figures = (f"| {number} | {part('core')} | {part('deep_dive')} | "
               f"{stats.words['exercises']:,}, {stats.code_lines['exercises']} |")
    assert figures in guide, f"docs/teaching.md should have the row {figures!r}"
    lesson_map = re.search(rf"^\| {number} \| `{path.stem}` \|.*\| (\d+) / (\d+) \| \d+ / \d+ \|$", guide, re.M)
    assert lesson_map, f"docs/teaching.md: no lesson-map row for {path.stem}"
    assert (int(lesson_map[1]), int(lesson_map[2])) == (stated_minutes(path), math.ceil(stats.minutes("core")))
