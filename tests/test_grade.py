"""`pstutor grade`: a class's submissions are graded task by task, each in its own sandbox and cgroup;
a broken or hostile submission is reported as such and can neither forge a verdict, stop the
grader, reach a classmate nor touch the teacher's files or screen. The attacks are in
`attacks.py`; each ran against the real grader here, beside solutions that must still pass."""

import csv
import json
import os
import tempfile
import time
from pathlib import Path

import nbformat
import pytest
from attacks import EXIT, FORGERS, FORGERS_OF_TASK, ODD_ERROR, ODD_TREE
from conftest import ROOT, clean_env, descendants, run_grader

from pstutor import build, metadata
from pstutor.sandbox import bwrap

SOURCE = ROOT / "lessons" / "exercises" / "01_cluster.md"
MARKER = "pstutor-left-behind-marker"
SECRET = "pstutor-teacher-secret-4711"
TIMEOUT = "150"  # seconds per student: a solution takes 30-90 s here, on a shared 2-core machine
needs_bwrap = pytest.mark.skipif(bwrap() is None, reason="needs bubblewrap (apt-get install bubblewrap)")


def _submission(path, answers: dict[str, str], lang: str = "en") -> None:
    """A student copy with some answer cells filled in ("SOLUTION" takes the official answer)."""
    notebook = build.render(SOURCE, lang, "exercise")
    solution = build.render(SOURCE, lang, "solution")
    for cell, solved in zip(notebook.cells, solution.cells, strict=True):
        tasks = metadata.tasks_of(cell)
        if tasks and tasks[0] in answers:
            cell.source = solved.source if answers[tasks[0]] == "SOLUTION" else answers[tasks[0]]
    nbformat.write(notebook, path)


def _pasted(path) -> None:
    """The solution's answer and check cells pasted into a new notebook: no metadata, no title."""
    cells = [c for c in build.render(SOURCE, "en", "solution").cells if c.cell_type == "code"]
    keep = [c for i, c in enumerate(cells) if metadata.tasks_of(c) or (i and metadata.tasks_of(cells[i - 1]))]
    setup = [c for c in cells if "import portpicker" in c.source]
    nbformat.write(
        nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c.source) for c in setup + keep]), path
    )


def _stripped(path) -> None:
    """The solution as an editor that drops unknown metadata saves it."""
    notebook = json.loads(build.notebook_path(SOURCE, "zh", "solution").read_text(encoding="utf-8"))
    notebook["metadata"] = {}
    for cell in notebook["cells"]:
        cell["metadata"] = {}
    path.write_text(json.dumps(notebook), encoding="utf-8")


COPY_SOLUTION = f"""import json
cells = json.load(open({str(ROOT / "solutions/en/01_cluster.ipynb")!r}))["cells"]
exec("".join(cells[7]["source"]))"""


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """One grading run over a class: correct, empty, wrong, crashing, hostile and invalid work."""
    teacher = tmp_path_factory.mktemp("teacher")
    keep = teacher / "keep.txt"
    keep.write_text("the teacher's notes")
    os.utime(keep, (1_000_000_000, 1_000_000_000))
    folder = teacher / "submissions"
    folder.mkdir()
    (folder / "ada.ipynb").write_bytes(build.notebook_path(SOURCE, "en", "solution").read_bytes())
    (folder / "bo.ipynb").write_bytes(build.notebook_path(SOURCE, "zh", "exercise").read_bytes())
    wrong = {
        c.task: c.source
        for c in build.read_lesson(SOURCE)
        if c.kind == "wrong" and c.expect in ("worker-count", "chief-missing")
    }
    _submission(folder / "cy.ipynb", {"01.1": wrong["1"], "01.2": wrong["2"]})
    _submission(folder / "cyzh.ipynb", {"01.1": wrong["1"]}, lang="zh")
    _submission(
        folder / "di.ipynb",
        {
            "01.1": "resolver = strategy = 1\n\ndef broken(:\n    pass",
            "01.2": "x = 1\nraise RuntimeError('lost my notes')",
        },
    )
    _submission(
        folder / "eve.ipynb",
        {
            "01.1": "import os\n"
            f"os.chmod({str(keep)!r}, 0o777)\nos.utime({str(keep)!r}, (0, 0))\nos.remove({str(keep)!r})",
            "01.2": "while True:\n    pass",
        },
    )
    _pasted(folder / "paste.ipynb")
    _stripped(folder / "stripped.ipynb")
    for name, attack in FORGERS.items():
        _submission(folder / f"forger-{name}.ipynb", {"01.1": attack})
    for name, (task, attack) in FORGERS_OF_TASK.items():
        _submission(folder / f"forger-{name}.ipynb", {task: attack})
    _submission(folder / "copier.ipynb", {"01.1": COPY_SOLUTION})
    _submission(
        folder / "spy.ipynb",
        {
            "01.1": f"raise RuntimeError(open({str(folder / 'ada.ipynb')!r}).read()[:80])",
            "01.2": "import os\nraise RuntimeError(os.environ.get('PSTUTOR_TEST_SECRET', 'no secret'))",
            "01.3": "import socket\nsocket.create_connection(('1.1.1.1', 80), timeout=5)",
        },
    )
    _submission(
        folder / "vandal.ipynb",
        {
            "01.1": "import os, signal\nopen('/dev/shm/left-behind', 'w').write('x')\n"
            "for target in (os.getppid(), 1):  # refused where the grader is root, ignored elsewhere\n"
            "    try:\n        os.kill(target, signal.SIGKILL)\n    except PermissionError:\n        pass",
            "01.2": "import os, subprocess, sys\n"
            f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)  # {MARKER}'],"
            " start_new_session=True)\n"
            "pid = os.fork()\nif pid == 0:\n    os.setsid()\n    os.execvp('sleep', ['sleep', '301'])\n"
            "raise RuntimeError('spawned two survivors')",
        },
    )
    _submission(
        folder / "hog.ipynb",
        {
            "01.1": "import time\nblocks = []\nfor _ in range(40):\n"
            "    blocks.append(b'x' * (100 << 20))\n    time.sleep(0.05)"
        },
    )
    forks = "import subprocess, time\nchildren = [subprocess.Popen(['sleep', '60']) for _ in range(250)]"
    _submission(folder / "forker.ipynb", {"01.1": forks + "\ntime.sleep(30)"})
    _submission(folder / "odd-error.ipynb", {"01.1": ODD_ERROR, "01.2": "SOLUTION"})
    _submission(folder / "odd-tree.ipynb", {"01.1": ODD_TREE, "01.2": "SOLUTION"})
    _submission(folder / "exiter.ipynb", {"01.1": "SOLUTION", "01.2": "SOLUTION", "01.3": EXIT})
    (folder / "fay.ipynb").write_text("{ this is not a notebook")
    os.mkfifo(folder / "fifo.ipynb")
    (folder / "folder.ipynb").mkdir()
    (folder / "link.ipynb").symlink_to(keep)
    for name in ('=HYPERLINK("evil")', "=bob", "'=bob"):
        _submission(folder / f"{name}.ipynb", {})
    odd = os.open(os.fsencode(folder) + b"/bad\xff\x1b[2J\x1b[31mname.ipynb", os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(odd, build.notebook_path(SOURCE, "en", "exercise").read_bytes())
    os.close(odd)
    before = {
        p: p.read_bytes()
        for p in folder.iterdir()
        if p.is_file() and not p.is_symlink() and p.name != "fifo.ipynb"
    }
    keep_stat = keep.stat()
    table = teacher / "out" / "grades.csv"
    env = {**clean_env(), "PSTUTOR_TEST_SECRET": SECRET}
    sandboxes_before = set(Path(tempfile.gettempdir()).glob("pstutor-grade-*"))
    started = time.monotonic()
    result = run_grader(folder, table, "--timeout", TIMEOUT, "--jobs", "2", "--memory", "2",
                        env=env, cwd=teacher)
    print(f"graded {len(before) + 3} submissions in {time.monotonic() - started:.0f} s")
    return result, table, keep, before, keep_stat, sandboxes_before


def _rows(table) -> dict[str, dict[str, str]]:
    with open(table, encoding="utf-8") as handle:
        return {row["student"]: row for row in csv.DictReader(handle)}


def _statuses(row) -> list[str]:
    return [row["01.1"], row["01.2"], row["01.3"]]


@needs_bwrap
def test_a_class_is_graded_task_by_task(graded):
    result, table, *_ = graded
    assert result.returncode == 0, result.stderr[-3000:]
    rows = _rows(table)
    assert _statuses(rows["ada"]) == ["passed"] * 3 and (rows["ada"]["score"], rows["ada"]["max score"]) == (
        "3",
        "3",
    )
    assert rows["ada"]["review"] == "" and rows["ada"]["matched by"] == "metadata"
    assert _statuses(rows["bo"]) == ["not attempted"] * 3 and rows["bo"]["score"] == "0"
    assert _statuses(rows["cy"]) == ["failed", "failed", "not attempted"]
    assert "✗" in rows["cy"]["details"] and "count the tasks of the 'worker' job" in rows["cy"]["details"]
    assert "count the tasks of the 'worker' job" in rows["cyzh"]["details"]  # the table's language
    assert _statuses(rows["di"]) == ["crashed", "crashed", "not attempted"]
    assert "SyntaxError" in rows["di"]["details"] and "line 3" in rows["di"]["details"]
    crash = "RuntimeError: lost my notes (line 2: raise RuntimeError('lost my notes'))"
    assert crash in rows["di"]["details"] and ".py" not in rows["di"]["details"]
    assert _statuses(rows["eve"])[:2] == ["crashed", "crashed"] and "time limit" in rows["eve"]["details"]
    untouched = {"not attempted"}  # a copy as handed out is not run: its seconds may round to 0
    ran = [row for row in rows.values() if row["seconds"] and set(_statuses(row)) != untouched]
    assert ran and all(float(row["seconds"]) > 0 for row in ran)
    assert "with every task passed" in result.stdout and "limits: cgroup" in result.stdout


@needs_bwrap
@pytest.mark.parametrize("student", ["paste", "stripped"])
def test_an_answer_without_metadata_is_graded_like_the_handed_out_copy(graded, student):
    row = _rows(graded[1])[student]
    assert _statuses(row) == ["passed"] * 3 and row["score"] == "3" and row["review"] == "", row
    assert row["matched by"] == "content" and row["language"] == ("en" if student == "paste" else "zh")


@needs_bwrap
@pytest.mark.parametrize("forger", [*(f"forger-{name}" for name in FORGERS), "copier"])
def test_no_forged_verdict_scores(graded, forger):
    row = _rows(graded[1])[forger]
    assert row["score"] == "0" and row["01.1"] != "passed", row
    if row["01.1"] == "needs review":
        assert row["review"].startswith("needs review (01.1 counts 0 until accepted)"), row
    else:  # the attack itself was refused, or the genuine check failed: 0 points either way
        assert row["01.1"] in ("crashed", "failed"), row
    assert row["review"] or "Refused" in row["details"] or "FileNotFoundError" in row["details"], row


@needs_bwrap
@pytest.mark.parametrize("forger", list(FORGERS_OF_TASK))
def test_no_forged_verdict_of_another_task_scores(graded, forger):
    task = FORGERS_OF_TASK[forger][0]
    row = _rows(graded[1])[f"forger-{forger}"]
    assert row["score"] == "0" and row[task] in ("needs review", "failed"), row
    assert row["review"] or row[task] == "failed", row


@needs_bwrap
def test_the_reasons_say_what_the_answer_did(graded):
    rows = _rows(graded[1])
    assert "changes functions, classes or modules" in rows["forger-registry"]["review"]
    assert "_CHECKS changed" in rows["forger-registry"]["details"]
    assert "Refused: pstutor grading: sys._getframe" in rows["forger-frames"]["details"]
    assert "Refused" in rows["forger-graph"]["details"] and "Refused" in rows["forger-foreign"]["details"]
    assert "reads process memory" in rows["forger-memory"]["review"]
    assert "reads process memory" in rows["forger-memory-map"]["review"]
    assert "the checker did not give" in rows["forger-rebind"]["review"]
    assert "leaves threads running" in rows["forger-thread"]["review"]
    assert "verdict outside the official check" in rows["forger-audit"]["review"]
    assert (
        "objects of classes it wrote" in rows["forger-imitation"]["review"]
        or rows["forger-imitation"]["01.3"] == "failed"
    )
    assert "json.loads changed" in rows["forger-library"]["details"]


@needs_bwrap
def test_no_secret_no_classmate_no_network_is_reachable(graded):
    spy = _rows(graded[1])["spy"]["details"]
    assert "FileNotFoundError" in spy and SECRET not in spy and "no secret" in spy
    assert "Network is unreachable" in spy or "OSError" in spy
    assert "nbformat" not in spy  # nothing of ada's notebook


@needs_bwrap
def test_the_grader_survives_and_nothing_is_left_behind(graded):
    result, table, keep, before, keep_stat, sandboxes_before = graded
    assert result.returncode == 0
    vandal = _rows(table)["vandal"]
    assert _statuses(vandal)[:2] == ["failed", "crashed"], vandal  # it lived on after its kill
    assert "`resolver` is not defined" in vandal["details"] and "spawned two survivors" in vandal["details"]
    assert keep.read_text() == "the teacher's notes"
    after = keep.stat()
    assert (after.st_mode, after.st_mtime, after.st_uid) == (
        keep_stat.st_mode,
        keep_stat.st_mtime,
        keep_stat.st_uid,
    )
    assert {p: p.read_bytes() for p in before} == before
    assert not Path("/dev/shm/left-behind").exists()
    assert sorted(p.name for p in table.parent.iterdir()) == ["grades.csv", "grades.csv.pstutor.json"]
    left = [pid for pid in os.listdir("/proc") if pid.isdigit() and _cmdline_has(pid, MARKER)]
    assert left == [] and descendants(os.getpid()) == []
    assert set(Path(tempfile.gettempdir()).glob("pstutor-grade-*")) <= sandboxes_before
    assert not list(Path("/sys/fs/cgroup/pids").glob("pstutor-grade-*"))


def _cmdline_has(pid: str, text: str) -> bool:
    try:
        return text in Path(f"/proc/{pid}/cmdline").read_text(errors="replace")
    except OSError:
        return False


@needs_bwrap
def test_limits_and_odd_files(graded):
    rows = _rows(graded[1])
    assert "memory limit of 2 GiB" in rows["hog"]["details"]
    assert "limit of 200 processes" in rows["forker"]["details"]
    for name in ("fay", "fifo", "folder", "link"):
        assert _statuses(rows[name]) == ["invalid"] * 3, name
    assert "not a regular file" in rows["fifo"]["details"] and "JSON" in rows["fay"]["details"]


@needs_bwrap
def test_odd_bytes_odd_trees_and_odd_exits_stop_nobody(graded):
    result, table, *_ = graded
    rows = _rows(table)
    assert '\'=HYPERLINK("evil")' in rows and "'=bob" in rows and "''=bob" in rows
    assert "bad\\xff\\x1b[2J\\x1b[31mname" in rows
    odd = rows["odd-error"]
    assert odd["01.1"] == "crashed" and odd["01.2"] == "passed" and "\\x1b[2J" in odd["details"]
    assert rows["odd-tree"]["01.2"] == "passed"
    exiter = rows["exiter"]
    assert _statuses(exiter) == ["passed", "passed", "crashed"] and exiter["score"] == "2", exiter
    assert "\x1b" not in result.stdout and "\x1b" not in table.read_text(encoding="utf-8")


@needs_bwrap
def test_a_flagged_submission_counts_once_the_teacher_accepts_it(graded, tmp_path):
    _, table, *_ = graded
    again = run_grader(table.parent.parent / "submissions", table, "--timeout", TIMEOUT, "--jobs", "2",
                       "--memory", "2", "--accept", "forger-registry", cwd=table.parent, timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "not run" in again.stdout and "[1/" not in again.stdout  # nothing ran again: the record was read
    row = _rows(table)["forger-registry"]
    assert (
        row["score"] == "1"
        and row["01.1"] == "passed"
        and row["review"].startswith("accepted by the teacher")
    )
