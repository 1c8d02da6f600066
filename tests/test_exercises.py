"""Exercises: every solution passes its checks, every student copy runs and says "not done",
and every wrong answer written in the source is caught by its check with the expected hint."""

import json
import re

import pytest

from pstutor import build
from pstutor.checks import MIME

EXERCISES = build.exercise_paths()
CHECK_CALL = re.compile(r'pstutor\.check\("(\d\d\.\d+)"')


def _tasks(source) -> list[str]:
    return [f"{source.stem[:2]}.{r.task}" for c in build.read_lesson(source) if c.kind == "code"
            for r in build.answer_regions(c.source)]


def _records(notebook: dict) -> dict[str, dict]:
    """The check verdicts a notebook shows, by task."""
    found = {}
    for cell in notebook["cells"]:
        for output in cell.get("outputs", []):
            record = output.get("data", {}).get(MIME)
            if record:
                found[record["task"]] = record
    return found


def test_every_lesson_has_an_exercise_and_points_to_it():
    lessons = {p.stem for p in build.lesson_paths()}
    assert {p.stem for p in EXERCISES} == lessons
    for lesson in build.lesson_paths():
        text = lesson.read_text(encoding="utf-8")
        assert f"exercises/en/{lesson.stem}.ipynb" in text and f"exercises/zh/{lesson.stem}.ipynb" in text


@pytest.mark.parametrize("source", EXERCISES, ids=lambda p: p.stem)
def test_each_task_is_checked_right_after_its_answer(source):
    tasks = _tasks(source)
    assert len(tasks) >= 2, "an exercise has at least two tasks"
    notebook = build.render(source, "en", "solution")
    calls = [CHECK_CALL.findall(c.source) for c in notebook.cells if c.cell_type == "code"]
    assert sorted(t for found in calls for t in found) == sorted(tasks), "one check cell per task"
    code = [c for c in notebook.cells if c.cell_type == "code"]
    for index, cell in enumerate(code):
        for task in cell.metadata.get("pstutor", {}).get("tasks", []):
            assert task in CHECK_CALL.findall(code[index + 1].source), f"{task}: check it in the next cell"


@pytest.mark.parametrize("source", EXERCISES, ids=lambda p: p.stem)
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_solution_passes_and_the_student_copy_is_not_done(source, lang):
    for variant, status in (("solution", "passed"), ("exercise", "not done")):
        path = build.notebook_path(source, lang, variant)
        records = _records(json.loads(path.read_text(encoding="utf-8")))
        assert sorted(records) == sorted(_tasks(source)), f"{path}: a check did not run"
        assert {r["status"] for r in records.values()} == {status}, f"{path}: {records}"


def _wrong_rounds(source) -> list[dict[str, tuple[str, str]]]:
    """Wrong answers grouped so that one execution tries at most one per task."""
    per_task: dict[str, list[tuple[str, str]]] = {}
    for cell in build.read_lesson(source):
        if cell.kind == "wrong":
            per_task.setdefault(cell.task, []).append((cell.source, cell.expect))
    rounds = max(len(v) for v in per_task.values())
    return [{task: answers[i] for task, answers in per_task.items() if i < len(answers)}
            for i in range(rounds)]


@pytest.mark.parametrize("source", EXERCISES, ids=lambda p: p.stem)
def test_every_wrong_answer_is_caught_with_its_hint(source, tmp_path):
    for round_ in _wrong_rounds(source):
        answers = {task: code for task, (code, _) in round_.items()}
        notebook = build.render(source, "en", "solution", answers=answers)
        build.execute(notebook, tmp_path)
        records = _records(notebook)
        for task, (_, expected) in round_.items():
            record = records[f"{source.stem[:2]}.{task}"]
            assert (record["status"], record["hint"]) == ("failed", expected), record
