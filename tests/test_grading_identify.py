"""Reading submissions without running them: by the metadata the build writes, or — when an editor,
a learning platform or a fresh notebook lost it — by the cells; and refusing, before parsing,
files no notebook of the course looks like. No kernel runs here."""

import json
import os
import time

import nbformat
import pytest
from conftest import ROOT, run_python

from pstutor import build, metadata
from pstutor.grading.identify import MAX_NOTEBOOK_BYTES, Invalid, catalogue, identify
from pstutor.grading.run import prepare

EXERCISES = catalogue(ROOT)
SOURCE = ROOT / "lessons" / "exercises" / "03_model_fit.md"


def _write(path, notebook) -> None:
    path.write_text(json.dumps(notebook), encoding="utf-8")


def _stripped(lang: str = "en", variant: str = "solution") -> dict:
    """A committed notebook as an editor that drops unknown metadata saves it."""
    notebook = json.loads(build.notebook_path(SOURCE, lang, variant).read_text(encoding="utf-8"))
    notebook["metadata"] = {"kernelspec": notebook["metadata"]["kernelspec"]}
    for cell in notebook["cells"]:
        cell["metadata"] = {}
    return notebook


def test_the_exercise_comes_from_the_notebook_metadata(tmp_path):
    path = build.notebook_path(SOURCE, "zh", "exercise")
    found = identify(path, EXERCISES)
    assert (found.exercise.source, found.exercise.lang, found.matched) == ("03_model_fit", "zh", "metadata")
    assert json.loads(path.read_text())["metadata"]["pstutor"]["schema"] == metadata.SCHEMA


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_notebook_without_metadata_is_recognised_by_its_cells(tmp_path, lang):
    _write(tmp_path / "s.ipynb", _stripped(lang))
    found = identify(tmp_path / "s.ipynb", EXERCISES)
    assert (found.exercise.source, found.exercise.lang, found.matched) == ("03_model_fit", lang, "content")
    solution = build.render(SOURCE, lang, "solution")
    expected = {tuple(metadata.tasks_of(c)): c.source for c in solution.cells if metadata.tasks_of(c)}
    assert found.answers == expected


def test_answers_pasted_into_a_fresh_notebook_are_the_same_answers(tmp_path):
    """Only the answer and check cells, in a new notebook with no title and no metadata at all."""
    solution = build.render(SOURCE, "en", "solution")
    code = [c for c in solution.cells if c.cell_type == "code"]
    kept = [
        cell
        for index, cell in enumerate(code)
        if metadata.tasks_of(cell) or (index and metadata.tasks_of(code[index - 1]))
    ]
    fresh = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(cell.source) for cell in kept])
    nbformat.write(fresh, tmp_path / "fresh.ipynb")
    found = identify(tmp_path / "fresh.ipynb", EXERCISES)
    assert (found.exercise.source, found.exercise.lang, found.matched) == ("03_model_fit", "en", "content")
    from_copy = identify(build.notebook_path(SOURCE, "en", "solution"), EXERCISES)
    assert found.answers == from_copy.answers
    assert prepare(found).notebook.cells == prepare(from_copy).notebook.cells  # graded exactly alike


def test_an_answer_cell_that_kept_its_pencil_line_is_found(tmp_path):
    notebook = _stripped("zh", "exercise")
    for cell in notebook["cells"]:  # no check cells at all: only the title and the ✏️ line are left
        if "pstutor.check(" in "".join(cell["source"]):
            cell["source"] = "# (the student deleted the check)"
    _write(tmp_path / "x.ipynb", notebook)
    found = identify(tmp_path / "x.ipynb", EXERCISES)
    assert (found.exercise.source, found.exercise.lang) == ("03_model_fit", "zh")
    assert sorted(found.answers) == [("03.1",), ("03.2",)]


def test_an_old_release_copy_is_read_as_schema_1(tmp_path):
    notebook = json.loads(build.notebook_path(SOURCE, "en", "exercise").read_text())
    del notebook["metadata"]["pstutor"]["schema"]
    _write(tmp_path / "old.ipynb", notebook)
    assert identify(tmp_path / "old.ipynb", EXERCISES).matched == "metadata"


@pytest.mark.parametrize(
    "cells, reason",
    [
        ([], "not recognised"),
        (['import pstutor\npstutor.check("03.1", a=1)', 'pstutor.check("01.2", b=2)'], "exercises 01, 03"),
        (['pstutor.check("42.1", a=1)'], "no exercise 42"),
    ],
)
def test_a_notebook_that_matches_no_exercise_or_two_is_invalid(tmp_path, cells, reason):
    nbformat.write(
        nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells]), tmp_path / "n.ipynb"
    )
    with pytest.raises(Invalid) as caught:
        identify(tmp_path / "n.ipynb", EXERCISES)
    assert reason in caught.value.reason["en"] and caught.value.reason["zh"]


def test_another_exercise_than_the_assignment_is_invalid(tmp_path):
    with pytest.raises(Invalid, match="not 01"):
        identify(build.notebook_path(SOURCE, "en", "solution"), EXERCISES, only="01")


@pytest.mark.parametrize(
    "make, reason",
    [
        (lambda p: p.write_bytes(b"[" * 100_000 + b"]" * 100_000), "nested deeper"),
        (lambda p: p.write_bytes(b'{"cells": [' + b"0," * 1_200_000 + b"0]}"), "JSON values"),
        (lambda p: p.write_bytes(b" " * (MAX_NOTEBOOK_BYTES + 1)), "larger than"),
        (
            lambda p: p.write_text(json.dumps({"cells": [{"cell_type": "code", "source": ""}] * 2001})),
            "2000 cells",
        ),
        (lambda p: p.write_bytes(b"\xff\xfe not json"), "not JSON"),
        (lambda p: p.write_text("[1, 2, 3]"), "no list of cells"),
        (lambda p: os.mkfifo(p), "not a regular file"),
        (lambda p: p.symlink_to("/etc/passwd"), "not a regular file"),
    ],
)
def test_files_no_notebook_looks_like_are_refused_before_parsing(tmp_path, make, reason):
    path = tmp_path / "odd.ipynb"
    make(path)
    started = time.monotonic()
    with pytest.raises(Invalid) as caught:
        identify(path, EXERCISES)
    assert reason in caught.value.reason["en"], caught.value.reason
    assert time.monotonic() - started < 10


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: f"{e.source[:2]}-{e.lang}")
def test_a_copy_as_handed_out_is_not_attempted_without_starting_a_kernel(monkeypatch, tmp_path, exercise):
    from pstutor.grading import classroom

    started = []
    monkeypatch.setattr(classroom, "execute", lambda prepared, *a, **k: started.append(prepared) or {})
    monkeypatch.setattr(classroom, "verdicts", lambda prepared, *a, **k: {})
    grade = lambda found: classroom.grade_one(  # noqa: E731
        found, ROOT, timeout=60, program=None, slot=None, memory=1 << 30, running=set(), stopping=None)

    untouched = grade(identify(exercise.path, EXERCISES))
    tasks = prepare(identify(exercise.path, EXERCISES)).attempted
    assert not started and tasks and list(untouched) == sorted(tasks)
    assert {result.status for result in untouched.values()} == {"not attempted"}

    notebook = nbformat.read(exercise.path, as_version=4)
    answer = next(cell for cell in notebook.cells if metadata.tasks_of(cell) and cell.cell_type == "code")
    answer.source += "\npass"
    nbformat.write(notebook, tmp_path / "changed.ipynb")
    grade(identify(tmp_path / "changed.ipynb", EXERCISES))
    assert len(started) == 1  # one changed answer: the notebook runs


@pytest.mark.parametrize("tail", [b"", b"\\"])
def test_a_file_made_to_slow_the_shape_check_is_refused_at_once(tmp_path, tail):
    """A quote and then escaped quotes up to the size limit: a JSON-string search that starts again
    inside the string takes quadratic time (about two hours for 1 MiB); this one reads it in one pass."""
    path = tmp_path / "zz.ipynb"
    path.write_bytes(b'"' + b'\\"' * ((MAX_NOTEBOOK_BYTES - 3) // 2) + tail)
    code = (
        "import sys\nfrom pathlib import Path\n"
        "from pstutor.grading.identify import Invalid, catalogue, identify\n"
        "try:\n    identify(Path(sys.argv[1]), catalogue(Path(sys.argv[2])))\n"
        "except Invalid as err:\n    print('invalid:', err)\n"
    )
    result = run_python(code, str(path), str(ROOT), timeout=120)  # seconds; the old search: years
    assert result.returncode == 0 and result.stdout.startswith("invalid:"), result.stderr[-2000:]
