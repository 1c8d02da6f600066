"""A Chinese reader reads Chinese: printed lines, prose and terms of the zh notebooks."""

import json
import re

import pytest
from conftest import ROOT

from pstutor import build, glossary

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
    assert not lines, "English lines in a Chinese notebook (translate them in the strings table):\n" + \
        "\n".join(lines)


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
