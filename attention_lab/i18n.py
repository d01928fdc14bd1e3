"""Messages in the learner's language: English (the source), 简体中文 (``zh-CN``) and 繁體中文 (``zh-TW``).

    import attention_lab as al
    from attention_lab.i18n import msg
    hint = msg("an index counts tokens from 0 to {last}, got {index}", last=4, index=7)
    print(hint)                   # an index counts tokens from 0 to 4, got 7
    al.set_language("zh-CN")      # what the first code cell of a Chinese edition adds
    print(hint)                   # 词元的索引从 0 数到 4，你给的是 7

``msg(template, **values)`` makes a lazy :class:`Message`; ``str()`` looks the template up in the current language's
catalog, falls back to English where an entry is missing (or still marked fuzzy), then fills the ``{name}``
placeholders with ``str.format``. A value that is itself a ``Message`` is rendered in the same language. Chinese text
has no space between two Chinese characters (or full-width punctuation): a Chinese template keeps a space on each side
of a placeholder (its value may be a number or code), and where the value is Chinese at that edge (a translated
``Message``) the space goes. Templates
are plain string literals (adjacent literals may be concatenated), never f-strings: ``tools/editions.py update``
extracts them with Babel (keyword ``msg``) into ``attention_lab/locale/attention_lab.pot``, and the tests fail when
that template or a catalog falls behind the source.

Catalogs: ``attention_lab/locale/<zh_CN|zh_TW>/LC_MESSAGES/attention_lab.po`` (gettext, read with Babel's
``pofile`` on first use). zh_TW is generated from zh_CN (OpenCC ``s2twp`` plus the reviewed table
``locale/zh_TW_exceptions.tsv``); translators edit zh_CN only. This module imports nothing of the package but
``_validation``, so every part of it may use it.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from ._validation import check_choice

__all__ = ["LANGUAGES", "Message", "catalog_path", "language", "msg", "set_language", "translate"]

LANGUAGES = ("en", "zh-CN", "zh-TW")
DOMAIN = "attention_lab"
LOCALE_DIR = Path(__file__).resolve().parent / "locale"

_state = {"language": "en"}
_CHINESE = "\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef"  # ideographs, CJK and full-width punctuation
_SPACE_IN_CHINESE = re.compile(f"(?<=[{_CHINESE}]) (?=[{_CHINESE}])")


def set_language(code: str) -> None:
    """Choose the language of the package's messages: ``"en"``, ``"zh-CN"`` or ``"zh-TW"``.

    Shape: no tensors. The Chinese editions of the lessons call it in their first code cell.
    """
    _state["language"] = _checked("set_language", code)


def language() -> str:
    """The language messages are rendered in now (``"en"`` until :func:`set_language` is called)."""
    return _state["language"]


def _checked(fn: str, code: object) -> str:
    return check_choice(fn, "code", code, LANGUAGES,
                        hint='pick "en" (English), "zh-CN" (简体中文) or "zh-TW" (繁體中文)')


def catalog_path(code: str) -> Path:
    """Where the package catalog of a language lives (``zh-CN`` -> ``locale/zh_CN/LC_MESSAGES/attention_lab.po``)."""
    return LOCALE_DIR / code.replace("-", "_") / "LC_MESSAGES" / f"{DOMAIN}.po"


@functools.cache
def _translations(catalog: Path) -> dict[str, str]:
    """msgid -> msgstr of one catalog, without untranslated or fuzzy entries (those fall back to English); kept per
    path, so a catalog read from another folder (LOCALE_DIR changed) is read afresh."""
    from babel.messages.pofile import read_po  # Babel comes with JupyterLab; imported only for a translation

    with catalog.open("rb") as handle:
        entries = read_po(handle)
    return {m.id: m.string for m in entries if m.id and isinstance(m.id, str) and m.string and not m.fuzzy}


def translate(template: str, code: str | None = None) -> str:
    """The template of ``code`` (default: the current language) for an English ``template``; English if missing."""
    code = language() if code is None else _checked("translate", code)
    if code == "en":
        return template
    return _translations(catalog_path(code)).get(template, template)


class Message:
    """A message rendered in the current language when it is turned into text (``str``, ``print``, an f-string).

    Shape: no tensors.
    """

    __slots__ = ("template", "values")

    def __init__(self, template: str, values: dict[str, object]) -> None:
        self.template = template
        self.values = values

    def render(self, code: str | None = None) -> str:
        """The text in language ``code`` (default: the current one); nested messages use the same language."""
        code = language() if code is None else _checked("Message.render", code)
        values = {name: value.render(code) if isinstance(value, Message) else value
                  for name, value in self.values.items()}
        translated = translate(self.template, code)
        try:
            text = translated.format(**values)
        except (KeyError, IndexError, ValueError):  # a broken translation (the tests forbid it) shows the English
            return self.template.format(**values)
        # a template spaces its placeholders off Chinese text (第 {n} 课, {name} 的); a value that is itself Chinese
        # (a nested message) leaves a space between two Chinese characters, which Chinese text never has
        return text if code == "en" else _SPACE_IN_CHINESE.sub("", text)

    def __str__(self) -> str:
        return self.render()

    def __format__(self, spec: str) -> str:
        return format(self.render(), spec)

    def __repr__(self) -> str:
        return f"msg({self.template!r}{''.join(f', {k}={v!r}' for k, v in self.values.items())})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Message):
            return NotImplemented
        return (self.template, self.values) == (other.template, other.values)

    __hash__ = None  # type: ignore[assignment]  # values may be unhashable (tensors, lists)


def msg(template: str, /, **values: object) -> Message:
    """A message to show the learner: ``template`` is an English string literal with ``{name}`` placeholders
    (format specs such as ``{x:.2f}`` allowed), ``values`` fill them when the message is rendered.

    Shape: no tensors (pass numbers and strings; format them in the template).
    """
    if not isinstance(template, str):
        raise TypeError(f"msg(): template must be a string literal, got {type(template).__name__}")
    return Message(template, values)
