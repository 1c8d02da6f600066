"""Every way grading results leave the grader, all read from the same `StudentResult`s.

- `csv`: the course's own table, one row per submission, one column per task, in the
  table's language (`--lang`);
- `canvas`: a gradebook CSV that Canvas imports (Grades → Import) and Moodle's CSV grade
  import reads: the identity columns Canvas expects, a "Points Possible" row and one
  column per exercise;
- `gradescope`: the `results.json` of a Gradescope autograder, for one submission;
- `prairielearn`: the `results.json` of a PrairieLearn external grader, for one submission;
- `summary`: the table on the teacher's screen.

In every one a task flagged for review scores 0 until the teacher accepts it, student text
is escaped (`pstutor.grading.escape`), and a submission that could not be graded is said to be
so, never scored.
"""

from __future__ import annotations

import csv
import io
import json

from pstutor.grading import escape as safe
from pstutor.grading.model import (
    FAILED_TO_GRADE,
    INVALID,
    PASSED,
    REFUSED,
    StudentResult,
    TaskResult,
    shown,
    status_word,
)
from pstutor.grading.record import MARK
from pstutor.grading.review import evidence_text, reason_text, review_text
from pstutor.language import current_language, say
from pstutor.tables import align

FORMATS = ("csv", "canvas", "gradescope", "prairielearn")
_NEEDS_REVIEW = {"en": "needs review", "zh": "待人工查看"}
_MATCHED = {
    "metadata": ("metadata", "元数据"),
    "content": ("content", "内容"),
    "metadata+content": ("metadata and content", "元数据和内容"),
}
CANVAS_IDENTITY = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")


def _json(payload: dict) -> bytes:
    """UTF-8 JSON of a payload in which any string may hold a lone surrogate (a non-UTF-8 file name)."""
    return json.dumps(_encodable(payload), ensure_ascii=False, indent=1).encode("utf-8")


def _encodable(value):
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {_encodable(key): _encodable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_encodable(item) for item in value]
    return value


def _number(value: float) -> str:
    return f"{value:g}"


def task_cell(task: TaskResult, accepted: bool, lang: str | None = None) -> str:
    """A task's column: its status, or "needs review" for a flagged pass."""
    if task.status == PASSED and task.review and not accepted:
        return _NEEDS_REVIEW["zh" if (lang or current_language()) == "zh" else "en"]
    return status_word(task.status, lang)


def _details(result: StudentResult, lang: str | None = None) -> str:
    if result.state in (REFUSED, FAILED_TO_GRADE):
        return shown(result.problem, lang)
    parts = [f"{task.task}: {shown(task.details, lang)}" for task in result.tasks.values() if task.details]
    parts += [shown({"en": "review", "zh": "查看"}, lang) + f" {item}" for item in evidence_text(result)]
    return "; ".join(parts)


def all_tasks(results: list[StudentResult]) -> list[str]:
    return sorted({task for result in results for task in result.tasks})


def course_csv(results: list[StudentResult], tasks: list[str]) -> bytes:
    """The course's table: one row per graded submission."""
    headers = [
        say("student", "学生"),
        say("exercise", "练习"),
        say("language", "语言"),
        say("matched by", "识别方式"),
        say("score", "得分"),
        say("max score", "满分"),
        say("seconds", "秒数"),
        say("review", "人工查看"),
        *tasks,
        say("details", "详细信息"),
    ]
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(headers)
    for result in results:
        if result.state == REFUSED:
            row = [
                result.exercise,
                result.language,
                "",
                "0",
                "",
                "",
                "",
                *[status_word(INVALID)] * len(tasks),
            ]
        elif result.state == FAILED_TO_GRADE:
            row = [result.exercise, result.language, "", "", "", "", "", *[""] * len(tasks)]
        else:
            matched = say(*_MATCHED.get(result.matched, (result.matched, result.matched)))
            row = [
                result.exercise,
                result.language,
                matched,
                _number(result.score()),
                _number(result.max_score()),
                f"{result.seconds:.0f}",
                review_text(result),
                *[task_cell(result.tasks[t], result.accepted) if t in result.tasks else "" for t in tasks],
            ]
        writer.writerow(
            [
                safe.cell(result.student, student=True),
                *[safe.cell(value) for value in row],
                safe.cell(_details(result)),
            ]
        )
    return buffer.getvalue().encode("utf-8")


def canvas_csv(results: list[StudentResult], titles: dict[str, str]) -> bytes:
    """A gradebook CSV for Canvas (and Moodle): identity columns, Points Possible, one column per exercise.

    Canvas matches a row to a student by its ID, SIS User ID or SIS Login ID: the grader
    writes the file name (the student) as Student and SIS Login ID, so name the submissions
    by the students' login IDs. The column names are Canvas's own, so they stay in English.
    """
    exercises = sorted({result.exercise for result in results if result.exercise})
    maximum = {
        exercise: max((r.max_score() for r in results if r.exercise == exercise), default=0)
        for exercise in exercises
    }
    students = list(dict.fromkeys(result.student for result in results))
    by = {(result.student, result.exercise): result for result in results}
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow([*CANVAS_IDENTITY, *(safe.cell(titles.get(e, e)) for e in exercises)])
    writer.writerow(["    Points Possible", "", "", "", "", *(_number(maximum[e]) for e in exercises)])
    for student in students:
        cells = []
        for exercise in exercises:
            result = by.get((student, exercise))
            cells.append("" if result is None or result.state == FAILED_TO_GRADE else _number(result.score()))
        refused = [r for r in results if r.student == student and r.state == REFUSED and not r.exercise]
        if refused and all(cell == "" for cell in cells):
            cells = ["0"] * len(exercises)
        login = safe.cell(student, student=True)
        writer.writerow([login, "", "", login, "", *cells])
    return buffer.getvalue().encode("utf-8")


def _task_name(task: str, lang: str) -> str:
    return f"Task {task}" if lang == "en" else f"任务 {task}"


def _task_output(task: TaskResult, accepted: bool, lang: str) -> str:
    lines = [shown(task.details, lang)] if task.details else []
    if task.review and not accepted:
        words = "; ".join(reason_text(reason, lang) for reason in task.review)
        lines.append(
            shown(
                {
                    "en": f"Scored 0 until your teacher reviews it: the answer {words}.",
                    "zh": f"在老师查看之前计 0 分：该答案{words}。",
                },
                lang,
            )
        )
    return "\n".join(lines)


def gradescope_json(result: StudentResult) -> bytes:
    """Gradescope's autograder results.json for one submission, in the student's language."""
    lang = result.language if result.language in ("en", "zh") else "en"
    mark = {MARK: result.to_record()}
    if result.state != "graded":
        output = shown(result.problem, lang) or shown({"en": "not graded", "zh": "未评分"}, lang)
        payload = {"score": 0, "output": output, "output_format": "text", "tests": [], "extra_data": mark}
        return _json(payload)
    tests = []
    for task in result.tasks.values():
        points = task.points(result.accepted)
        tests.append(
            {
                "name": _task_name(task.task, lang),
                "number": task.task,
                "score": points,
                "max_score": task.max_points,
                "status": "passed" if points == task.max_points else "failed",
                "output": _task_output(task, result.accepted, lang),
                "output_format": "text",
                "visibility": "visible",
            }
        )
    output = _summary(result, lang)
    payload = {
        "score": result.score(),
        "output": output,
        "output_format": "text",
        "execution_time": round(result.seconds),
        "tests": tests,
        "extra_data": mark,
    }
    return _json(payload)


def prairielearn_json(result: StudentResult) -> bytes:
    """PrairieLearn's external grader results.json for one submission (score in 0–1)."""
    lang = result.language if result.language in ("en", "zh") else "en"
    mark = result.to_record()
    if result.state != "graded":
        problem = shown(result.problem, lang) or shown({"en": "not graded", "zh": "未评分"}, lang)
        payload = {"gradable": False, "format_errors": [problem], MARK: mark}
        return _json(payload)
    tests = [
        {
            "name": _task_name(task.task, lang),
            "points": task.points(result.accepted),
            "max_points": task.max_points,
            "message": _task_output(task, result.accepted, lang),
            "output": shown(task.details, lang),
        }
        for task in result.tasks.values()
    ]
    total = result.max_score()
    payload = {
        "gradable": True,
        "score": result.score() / total if total else 0.0,
        "message": _summary(result, lang),
        "tests": tests,
        MARK: mark,
    }
    return _json(payload)


def _summary(result: StudentResult, lang: str) -> str:
    """The points, and which tasks wait for the teacher's review: one text for every format."""
    waiting = result.flagged()
    line = shown(
        {
            "en": f"{_number(result.score())} of {_number(result.max_score())} points.",
            "zh": f"得分 {_number(result.score())} / {_number(result.max_score())}。",
        },
        lang,
    )
    if waiting:
        line += " " + shown(
            {
                "en": f"{', '.join(waiting)} wait for your teacher's review (0 points until then).",
                "zh": f"{'、'.join(waiting)} 等待老师查看（在此之前计 0 分）。",
            },
            lang,
        )
    return line


def summary(results: list[StudentResult]) -> str:
    """The table for the teacher's screen, the details, and what is waiting for a look."""
    tasks = all_tasks(results)
    table = [[say("student", "学生"), say("score", "得分"), *tasks, say("review", "人工查看")]]
    for result in results:
        name = safe.on_screen(result.student)
        if result.state == REFUSED:
            table.append(
                [
                    name,
                    "-",
                    *["-"] * len(tasks),
                    say("invalid: ", "无效：") + safe.visible(shown(result.problem)),
                ]
            )
        elif result.state == FAILED_TO_GRADE:
            table.append(
                [
                    name,
                    "-",
                    *["-"] * len(tasks),
                    say("not graded: ", "未评分：") + safe.visible(shown(result.problem)),
                ]
            )
        else:
            score = f"{_number(result.score())}/{_number(result.max_score())}"
            table.append(
                [
                    name,
                    score,
                    *[
                        task_cell(result.tasks[t], result.accepted) if t in result.tasks else "-"
                        for t in tasks
                    ],
                    review_text(result),
                ]
            )
    lines = [line.rstrip() for line in align(table, [False] * len(table[0]))]
    notes = [
        f"  {safe.on_screen(result.student)} {task.task}: {safe.visible(shown(task.details))}"
        for result in results
        for task in result.tasks.values()
        if task.details
    ]
    notes += [
        f"  {safe.on_screen(result.student)} {say('review', '查看')} {safe.visible(item)}"
        for result in results
        for item in evidence_text(result)
        if not result.accepted
    ]
    if notes:
        lines += ["", say("Details:", "详细信息："), *notes]
    graded = [r for r in results if r.state == "graded"]
    complete = sum(
        bool(r.tasks) and all(t.points(r.accepted) == t.max_points for t in r.tasks.values()) for r in graded
    )
    waiting = sum(len(r.flagged()) for r in graded)
    failed = sum(r.state == FAILED_TO_GRADE for r in results)
    lines += [
        "",
        say(
            f"{len(results)} submission(s); {complete} with every task passed; {waiting} task "
            f"verdict(s) wait for review (0 points until accepted: --accept STUDENT); "
            f"{failed} could not be graded (run the same command again).",
            f"共 {len(results)} 份提交；其中 {complete} 份全部通过；{waiting} 个任务判定等待人工查看"
            f"（接受前计 0 分：--accept 学生）；{failed} 份未能评分（再次运行同一命令即可）。",
        ),
    ]
    return "\n".join(lines)
