"""No false flags: every worked solution and every correct alternative of every exercise
(`<!-- cell: right task=k -->`) is graded by the real grader — sandbox, cgroups, the integrity
hook in the kernel — with every task passed, full marks and nothing to review. The attacks the
hook must catch are in test_grade.py; these answers are what it must leave alone."""

import csv

import nbformat
import pytest
from conftest import ROOT, run_grader

from pstutor import build
from pstutor.sandbox import bwrap

EXERCISES = build.exercise_paths(ROOT)
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
