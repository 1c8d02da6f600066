"""No false flags: every worked solution and every correct alternative of every exercise
(`<!-- cell: right task=k -->`) is graded by the real grader — sandbox, cgroups, the integrity
hook in the kernel — with every task passed, full marks and nothing to review. Most attacks the
hook must catch are in test_grade.py; the ones here reached the hook's own state or its seal through
code it took for the course's (`attacks.HOLES`), beside a solution that must still pass."""

import csv

import nbformat
import pytest
from attacks import HOLES
from conftest import ROOT, run_grader

from pstutor import build, metadata
from pstutor.sandbox import bwrap

EXERCISES = build.exercise_paths(ROOT)
CLUSTER = ROOT / "lessons" / "exercises" / "01_cluster.md"
needs_bwrap = pytest.mark.skipif(bwrap() is None, reason="needs bubblewrap (apt-get install bubblewrap)")


def _rounds(source) -> list[dict[str, str]]:
    """The correct alternatives in as few notebooks as possible: round i takes the i-th of every task."""
    per_task: dict[str, list[str]] = {}
    for cell in build.read_lesson(source):
        if cell.kind == "right":
            per_task.setdefault(cell.task, []).append(cell.source)
    return [
        {task: answers[i] for task, answers in per_task.items() if i < len(answers)}
        for i in range(max(map(len, per_task.values())))
    ]


@needs_bwrap
@pytest.mark.parametrize("source", EXERCISES, ids=lambda p: p.stem)
def test_no_solution_and_no_correct_alternative_is_flagged(source, tmp_path):
    folder = tmp_path / "class"
    folder.mkdir()
    (folder / "solution.ipynb").write_bytes(build.notebook_path(source, "zh", "solution").read_bytes())
    for index, answers in enumerate(_rounds(source)):
        nbformat.write(
            build.render(source, "en", "solution", answers=answers), folder / f"right-{index + 1}.ipynb"
        )
    table = tmp_path / "grades.csv"
    result = run_grader(folder, table, "--jobs", "2", "--timeout", "600")
    assert result.returncode == 0, result.stderr[-3000:]
    with open(table, encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == len(_rounds(source)) + 1
    for row in rows:
        assert row["review"] == "" and row["score"] == row["max score"], (row["student"], row["details"])


def _with_answer(path, task: str, attack: str) -> None:
    """Exercise 01 with `attack` as the answer to `task`, the solution's answers before it."""
    notebook = build.render(CLUSTER, "en", "exercise")
    solution = build.render(CLUSTER, "en", "solution")
    for cell, solved in zip(notebook.cells, solution.cells, strict=True):
        tasks = metadata.tasks_of(cell)
        if tasks and tasks[0] == task:
            cell.source = attack
        elif tasks and tasks[0] < task:
            cell.source = solved.source
    nbformat.write(notebook, path)


@pytest.fixture(scope="module")
def holes(tmp_path_factory) -> dict[str, dict[str, str]]:
    """One grading run: every attack of `HOLES` beside the solution."""
    folder = tmp_path_factory.mktemp("holes")
    (folder / "control.ipynb").write_bytes(build.notebook_path(CLUSTER, "en", "solution").read_bytes())
    for name, (task, attack) in HOLES.items():
        _with_answer(folder / f"{name}.ipynb", task, attack)
    table = folder / "grades.csv"
    result = run_grader(folder, table, "--jobs", "2", "--timeout", "300")
    assert result.returncode == 0, result.stderr[-3000:]
    with open(table, encoding="utf-8") as handle:
        return {row["student"]: row for row in csv.DictReader(handle)}


@needs_bwrap
def test_the_control_beside_the_holes_passes(holes):
    row = holes["control"]
    assert row["review"] == "" and row["score"] == row["max score"] == "3", row


@needs_bwrap
@pytest.mark.parametrize("attack", list(HOLES))
def test_code_the_answer_made_is_never_the_courses(holes, attack):
    task = HOLES[attack][0]
    row = holes[attack]
    assert row[task] in ("needs review", "crashed", "failed"), row
    assert row["score"] == str(int(task[-1]) - 1), row  # only the solution's answers before it count
    assert row["review"] or "Refused" in row["details"], row
