"""The package's messages in the learner's language: set_language, msg(), the catalogs read at run time."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from babel.messages.catalog import Catalog
from babel.messages.pofile import read_po, write_po

import attention_lab
from attention_lab import i18n
from attention_lab.i18n import Message, msg

PACKAGE = Path(attention_lab.__file__).parent


@pytest.fixture(autouse=True)
def _english_afterwards():
    yield
    i18n.set_language("en")


def _catalog_string(language: str, english: str) -> str:
    with i18n.catalog_path(language).open("rb") as handle:
        return read_po(handle)[english].string


def test_set_language_takes_the_three_codes_and_names_them_when_refusing():
    assert i18n.language() == "en"
    for code in ("zh-CN", "zh-TW", "en"):
        attention_lab.set_language(code)
        assert i18n.language() == code
    for bad in ("zh", "zh_CN", "fr", None, 1):
        with pytest.raises(ValueError, match=r"set_language\(\): code must be one of 'en', 'zh-CN', 'zh-TW'"):
            i18n.set_language(bad)
    assert attention_lab.set_language is i18n.set_language and "set_language" in attention_lab.__all__


def test_a_message_is_rendered_in_the_language_current_when_it_is_shown():
    stub = msg("YOUR CODE HERE")
    assert str(stub) == "YOUR CODE HERE"
    i18n.set_language("zh-CN")
    assert str(stub) == _catalog_string("zh-CN", "YOUR CODE HERE") != "YOUR CODE HERE"
    i18n.set_language("zh-TW")
    assert f"{stub}" == _catalog_string("zh-TW", "YOUR CODE HERE") != _catalog_string("zh-CN", "YOUR CODE HERE")
    assert stub.render("en") == "YOUR CODE HERE" and i18n.language() == "zh-TW"  # render() changes nothing


def test_values_fill_the_placeholders_with_their_format_specs_and_nested_messages_follow_the_language():
    english = ("column {key} ({token!r}) is brightest in row {best}: {best_token!r} gives {token!r} a weight of "
               "{weight:.2f}")
    values = {"key": 1, "token": "cat", "best": 4, "best_token": "mouse", "weight": 0.71828}
    message = msg(english, **values)
    assert str(message) == "column 1 ('cat') is brightest in row 4: 'mouse' gives 'cat' a weight of 0.72"
    i18n.set_language("zh-CN")
    assert str(message) == _catalog_string("zh-CN", english).format(**values)
    assert "0.72" in str(message) and "'mouse'" in str(message)
    outer = msg("{what} should be a whole number", what=msg("each entry of the shape"))
    assert str(outer).startswith(_catalog_string("zh-CN", "each entry of the shape"))  # outer has no entry yet
    assert outer.render("en") == "each entry of the shape should be a whole number"


def test_a_template_without_an_entry_falls_back_to_english():
    i18n.set_language("zh-CN")
    assert str(msg("no such message {n}", n=3)) == "no such message 3"


def _with_catalog(monkeypatch, tmp_path, entries):
    """Point the zh-CN catalog at a temporary one holding ``entries`` (english, translation, flags)."""
    catalog = Catalog(locale="zh_CN")
    for english, translation, flags in entries:
        catalog.add(english, translation, flags=flags)
    path = tmp_path / "zh_CN" / "LC_MESSAGES" / "attention_lab.po"
    path.parent.mkdir(parents=True)
    with path.open("wb") as handle:
        write_po(handle, catalog)
    monkeypatch.setattr(i18n, "LOCALE_DIR", tmp_path)  # a catalog of another folder is read afresh
    return path


def test_fuzzy_and_broken_translations_show_the_english(monkeypatch, tmp_path):
    _with_catalog(monkeypatch, tmp_path, [("ok {n}", "好 {n}", ()), ("stale", "旧的", ("fuzzy",)),
                                          ("broken {n}", "坏 {count}", ())])
    i18n.set_language("zh-CN")
    assert str(msg("ok {n}", n=1)) == "好 1"
    assert str(msg("stale")) == "stale"  # fuzzy: the English changed, the translation is not trusted
    assert str(msg("broken {n}", n=2)) == "broken 2"  # a placeholder the English lacks: English, no KeyError


def test_a_chinese_value_loses_the_spaces_its_template_keeps_for_code_and_numbers(monkeypatch, tmp_path):
    _with_catalog(monkeypatch, tmp_path, [("{name} grows as n^{p}", "{name} 按 n^{p} 增长", ()),
                                          ("the loop", "循环", ()), ("sparse (sliding)", "sparse（滑动）", ())])
    i18n.set_language("zh-CN")
    assert str(msg("{name} grows as n^{p}", name="F.softmax", p=2)) == "F.softmax 按 n^2 增长"
    assert str(msg("{name} grows as n^{p}", name=msg("the loop"), p=2)) == "循环按 n^2 增长"
    assert str(msg("{name} grows as n^{p}", name=msg("sparse (sliding)"), p=2)) == "sparse（滑动）按 n^2 增长"
    assert msg("{name} grows as n^{p}", name=msg("the loop"), p=2).render("en") == "the loop grows as n^2"


def test_a_chinese_value_meets_chinese_text_without_a_space(monkeypatch, tmp_path):
    _with_catalog(monkeypatch, tmp_path, [("{what} is wrong", "{what} 不对", ()), ("your output", "你的输出", ()),
                                          ("for {where}: {hint}", "对于 {where}：{hint}", ())])
    i18n.set_language("zh-CN")
    assert str(msg("{what} is wrong", what=msg("your output"))) == "你的输出不对"  # not 你的输出 不对
    assert str(msg("{what} is wrong", what="scores")) == "scores 不对"  # a space between Chinese and Latin stays
    assert str(msg("for {where}: {hint}", where="长度 3", hint="x")) == "对于长度 3：x"
    assert msg("{what} is wrong", what="a b").render("en") == "a b is wrong"


def test_msg_takes_only_a_string_and_a_message_compares_by_content():
    with pytest.raises(TypeError, match="msg\\(\\): template must be a string literal"):
        msg(3)
    assert msg("a {x}", x=1) == msg("a {x}", x=1) != msg("a {x}", x=2)
    assert repr(msg("a {x}", x=1)) == "msg('a {x}', x=1)"
    assert isinstance(msg("a"), Message)


def _msg_calls(path: Path):
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "msg":
            yield node


def test_every_msg_template_in_the_package_is_a_plain_literal():
    """Extraction reads string literals only: an f-string, a variable or a concatenation with + would be missed."""
    calls = [(path, call) for path in sorted(PACKAGE.rglob("*.py")) if path.name != "i18n.py"
             for call in _msg_calls(path)]
    assert len(calls) >= 20, "the package's messages are expected to use msg()"
    bad = [f"{path.relative_to(PACKAGE)}:{call.lineno}" for path, call in calls
           if not (call.args and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str))
           or len(call.args) != 1]
    assert not bad, f"msg() needs one string literal (no f-string, no variable), then keyword values: {bad}"


def test_the_literal_rule_can_fail(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text('name = "x"\nmsg(f"hi {name}")\nmsg("ok {n}", n=1)\n', encoding="utf-8")
    calls = list(_msg_calls(sample))
    assert [isinstance(c.args[0], ast.Constant) for c in calls] == [False, True]
