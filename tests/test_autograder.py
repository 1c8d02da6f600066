"""The Gradescope autograder, rehearsed: `pstutor autograder gradescope --exercise 03` writes the files
Gradescope runs, and `run_autograder` runs in a directory laid out exactly as Gradescope's
`/autograder` (bind-mounted there with bubblewrap) for a right, a wrong, a hostile and a
metadata-less submission; each `results.json` must validate against Gradescope's specification."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import nbformat
import pytest
from attacks import REBIND_PSTUTOR
from conftest import ROOT, clean_env, run_pstutor

from pstutor import build, metadata
from pstutor.sandbox import bwrap

SOURCE = ROOT / "lessons" / "exercises" / "03_model_fit.md"
SCHEMA = json.loads((Path(__file__).parent / "schemas" / "gradescope-results.json").read_text())
can_mount = pytest.mark.skipif(
    bwrap() is None or os.geteuid() != 0,
    reason="needs bubblewrap and root to mount a directory at /autograder",
)


def test_the_autograder_files_are_written_once(tmp_path):
    out = tmp_path / "autograder"
    result = run_pstutor(
        "autograder", "gradescope", "--exercise", "03", "--out", str(out), "--course", str(ROOT)
    )
    assert result.returncode == 0, result.stderr
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == [
        "course/exercises/en/03_model_fit.ipynb",
        "course/exercises/zh/03_model_fit.ipynb",
        "course/pyproject.toml",
        "run_autograder",
        "setup.sh",
    ]
    assert os.access(out / "run_autograder", os.X_OK) and os.access(out / "setup.sh", os.X_OK)
    assert "apt-get install -y bubblewrap" in (out / "setup.sh").read_text()
    assert "--format gradescope --exercise 03" in (out / "run_autograder").read_text()
    again = run_pstutor(
        "autograder", "gradescope", "--exercise", "03", "--out", str(out), "--course", str(ROOT)
    )
    assert again.returncode == 2 and "not an empty folder" in again.stderr
    missing = run_pstutor("autograder", "gradescope", "--exercise", "42", "--out", str(tmp_path / "x"))
    assert missing.returncode == 2 and "no exercise" in missing.stderr and not (tmp_path / "x").exists()


def _submission(kind: str, folder: Path) -> None:
    folder.mkdir(parents=True)
    if kind == "right":
        shutil.copy(build.notebook_path(SOURCE, "en", "solution"), folder / "mine.ipynb")
        return
    if kind == "metadata-less":  # a Chinese solution that an editor saved without any metadata
        notebook = json.loads(build.notebook_path(SOURCE, "zh", "solution").read_text(encoding="utf-8"))
        notebook["metadata"] = {}
        for cell in notebook["cells"]:
            cell["metadata"] = {}
        (folder / "mine.ipynb").write_text(json.dumps(notebook), encoding="utf-8")
        return
    wrong = next(
        c.source
        for c in build.read_lesson(SOURCE)
        if c.kind == "wrong" and c.expect == "shuffle" and "seed=42" in c.source
    )
    hostile = REBIND_PSTUTOR.replace("resolver = strategy = 1", "dataset = model = history = 1")
    answers = {"03.1": wrong} if kind == "wrong" else {"03.1": hostile}
    notebook = build.render(SOURCE, "en", "exercise")
    solution = build.render(SOURCE, "en", "solution")
    for cell, solved in zip(notebook.cells, solution.cells, strict=True):
        tasks = metadata.tasks_of(cell)
        if tasks == ["03.1"]:
            cell.source = answers["03.1"]
        elif tasks:
            cell.source = solved.source
    nbformat.write(notebook, folder / "mine.ipynb")


def _run_in_autograder(root: Path) -> subprocess.CompletedProcess:
    """`/autograder/run_autograder` with `root` mounted at /autograder, the rest of the machine as it is."""
    line = ["bwrap", "--die-with-parent", "--dev-bind", "/dev", "/dev", "--proc", "/proc"]
    for entry in sorted(os.listdir("/")):
        path = f"/{entry}"
        if entry in ("proc", "dev", "autograder"):
            continue
        if os.path.islink(path):
            line += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            line += ["--bind", path, path]
    line += ["--bind", str(root), "/autograder", "--chdir", "/autograder", "/autograder/run_autograder"]
    env = {**clean_env(), "PSTUTOR": f"{sys.executable} -m pstutor"}
    return subprocess.run(line, capture_output=True, text=True, env=env, timeout=1500)


@can_mount
@pytest.mark.parametrize("kind", ["right", "wrong", "hostile", "metadata-less"])
def test_run_autograder_writes_a_valid_results_json(tmp_path, kind):
    files = tmp_path / "zip"
    assert (
        run_pstutor(
            "autograder", "gradescope", "--exercise", "03", "--out", str(files), "--course", str(ROOT)
        ).returncode
        == 0
    )
    root = tmp_path / "autograder"  # as Gradescope lays it out
    shutil.copytree(files, root / "source")
    shutil.copy2(files / "run_autograder", root / "run_autograder")
    (root / "results").mkdir()
    _submission(kind, root / "submission")
    done = _run_in_autograder(root)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-3000:])
    results = json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))
    jsonschema.validate(results, SCHEMA)
    scores = {test["number"]: test["score"] for test in results["tests"]}
    if kind in ("right", "metadata-less"):
        assert results["score"] == 2 and scores == {"03.1": 1, "03.2": 1}, results
        assert results["extra_data"]["pstutor-grade"]["matched"] == (
            "metadata" if kind == "right" else "content"
        )
    elif kind == "wrong":
        assert scores["03.1"] == 0 and "every worker reads the same batches" in results["tests"][0]["output"]
    else:
        assert scores["03.1"] == 0 and "teacher" in results["tests"][0]["output"], results
    if kind == "metadata-less":
        assert results["tests"][0]["name"] == "任务 03.1"  # in the student's language
