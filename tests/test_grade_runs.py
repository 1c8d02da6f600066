"""How `pstutor grade` behaves as a command: bad settings and outputs refused before anything runs,
an interrupted or killed run that leaves no verdict and nothing behind, a rerun that continues
from the grader's record and regrades what changed, Chinese tables, and the autograder formats."""

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import nbformat
import pytest
from conftest import ROOT, clean_env, descendants, run_grader, run_pstutor

from pstutor import build, metadata
from pstutor.sandbox import bwrap, work_base

SOURCE = ROOT / "lessons" / "exercises" / "01_cluster.md"
SCHEMAS = Path(__file__).parent / "schemas"
needs_bwrap = pytest.mark.skipif(bwrap() is None, reason="needs bubblewrap (apt-get install bubblewrap)")


def _class(folder: Path, names=("a1", "a2", "a3"), variant: str = "exercise") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / f"{name}.ipynb").write_bytes(build.notebook_path(SOURCE, "en", variant).read_bytes())
    return folder


def _rows(table) -> dict[str, dict[str, str]]:
    with open(table, encoding="utf-8") as handle:
        return {row[next(iter(row))]: row for row in csv.DictReader(handle)}


@pytest.mark.parametrize(
    "args, message",
    [
        (["--timeout", "1"], "--timeout"),
        (["--memory", "0"], "must be a number of GiB, at least 1"),
        (["--memory", "nan"], "must be a number of GiB, at least 1"),
        (["--memory", "inf"], "must be a number of GiB, at least 1"),
        (["--out", ""], "--out needs a file name"),
        (["--out", "{tmp}"], "is a folder"),
        (["--out", "{tmp}/notes.txt"], "was not written by pstutor grade"),
        (["--out", str(ROOT / "exercises/en/01_cluster.ipynb")], "would be read as a submission"),
        (["--out", "/proc/pstutor/grades.csv"], "cannot write"),
        (["--accept", "nobody"], "--accept nobody: no submission of that name"),
        (["--exercise", "42"], "no exercise '42'"),
        (["--format", "gradescope", "--out", "{tmp}/notes.txt"], "was not written by pstutor grade"),
    ],
)
def test_bad_settings_and_outputs_are_refused_before_anything_runs(tmp_path, args, message):
    folder = _class(tmp_path / "class", ["a1"])
    notes = tmp_path / "notes.txt"
    notes.write_text("the teacher's notes")
    before = sorted(p.name for p in tmp_path.rglob("*"))
    args = [arg.replace("{tmp}", str(tmp_path)) for arg in args]
    result = run_pstutor("grade", str(folder), "--course", str(ROOT), *args, cwd=tmp_path, timeout=120)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert message in result.stderr and len(result.stderr.strip().splitlines()) <= 3, result.stderr
    assert "Traceback" not in result.stderr
    assert (
        sorted(p.name for p in tmp_path.rglob("*")) == before and notes.read_text() == "the teacher's notes"
    )


def test_grading_outside_a_clone_says_so(tmp_path):
    (tmp_path / "a.ipynb").write_text("{}")
    result = run_pstutor("grade", str(tmp_path), cwd=tmp_path)
    assert result.returncode == 2 and "not inside a clone of the course" in result.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (["/nonexistent/folder"], "is not a folder"),
        ([str(ROOT / "lessons")], "no .ipynb files"),
    ],
)
def test_bad_grading_input_is_refused_with_the_reason(args, message):
    result = run_pstutor("grade", *args)
    assert result.returncode == 2 and message in result.stderr


def test_without_bubblewrap_the_grader_refuses_and_says_what_to_install(tmp_path):
    (tmp_path / "a.ipynb").write_bytes(build.notebook_path(SOURCE, "en", "exercise").read_bytes())
    env = {**clean_env(), "PATH": str(Path(sys.executable).parent)}  # no bwrap on this PATH
    result = subprocess.run(
        [sys.executable, "-m", "pstutor", "grade", str(tmp_path), "--out", str(tmp_path / "g.csv")],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    assert "install bubblewrap" in result.stderr and "--no-sandbox" in result.stderr
    assert not (tmp_path / "g.csv").exists()


def _start(command: list[str]) -> subprocess.Popen:
    return subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(),
        start_new_session=True,
    )


def _stop(grader: subprocess.Popen, sig: int) -> str:
    try:
        grader.send_signal(sig)
        _, err = grader.communicate(timeout=180)
    finally:
        if grader.poll() is None:
            os.killpg(grader.pid, signal.SIGKILL)
            grader.wait()
    return err


@needs_bwrap
def test_a_stopped_grading_keeps_its_results_and_a_rerun_continues(tmp_path):
    folder = _class(tmp_path / "class", variant="solution")  # slow enough to be stopped in the middle
    table = tmp_path / "grades.csv"
    command = [
        sys.executable,
        "-m",
        "pstutor",
        "grade",
        str(folder),
        "--out",
        str(table),
        "--jobs",
        "1",
        "--course",
        str(ROOT),
    ]
    grader = _start(command)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and len(_rows(table) if table.exists() else {}) < 1:
        time.sleep(0.5)
    err = _stop(grader, signal.SIGINT)
    assert grader.returncode == 130, err[-2000:]
    assert "run the same command again" in err
    kept = _rows(table)
    assert 1 <= len(kept) < 3 and all(row["score"] == "3" for row in kept.values())  # no half-graded row
    again = run_pstutor(*command[3:], timeout=900)
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"{len(kept)} submission(s) not run" in again.stdout
    assert list(_rows(table)) == ["a1", "a2", "a3"]
    changed = run_pstutor(*command[3:], "--timeout", "240", timeout=900)  # a setting that can change verdicts
    assert changed.returncode == 0 and "not run" not in changed.stdout and "[3/3]" in changed.stdout


@needs_bwrap
def test_a_plain_kill_leaves_no_verdict_no_folder_and_no_process(tmp_path):
    folder = _class(tmp_path / "class", ["k1", "k2"])
    for path in folder.glob("*.ipynb"):  # an answer changed, so each copy runs (an unchanged one is not run)
        notebook = nbformat.read(path, as_version=4)
        answer = next(c for c in notebook.cells if c.cell_type == "code" and metadata.tasks_of(c))
        answer.source = "import time\ntime.sleep(120)  # still running when the grader is stopped"
        nbformat.write(notebook, path)
    table = tmp_path / "grades.csv"
    grader = _start(
        [
            sys.executable,
            "-m",
            "pstutor",
            "grade",
            str(folder),
            "--out",
            str(table),
            "--jobs",
            "2",
            "--course",
            str(ROOT),
        ]
    )
    pattern = f"pstutor-grade-{grader.pid}-*"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not list(
        Path(work_base()).glob(f"{pattern}/connection.json")
    ):
        time.sleep(0.2)
    time.sleep(3)  # the kernels are starting: the worst moment to be killed
    err = _stop(grader, signal.SIGTERM)
    assert grader.returncode == 128 + signal.SIGTERM, err[-2000:]
    assert not list(Path(work_base()).glob(pattern))
    rows = _rows(table) if table.exists() else {}
    assert all(row["01.1"] not in ("passed", "failed", "crashed") for row in rows.values())  # no verdict
    assert not list(Path("/sys/fs/cgroup/pids").glob(f"pstutor-grade-{grader.pid}*"))
    assert descendants(os.getpid()) == []


@needs_bwrap
def test_a_chinese_table_is_chinese_throughout(tmp_path):
    folder = _class(tmp_path / "class", ["学生甲"])
    table = tmp_path / "成绩.csv"
    result = run_pstutor(
        "--lang", "zh", "grade", str(folder), "--out", str(table), "--course", str(ROOT), timeout=600
    )
    assert result.returncode == 0, result.stderr[-2000:]
    header = table.read_text(encoding="utf-8").splitlines()[0]
    assert header.startswith("学生,练习,语言,识别方式,得分,满分,秒数,人工查看") and "详细信息" in header
    row = _rows(table)["学生甲"]
    assert row["01.1"] == "未作答" and row["识别方式"] == "元数据"
    assert "共 1 份提交" in result.stdout and "学生" in result.stdout and "not attempted" not in result.stdout


@needs_bwrap
def test_gradescope_and_prairielearn_results_of_one_submission(tmp_path):
    folder = _class(tmp_path / "submission", ["mine"], variant="solution")
    schemas = {
        "gradescope": json.loads((SCHEMAS / "gradescope-results.json").read_text()),
        "prairielearn": json.loads((SCHEMAS / "prairielearn-results.json").read_text()),
    }
    for format, schema in schemas.items():
        out = tmp_path / format / "results.json"
        result = run_grader(folder, out, "--format", format, "--exercise", "01", timeout=600)
        assert result.returncode == 0, result.stderr[-2000:]
        payload = json.loads(out.read_text(encoding="utf-8"))
        jsonschema.validate(payload, schema)
        assert payload["score"] == (3 if format == "gradescope" else 1.0)
    (folder / "other.ipynb").write_text("{}")  # two notebooks: the student must submit one
    out = tmp_path / "two" / "results.json"
    result = run_grader(folder, out, "--format", "prairielearn", timeout=300)
    payload = json.loads(out.read_text(encoding="utf-8"))
    assert (
        result.returncode == 0
        and payload["gradable"] is False
        and "exactly one" in payload["format_errors"][0]
    )


@needs_bwrap
def test_a_canvas_gradebook_collects_one_column_per_exercise(tmp_path):
    schema = json.loads((SCHEMAS / "canvas-gradebook.json").read_text())
    out = tmp_path / "gradebook.csv"
    for exercise, source in (("01", SOURCE), ("02", ROOT / "lessons" / "exercises" / "02_sharding.md")):
        folder = tmp_path / exercise
        folder.mkdir()
        (folder / "s1234.ipynb").write_bytes(build.notebook_path(source, "en", "solution").read_bytes())
        result = run_grader(folder, out, "--format", "canvas", timeout=600)
        assert result.returncode == 0, result.stderr[-2000:]
    with open(out, encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    jsonschema.validate(rows, schema)
    assert list(rows[0])[:5] == schema["x-header"] and len(rows) == 2
    student = rows[1]
    assert student["SIS Login ID"] == "s1234" and student["Student"] == "s1234"
    assert [value for key, value in student.items() if key.startswith("Exercise")] == ["3", "3"]


def test_the_submission_kernel_imports_nothing_only_the_grader_needs():
    """Each submission's kernel starts by importing the integrity hook: the grader's own
    machinery (nbformat, and through it jsonschema's grammars, seconds per kernel) stays out."""
    probe = (
        "import sys\n"
        "from pstutor.grading import integrity, kernel\n"
        "grader = ('nbformat', 'jsonschema', 'pstutor.grading.classroom')\n"
        "print(sorted(m for m in grader if m in sys.modules))\n"
        "import pstutor.grading as grading\n"
        "print(grading.grade.__module__, grading.GradingError.__name__)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=clean_env(),
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["[]", "pstutor.grading.classroom GradingError"], done.stdout
