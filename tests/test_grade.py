"""`pstutor grade`: a class's submissions are graded task by task; a broken or hostile
submission is reported as such and never stops the others or touches the teacher's files."""

import csv
import os
import shutil
import subprocess
import sys

import nbformat
import pytest
from conftest import ROOT, descendants, run_pstutor

from pstutor import build
from pstutor.sandbox import landlock_version

SOURCE = ROOT / "lessons" / "exercises" / "01_cluster.md"


def _submission(path, answers: dict[str, str], lang: str = "en") -> None:
    """A student copy with some answer cells filled in ("SOLUTION" takes the official answer)."""
    notebook = build.render(SOURCE, lang, "exercise")
    solution = build.render(SOURCE, lang, "solution")
    for cell, solved in zip(notebook.cells, solution.cells, strict=True):
        tasks = cell.metadata.get("pstutor", {}).get("tasks", [])
        if tasks and tasks[0] in answers:
            cell.source = solved.source if answers[tasks[0]] == "SOLUTION" else answers[tasks[0]]
    nbformat.write(notebook, path)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """One grading run over a small class: correct, empty, wrong, crashing, hostile and invalid work."""
    teacher = tmp_path_factory.mktemp("teacher")
    keep = teacher / "keep.txt"
    keep.write_text("the teacher's notes")
    folder = teacher / "submissions"
    folder.mkdir()
    shutil.copy(build.notebook_path(SOURCE, "en", "solution"), folder / "ada.ipynb")
    shutil.copy(build.notebook_path(SOURCE, "zh", "exercise"), folder / "bo.ipynb")
    wrong = {c.task: c.source for c in build.read_lesson(SOURCE) if c.kind == "wrong"
             and c.expect in ("worker-count", "chief-missing")}
    _submission(folder / "cy.ipynb", {"01.1": wrong["1"], "01.2": wrong["2"]})
    _submission(folder / "di.ipynb", {"01.1": "def broken(:\n    pass",
                                      "01.2": "raise RuntimeError('lost my notes')"})
    _submission(folder / "eve.ipynb", {
        "01.1": f"import os\nos.remove({str(keep)!r})\nresolver = strategy = None",
        "01.2": "while True:\n    pass",
    })
    (folder / "fay.ipynb").write_text("{ this is not a notebook")
    before = {p: p.read_bytes() for p in folder.iterdir()}
    table = teacher / "out" / "grades.csv"
    result = run_pstutor("grade", str(folder), "--out", str(table), "--timeout", "40", timeout=600)
    return result, table, keep, before


def _rows(table) -> dict[str, dict[str, str]]:
    with open(table, encoding="utf-8") as handle:
        return {row["student"]: row for row in csv.DictReader(handle)}


@pytest.mark.skipif(landlock_version() < 1, reason="needs Landlock (Linux 5.13+) for the write-fence")
def test_a_class_is_graded_task_by_task(graded):
    result, table, _, _ = graded
    assert result.returncode == 0, result.stderr[-3000:]
    rows = _rows(table)
    assert list(rows) == ["ada", "bo", "cy", "di", "eve", "fay"]
    statuses = {name: [row["01.1"], row["01.2"], row["01.3"]] for name, row in rows.items()}
    assert statuses["ada"] == ["passed"] * 3
    assert statuses["bo"] == ["not attempted"] * 3
    assert statuses["cy"] == ["failed", "failed", "not attempted"]
    assert "count the tasks of the 'worker' job" in rows["cy"]["details"]
    assert "coordinator (chief)" in rows["cy"]["details"]
    assert statuses["di"] == ["crashed", "crashed", "not attempted"]
    assert "SyntaxError" in rows["di"]["details"] and "lost my notes" in rows["di"]["details"]
    assert statuses["eve"] == ["crashed", "crashed", "not attempted"]
    assert "PermissionError" in rows["eve"]["details"] and "time limit" in rows["eve"]["details"]
    assert statuses["fay"] == ["invalid"] * 3 and "JSON" in rows["fay"]["details"]
    assert "1 with every task passed" in result.stdout


@pytest.mark.skipif(landlock_version() < 1, reason="needs Landlock (Linux 5.13+) for the write-fence")
def test_nothing_of_the_teacher_is_changed_and_nothing_keeps_running(graded):
    _, table, keep, before = graded
    assert keep.read_text() == "the teacher's notes"
    assert {p: p.read_bytes() for p in before} == before
    assert set(table.parent.iterdir()) == {table}
    assert descendants(os.getpid()) == []


def test_the_fence_blocks_writes_outside_its_folder(tmp_path):
    if landlock_version() < 1:
        pytest.skip("needs Landlock")
    inside, outside = tmp_path / "inside", tmp_path / "outside.txt"
    inside.mkdir()
    outside.write_text("safe")
    code = (
        "import os, sys\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from pstutor.sandbox import fence_writes\n"
        f"fence_writes({str(inside)!r})\n"
        f"open({str(inside / 'ok.txt')!r}, 'w').write('fine')\n"
        f"try:\n    os.remove({str(outside)!r})\nexcept PermissionError:\n    print('blocked')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "blocked", done.stderr
    assert outside.read_text() == "safe" and (inside / "ok.txt").read_text() == "fine"


@pytest.mark.parametrize("args, message", [
    (["/nonexistent/folder"], "is not a folder"),
    ([str(ROOT / "lessons")], "no .ipynb files"),
])
def test_bad_grading_input_is_refused_with_the_reason(args, message):
    result = run_pstutor("grade", *args)
    assert result.returncode == 2 and message in result.stderr
