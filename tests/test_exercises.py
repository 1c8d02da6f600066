"""Exercises: every solution passes its checks, every student copy runs and says "not done",
and every wrong answer written in the source is caught by its check with the expected hint."""

import itertools
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


# Tasks whose answers change shared state (folders, a cluster's processes, step counters):
# each of their answers needs a fresh kernel. The answers of every other task run one after
# another in one kernel, each followed by the task's check.
FRESH_KERNEL = {"01.1", "03.2", "04.3", "07.1", "07.2", "08.2"}


def _answer_rounds(source) -> list[dict[str, list[tuple[str, str]]]]:
    """Wrong answers and correct alternatives (expected hint ""), grouped into executions."""
    per_task: dict[str, list[tuple[str, str]]] = {}
    for kind in ("wrong", "right"):  # a correct answer last: later tasks build on what it leaves
        for cell in build.read_lesson(source):
            if cell.kind == kind:
                per_task.setdefault(cell.task, []).append((cell.source, cell.expect))
    rounds: list[dict[str, list[tuple[str, str]]]] = []
    for task, answers in per_task.items():
        groups = [answers[i:i + 1] for i in range(len(answers))] \
            if f"{source.stem[:2]}.{task}" in FRESH_KERNEL else [answers]
        for index, group in enumerate(groups):
            if index == len(rounds):
                rounds.append({})
            rounds[index][task] = group
    return rounds


def _one_after_another(answers: list[str], check: str) -> str:
    """One answer cell that runs several answers, each but the last followed by its check."""
    return "\n".join(f"{code}\ndisplay({check})" for code in answers[:-1]) + "\n" + answers[-1]


def _records_in_order(notebook, task_id: str) -> list[dict]:
    return [output["data"][MIME] for cell in notebook.cells for output in cell.get("outputs", [])
            if output.get("data", {}).get(MIME, {}).get("task") == task_id]


@pytest.mark.parametrize("source", EXERCISES, ids=lambda p: p.stem)
def test_every_task_has_two_correct_alternatives(source):
    right = [f"{source.stem[:2]}.{c.task}" for c in build.read_lesson(source) if c.kind == "right"]
    assert all(right.count(task) >= 2 for task in _tasks(source)), f"{source.name}: {sorted(right)}"


@pytest.mark.parametrize("source", EXERCISES, ids=lambda p: p.stem)
def test_wrong_answers_are_caught_and_correct_alternatives_pass(source, tmp_path):
    solution = build.render(source, "en", "solution")
    code = [cell for cell in solution.cells if cell.cell_type == "code"]
    checks = {task: code[i + 1].source for i, cell in enumerate(code)
              for task in cell.metadata.get("pstutor", {}).get("tasks", [])}
    for round_ in _answer_rounds(source):
        prefix = source.stem[:2]
        answers = {task: _one_after_another([code for code, _ in group], checks[f"{prefix}.{task}"])
                   for task, group in round_.items()}
        notebook = build.render(source, "en", "solution", answers=answers)
        build.execute(notebook, tmp_path)
        for task, group in round_.items():
            records = _records_in_order(notebook, f"{prefix}.{task}")
            assert len(records) == len(group), (task, records)
            for (answer, expected), record in zip(group, records, strict=True):
                if expected:
                    assert (record["status"], record["hint"]) == ("failed", expected), (record, answer)
                    assert record["detail"].startswith("✗ "), record
                else:
                    assert record["status"] == "passed", (record, answer)


def test_a_crashed_answer_cell_gives_a_clear_failure_in_the_check_cell(tmp_path):
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell('import pstutor\npstutor.set_language("en")'),
        nbformat.v4.new_code_cell("def is_chief(resolver):\n    return True\nsave_path = undefined_helper"),
        nbformat.v4.new_code_cell('pstutor.check("09.2", is_chief=is_chief, save_path=save_path)'),
    ])
    NotebookClient(notebook, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    answer, check = notebook.cells[1].outputs, notebook.cells[2].outputs
    assert answer[0]["ename"] == "NameError"  # the ✏️ cell shows its own error
    assert [output["output_type"] for output in check] == ["display_data"], check
    text = check[0]["data"]["text/plain"]
    assert "❌ Task 09.2" in text and "✗ `save_path` is not defined" in text
    assert check[0]["data"][MIME]["hint"] == "answer-missing"


@pytest.mark.parametrize("source", EXERCISES, ids=lambda p: p.stem)
def test_both_languages_have_the_same_headings_and_terms(source):
    cells = build.read_lesson(source)
    for en, zh in itertools.pairwise(cells):
        if en.kind == "en":
            levels = [re.findall(r"^(#+) ", cell.source, re.M) for cell in (en, zh)]
            assert levels[0] == levels[1], f"{source.name}: {en.source[:60]!r}"
            prose = re.sub(r"`[^`]*`", "", zh.source)
            assert "epoch" not in prose.lower(), f"{source.name}: 'epoch' is 周期 in Chinese prose"
