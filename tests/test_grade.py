"""`pstutor grade`: a class's submissions are graded task by task, each in its own sandbox; a
broken or hostile submission is reported as such and can neither fool the grader, stop it,
reach a classmate nor touch the teacher's files. Every attack below passed (or hung, or
killed the grader) before the bubblewrap sandbox."""

import csv
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import pytest
from conftest import ROOT, clean_env, descendants, run_pstutor

from pstutor import build
from pstutor.sandbox import bwrap

SOURCE = ROOT / "lessons" / "exercises" / "01_cluster.md"
MARKER = "pstutor-left-behind-marker"
SECRET = "pstutor-teacher-secret-4711"
needs_bwrap = pytest.mark.skipif(bwrap() is None, reason="needs bubblewrap (apt-get install bubblewrap)")


def _submission(path, answers: dict[str, str], lang: str = "en") -> None:
    """A student copy with some answer cells filled in ("SOLUTION" takes the official answer)."""
    notebook = build.render(SOURCE, lang, "exercise")
    solution = build.render(SOURCE, lang, "solution")
    for cell, solved in zip(notebook.cells, solution.cells, strict=True):
        tasks = cell.metadata.get("pstutor", {}).get("tasks", [])
        if tasks and tasks[0] in answers:
            cell.source = solved.source if answers[tasks[0]] == "SOLUTION" else answers[tasks[0]]
    nbformat.write(notebook, path)


FORGE_CHECK = """import pstutor
from pstutor.checks import PASSED, Result
pstutor.check = lambda task, **answers: Result(task, PASSED)
resolver = strategy = 1"""
FORGE_EXPECT = """import pstutor.checks
pstutor.checks.expect = lambda *args, **kwargs: None
import pstutor.checks.ex01
resolver = strategy = 1"""
FORGE_HOOK = """from IPython.display import display
def forge(*args):
    record = {"task": "01.1", "status": "passed", "hint": "", "detail": ""}
    display({"application/vnd.pstutor.check+json": record}, raw=True)
get_ipython().events.register("pre_run_cell", forge)
resolver = strategy = 1"""
COPY_SOLUTION = f"""import json
cells = json.load(open({str(ROOT / 'solutions/en/01_cluster.ipynb')!r}))["cells"]
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
    wrong = {c.task: c.source for c in build.read_lesson(SOURCE) if c.kind == "wrong"
             and c.expect in ("worker-count", "chief-missing")}
    _submission(folder / "cy.ipynb", {"01.1": wrong["1"], "01.2": wrong["2"]})
    _submission(folder / "di.ipynb", {"01.1": "resolver = strategy = 1\n\ndef broken(:\n    pass",
                                      "01.2": "x = 1\nraise RuntimeError('lost my notes')"})
    _submission(folder / "eve.ipynb", {
        "01.1": "import os\n"
                f"os.chmod({str(keep)!r}, 0o777)\nos.utime({str(keep)!r}, (0, 0))\nos.remove({str(keep)!r})",
        "01.2": "while True:\n    pass",
    })
    _submission(folder / "forger1.ipynb", {"01.1": FORGE_CHECK})
    _submission(folder / "forger2.ipynb", {"01.1": FORGE_EXPECT})
    _submission(folder / "forger3.ipynb", {"01.1": FORGE_HOOK})
    _submission(folder / "forger4.ipynb", {"01.1": COPY_SOLUTION})
    _submission(folder / "spy.ipynb", {
        "01.1": f"raise RuntimeError(open({str(folder / 'ada.ipynb')!r}).read()[:80])",
        "01.2": "import os\nraise RuntimeError(os.environ.get('PSTUTOR_TEST_SECRET', 'no secret'))",
        "01.3": "import socket\nsocket.create_connection(('1.1.1.1', 80), timeout=5)",
    })
    _submission(folder / "vandal.ipynb", {
        "01.1": "import os, signal\nopen('/dev/shm/left-behind', 'w').write('x')\n"
                "os.kill(os.getppid(), signal.SIGKILL)\nos.kill(1, signal.SIGKILL)",
        "01.2": "import os, subprocess, sys\n"
                f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)  # {MARKER}'],"
                " start_new_session=True)\n"
                "pid = os.fork()\nif pid == 0:\n    os.setsid()\n    os.execvp('sleep', ['sleep', '301'])\n"
                "raise RuntimeError('spawned two survivors')",
    })
    _submission(folder / "hog.ipynb", {"01.1": "import time\nblocks = []\nfor _ in range(40):\n"
                                               "    blocks.append(b'x' * (100 << 20))\n    time.sleep(0.05)"})
    forks = "import subprocess, time\nchildren = [subprocess.Popen(['sleep', '60']) for _ in range(250)]"
    _submission(folder / "forker.ipynb", {"01.1": forks + "\ntime.sleep(30)"})
    (folder / "fay.ipynb").write_text("{ this is not a notebook")
    os.mkfifo(folder / "fifo.ipynb")
    (folder / "folder.ipynb").mkdir()
    (folder / "link.ipynb").symlink_to(keep)
    _submission(folder / '=HYPERLINK("evil").ipynb', {})
    _submission(folder / "cyzh.ipynb", {"01.1": wrong["1"]}, lang="zh")
    before = {p: p.read_bytes() for p in folder.iterdir() if p.is_file() and not p.is_symlink()
              and p.name != "fifo.ipynb"}
    keep_stat = keep.stat()
    table = teacher / "out" / "grades.csv"
    env = {**clean_env(), "PSTUTOR_TEST_SECRET": SECRET}
    sandboxes_before = set(Path(tempfile.gettempdir()).glob("pstutor-grade-*"))
    result = subprocess.run(
        [sys.executable, "-m", "pstutor", "grade", str(folder), "--out", str(table), "--timeout", "40",
         "--jobs", "2", "--memory", "2", "--course", str(ROOT)],
        capture_output=True, text=True, timeout=900, env=env, cwd=teacher)
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
    assert _statuses(rows["ada"]) == ["passed"] * 3 and rows["ada"]["score"] == "3/3"
    assert _statuses(rows["bo"]) == ["not attempted"] * 3 and rows["bo"]["score"] == "0/3"
    assert _statuses(rows["cy"]) == ["failed", "failed", "not attempted"]
    assert "✗" in rows["cy"]["details"] and "count the tasks of the 'worker' job" in rows["cy"]["details"]
    assert _statuses(rows["di"]) == ["crashed", "crashed", "not attempted"]
    assert "SyntaxError" in rows["di"]["details"] and "line 3" in rows["di"]["details"]
    crash = "RuntimeError: lost my notes (line 2: raise RuntimeError('lost my notes'))"
    assert crash in rows["di"]["details"] and ".py" not in rows["di"]["details"]
    assert _statuses(rows["eve"])[:2] == ["crashed", "crashed"] and "time limit" in rows["eve"]["details"]
    assert all(float(row["seconds"]) > 0 for row in rows.values() if row["score"])
    assert "1 with every task passed" in result.stdout


@needs_bwrap
def test_the_table_is_written_in_one_language_with_no_grader_paths(graded):
    _, table, *_ = graded
    text = table.read_text(encoding="utf-8")
    assert "count the tasks of the 'worker' job" in _rows(table)["cyzh"]["details"]  # a zh notebook
    assert "pstutor-grade-" not in text and str(ROOT) not in text and sys.prefix not in text
    assert "count the tasks" in _rows(table)["cy"]["details"]


@needs_bwrap
@pytest.mark.parametrize("forger", ["forger1", "forger2", "forger3", "forger4"])
def test_a_forged_verdict_is_flagged_for_review(graded, forger):
    rows = _rows(graded[1])
    assert rows[forger]["review"].startswith("needs review"), rows[forger]
    if forger == "forger4":  # the solutions are not in the sandbox: nothing to copy
        assert rows[forger]["01.1"] == "crashed" and "FileNotFoundError" in rows[forger]["details"]
    if forger == "forger3":  # a record printed by a hook before the real one is never taken
        assert rows[forger]["01.1"] != "passed"
    assert rows["ada"]["review"] == "" and rows["cy"]["review"] == ""


@needs_bwrap
def test_no_secret_no_classmate_no_network_is_reachable(graded):
    rows = _rows(graded[1])
    spy = rows["spy"]["details"]
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
    assert (after.st_mode, after.st_mtime, after.st_uid) == (keep_stat.st_mode, keep_stat.st_mtime,
                                                             keep_stat.st_uid)
    assert {p: p.read_bytes() for p in before} == before
    assert not Path("/dev/shm/left-behind").exists()
    assert sorted(p.name for p in table.parent.iterdir()) == ["grades.csv"]
    left = [pid for pid in os.listdir("/proc") if pid.isdigit() and _cmdline_has(pid, MARKER)]
    assert left == [] and descendants(os.getpid()) == []
    assert set(Path(tempfile.gettempdir()).glob("pstutor-grade-*")) <= sandboxes_before


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
    assert "'=HYPERLINK(\"evil\")" in rows


@needs_bwrap
def test_a_stopped_grading_keeps_its_results_and_a_rerun_continues(tmp_path):
    folder = tmp_path / "class"
    folder.mkdir()
    for name in ("a1", "a2", "a3"):
        (folder / f"{name}.ipynb").write_bytes(build.notebook_path(SOURCE, "en", "exercise").read_bytes())
    table = tmp_path / "grades.csv"
    command = [sys.executable, "-m", "pstutor", "grade", str(folder), "--out", str(table), "--jobs", "1",
               "--course", str(ROOT)]
    grader = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=clean_env(), start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and len(_rows(table) if table.exists() else {}) < 1:
            time.sleep(0.5)
        grader.send_signal(signal.SIGINT)
        _, err = grader.communicate(timeout=120)
    finally:
        if grader.poll() is None:
            os.killpg(grader.pid, signal.SIGKILL)
            grader.wait()
    assert grader.returncode == 130, err[-2000:]
    assert "run the same command again" in err
    kept = _rows(table)
    assert 1 <= len(kept) < 3
    again = run_pstutor(*command[3:], timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"{len(kept)} submission(s) not run" in again.stdout
    assert list(_rows(table)) == ["a1", "a2", "a3"]


def test_grading_outside_a_clone_says_so(tmp_path):
    (tmp_path / "a.ipynb").write_text("{}")
    result = run_pstutor("grade", str(tmp_path), cwd=tmp_path)
    assert result.returncode == 2 and "not inside a clone of the course" in result.stderr


@pytest.mark.parametrize("args, message", [
    (["/nonexistent/folder"], "is not a folder"),
    ([str(ROOT / "lessons")], "no .ipynb files"),
])
def test_bad_grading_input_is_refused_with_the_reason(args, message):
    result = run_pstutor("grade", *args)
    assert result.returncode == 2 and message in result.stderr


def test_the_exercise_comes_from_the_notebook_metadata():
    from pstutor.grade import Submission, identify

    path = build.notebook_path(SOURCE, "zh", "exercise")
    found = identify(Submission("x", path), ROOT)
    assert (found.exercise, found.language, found.problem) == ("01_cluster", "zh", "")


def test_correct_answers_are_not_flagged_for_review():
    from pstutor.grade import merge, review

    for source in build.exercise_paths():
        answers = [build.render(source, "en", "solution")]
        answers += [build.render(source, "en", "solution", answers={c.task: c.source})
                    for c in build.read_lesson(source) if c.kind in ("right", "wrong")]
        for solution in answers:
            notebook, _ = merge(build.render(source, "en", "exercise"), solution)
            assert review(notebook) == "", (source.name, review(notebook))


@pytest.mark.parametrize("attack", [FORGE_CHECK, FORGE_EXPECT, FORGE_HOOK, COPY_SOLUTION,
                                    "import sys\nsys.modules['pstutor'].check = print",
                                    "import pstutor.checks\npstutor.checks._CHECKS.clear()",
                                    "getattr(__builtins__, 'ev' + 'al')('1')",
                                    "import os\nos.kill(os.getppid(), 9)"])
def test_answers_that_reach_for_the_checker_are_flagged(attack):
    from pstutor.grade import merge, review

    student = build.render(SOURCE, "en", "exercise")
    next(c for c in student.cells if c.metadata.get("pstutor", {}).get("tasks") == ["01.1"]).source = attack
    notebook, _ = merge(build.render(SOURCE, "en", "exercise"), student)
    assert review(notebook).startswith("needs review: touches "), attack


def test_a_chinese_table_is_chinese_throughout_and_read_back(tmp_path):
    from pstutor.grade import Submission, _earlier_results, write_table
    from pstutor.language import set_language

    table = tmp_path / "grades.csv"
    done = Submission("=cmd|' /C calc'!A0", tmp_path / "x.ipynb", "01_cluster", "zh",
                      {"01.1": ("passed", ""), "01.2": ("failed", "✗ 提示")}, seconds=3, digest="abc")
    set_language("zh")
    try:
        write_table([done], table, ["01.1", "01.2"])
        again = _earlier_results(table)
    finally:
        set_language("en")
    text = table.read_text(encoding="utf-8")
    assert "通过" in text and "未通过" in text and "passed" not in text
    assert text.splitlines()[1].startswith("'=cmd")  # a formula in a file name stays text
    read_back = again["=cmd|' /C calc'!A0"]
    assert read_back.results == done.results and read_back.score() == "1/2"


def test_without_bubblewrap_the_grader_refuses_and_says_what_to_install(tmp_path):
    (tmp_path / "a.ipynb").write_bytes(build.notebook_path(SOURCE, "en", "exercise").read_bytes())
    env = {**clean_env(), "PATH": str(Path(sys.executable).parent)}  # no bwrap on this PATH
    result = subprocess.run([sys.executable, "-m", "pstutor", "grade", str(tmp_path), "--out",
                             str(tmp_path / "g.csv")], capture_output=True, text=True, env=env, cwd=ROOT,
                            timeout=120)
    assert result.returncode == 2, result.stderr
    assert "install bubblewrap" in result.stderr and "--no-sandbox" in result.stderr
    assert not (tmp_path / "g.csv").exists()
