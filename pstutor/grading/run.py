"""Running one submission: its answers in a fresh copy of the exercise, a fresh kernel in its own
sandbox and cgroup, driven by a notebook client in a process of its own
(`pstutor.grading.client`), and the verdicts read back only from sealed check records.

The notebook run is the committed student copy with the student's answer cells put in, so
check cells cannot be edited away; a seal cell of the grader's goes right before the first
answer (`pstutor.grading.integrity`). The kernel gets a key of its own, written to a file in
its sandbox folder that the kernel deletes before IPython starts. A task's verdict is the
record its official check cell returned, with a valid seal over the id of the request that
ran that cell (the client reports it): a record displayed by anything else, the check cell's
value without a seal, or one sealed in another run, is never a "passed" that scores.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hmac
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import nbformat

from pstutor import metadata
from pstutor.checks import FAILED, MIME, NOT_DONE, PASSED
from pstutor.grading import integrity
from pstutor.grading.client import KERNEL_NAME
from pstutor.grading.identify import Identified
from pstutor.grading.limits import PROCESS_LIMIT, TASK_LIMIT, Slot, Watchdog
from pstutor.grading.model import CRASHED, NOT_ATTEMPTED, TaskResult, Text, text

KEY_FILE, PLAN_FILE = ".pstutor-key", ".pstutor-plan.json"
_SEAL_ID = "pstutor-seal"
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_SEAL = re.compile(r"[0-9a-f]{64}")  # what hexdigest() gives; compare_digest refuses non-ASCII text
_SEAL_CELL = (
    '__import__("pstutor.grading.integrity", fromlist=["seal_file"]).seal_file({plan!r})  '
    "# the grader's seal: nothing of the answers has run yet"
)


@dataclasses.dataclass
class Prepared:
    """The notebook to run for one submission, and what the grader needs to read it back."""

    notebook: nbformat.NotebookNode
    attempted: dict[str, bool]  # task -> the student changed its answer cell
    plan: dict  # for the seal cell
    checks: dict[str, int]  # task -> index of its official check cell
    requests: dict[int, str] = dataclasses.field(default_factory=dict)  # check cell -> its run's request id


def official(path: Path) -> nbformat.NotebookNode:
    """The committed student copy of an exercise, without its outputs."""
    notebook = nbformat.read(path, as_version=4)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    return notebook


def prepare(found: Identified) -> Prepared:
    """The official exercise with the student's answers in it, and the grader's seal cell before them."""
    notebook = official(found.exercise.path)
    attempted: dict[str, bool] = {}
    answers: dict[str, str] = {}
    first_answer = None
    for index, cell in enumerate(notebook.cells):
        tasks = tuple(metadata.tasks_of(cell))
        if not tasks or cell.cell_type != "code":
            continue
        first_answer = index if first_answer is None else first_answer
        source = found.answers.get(tasks)
        changed = source is not None and source.strip() != cell.source.strip()
        if changed:
            cell.source = source
        attempted.update(dict.fromkeys(tasks, changed))
        answers[", ".join(tasks)] = cell.source
    seal = nbformat.v4.new_code_cell()  # its source names the plan's full path: execute() writes it
    seal.id = _SEAL_ID
    notebook.cells.insert(first_answer if first_answer is not None else len(notebook.cells), seal)
    checks = {}
    for index, cell in enumerate(notebook.cells):
        checked = metadata.checked_tasks(cell.source) if cell.cell_type == "code" else []
        if len(checked) == 1 and not metadata.tasks_of(cell):
            checks[checked[0]] = index
    answer_sources = set(answers.values())
    course = [
        cell.source
        for cell in notebook.cells
        if cell.cell_type == "code" and not metadata.tasks_of(cell) and cell.source not in answer_sources
    ]
    plan = {
        "answers": answers,
        "checks": {task: notebook.cells[i].source for task, i in checks.items()},
        "course": course,
        "imports": integrity.check_imports(found.exercise.source[:2]),
    }
    return Prepared(notebook, attempted, plan, checks)


def execute(
    prepared: Prepared,
    work: Path,
    *,
    timeout: float,
    sandbox: str | None,
    slot: Slot,
    memory: int,
    key: bytes,
    running: set[int],
    stopping: threading.Event,
) -> Text:
    """Run the notebook in a fresh kernel inside `work`; what stopped it early (empty when nothing did).

    The notebook client runs in a process of its own (`pstutor.grading.client`), so that what
    the kernel sends can never grow the grader; the grader watches the kernel from outside.
    """
    specs = work / "kernels"
    (specs / KERNEL_NAME).mkdir(parents=True)
    (work / "tmp").mkdir()
    (work / KEY_FILE).write_bytes(key)
    (work / PLAN_FILE).write_text(json.dumps(prepared.plan), encoding="utf-8")
    # the kernel's working folder is its own /tmp, not `work`: the seal cell names the plan in full
    seal = next(cell for cell in prepared.notebook.cells if cell.get("id") == _SEAL_ID)
    seal.source = _SEAL_CELL.format(plan=str(work / PLAN_FILE))
    kernel = [sys.executable, "-m", "pstutor.grading.kernel", str(work / KEY_FILE), "-f", "{connection_file}"]
    limits = [f"--cgroup={folder}" for folder in slot.cgroups]
    limits += [f"--cpus={','.join(str(cpu) for cpu in slot.cpus)}"] if slot.cpus else []
    if sandbox:
        kernel = [sys.executable, "-m", "pstutor.sandbox", *limits, str(work), "--", *kernel]
    else:
        kernel = [sys.executable, "-m", "pstutor.sandbox", "--no-walls", *limits, str(work), "--", *kernel]
    env = {
        "HOME": str(work),
        "TMPDIR": str(work / "tmp"),
        "IPYTHONDIR": str(work / ".ipython"),
        "MPLCONFIGDIR": str(work / ".matplotlib"),
        "MPLBACKEND": "agg",
    }
    (specs / KERNEL_NAME / "kernel.json").write_text(
        json.dumps(
            {
                "argv": kernel,
                "display_name": "pstutor grading",
                "language": "python",
                "env": env,
                "interrupt_mode": "message" if sandbox else "signal",
            }
        )
    )
    own = Path(tempfile.mkdtemp(prefix="pstutor-client-"))  # the grader's: no kernel can reach it
    kernels: list[int] = []
    watchdogs: list[Watchdog] = []

    def started(pid: int) -> None:
        kernels.append(pid)
        running.add(pid)
        watchdogs.append(Watchdog(pid, memory=memory, on_limit=lambda: _kill_group(pid)))
        if stopping.is_set():  # stopped while it was starting
            _kill_group(pid)

    late = threading.Event()

    def last_resort() -> None:  # for a kernel stuck where an interrupt cannot reach
        late.set()
        for pid in [*kernels, client.pid]:
            _kill_group(pid)

    try:
        job = {"notebook": prepared.notebook, "work": str(work), "sandboxed": bool(sandbox),
               "timeout": timeout, "checks": sorted(set(prepared.checks.values()))}
        (own / "job.json").write_text(json.dumps(job), encoding="utf-8")
        if stopping.is_set():
            raise Interrupted()
        client = subprocess.Popen(
            [sys.executable, "-m", "pstutor.grading.client", str(own / "job.json"), str(own / "result.json")],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            start_new_session=True,  # its own group: stopped with everything it started
        )
        running.add(client.pid)
        timer = threading.Timer(timeout + 15, last_resort)
        timer.start()
        try:
            for line in client.stdout:  # until it ends: "kernel PID" once the kernel runs
                words = line.split()
                if len(words) == 2 and words[0] == "kernel" and words[1].isdigit() and not kernels:
                    started(int(words[1]))
            client.wait()
        finally:
            timer.cancel()
            running.discard(client.pid)
        if stopping.is_set():
            raise Interrupted()
        reached = _limit_reached(watchdogs, slot, memory)
        if reached:
            return reached
        over_time = text(f"time limit of {timeout:g} s exceeded", f"超过了 {timeout:g} 秒的时间限制")
        if late.is_set():
            return over_time
        if not (own / "result.json").exists():
            if not kernels:  # no kernel started: the grader's problem, not the student's
                raise RuntimeError(f"the notebook client ended with exit code {client.returncode}")
            return text(  # the client's capped address space: the kernel sent a flood of frames
                f"the kernel sent more than the grader takes in (its client stopped, exit code "
                f"{client.returncode})",
                f"内核发来的消息超出了评分程序能接收的量（其客户端已停止，退出码 {client.returncode}）",
            )
        result = json.loads((own / "result.json").read_text(encoding="utf-8"))
        prepared.notebook = nbformat.from_dict(result["notebook"])
        prepared.requests = {int(index): request for index, request in result["requests"].items()}
        stopped = result["stopped"]
        if stopped is None:
            return {}
        if not kernels:
            raise RuntimeError(f"no kernel started: {stopped['error']}: {stopped['first']}")
        if stopped["timed_out"]:
            return over_time
        name, first = stopped["error"], stopped["first"]
        return text(f"{name}: {first}", f"{name}：{first}")
    finally:
        for watchdog in watchdogs:
            watchdog.stop()
        for pid in kernels:  # the kernel is gone by now; anything it started goes too
            _kill_group(pid)
            running.discard(pid)
        slot.stop()
        shutil.rmtree(own, ignore_errors=True)


class Interrupted(Exception):
    """The grading was stopped (Ctrl-C, a signal) while this submission ran: no verdict."""


def _limit_reached(watchdogs: list[Watchdog], slot: Slot, memory: int) -> Text:
    reached = slot.reached() or next((w.exceeded for w in watchdogs if w.exceeded), "")
    gib = f"{memory / 2**30:g}"
    if reached == "memory":
        return text(f"memory limit of {gib} GiB exceeded", f"超过了 {gib} GiB 的内存限制")
    if reached == "processes":
        return text(f"limit of {PROCESS_LIMIT} processes exceeded", f"超过了 {PROCESS_LIMIT} 个进程的限制")
    if reached == "tasks":
        return text(
            f"limit of {TASK_LIMIT} processes and threads exceeded", f"超过了 {TASK_LIMIT} 个进程和线程的限制"
        )
    return {}


def _kill_group(pid: int | None) -> None:
    """Stop the kernel and everything it started (it leads its own process group)."""
    import signal

    if pid:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)


def new_key() -> bytes:
    """A seal key for one submission's kernel."""
    return secrets.token_bytes(32)


def sealed(record: dict, key: bytes) -> bool:
    """Whether a check record carries a valid seal of this submission's kernel."""
    seal = record.get("seal")
    if not isinstance(seal, str) or not _SEAL.fullmatch(seal):
        return False
    try:
        message = integrity.canonical(record).encode()
    except (TypeError, ValueError, RecursionError):  # what no genuine record holds (lone surrogates)
        return False
    return hmac.compare_digest(seal, hmac.new(key, message, "sha256").hexdigest())


def verdicts(prepared: Prepared, stopped: Text, key: bytes, hide: list[str]) -> dict[str, TaskResult]:
    """Each task's result, from the sealed value of its official check cell and its answer's errors."""
    notebook, attempted = prepared.notebook, prepared.attempted
    crashed: dict[str, dict[str, str]] = {}
    course_error: dict[str, str] = {}  # the first official cell that failed before the task's answer
    for cell in notebook.cells:
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        tasks = metadata.tasks_of(cell)
        if errors and not tasks and not metadata.checked_tasks(cell.source) and not course_error:
            course_error = {lang: _hide(_error_line(errors[0], lang), hide) for lang in ("en", "zh")}
        for task in tasks if errors else []:
            crashed[task] = {lang: _hide(_error_line(errors[0], lang), hide) for lang in ("en", "zh")}
            if course_error:
                crashed[task] = {
                    "en": f"{crashed[task]['en']} (after the exercise's own cell failed: "
                    f"{course_error['en']})",
                    "zh": f"{crashed[task]['zh']}（此前练习自带的单元格出错：{course_error['zh']}）",
                }
    results: dict[str, TaskResult] = {}
    for task, index in prepared.checks.items():
        if task in attempted:
            request = prepared.requests.get(index, "")
            result = _verdict(task, notebook.cells[index], attempted[task], key, request, hide)
            if result is not None:
                results[task] = result
    stop_text = stopped
    for task, tried in attempted.items():
        earlier = results.get(task)
        if tried and task in crashed and (earlier is None or earlier.status != PASSED):
            interrupted = stopped and crashed[task]["en"].startswith("KeyboardInterrupt")
            details = stop_text if interrupted else crashed[task]
            results[task] = TaskResult(
                task, CRASHED, details, earlier.review if earlier else [], earlier.evidence if earlier else []
            )
        elif task not in results:
            results[task] = (
                _no_verdict(task, tried, notebook.cells[prepared.checks[task]], stop_text, hide)
                if task in prepared.checks
                else TaskResult(task, CRASHED if tried else NOT_ATTEMPTED)
            )
    return dict(sorted(results.items()))


def _no_verdict(task: str, tried: bool, cell, stopped: Text, hide: list[str]) -> TaskResult:
    """A task whose check cell gave no verdict: it did not run (the kernel stopped), it failed, or
    it ran and showed none at all — which only an answer that rewrote or muted it can cause."""
    errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
    if stopped or (cell.get("execution_count") is None and not errors):
        return (
            TaskResult(task, CRASHED, stopped or text("its check did not run", "它的检查没有运行"))
            if tried
            else TaskResult(task, NOT_ATTEMPTED)
        )
    if errors:
        line = {lang: _hide(_error_line(errors[0], lang), hide) for lang in ("en", "zh")}
        found = text(f"its check failed: {line['en']}", f"它的检查出错：{line['zh']}")
        return TaskResult(task, CRASHED, found) if tried else TaskResult(task, NOT_ATTEMPTED)
    return TaskResult(
        task,
        CRASHED if tried else NOT_ATTEMPTED,
        text("its check cell ran but gave no verdict", "它的检查单元格运行了，却没有给出判定"),
        ["no-verdict"],
        [f"{task}: the check cell ran without showing the checker's verdict"],
    )


def _verdict(
    task: str, cell, attempted: bool, key: bytes, request: str, hide: list[str]
) -> TaskResult | None:
    """The result one check cell shows: its sealed value from this very run (`request`); else a
    failure it displayed; else a "passed" without a seal, or sealed in another run, which needs a
    teacher's look."""
    genuine = unsealed_pass = failure = None
    replayed = False
    for output in cell.get("outputs", []):
        record = output.get("data", {}).get(MIME) if isinstance(output.get("data"), dict) else None
        if not isinstance(record, dict) or record.get("task") != task:
            continue
        own = output.get("output_type") == "execute_result" and sealed(record, key)
        if own and request and record.get("request") == request and genuine is None:
            genuine = record
        elif record.get("status") == PASSED:
            unsealed_pass = unsealed_pass or record
            replayed = replayed or own
        elif record.get("status") == FAILED:
            failure = failure or record
    if genuine is not None:
        reasons = [
            entry for entry in genuine.get("integrity", []) if isinstance(entry, list) and len(entry) == 3
        ]
        review = list(dict.fromkeys(str(reason) for reason, _, _ in reasons))
        evidence = [f"{at}: {detail}" for _, at, detail in reasons]
        return _from_record(task, genuine, attempted, hide, review, evidence)
    if failure is not None:
        return _from_record(task, failure, attempted, hide, [], [])
    if unsealed_pass is not None:
        why = (
            ("replayed", f"{task}: a 'passed' the checker sealed in another cell's run")
            if replayed
            else ("unsealed", f"{task}: a 'passed' shown without the checker's seal")
        )
        return TaskResult(task, PASSED if attempted else NOT_ATTEMPTED, {}, [why[0]], [why[1]])
    return None


def _from_record(
    task: str, record: dict, attempted: bool, hide: list[str], review: list[str], evidence: list[str]
) -> TaskResult:
    status = record.get("status")
    if not attempted or status == NOT_DONE:
        return TaskResult(task, NOT_ATTEMPTED, {}, review, evidence)
    if status == PASSED:
        return TaskResult(task, PASSED, {}, review, evidence)
    details = record.get("details") if isinstance(record.get("details"), dict) else {}
    fallback = str(record.get("detail", ""))
    shown = {lang: _hide(str(details.get(lang) or fallback)[:500], hide) for lang in ("en", "zh")}
    return TaskResult(task, FAILED, shown, review, evidence)


def _error_line(error: dict, lang: str) -> str:
    """`Name: message (line N: code)` of an error output: the student's own line, no grader path."""
    name, value = str(error.get("ename", "")), str(error.get("evalue", ""))
    value = re.sub(r" \(\d+\.py, line \d+\)", "", value)  # the kernel's name for the cell
    text_ = _ANSI.sub("", "\n".join(str(line) for line in error.get("traceback", [])))
    where = re.findall(r"Cell In\[\d+\], line (\d+)", text_)
    code = re.findall(r"^-*> *\d+ (.*)$", text_, re.M)
    if not where and name == "SyntaxError":
        where = re.findall(r"line (\d+)", text_)[:1]
        code = []
    if not where:
        return f"{name}: {value[:200]}"
    number = where[-1]
    line = f": {code[0].strip()[:120]}" if code else ""
    return (
        f"{name}: {value[:200]} (line {number}{line})"
        if lang == "en"
        else f"{name}: {value[:200]}（第 {number} 行{line.replace(': ', '：', 1)}）"
    )


def _hide(text_: str, paths: list[str]) -> str:
    """Details without the grader's folders (the sandbox, the course, Python's own)."""
    for path in sorted({*paths, sys.prefix, sys.base_prefix}, key=len, reverse=True):
        text_ = text_.replace(path, "…")
    return text_
