"""Chinese text in the library's figures draws without missing-glyph warnings, per figure, nothing global changed."""

from __future__ import annotations

import io
import warnings
from pathlib import Path

import matplotlib
import pytest
import torch
from matplotlib import font_manager
from matplotlib.figure import Figure as MatplotlibFigure

from attention_lab import i18n, plotting

# The CJK fonts a figure may fall back on (the plotting package's docstring names them), found here by their files,
# independently of the library; the Traditional ones come first for zh-TW.
CJK_FILES = ("notosanscjk", "sourcehansans", "wqy-zenhei", "wqy-microhei", "msyh", "msjh", "simhei", "pingfang",
             "stheiti")
CJK_NAMES = ("Noto Sans CJK", "Source Han Sans", "WenQuanYi", "Microsoft YaHei", "Microsoft JhengHei", "PingFang",
             "Heiti", "Hiragino Sans GB", "SimHei", "Arial Unicode MS")
TRADITIONAL = ("Noto Sans CJK TC", "Source Han Sans TC", "Microsoft JhengHei", "PingFang TC", "Heiti TC",
               "Noto Sans CJK HK")

pytestmark = pytest.mark.skipif(
    not any(key in Path(path).name.lower() for path in font_manager.findSystemFonts() for key in CJK_FILES),
    reason="no CJK font on this machine (Debian: apt-get install fonts-noto-cjk or fonts-wqy-zenhei; .ci/run installs "
           "one)")

TOKENS = ["猫", "追", "老鼠"]


def _draw(fig) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig.savefig(io.BytesIO(), format="png", bbox_inches="tight")  # what the inline backend does
    return [str(w.message) for w in caught]


def test_a_figure_with_chinese_labels_and_title_draws_without_missing_glyphs():
    weights = torch.softmax(torch.randn(3, 3), dim=-1)
    fig = plotting.plot_attention(weights, TOKENS, TOKENS, title="谁关注谁")
    assert _draw(fig) == []
    assert repr(fig).startswith("<Figure size ")  # the text nbval compares is matplotlib's own
    fallback = fig.axes[0].get_xticklabels()[0].get_fontfamily()[-1]  # the family a Chinese tick label falls back on
    assert fallback.startswith(CJK_NAMES), fallback


def test_without_the_fallback_the_same_text_warns():
    """The check above can fail: matplotlib's default font has no Chinese glyphs."""
    fig = MatplotlibFigure()
    fig.add_subplot().set_title("谁关注谁")
    assert any("missing from font" in message for message in _draw(fig))


def test_latin_text_keeps_its_font_and_no_global_setting_changes():
    before = dict(matplotlib.rcParams)
    fig = plotting.plot_attention(torch.eye(2), ["a", "b"], ["a", "b"], title="Who attends to whom")
    assert _draw(fig) == []
    assert fig.axes[0].title.get_fontfamily() == before["font.family"]
    fig_zh = plotting.plot_attention(torch.eye(2), ["甲", "乙"], ["甲", "乙"])
    assert _draw(fig_zh) == []
    assert dict(matplotlib.rcParams) == before


def test_traditional_fonts_come_first_for_zh_tw():
    i18n.set_language("zh-TW")
    try:
        fig = plotting.plot_attention(torch.eye(2), ["貓", "鼠"], ["貓", "鼠"], title="誰關注誰")
        assert _draw(fig) == []
    finally:
        i18n.set_language("en")
    fallback = fig.axes[0].title.get_fontfamily()[-1]
    installed = {font.name for font in font_manager.fontManager.ttflist}
    assert fallback in TRADITIONAL if installed & set(TRADITIONAL) else fallback.startswith(CJK_NAMES), fallback
