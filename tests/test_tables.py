"""Printed tables and progress lines speak the course's language; the lesson cells that use them are equal."""

import json
import re

import numpy as np
import pytest
from conftest import ROOT

import pstutor
from pstutor import build
from pstutor.language import set_language
from pstutor.tables import format_progress, format_table, text_width

CJK = re.compile(r"[\u4e00-\u9fff]")
PRINTERS = ("pstutor.show_table(", "pstutor.progress(", "show_shards(")
ROWS = [
    {"strategy": "none", "training": "-", "steps_per_execution": 1, "examples_per_s": 162459.4,
     "loss": 0.46414},
    {"strategy": "ps", "training": "async", "steps_per_execution": 8, "examples_per_s": np.float32(7171.2),
     "loss": np.float32(0.4635)},
]


@pytest.fixture(params=["en", "zh"])
def lang(request):
    set_language(request.param)
    yield request.param
    set_language("en")


def test_table_headers_and_word_values_are_in_the_course_language(lang):
    header, first, second = format_table(ROWS).splitlines()
    expected = {"en": ["strategy", "training", "steps_per_execution", "examples/s", "loss"],
                "zh": ["策略", "训练方式", "steps_per_execution", "样本/秒", "损失"]}[lang]
    assert header.split() == expected  # the API name stays as it is
    assert first.split() == ["none", "-", "1", "162,459.4000", "0.4641"]
    assert second.split() == ["ps", {"en": "async", "zh": "异步"}[lang], "8", "7,171.2002", "0.4635"]


def test_table_columns_line_up_with_chinese_and_numbers_align_right(lang):
    lines = format_table(ROWS, ["training", "examples_per_s", "loss"], digits=1).splitlines()
    ends = {text_width(line) for line in lines}
    assert len(ends) == 1  # numbers are right-aligned: every line ends in the same column
    assert lines[1].endswith(" 0.5") and lines[2].endswith(" 0.5")
    assert CJK.search(lines[0]) if lang == "zh" else not CJK.search("\n".join(lines))


def test_show_table_prints_the_table(lang, capsys):
    pstutor.show_table(ROWS, ["strategy", "loss"])
    assert capsys.readouterr().out == format_table(ROWS, ["strategy", "loss"]) + "\n"


@pytest.mark.parametrize("values, en, zh", [
    ({"epoch": 2, "loss": np.float32(0.41), "accuracy": 0.988},
     "epoch 2: loss 0.4100, accuracy 0.9880", "第 2 个周期：损失 0.4100，准确率 0.9880"),
    ({"checkpoint_step": 10, "accuracy": 0.57},
     "checkpoint at step 10: accuracy 0.5700", "第 10 步的检查点：准确率 0.5700"),
    ({"step": 3}, "step 3", "第 3 步"),
    ({"steps_per_execution": 10, "ms_per_step": 4.5},  # an API name stays as it is
     "steps_per_execution 10: ms per step 4.5000", "steps_per_execution 10：每步毫秒数 4.5000"),
])
def test_progress_line_in_both_languages(lang, values, en, zh, capsys):
    pstutor.progress(**values)
    assert capsys.readouterr().out == {"en": en, "zh": zh}[lang] + "\n"


def test_progress_without_keywords_is_refused_in_the_course_language(lang):
    message = {"en": "at least one keyword", "zh": "至少需要一个关键字参数"}[lang]
    with pytest.raises(ValueError, match=message):
        format_progress()


def _printing_cells(lang: str) -> dict[str, list[tuple[str, str]]]:
    """Per lesson notebook: (source, printed text) of each code cell that prints through the helpers."""
    found = {}
    for path in (build.notebook_path(source, lang) for source in build.lesson_paths(ROOT)):
        cells = json.loads(path.read_text())["cells"]
        found[path.name] = [
            ("".join(cell["source"]),
             "".join("".join(out["text"]) for out in cell["outputs"] if out["output_type"] == "stream"))
            for cell in cells
            if cell["cell_type"] == "code" and any(p in "".join(cell["source"]) for p in PRINTERS)
        ]
    return found


def test_lesson_tables_and_progress_lines_are_chinese_in_the_chinese_notebooks():
    """What the helpers print: Chinese in the Chinese notebook, no Chinese in the English one
    (the cells run the same program: tests/test_build.py)."""
    zh, en = _printing_cells("zh"), _printing_cells("en")
    assert any(zh.values()), "no lesson prints through show_table or progress"
    for name, cells in zh.items():
        for (source, zh_out), (_, en_out) in zip(cells, en[name], strict=True):
            assert zh_out.strip() and CJK.search(zh_out), (name, source, zh_out)
            assert not CJK.search(en_out), (name, source, en_out)
