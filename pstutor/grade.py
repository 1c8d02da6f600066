"""Grading a class: `pstutor grade SUBMISSIONS/` runs every student's exercise notebook and
writes a task × student table.

Submissions are untrusted. Each one is read without executing anything, then the student's
answer cells (found by the task numbers the build stored in their metadata) are put into a
fresh copy of the official exercise, so check cells cannot be edited away. That notebook runs
in a new kernel, in its own temporary folder, under a time limit, with writes fenced to
that folder (`pstutor.sandbox`). Whatever one submission does — a syntax error, an endless
loop, deleting files, not being JSON at all — is reported for that student and grading
goes on. The teacher's files are only read; the table is the one file written.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import nbformat

from pstutor import build
from pstutor.checks import FAILED, MIME, NOT_DONE, PASSED
from pstutor.language import say

CRASHED, NOT_ATTEMPTED, INVALID = "crashed", "not attempted", "invalid"
_KERNEL = "pstutor-grading"


class GradingError(ValueError):
    """The grading itself cannot start: no such folder, no notebooks, no write-fence."""


@dataclasses.dataclass
class Submission:
    """One student's notebook and what grading found, task by task."""

    student: str
    path: Path
    exercise: str = ""
    results: dict[str, tuple[str, str]] = dataclasses.field(default_factory=dict)  # task -> (status, detail)
    problem: str = ""  # why the whole submission could not be graded


def grade(folder: Path, table: Path, *, timeout: float = 300, sandbox: bool = True,
          log=print) -> list[Submission]:
    """Grade every `*.ipynb` in `folder` (one per student) and write the CSV `table`."""
    folder, table = Path(folder), Path(table)
    if not folder.is_dir():
        raise GradingError(say(f"{folder} is not a folder", f"{folder} 不是文件夹"))
    if sandbox:
        from pstutor.sandbox import landlock_version

        if landlock_version() < 1:
            raise GradingError(say(
                "this system cannot fence the submissions' file writes (Landlock, Linux 5.13+); "
                "grade in a container or VM, or pass --no-sandbox if you trust every submission",
                "本系统无法限制提交代码写文件（需要 Landlock，Linux 5.13+）；请在容器或虚拟机中评分，"
                "或者在信任所有提交时加上 --no-sandbox"))
    paths = sorted(folder.glob("*.ipynb"))
    if not paths:
        raise GradingError(say(f"no .ipynb files in {folder}", f"{folder} 中没有 .ipynb 文件"))
    submissions = []
    for number, path in enumerate(paths, 1):
        log(say(f"[{number}/{len(paths)}] {path.name} ...", f"[{number}/{len(paths)}] {path.name} ……"))
        submission = Submission(path.stem, path)
        grade_one(submission, timeout=timeout, sandbox=sandbox)
        submissions.append(submission)
    write_table(submissions, table)
    return submissions


def grade_one(submission: Submission, *, timeout: float, sandbox: bool) -> None:
    """Fill in `submission.results` (or `.problem`); never raises for a bad submission."""
    try:
        student = nbformat.read(submission.path, as_version=4)
        source, lang = _which_exercise(student)
    except Exception as err:  # not JSON, not a notebook, not one of ours: all the student's doing
        submission.problem = f"{type(err).__name__}: {str(err)[:200]}"
        return
    submission.exercise = source.stem
    notebook, attempted = merge(build.render(source, lang, "exercise"), student)
    with tempfile.TemporaryDirectory(prefix="pstutor-grade-") as work:
        error = run_isolated(notebook, Path(work), timeout=timeout, sandbox=sandbox)
    submission.results = read_verdicts(notebook, attempted, error)


def _which_exercise(student: nbformat.NotebookNode) -> tuple[Path, str]:
    """The course exercise a notebook is a copy of, and its language."""
    tasks = [task for cell in student.cells for task in _tasks_of(cell)]
    name = student.metadata.get("colab", {}).get("name", "")
    for source in build.exercise_paths():
        if name == f"{source.stem}.ipynb" or (tasks and source.stem.startswith(str(tasks[0])[:2])):
            code = "".join(cell.source for cell in student.cells if cell.cell_type == "code")
            return source, "zh" if 'pstutor.setup(lang="zh")' in code else "en"
    raise ValueError("not one of the course's exercises (no task numbers in the cell metadata)")


def merge(official: nbformat.NotebookNode, student: nbformat.NotebookNode):
    """The official exercise with the student's answer cells; and which tasks were attempted."""
    by_tasks = {tuple(_tasks_of(c)): c for c in student.cells if c.cell_type == "code" and _tasks_of(c)}
    attempted: dict[str, bool] = {}
    for cell in official.cells:
        tasks = tuple(_tasks_of(cell))
        if not tasks:
            continue
        answer = by_tasks.get(tasks)
        changed = answer is not None and answer.source.strip() != cell.source.strip()
        if changed:
            cell.source = answer.source
        attempted.update(dict.fromkeys(tasks, changed))
    return official, attempted


def run_isolated(notebook: nbformat.NotebookNode, work: Path, *, timeout: float, sandbox: bool) -> str:
    """Execute `notebook` in a fresh kernel inside `work`; return what stopped it early, if anything."""
    from jupyter_client import AsyncKernelManager
    from jupyter_client.kernelspec import KernelSpecManager
    from nbclient import NotebookClient
    from traitlets import default

    specs = work / "kernels"
    (specs / _KERNEL).mkdir(parents=True)
    (work / "tmp").mkdir()
    kernel = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    if sandbox:
        kernel = [sys.executable, "-m", "pstutor.sandbox", str(work), "--", *kernel]
    env = {"HOME": str(work), "TMPDIR": str(work / "tmp"), "IPYTHONDIR": str(work / ".ipython"),
           "MPLCONFIGDIR": str(work / ".matplotlib"), "MPLBACKEND": "agg"}
    (specs / _KERNEL / "kernel.json").write_text(json.dumps(
        {"argv": kernel, "display_name": "pstutor grading", "language": "python", "env": env}))
    deadline = time.monotonic() + timeout
    client = NotebookClient(
        notebook, kernel_name=_KERNEL, allow_errors=True, record_timing=False, iopub_timeout=10,
        timeout_func=lambda cell: max(1, int(deadline - time.monotonic())),
        resources={"metadata": {"path": str(work)}},
    )

    class SandboxedKernels(AsyncKernelManager):
        @default("kernel_spec_manager")
        def _only_the_grading_kernel(self) -> KernelSpecManager:
            return KernelSpecManager(kernel_dirs=[str(specs)])

    client.kernel_manager_class = SandboxedKernels
    kernels: list[int] = []
    client.on_notebook_start = lambda **_: kernels.append(client.km.provisioner.pid)
    timer = threading.Timer(timeout + 15, lambda: [_kill_group(pid) for pid in kernels])
    timer.start()  # the last resort, for a kernel stuck where an interrupt cannot reach
    try:
        client.execute(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # the kernel's own noise
        return ""
    except Exception as err:  # time limit, a kernel that died: the student's code did it
        if not kernels:  # no kernel started: the grader's problem, not the student's
            raise
        if time.monotonic() >= deadline:
            return say(f"time limit of {timeout:g} s exceeded", f"超过了 {timeout:g} 秒的时间限制")
        return f"{type(err).__name__}: {str(err).splitlines()[0][:200] if str(err) else ''}"
    finally:
        timer.cancel()
        for pid in kernels:  # the kernel is gone by now; anything it started goes too
            _kill_group(pid)


def _tasks_of(cell) -> list[str]:
    """The tasks whose answer a cell holds (stored by the build in the cell's metadata)."""
    tasks = cell.get("metadata", {}).get("pstutor", {}).get("tasks", [])
    return [str(task) for task in tasks] if isinstance(tasks, list) else []


def _kill_group(pid: int | None) -> None:
    """Stop the kernel and everything it started (it leads its own process group)."""
    if pid:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)


def read_verdicts(notebook: nbformat.NotebookNode, attempted: dict[str, bool],
                  stopped: str) -> dict[str, tuple[str, str]]:
    """Each task's status and detail, from the executed notebook's check records."""
    results: dict[str, tuple[str, str]] = {}
    crashed: dict[str, str] = {}
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        for task in _tasks_of(cell):
            if errors:
                crashed[task] = f"{errors[0]['ename']}: {errors[0]['evalue'][:200]}"
        for output in cell.get("outputs", []):
            record = output.get("data", {}).get(MIME)
            if isinstance(record, dict) and record.get("task") in attempted:
                results[record["task"]] = _status(record, attempted[record["task"]])
    for task, tried in attempted.items():
        if tried and task in crashed:
            interrupted = stopped and crashed[task].startswith("KeyboardInterrupt")
            results[task] = (CRASHED, stopped if interrupted else crashed[task])
        elif task not in results:
            results[task] = (CRASHED, stopped or say("its check did not run", "它的检查没有运行")) \
                if tried else (NOT_ATTEMPTED, "")
    return dict(sorted(results.items()))


def _status(record: dict, attempted: bool) -> tuple[str, str]:
    if not attempted or record["status"] == NOT_DONE:
        return NOT_ATTEMPTED, ""
    if record["status"] == PASSED:
        return PASSED, ""
    return FAILED, record.get("detail", "")


def write_table(submissions: list[Submission], table: Path) -> None:
    """The CSV: one row per student, one column per task, then the details of what went wrong."""
    tasks = sorted({task for s in submissions for task in s.results})
    table.parent.mkdir(parents=True, exist_ok=True)
    with open(table, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["student", "exercise", *tasks, "details"])
        for s in submissions:
            if s.problem:
                writer.writerow([s.student, s.exercise, *[INVALID] * len(tasks), s.problem])
                continue
            details = "; ".join(f"{task}: {detail}" for task, (_, detail) in s.results.items() if detail)
            writer.writerow([s.student, s.exercise, *[s.results.get(t, ("", ""))[0] for t in tasks], details])


def summary(submissions: list[Submission]) -> str:
    """A short table for the screen, and every failure with its hint."""
    tasks = sorted({task for s in submissions for task in s.results})
    width = max([len(say("student", "学生"))] + [len(s.student) for s in submissions]) + 2
    lines = [say("student", "学生").ljust(width) + "".join(t.ljust(15) for t in tasks)]
    for s in submissions:
        if s.problem:
            lines.append(s.student.ljust(width) + say("invalid submission: ", "无效的提交：") + s.problem)
        else:
            cells = "".join(s.results.get(task, ("-", ""))[0].ljust(15) for task in tasks)
            lines.append(s.student.ljust(width) + cells)
    notes = [f"  {s.student} {task}: {detail}" for s in submissions
             for task, (_, detail) in s.results.items() if detail]
    if notes:
        lines += ["", say("Details:", "详细信息："), *notes]
    complete = sum(bool(s.results) and all(v[0] == PASSED for v in s.results.values()) for s in submissions)
    lines += ["", say(f"{len(submissions)} submission(s); {complete} with every task passed.",
                      f"共 {len(submissions)} 份提交；其中 {complete} 份全部通过。")]
    return "\n".join(lines)
