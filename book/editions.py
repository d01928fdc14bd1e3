"""The editions of the course that exist in a checkout, and the few words the book adds to each of them.

An edition is a language of the lessons: English in ``notebooks/NN_topic.ipynb`` (the source), every other one in
``notebooks/<tag>/NN_topic.ipynb`` with the same file names (``zh-CN``, ``zh-TW``), and its README beside the
English one (``README.<tag>.md``). A doc of ``docs/`` has an edition where ``docs/<name>.<tag>.md`` exists; else the
edition shows the English doc and says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

SOURCE_TAG = "en"
LESSON_NAME = re.compile(r"^\d\d_[A-Za-z0-9_]+\.ipynb$")
EDITION_TAG = re.compile(r"^[a-z]{2,3}(-[A-Za-z0-9]{2,8})*$")  # a BCP 47 language tag: zh-CN, zh-TW, ja, pt-BR

# Sphinx's name of each language (its own words, search and dates), where it differs from the tag
SPHINX_LANGUAGE = {"zh-CN": "zh_CN", "zh-TW": "zh_TW", "pt-BR": "pt_BR"}

# Every word the book itself adds to a page, per edition. An edition missing here gets the English words.
# {notebook}: a link to the lesson's notebook in the repository.
WORDS: dict[str, dict[str, str]] = {
    "en": {
        "name": "English",
        "book_title": "attention-lab: self-attention, built by hand",
        "tagline": "{count} Jupyter lessons that build self-attention by hand, from the dot product to "
                   "block-sparse attention, and check every step against PyTorch: executed, as a web book.",
        "route": "The route",
        "route_intro": "{count} lessons, one page each. Start with lesson 00; each lesson names the ones it builds on.",
        "reference": "Reference",
        "lessons": "Lessons",
        "readme": "README: install, run, test",
        "run_here": "Run the lessons on your computer",
        "run_body": "This book shows the lessons as they were executed when they were committed; nothing runs "
                    "on these pages. To run them, clone the repository and, in its folder:",
        "make_lab": "opens your own copies of the lessons in JupyterLab, the exercises without their solutions",
        "make_test": "runs every test and check of the course, this book's included",
        "formula": "Every lesson builds up to this one formula, one piece at a time:",
        "lesson_note_title": "Read here, run on your computer",
        "lesson_note": "This page is the executed notebook {notebook}, with the outputs of its committed run: "
                       "nothing runs here. To run it and answer its exercises, clone the repository and use "
                       "`make lab` (your own copy in JupyterLab) or `make test` (every check). Solutions and "
                       "check messages are folded: try an exercise before you open them.",
        "machine_output": "This output was recorded on the computer that last executed the lesson (timings, "
                          "memory, threads or a progress bar): run the lesson to see your computer's numbers.",
        "widget_output": "In JupyterLab this cell shows a live widget (sliders or a progress bar). A web page has "
                         "no Python kernel behind it, so the widget is left out here: run the lesson to use it.",
        "show_solution": "Show the solution",
        "hide_solution": "Hide the solution",
        "show_check": "Show the check's message",
        "hide_check": "Hide the check's message",
        "show_deep_dive": "Open the deep dive ({cells} cells)",
        "show_deep_dive_1": "Open the deep dive (1 cell)",
        "hide_deep_dive": "Close the deep dive",
        "english_only": "This page has no edition in this language yet; it is shown in English.",
        "language": "Language",
        "editions": "Editions",
    },
    "zh-CN": {
        "name": "简体中文",
        "book_title": "attention-lab：亲手构建自注意力",
        "tagline": "{count} 课 Jupyter 课程，从点积到块稀疏注意力，亲手构建自注意力，并把每一步与 PyTorch 核对："
                   "已执行的课程，做成网页书。",
        "route": "学习路线",
        "route_intro": "共 {count} 课，每课一页。从第 00 课开始；每课都写明它以哪几课为基础。",
        "reference": "参考",
        "lessons": "课程",
        "readme": "README：安装、运行、测试",
        "run_here": "在自己的电脑上运行课程",
        "run_body": "本书展示的是课程提交时执行的结果；这些页面上什么都不会运行。要运行课程，请克隆代码仓库，"
                    "并在其目录中执行：",
        "make_lab": "在 JupyterLab 中打开你自己的课程副本，练习不含答案",
        "make_test": "运行课程的全部测试与检查，包括本书的",
        "formula": "每一课都一步步地走向这一个公式：",
        "lesson_note_title": "在这里阅读，在自己的电脑上运行",
        "lesson_note": "本页是已执行的笔记本 {notebook}，显示的是提交时运行的输出：这里什么都不会运行。"
                       "要运行它并完成练习，请克隆代码仓库，使用 `make lab`（在 JupyterLab 中打开你自己的副本）"
                       "或 `make test`（全部检查）。答案和检查信息已折叠：请先自己做练习再打开。",
        "machine_output": "这段输出来自最后一次执行本课的电脑（耗时、内存、线程数或进度条）："
                          "运行本课即可看到你的电脑上的数字。",
        "widget_output": "在 JupyterLab 中，这个单元格会显示一个交互式控件（滑块或进度条）。网页背后没有 Python "
                         "内核，因此这里省略了该控件：运行本课即可使用它。",
        "show_solution": "显示答案",
        "hide_solution": "隐藏答案",
        "show_check": "显示检查信息",
        "hide_check": "隐藏检查信息",
        "show_deep_dive": "展开深入内容（{cells} 个单元格）",
        "show_deep_dive_1": "展开深入内容（1 个单元格）",
        "hide_deep_dive": "收起深入内容",
        "english_only": "本页尚无该语言的版本，以下为英文原文。",
        "language": "语言",
        "editions": "版本",
    },
    "zh-TW": {
        "name": "繁體中文",
        "book_title": "attention-lab：親手建構自注意力",
        "tagline": "{count} 課 Jupyter 課程，從點積到區塊稀疏注意力，親手建構自注意力，並把每一步與 PyTorch 核對："
                   "已執行的課程，做成網頁書。",
        "route": "學習路線",
        "route_intro": "共 {count} 課，每課一頁。從第 00 課開始；每課都寫明它以哪幾課為基礎。",
        "reference": "參考",
        "lessons": "課程",
        "readme": "README：安裝、執行、測試",
        "run_here": "在自己的電腦上執行課程",
        "run_body": "本書展示的是課程提交時執行的結果；這些頁面上什麼都不會執行。要執行課程，請複製（clone）"
                    "程式碼儲存庫，並在其目錄中執行：",
        "make_lab": "在 JupyterLab 中開啟你自己的課程副本，練習不含答案",
        "make_test": "執行課程的全部測試與檢查，包括本書的",
        "formula": "每一課都一步步地走向這一個公式：",
        "lesson_note_title": "在這裡閱讀，在自己的電腦上執行",
        "lesson_note": "本頁是已執行的筆記本 {notebook}，顯示的是提交時執行的輸出：這裡什麼都不會執行。"
                       "要執行它並完成練習，請複製程式碼儲存庫，使用 `make lab`（在 JupyterLab 中開啟你自己的副本）"
                       "或 `make test`（全部檢查）。解答和檢查訊息已摺疊：請先自己做練習再開啟。",
        "machine_output": "這段輸出來自最後一次執行本課的電腦（耗時、記憶體、執行緒數或進度條）："
                          "執行本課即可看到你的電腦上的數字。",
        "widget_output": "在 JupyterLab 中，這個儲存格會顯示一個互動式元件（滑桿或進度條）。網頁背後沒有 Python "
                         "核心，因此這裡省略了該元件：執行本課即可使用它。",
        "show_solution": "顯示解答",
        "hide_solution": "隱藏解答",
        "show_check": "顯示檢查訊息",
        "hide_check": "隱藏檢查訊息",
        "show_deep_dive": "展開深入內容（{cells} 個儲存格）",
        "show_deep_dive_1": "展開深入內容（1 個儲存格）",
        "hide_deep_dive": "收起深入內容",
        "english_only": "本頁尚無該語言的版本，以下為英文原文。",
        "language": "語言",
        "editions": "版本",
    },
}


@dataclass(frozen=True)
class Edition:
    """One language of the course: where its lessons and README are, and what the book calls it."""

    tag: str
    lessons: tuple[Path, ...]
    readme: Path

    @property
    def words(self) -> dict[str, str]:
        return {**WORDS[SOURCE_TAG], **WORDS.get(self.tag, {"name": self.tag})}

    @property
    def name(self) -> str:
        return self.words["name"]

    @property
    def sphinx_language(self) -> str:
        return SPHINX_LANGUAGE.get(self.tag, self.tag.replace("-", "_"))

    def doc(self, english: Path) -> Path:
        """This edition's version of the English doc ``docs/<name>.md``, or the English doc where there is none."""
        translated = english.with_name(f"{english.stem}.{self.tag}{english.suffix}")
        return translated if self.tag != SOURCE_TAG and translated.exists() else english


def lessons_in(folder: Path) -> tuple[Path, ...]:
    return tuple(sorted(p for p in folder.glob("*.ipynb") if LESSON_NAME.match(p.name)))


def discover(repo: Path) -> list[Edition]:
    """English first, then every ``notebooks/<tag>/`` that holds lessons, in the order of their tags."""
    notebooks = repo / "notebooks"
    editions = [Edition(SOURCE_TAG, lessons_in(notebooks), repo / "README.md")]
    for folder in sorted(p for p in notebooks.iterdir() if p.is_dir() and EDITION_TAG.match(p.name)):
        lessons = lessons_in(folder)
        if lessons:
            readme = repo / f"README.{folder.name}.md"
            editions.append(Edition(folder.name, lessons, readme if readme.exists() else repo / "README.md"))
    return editions


def english_docs(repo: Path) -> list[Path]:
    """The docs every edition shows: notation, conventions, the teacher's guide first, then any other doc."""
    first = ["notation", "conventions", "teaching"]
    docs = [p for p in (repo / "docs").glob("*.md") if "." not in p.stem]  # name.zh-CN.md is an edition
    return sorted(docs, key=lambda p: (first.index(p.stem) if p.stem in first else len(first), p.stem))
