"""Chinese text in the library's figures draws without missing-glyph warnings, per figure, nothing global changed."""

from __future__ import annotations

import io
import warnings

import matplotlib
import pytest
import torch
from matplotlib.figure import Figure as MatplotlibFigure

from attention_lab import plotting
from attention_lab.plotting import _fonts

pytestmark = pytest.mark.skipif(not _fonts.cjk_font_families(), reason=(
    "no CJK font on this machine (Debian: apt-get install fonts-noto-cjk or fonts-wqy-zenhei; .ci/run installs one)"))

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
    ticks = fig.axes[0].get_xticklabels()
    assert _fonts.cjk_font_families()[0] in ticks[0].get_fontfamily()


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
    families = _fonts.cjk_font_families("zh-TW")
    assert families and families[0] in _fonts._TRADITIONAL + _fonts._SIMPLIFIED + _fonts._ANY
