"""A Chinese reader reads Chinese: printed lines, prose and terms of the zh notebooks."""

import json
import re

import pytest
from conftest import ROOT

import pstutor
from pstutor import build, glossary, tables
from pstutor.grading.model import STATUSES
from pstutor.language import set_language

ZH = sorted(p for kind in ("notebooks", "solutions", "exercises")
            for p in (ROOT / kind / "zh").glob("*.ipynb"))
CJK = re.compile(r"[\u3400-\u9fff\uff00-\uffef\u3000-\u303f]")
# TensorFlow's, gRPC's and Python's own text, and what is code or data rather than a sentence
FOREIGN = re.compile(r"grpc|GRPC|/job:|error\(s\)|Detected at node|stack traces|UNAVAILABLE|CANCELLED|"
                     r"\[Op:|<Figure|tf_keras|transient connectivity|derived errors|Traceback|File \"|"
                     r"^\s*(WARNING|INFO|ERROR|[EWI]\d{4})|Error:|Error\b.*:|^\s*at |https?://")
CODE = re.compile(r"^\s*([-+#]|\$|export |python|exec |set |if |fi\b|then\b|cd |echo )|"
                  r"^(FROM|RUN|COPY|WORKDIR) |^\s*[-\w./\"']+:\s|"  # a Dockerfile's instructions
                  r"[{}()=]\s*$")


def _id(path) -> str:
    return f"{path.parent.parent.name}/{path.stem}"


# API names that look like plain words; API names stay in English (COURSE.md's glossary)
API_WORDS = {"ms", "fit", "evaluate", "predict", "schedule", "join", "fetch", "repeat", "shuffle", "batch"}


def english_word(chunk: str) -> bool:
    """A plain English word (`none`, `Workers`), not an API name (`MirroredStrategy`, `tf.data`, `GPU`)."""
    return bool(re.fullmatch(r"[A-Za-z][a-z]+[,:;]?", chunk)) and chunk.rstrip(",:;") not in API_WORDS


def figure_english(text: str) -> list[str]:
    """The words of a stored figure (its text form, `pictures.CourseFigure`) that are plain English."""
    return [line.strip() for line in text.splitlines()[1:]
            if not CJK.search(line) and any(english_word(chunk) for chunk in line.split())]


def english_lines(notebook: dict) -> list[str]:
    """Lines the course printed in English (no CJK, two or more English words, not a log or code),
    and English words in its figures."""
    found = []
    for index, cell in enumerate(notebook["cells"]):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error" or output.get("name") == "stderr":
                continue
            text = output.get("text") or output.get("data", {}).get("text/plain", "")
            text = "".join(text) if isinstance(text, list) else text
            if "image/png" in output.get("data", {}):
                found += [f"[{index}] figure: {words}" for words in figure_english(text)]
                continue
            for line in text.splitlines():
                if not (CJK.search(line) or FOREIGN.search(line) or CODE.search(line)) \
                        and sum(map(english_word, line.split())) >= 2:
                    found.append(f"[{index}] {line[:120]}")
    return found


@pytest.mark.parametrize("path", ZH, ids=_id)
def test_the_chinese_notebooks_print_chinese(path):
    lines = english_lines(json.loads(path.read_text(encoding="utf-8")))
    assert not lines, ("English lines in a Chinese notebook (translate a lesson's literal in its strings "
                       "table, a helper's label in glossary.WORDS):\n" + "\n".join(lines))


def test_the_english_line_finder_finds_english_and_spares_chinese_and_logs():
    def notebook(*lines):
        output = {"output_type": "stream", "name": "stdout", "text": "\n".join(lines)}
        return {"cells": [{"outputs": [output]}]}

    assert english_lines(notebook("I am worker 1", "loss decreased: True")) == \
        ["[0] I am worker 1", "[0] loss decreased: True"]
    assert english_lines(notebook("我是 worker 1", "W0000 00:00 grpc said so", "x = f(a, b)")) == []
    assert english_lines(notebook("+if not gpus:", "-return tf.distribute.get_strategy()")) == []  # a diff
    figure = {"output_type": "display_data", "data": {"image/png": "", "text/plain": (
        "<Figure size 800x400 with 1 Axes>\n  每个周期的损失\n  MirroredStrategy\n  tf.data\n"
        "  none\n  ps #")}}
    assert english_lines({"cells": [{"outputs": [figure]}]}) == ["[0] figure: none", "[0] figure: ps #"]


@pytest.mark.parametrize("source", build.lesson_paths(ROOT) + build.exercise_paths(ROOT),
                         ids=lambda p: p.stem)
def test_chinese_prose_uses_the_glossary_terms(source):
    """One term per concept (COURSE.md's glossary), in the Chinese prose of every source."""
    found = []
    for cell in build.read_lesson(source):
        if cell.kind == "zh":
            prose = re.sub(r"`[^`]*`", "", re.sub(r"```.*?```|<!--.*?-->", "", cell.source, flags=re.S))
            found += glossary.avoided(prose, prose=True)
    assert not found, f"{source.name}: " + "; ".join(found)


@pytest.mark.parametrize("path", ZH, ids=_id)
def test_chinese_outputs_use_the_glossary_terms(path):
    notebook = json.loads(path.read_text(encoding="utf-8"))
    texts = ["".join(o.get("text", "")) for c in notebook["cells"] for o in c.get("outputs", [])
             if o.get("name") == "stdout"]
    found = glossary.avoided("\n".join(texts))
    assert not found, "; ".join(found)


def test_the_glossary_rules_catch_what_readers_stumbled_on():
    assert glossary.avoided("每份数据副本都有自己的顺序")
    assert glossary.avoided("它返回一个承诺")
    assert glossary.avoided("两个 ps 各存一半", prose=True)
    assert not glossary.avoided("两个参数服务器各存一半；每个副本算一份梯度", prose=True)
    assert not glossary.avoided("协调器（chief）负责调度", prose=True)


def _zh_programs() -> dict[str, str]:
    """What runs in the Chinese notebooks (the lessons' code with their strings tables applied)
    and the helpers' own code: where a course word can come from."""
    programs = {}
    for source in build.lesson_paths(ROOT) + build.exercise_paths(ROOT):
        for variant in build.variants(source):
            code = [c.source for c in build.render(source, "zh", variant).cells if c.cell_type == "code"]
            programs[f"{source.name} ({variant})"] = "\n".join(code)
    programs |= {str(path.relative_to(ROOT)): path.read_text(encoding="utf-8")
                 for path in sorted((ROOT / "pstutor").rglob("*.py")) if path.name != "glossary.py"}
    return programs


def unused_words(programs: dict[str, str]) -> list[str]:
    """Labels of glossary.WORDS no program holds as a string, and column keys of tables.COLUMNS
    that no program but tables.py names (as a string or a keyword, e.g. progress(loss=...))."""
    def holds(text: str, pattern: str) -> bool:
        return re.search(pattern, text) is not None

    labels = [f"glossary.WORDS[{en!r}]" for en in glossary.WORDS
              if not any(holds(code, rf"[\"']{re.escape(en)}[\"']") for code in programs.values())]
    keys = [f"tables.COLUMNS[{key!r}]" for key in tables.COLUMNS
            if not any(holds(code, rf"[\"']{key}[\"']|\b{key}=") for name, code in programs.items()
                       if name != "pstutor/tables.py")]
    return labels + keys


def test_every_course_word_is_used_by_a_lesson_or_a_helper():
    """A word nothing shows is dead: a lesson's phrase that its strings table translates never
    reaches the helpers' table in Chinese, so it does not belong there."""
    programs = _zh_programs()
    assert not unused_words(programs), unused_words(programs)
    only_loss = unused_words({"lesson": 'show_table([{"loss": 1}])'})  # the check can fail ...
    assert "glossary.WORDS['custom loop']" in only_loss and "tables.COLUMNS['loss']" not in only_loss
    lesson = "\n".join([f"x = {en!r}" for en in glossary.WORDS] + [f"y = {key!r}" for key in tables.COLUMNS])
    assert unused_words({"lesson": lesson}) == []  # ... and it passes where every word is used


def test_every_label_the_helpers_translate_is_in_the_course_words():
    """Table columns, word values and statuses name their English label; its Chinese is in the one table."""
    labels = [*tables.COLUMNS.values(), *tables.VALUE_WORDS, *STATUSES]
    assert [label for label in labels if not CJK.search(glossary.WORDS.get(label, ""))] == []


def test_a_label_missing_from_the_course_words_shows_as_english_in_a_chinese_output(monkeypatch):
    """The words of a figure and a table reach the Chinese notebook only through glossary.WORDS:
    without an entry the label stays English, and the English-line finder above reports it."""
    def outputs():
        figure = pstutor.plot_curves({"Model.fit": [0.7, 0.5], "custom loop": [0.7, 0.4]})
        table = tables.format_table([{"strategy": "ps", "changed_lines": 3}])
        return {"cells": [{"outputs": [
            {"output_type": "display_data", "data": {"image/png": "", "text/plain": repr(figure)}},
            {"output_type": "stream", "name": "stdout", "text": table}]}]}

    set_language("zh")
    try:
        assert english_lines(outputs()) == []
        for label in ("custom loop", "changed lines", "strategy"):
            monkeypatch.delitem(glossary.WORDS, label)
        assert english_lines(outputs()) == ["[0] figure: custom loop", "[0] strategy  changed lines"]
    finally:
        set_language("en")
