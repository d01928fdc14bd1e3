"""Chinese text in the library's figures: a font fallback per figure, so that a Chinese title, label, legend or tick
label draws without missing glyphs (matplotlib warns about each on stderr, which fails nbval).

Every figure the library builds is this module's :class:`Figure`: matplotlib's own, whose ``draw`` first gives each
text that holds Chinese characters a family list ending in an installed CJK font (Noto Sans CJK, WenQuanYi Zen Hei,
Microsoft YaHei/JhengHei, PingFang, ...; the Traditional forms first for ``zh-TW``). Latin text keeps matplotlib's
default font, and nothing global changes: no ``rcParams``, no style. When matplotlib's font cache predates the
CJK font (a font installed after matplotlib's first import), the system's CJK font files are added to this
session's font list, once, instead of rebuilding the cache.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from matplotlib import font_manager
from matplotlib.figure import Figure as _MatplotlibFigure
from matplotlib.text import Text

from ..i18n import language

__all__ = ["Figure", "cjk_font_families", "use_cjk_fallback"]

CJK_TEXT = re.compile(r"[\u3000-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]")
_SIMPLIFIED = ("Noto Sans CJK SC", "Source Han Sans SC", "WenQuanYi Zen Hei", "WenQuanYi Micro Hei",
               "Microsoft YaHei", "PingFang SC", "Heiti SC", "Hiragino Sans GB", "SimHei")
_TRADITIONAL = ("Noto Sans CJK TC", "Source Han Sans TC", "Microsoft JhengHei", "PingFang TC", "Heiti TC",
                "Noto Sans CJK HK")
_ANY = ("Noto Sans CJK JP", "Arial Unicode MS")
_FONT_FILES = ("notosanscjk", "sourcehansans", "wqy-zenhei", "wqy-microhei", "msyh", "msjh", "simhei", "pingfang",
               "stheiti")


def _installed() -> set[str]:
    return {font.name for font in font_manager.fontManager.ttflist}


@functools.cache
def cjk_font_families(code: str = "zh-CN") -> tuple[str, ...]:
    """The CJK fonts to fall back on for ``code`` (the first installed one), or ``()`` when the machine has none."""
    order = (*_TRADITIONAL, *_SIMPLIFIED) if code == "zh-TW" else (*_SIMPLIFIED, *_TRADITIONAL)
    names = _installed()
    if not names & set(order + _ANY):  # matplotlib's cache may be older than the font: look at the files
        for path in font_manager.findSystemFonts():
            if any(key in Path(path).name.lower() for key in _FONT_FILES):
                try:
                    font_manager.fontManager.addfont(path)
                except (OSError, RuntimeError, ValueError):  # a font file matplotlib cannot read
                    continue
        names = _installed()
    return tuple(name for name in (*order, *_ANY) if name in names)[:1]


def use_cjk_fallback(fig: _MatplotlibFigure) -> None:
    """Give every text of ``fig`` that holds Chinese characters the CJK fallback font (its own family first)."""
    texts = list(fig.findobj(Text))
    for ax in fig.axes:
        texts += [*ax.xaxis.get_ticklabels(which="both"), *ax.yaxis.get_ticklabels(which="both")]
    chinese = [text for text in texts if CJK_TEXT.search(text.get_text())]
    if not chinese:
        return
    fallback = cjk_font_families(language())
    for text in chinese:
        family = list(text.get_fontfamily())
        if fallback and fallback[0] not in family:
            text.set_fontfamily([*family, *fallback])


class Figure(_MatplotlibFigure):
    """matplotlib's ``Figure``, whose Chinese text falls back on an installed CJK font when it is drawn.

    Shape: no tensors.
    """

    def draw(self, renderer):
        use_cjk_fallback(self)
        return super().draw(renderer)
