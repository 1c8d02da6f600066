"""Every output format of `pstutor grade`, from one results model: the course CSV (in either language),
a Canvas/Moodle gradebook, Gradescope's and PrairieLearn's results.json — each validated against
a schema written from the service's public documentation (tests/schemas/), each scoring a
flagged task 0, each keeping a student's odd bytes from breaking it. No kernel runs here."""

import csv
import io
import json
import re
from pathlib import Path

import jsonschema
import pytest

from pstutor.grading import escape as safe
from pstutor.grading import export, record
from pstutor.grading.model import (
    CRASHED,
    FAILED,
    FAILED_TO_GRADE,
    GRADED,
    NOT_ATTEMPTED,
    PASSED,
    REFUSED,
    StudentResult,
    TaskResult,
    text,
)
from pstutor.language import set_language
from pstutor.tables import text_width

SCHEMAS = Path(__file__).parent / "schemas"
GRADESCOPE = json.loads((SCHEMAS / "gradescope-results.json").read_text())
PRAIRIELEARN = json.loads((SCHEMAS / "prairielearn-results.json").read_text())
CANVAS = json.loads((SCHEMAS / "canvas-gradebook.json").read_text())
CANVAS_HEADER = CANVAS["x-header"]


def _tasks(*statuses, review=()):
    return {
        f"03.{i + 1}": TaskResult(
            f"03.{i + 1}",
            status,
            text("✗ it ends — repeat it", "✗ 它会结束——重复它") if status == FAILED else {},
            list(review) if i == 0 else [],
            [f"03.{i + 1}: sys._getframe"] if review and i == 0 else [],
        )
        for i, status in enumerate(statuses)
    }


def _class():
    return [
        StudentResult("ada", "03_model_fit", "en", "metadata", GRADED, _tasks(PASSED, PASSED), seconds=12),
        StudentResult("bo", "03_model_fit", "zh", "content", GRADED, _tasks(PASSED, FAILED), seconds=9),
        StudentResult(
            "forger",
            "03_model_fit",
            "en",
            "metadata",
            GRADED,
            _tasks(PASSED, PASSED, review=["introspection"]),
            seconds=8,
        ),
        StudentResult(
            "=cmd|' /C calc'!A0", "03_model_fit", "en", "metadata", GRADED, _tasks(CRASHED, NOT_ATTEMPTED)
        ),
        StudentResult("bad\udcff\x1b[2Jname", state=REFUSED, problem=text("not a notebook", "不是笔记本")),
        StudentResult("'=bob", "03_model_fit", "en", "metadata", GRADED, _tasks(PASSED, PASSED)),
        StudentResult("=bob", "03_model_fit", "en", "metadata", GRADED, _tasks(PASSED, PASSED)),
        StudentResult(
            "lost",
            "03_model_fit",
            "en",
            "metadata",
            FAILED_TO_GRADE,
            problem=text("the grader could not run it: OSError", "评分程序无法运行它：OSError"),
        ),
    ]


def _rows(data: bytes) -> list[dict]:
    return list(csv.DictReader(io.StringIO(data.decode("utf-8"))))


def test_a_flagged_task_scores_zero_in_every_format():
    forger = _class()[2]
    assert forger.score() == 1 and forger.flagged() == ["03.1"]
    row = next(r for r in _rows(export.course_csv(_class(), ["03.1", "03.2"])) if r["student"] == "forger")
    assert (row["score"], row["03.1"]) == ("1", "needs review") and "needs review" in row["review"]
    canvas = {r["Student"]: r for r in _rows(export.canvas_csv(_class(), {"03_model_fit": "Exercise 3"}))}
    assert canvas["forger"]["Exercise 3"] == "1" and canvas["ada"]["Exercise 3"] == "2"
    scope = json.loads(export.gradescope_json(forger))
    assert scope["score"] == 1 and scope["tests"][0]["score"] == 0 and scope["tests"][0]["status"] == "failed"
    assert "teacher" in scope["tests"][0]["output"]
    learn = json.loads(export.prairielearn_json(forger))
    assert learn["score"] == 0.5 and learn["tests"][0]["points"] == 0
    forger.accepted = True  # --accept forger: the teacher looked at it
    assert forger.score() == 2 and json.loads(export.gradescope_json(forger))["score"] == 2


def test_gradescope_results_follow_its_specification():
    for result in _class():
        payload = json.loads(export.gradescope_json(result))
        jsonschema.validate(payload, GRADESCOPE)
        assert (
            payload["extra_data"][record.MARK]["student"]
            == result.student.encode("utf-8", "backslashreplace").decode()
        )
    zh = json.loads(export.gradescope_json(_class()[1]))  # the student's notebook language
    assert zh["tests"][1]["name"] == "任务 03.2" and "重复它" in zh["tests"][1]["output"]
    with pytest.raises(jsonschema.ValidationError):  # the schema does catch a wrong field
        jsonschema.validate({"score": 1, "tests": [{"score": 1, "status": "ok"}]}, GRADESCOPE)


def test_prairielearn_results_follow_its_documentation():
    for result in _class():
        payload = json.loads(export.prairielearn_json(result))
        jsonschema.validate(payload, PRAIRIELEARN)
        assert len(export.prairielearn_json(result)) < 1 << 20
        assert payload["gradable"] is (result.state == GRADED)
    invalid = json.loads(export.prairielearn_json(_class()[4]))
    assert invalid["format_errors"] == ["not a notebook"] and "score" not in invalid
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"score": 3}, PRAIRIELEARN)


def test_the_canvas_gradebook_has_canvas_columns_and_one_column_per_exercise():
    results = [
        *_class(),
        StudentResult(
            "ada", "04_custom_loop", "en", "metadata", GRADED, {"04.1": TaskResult("04.1", PASSED)}
        ),
    ]
    data = export.canvas_csv(
        results, {"03_model_fit": "Exercise 3: Model.fit", "04_custom_loop": "Exercise 4"}
    )
    header = next(csv.reader(io.StringIO(data.decode())))
    assert header == [*CANVAS_HEADER, "Exercise 3: Model.fit", "Exercise 4"]
    rows = _rows(data)
    jsonschema.validate(rows, CANVAS)
    ada = next(r for r in rows if r["Student"] == "ada")
    assert (ada["SIS Login ID"], ada["Exercise 3: Model.fit"], ada["Exercise 4"]) == ("ada", "2", "1")
    assert rows[0]["Exercise 3: Model.fit"] == "2" and rows[0]["Student"].strip() == "Points Possible"
    lost = next(r for r in rows if r["Student"] == "lost")
    assert lost["Exercise 3: Model.fit"] == ""  # no verdict: the gradebook is left as it was
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate([rows[0], {**ada, "SIS Login ID": ""}], CANVAS)


def test_odd_names_are_stored_safely_and_stay_distinct():
    data = export.course_csv(_class(), ["03.1", "03.2"])
    names = [row["student"] for row in _rows(data)]
    assert len(set(names)) == len(names)  # '=bob and =bob stay two students
    assert "'=bob" in names and "''=bob" in names and "'=cmd|' /C calc'!A0" in names
    odd = next(name for name in names if name.startswith("bad"))
    assert odd == "bad\\xff\\x1b[2Jname" and "\x1b" not in data.decode()
    assert safe.name("a\\xff") != safe.name("a\udcff")  # one-to-one



@pytest.mark.parametrize("first, second", [
    ("eve\udc85", "eve\x85"),  # an undecodable byte and the character of the same number
    ("alice\u3164", "alice"),  # a blank Hangul letter
    ("bob\u00a0", "bob"),  # a no-break space
    ("e\u0301", "e"),  # a combining accent
])
def test_names_that_would_look_alike_are_written_apart(first, second):
    assert safe.name(first) != safe.name(second) and safe.name(first).isascii()


def test_a_name_cannot_fake_the_columns_of_the_summary():
    forged = "zed  3\u22153  passed passed  (ok)" + " " * 60
    zed = StudentResult(forged, "03_model_fit", "en", "metadata", GRADED, _tasks(FAILED, FAILED))
    rows = [zed, *_class()]
    lines = export.summary(rows).splitlines()
    row = next(line for line in lines if "zed" in line)
    assert row.startswith('"zed  3\u22153  passed passed') and re.search(r'…#[0-9a-f]{6}" +0/2 ', row), row
    assert text_width(row[: row.index(" 0/2 ")]) <= 40, row  # the real score is not pushed far right
    assert safe.on_screen("x" * 50) != safe.on_screen("x" * 49 + "y")  # cut names stay apart
    assert (safe.on_screen("ada"), safe.on_screen("张三"), safe.on_screen("a b")) == ("ada", "张三", '"a b"')


def test_a_chinese_table_is_chinese_and_aligned():
    set_language("zh")
    try:
        data = export.course_csv(_class(), ["03.1", "03.2"]).decode()
        screen = export.summary(_class())
    finally:
        set_language("en")
    header = data.splitlines()[0]
    assert header.startswith("学生,练习,语言,识别方式,得分,满分,秒数,人工查看") and header.endswith(
        "详细信息"
    )
    for english in ("passed", "failed", "needs review", "not attempted", "crashed", "metadata", "student"):
        assert english not in data.replace("✗ it ends", ""), english
    assert "通过" in data and "待人工查看" in data and "需要人工查看" in data
    lines = screen.splitlines()
    table = lines[: len(_class()) + 1]
    assert table[0].split()[:4] == ["学生", "得分", "03.1", "03.2"] and all(
        "\x1b" not in line for line in lines
    )
    starts = {
        text_width(found.group(1)) + len(found.group(2))
        for found in (re.match(r"(\S+)(\s+)", line) for line in table[:4])
    }  # names without spaces
    assert len(starts) == 1  # the score column starts at the same display column in every row
    assert "未通过" in screen and "未能评分" in screen and "等待人工查看" in screen


def test_the_summary_counts_what_waits_and_what_failed():
    screen = export.summary(_class())
    assert "1 task verdict(s) wait for review" in screen and "1 could not be graded" in screen
    assert "\x1b" not in screen and "bad\\xff\\x1b[2Jname" in screen


def test_a_record_reads_back_as_the_same_results():
    for result in _class():
        again = StudentResult.from_record(json.loads(json.dumps(result.to_record())))
        assert again == result
    assert StudentResult.from_record({"version": 99}) is None
