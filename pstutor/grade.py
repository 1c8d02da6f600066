"""Grading a class: `pstutor grade SUBMISSIONS/` runs every student's exercise notebook and
writes a task × student table.

Submissions are untrusted. Each one is read without executing anything (only regular
files are opened); the exercise and its language come from the notebook metadata the
build writes. The student's answer cells (found by the task numbers stored in the cell
metadata) are put into a fresh copy of the committed exercise of the course folder, so
check cells cannot be edited away. That notebook runs in a new kernel inside its own
bubblewrap sandbox (`pstutor.sandbox`): its own PID namespace, no network, a read-only view
of Python and the installed packages only, writes only to its own temporary folder,
memory, process, output and time limits; the folder and everything started in it are
gone at the end. A verdict counts only when it comes from the official check cell of its
task; answer cells that reach for the checker, IPython, the interpreter's internals or
files outside the exercise are marked `needs review` with the reason.

Results are written to the table as each student finishes (a rerun continues where a
crash or Ctrl-C stopped), `--jobs` students at a time.
"""

from __future__ import annotations

import ast
import concurrent.futures
import contextlib
import csv
import dataclasses
import hashlib
import json
import os
import re
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import nbformat

from pstutor.checks import FAILED, MIME, NOT_DONE, PASSED
from pstutor.course import find_course
from pstutor.language import LANGUAGES, current_language, say

CRASHED, NOT_ATTEMPTED, INVALID = "crashed", "not attempted", "invalid"
_KERNEL = "pstutor-grading"
MAX_NOTEBOOK_BYTES = 20 << 20
MAX_OUTPUT_BYTES = 2 << 20  # per submission: the rest of a flood of output is dropped
MEMORY_LIMIT = 6 << 30  # per submission, the kernel and everything it starts together
PROCESS_LIMIT = 200
_CHECK_CALL = re.compile(r'pstutor\.check\(\s*"(\d\d\.\d+)"')
_SOURCE_NAME = re.compile(r"^\d\d_[a-z0-9_]+$")
_FORMULA = ("=", "+", "-", "@", "\t", "\r")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
COLUMNS = ("student", "exercise", "language", "score", "seconds", "review")
_STATUS_ZH = {PASSED: "通过", FAILED: "未通过", NOT_ATTEMPTED: "未作答", CRASHED: "崩溃", INVALID: "无效"}


def shown(status: str) -> str:
    """A task's status in the table's language."""
    return say(status, _STATUS_ZH.get(status, status))


class GradingError(ValueError):
    """The grading itself cannot start: no course, no such folder, no notebooks, no sandbox."""


@dataclasses.dataclass
class Submission:
    """One student's notebook and what grading found, task by task."""

    student: str
    path: Path
    exercise: str = ""
    language: str = ""
    results: dict[str, tuple[str, str]] = dataclasses.field(default_factory=dict)  # task -> (status, detail)
    problem: str = ""  # why the whole submission could not be graded
    review: str = ""  # why a person should look at it before trusting the verdicts
    seconds: float = 0.0
    digest: str = ""  # of the file graded: a rerun grades a changed file again
    notebook: nbformat.NotebookNode | None = dataclasses.field(default=None, repr=False)

    def score(self) -> str:
        """Tasks passed / tasks."""
        if self.problem or not self.results:
            return ""
        return f"{sum(status == PASSED for status, _ in self.results.values())}/{len(self.results)}"


def default_jobs() -> int:
    """How many submissions this machine can run at once: one per core, memory permitting."""
    available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    with contextlib.suppress(OSError, ValueError, StopIteration):
        meminfo = Path("/proc/meminfo").read_text().splitlines()
        available = int(next(line for line in meminfo if line.startswith("MemAvailable")).split()[1]) * 1024
    return max(1, min(os.cpu_count() or 1, available // MEMORY_LIMIT))


def grade(folder: Path, table: Path, *, course: Path | None = None, timeout: float = 300,
          sandbox: bool = True, jobs: int | None = None, memory: int = MEMORY_LIMIT,
          log=print) -> list[Submission]:
    """Grade every `*.ipynb` in `folder` (one per student) into the CSV `table`, student by student."""
    folder, table = Path(folder), Path(table)
    course = find_course(course)
    if not (course / "exercises").is_dir():
        raise GradingError(say(f"{course} has no exercises/ folder to grade against",
                               f"{course} 中没有用来评分的 exercises/ 文件夹"))
    if not folder.is_dir():
        raise GradingError(say(f"{folder} is not a folder", f"{folder} 不是文件夹"))
    paths = sorted(folder.glob("*.ipynb"))
    if not paths:
        raise GradingError(say(f"no .ipynb files in {folder}", f"{folder} 中没有 .ipynb 文件"))
    program = None
    if sandbox:
        from pstutor.sandbox import bwrap

        program = bwrap()
        if program is None:
            raise GradingError(say(
                "the sandbox for the submissions is not available: install bubblewrap "
                "(apt-get install bubblewrap) on a system that allows user namespaces, or pass "
                "--no-sandbox if you trust every submission",
                "无法为提交建立沙箱：请安装 bubblewrap（apt-get install bubblewrap），"
                "并确保系统允许用户命名空间；或者在信任所有提交时加上 --no-sandbox"))
    submissions = [identify(Submission(_student(path), path), course) for path in paths]
    done = _earlier_results(table)
    todo = []
    for submission in submissions:
        earlier = done.get(submission.student)
        if earlier and earlier.digest == submission.digest and not submission.problem:
            for field in ("exercise", "language", "results", "review", "seconds"):
                setattr(submission, field, getattr(earlier, field))
        elif not submission.problem:
            todo.append(submission)
    tasks = _all_tasks(course, submissions)
    lock = threading.Lock()
    _STOPPING.clear()
    write_table(submissions, table, tasks)
    if len(todo) < len(submissions):
        log(say(f"{len(submissions) - len(todo)} submission(s) not run: invalid, or already graded in "
                f"{table.name} with the same file", f"{len(submissions) - len(todo)} 份提交未运行："
                f"无效，或者同一文件已在 {table.name} 中评过分"))

    def one(submission: Submission) -> Submission:
        try:
            grade_one(submission, course, timeout=timeout, program=program, sandbox=sandbox, memory=memory)
        except Exception as err:  # the grader's own trouble with this one (no kernel): report, go on
            reason = f"{type(err).__name__}: {err}"[:200]
            submission.problem = say("could not be run: ", "无法运行：") + reason
            submission.seconds = max(submission.seconds, 0.1)
        with lock:
            write_table(submissions, table, tasks)
            finished = sum(1 for s in todo if s.seconds)
            log(f"[{finished}/{len(todo)}] {submission.student}: {submission.score() or submission.problem} "
                f"({submission.seconds:.0f} s)")
        return submission

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=jobs or default_jobs())
    try:
        for future in concurrent.futures.as_completed([pool.submit(one, s) for s in todo]):
            future.result()
    except BaseException:
        _STOPPING.set()
        pool.shutdown(wait=False, cancel_futures=True)
        _stop_all_kernels()
        raise
    pool.shutdown()
    return submissions


def _student(path: Path) -> str:
    return path.name[: -len(".ipynb")]


def identify(submission: Submission, course: Path) -> Submission:
    """Read a submission without running it: which exercise in which language (or why not)."""
    try:
        data = _read_regular_file(submission.path)
        submission.digest = hashlib.sha256(data).hexdigest()[:16]
        notebook = nbformat.reads(data.decode("utf-8"), as_version=4)
        meta = notebook.metadata.get("pstutor", {})
        source, lang = (meta.get("source"), meta.get("lang")) if isinstance(meta, dict) else (None, None)
        if not (isinstance(source, str) and _SOURCE_NAME.match(source) and lang in LANGUAGES
                and _official_path(course, source, lang).is_file()):
            raise ValueError(say(
                "not a copy of one of the course's exercises (no pstutor metadata): hand out the "
                "notebooks of exercises/",
                "不是课程练习的副本（没有 pstutor 元数据）：请分发 exercises/ 中的笔记本"))
    except Exception as err:  # not a file, not JSON, not ours: all the student's doing
        submission.problem = f"{type(err).__name__}: {str(err)[:200]}"
        return submission
    submission.exercise, submission.language, submission.notebook = source, lang, notebook
    return submission


def _read_regular_file(path: Path) -> bytes:
    """The bytes of a regular file; links, folders, FIFOs and devices are refused unopened."""
    info = os.lstat(path)
    if not stat.S_ISREG(info.st_mode):
        raise ValueError(say("not a regular file (a link, folder, FIFO or device): not opened",
                             "不是普通文件（链接、文件夹、FIFO 或设备）：未打开"))
    if info.st_size > MAX_NOTEBOOK_BYTES:
        size = MAX_NOTEBOOK_BYTES >> 20
        raise ValueError(say(f"larger than {size} MB", f"超过 {size} MB"))
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise ValueError(say("not a regular file: not opened", "不是普通文件：未打开"))
        return handle.read(MAX_NOTEBOOK_BYTES + 1)[:MAX_NOTEBOOK_BYTES]


def _official_path(course: Path, source: str, lang: str) -> Path:
    return course / "exercises" / lang / f"{source}.ipynb"


def official(course: Path, source: str, lang: str) -> nbformat.NotebookNode:
    """The committed student copy of an exercise, without its outputs."""
    notebook = nbformat.read(_official_path(course, source, lang), as_version=4)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    return notebook


def _all_tasks(course: Path, submissions: list[Submission]) -> list[str]:
    exercises = {(s.exercise, s.language) for s in submissions if s.exercise}
    return sorted({task for source, lang in exercises for cell in official(course, source, lang).cells
                   for task in _tasks_of(cell)})


def grade_one(submission: Submission, course: Path, *, timeout: float, program: str | None = None,
              sandbox: bool = True, memory: int = MEMORY_LIMIT) -> None:
    """Fill in `submission.results` (or `.problem`); never raises for a bad submission."""
    started = time.monotonic()
    if submission.notebook is None:
        identify(submission, course)
    student, submission.notebook = submission.notebook, None
    if student is None:
        return
    notebook, attempted = merge(official(course, submission.exercise, submission.language), student)
    work = Path(tempfile.mkdtemp(prefix="pstutor-grade-"))
    submission.review = _hide(review(notebook), [str(course)])
    try:
        stopped = run_isolated(notebook, work, timeout=timeout, program=program if sandbox else None,
                               memory=memory)
        submission.results = read_verdicts(notebook, attempted, stopped, hide=[str(work), str(course)])
    finally:
        _remove(work)
    submission.seconds = max(time.monotonic() - started, 0.1)


def _remove(folder: Path) -> None:
    """Delete a sandbox folder, whatever the submission made of it (read-only files, odd names)."""
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            with contextlib.suppress(OSError):
                os.chmod(os.path.join(root, name), 0o700, follow_symlinks=False)
    subprocess.run(["rm", "-rf", "--one-file-system", str(folder)], check=False)


def merge(official_notebook: nbformat.NotebookNode, student: nbformat.NotebookNode):
    """The official exercise with the student's answer cells; and which tasks were attempted."""
    by_tasks = {tuple(_tasks_of(c)): c for c in student.cells if c.cell_type == "code" and _tasks_of(c)}
    attempted: dict[str, bool] = {}
    for cell in official_notebook.cells:
        tasks = tuple(_tasks_of(cell))
        if not tasks:
            continue
        answer = by_tasks.get(tasks)
        changed = answer is not None and isinstance(answer.source, str) \
            and answer.source.strip() != cell.source.strip()
        if changed:
            cell.source = answer.source
            cell.metadata["pstutor"]["answer"] = True
        attempted.update(dict.fromkeys(tasks, changed))
    return official_notebook, attempted


# What answer cells must not touch for their verdict to be trusted without a look.
_SUSPECT_NAMES = {
    "get_ipython": "IPython's hooks", "IPython": "IPython's hooks", "builtins": "builtins",
    "__builtins__": "builtins", "__import__": "dynamic imports", "importlib": "dynamic imports",
    "exec": "executed strings", "eval": "executed strings", "compile": "executed strings",
    "globals": "the interpreter's namespaces", "vars": "the interpreter's namespaces",
    "setattr": "attribute patching", "delattr": "attribute patching", "ctypes": "ctypes",
    "gc": "the garbage collector", "inspect": "the interpreter's internals",
    "_CHECKS": "the checker", "expect": "the checker", "Result": "the checker", "MIME": "the checker",
    "settrace": "tracing hooks", "setprofile": "tracing hooks", "pickle": "pickle", "marshal": "marshal",
    "subprocess": "other programs", "signal": "signals", "open": "files", "read_text": "files",
    "read_bytes": "files", "GFile": "files",
}
_SUSPECT_ATTRIBUTES = {"get_ipython", "_CHECKS", "expect", "Result", "MIME", "settrace", "setprofile",
                       "read_text", "read_bytes", "GFile"}
_INTERNALS = {"modules", "checks", "check", "_getframe", "__dict__", "__class__", "__globals__", "__code__",
              "__builtins__", "__subclasses__", "__bases__", "__mro__", "__closure__", "__defaults__",
              "__kwdefaults__", "f_globals", "f_locals", "f_back", "tb_frame", "gi_frame"}
_SUSPECT_OS = {"kill", "killpg", "system", "popen", "fork", "forkpty", "setsid", "execv", "execvp",
               "execve", "spawnv", "posix_spawn", "open", "chmod", "chown", "utime", "setxattr"}
_SUSPECT_MODULES = {"pstutor", "sys", "socket", "IPython", "importlib", "ctypes", "gc", "inspect",
                    "subprocess", "signal", "pickle", "marshal", "builtins", "multiprocessing"}


def review(notebook: nbformat.NotebookNode) -> str:
    """Why the answer cells need a person's look (empty when they stay within the exercise)."""
    from IPython.core.inputtransformer2 import TransformerManager

    reasons: list[str] = []
    for cell in notebook.cells:
        if not cell.get("metadata", {}).get("pstutor", {}).get("answer"):
            continue
        code = TransformerManager().transform_cell(cell.source)
        try:
            tree = ast.parse(code)
        except SyntaxError:
            continue  # it cannot run either: it crashes, and the table says so
        for node in ast.walk(tree):
            reasons += _suspect(node)
    unique = list(dict.fromkeys(reasons))
    return say("needs review: touches ", "需要人工查看：涉及 ") + ", ".join(unique) if unique else ""


def _suspect(node: ast.AST) -> list[str]:
    """The reasons one syntax node is suspect."""
    found = []
    if isinstance(node, ast.Name) and node.id in _SUSPECT_NAMES:
        found.append(f"{_SUSPECT_NAMES[node.id]} ({node.id})")
    elif isinstance(node, ast.Attribute):
        owner = node.value.id if isinstance(node.value, ast.Name) else ""
        if node.attr in _SUSPECT_ATTRIBUTES:
            found.append(f"{_SUSPECT_NAMES[node.attr]} (.{node.attr})")
        if owner == "os" and node.attr in _SUSPECT_OS:
            found.append(f"the system (os.{node.attr})")
        if node.attr in _INTERNALS:
            found.append(f"the interpreter's internals (.{node.attr})")
    elif isinstance(node, ast.Import | ast.ImportFrom):
        names = [alias.name for alias in node.names] + [getattr(node, "module", None) or ""]
        for name in names:
            if name.split(".")[0] in _SUSPECT_MODULES | set(_SUSPECT_NAMES):
                found.append(f"imports ({name})")
    elif isinstance(node, ast.Constant) and isinstance(node.value, str):
        text = node.value
        if _outside(text):
            found.append(f"files outside the exercise ({text[:40]!r})")
        if "pstutor" in text:
            found.append(f"the checker ({text[:40]!r})")
    return found


def _outside(text: str) -> bool:
    """Whether a string looks like a path outside the exercise: /an/existing/folder, ~, or .."""
    top = text.split("/")[1] if text.startswith("/") and "/" in text[1:] else ""
    return text.startswith("~") or ".." in text.split("/") \
        or (bool(top) and os.path.isdir(f"/{top}"))


def run_isolated(notebook: nbformat.NotebookNode, work: Path, *, timeout: float,
                 program: str | None, memory: int = MEMORY_LIMIT) -> str:
    """Execute `notebook` in a fresh kernel inside `work`; return what stopped it early, if anything."""
    from jupyter_client import AsyncKernelManager
    from jupyter_client.kernelspec import KernelSpecManager
    from traitlets import default

    from pstutor.sandbox import Watchdog

    specs = work / "kernels"
    (specs / _KERNEL).mkdir(parents=True)
    (work / "tmp").mkdir()
    kernel = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    env = {"HOME": str(work), "TMPDIR": str(work / "tmp"), "IPYTHONDIR": str(work / ".ipython"),
           "MPLCONFIGDIR": str(work / ".matplotlib"), "MPLBACKEND": "agg"}
    if program:
        kernel = [sys.executable, "-m", "pstutor.sandbox", str(work), "--", *kernel]
    (specs / _KERNEL / "kernel.json").write_text(json.dumps(
        {"argv": kernel, "display_name": "pstutor grading", "language": "python", "env": env,
         "interrupt_mode": "message" if program else "signal"}))
    deadline = time.monotonic() + timeout

    class SandboxedKernels(AsyncKernelManager):
        @default("kernel_spec_manager")
        def _only_the_grading_kernel(self) -> KernelSpecManager:
            return KernelSpecManager(kernel_dirs=[str(specs)])

        @default("transport")
        def _local_sockets(self) -> str:  # no network in the sandbox: Unix sockets in its folder
            return "ipc" if program else "tcp"

        @default("ip")
        def _socket_prefix(self) -> str:
            return str(work / "kernel") if program else "127.0.0.1"

        @default("connection_file")
        def _connection_file_in_the_sandbox(self) -> str:
            return str(work / "connection.json")

    client = _capped_client()(
        notebook, kernel_name=_KERNEL, allow_errors=True, record_timing=False, iopub_timeout=10,
        timeout_func=lambda cell: max(1, int(deadline - time.monotonic())),
        resources={"metadata": {"path": str(work)}}, kernel_manager_class=SandboxedKernels,
    )
    kernels: list[int] = []
    watchdogs: list[Watchdog] = []

    def started(**_) -> None:
        pid = client.km.provisioner.pid
        kernels.append(pid)
        _RUNNING.add(pid)
        watchdogs.append(Watchdog(pid, memory=memory, processes=PROCESS_LIMIT,
                                  on_limit=lambda: _kill_group(pid)))

    client.on_notebook_start = started
    timer = threading.Timer(timeout + 15, lambda: [_kill_group(pid) for pid in kernels])
    timer.start()  # the last resort, for a kernel stuck where an interrupt cannot reach
    try:
        if _STOPPING.is_set():
            return say("grading was interrupted", "评分被中断")
        client.execute(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # the kernel's own noise
        return _limit_reached(watchdogs, memory)
    except Exception as err:  # time limit, a kernel that died: the student's code did it
        if not kernels:  # no kernel started: the grader's problem, not the student's
            raise
        if _limit_reached(watchdogs, memory):
            return _limit_reached(watchdogs, memory)
        if time.monotonic() >= deadline:
            return say(f"time limit of {timeout:g} s exceeded", f"超过了 {timeout:g} 秒的时间限制")
        first = str(err).splitlines()[0][:200] if str(err) else ""
        return f"{type(err).__name__}: {first}"
    finally:
        timer.cancel()
        for watchdog in watchdogs:
            watchdog.stop()
        for pid in kernels:  # the kernel is gone by now; anything it started goes too
            _kill_group(pid)
            _RUNNING.discard(pid)


def _capped_client():
    """A NotebookClient whose kept output is capped: a flood of prints cannot exhaust the grader."""
    from nbclient import NotebookClient

    class CappedClient(NotebookClient):
        kept = 0

        def output(self, outs, msg, display_id, cell_index):
            size = len(json.dumps(msg.get("content", {}), default=str))
            is_record = MIME in msg.get("content", {}).get("data", {})
            if self.kept + size > MAX_OUTPUT_BYTES and not (is_record and size < 4096):
                return None
            self.kept += size
            return super().output(outs, msg, display_id, cell_index)

    return CappedClient


def _limit_reached(watchdogs, memory: int) -> str:
    for watchdog in watchdogs:
        if watchdog.exceeded == "memory":
            gib = f"{memory / 2**30:g}"
            return say(f"memory limit of {gib} GiB exceeded", f"超过了 {gib} GiB 的内存限制")
        if watchdog.exceeded:
            return say(f"limit of {PROCESS_LIMIT} processes exceeded", f"超过了 {PROCESS_LIMIT} 个进程的限制")
    return ""


_RUNNING: set[int] = set()  # kernels (sandboxes) running now, stopped on Ctrl-C
_STOPPING = threading.Event()


def _stop_all_kernels() -> None:
    for pid in list(_RUNNING):
        _kill_group(pid)


def _tasks_of(cell) -> list[str]:
    """The tasks whose answer a cell holds (stored by the build in the cell's metadata)."""
    meta = cell.get("metadata", {}).get("pstutor", {})
    tasks = meta.get("tasks", []) if isinstance(meta, dict) else []
    return [str(task) for task in tasks] if isinstance(tasks, list) else []


def _kill_group(pid: int | None) -> None:
    """Stop the kernel and everything it started (it leads its own process group)."""
    if pid:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)


def read_verdicts(notebook: nbformat.NotebookNode, attempted: dict[str, bool], stopped: str,
                  hide: list[str] = ()) -> dict[str, tuple[str, str]]:
    """Each task's status and detail, read only from the official check cell of that task."""
    results: dict[str, tuple[str, str]] = {}
    crashed: dict[str, str] = {}
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        for task in _tasks_of(cell):
            if errors:
                crashed[task] = _hide(_error_line(errors[0]), hide)
        checked = _CHECK_CALL.findall(cell.source) if not _tasks_of(cell) else []
        for output in cell.get("outputs", []) if len(checked) == 1 else []:
            record = output.get("data", {}).get(MIME)
            # A pass counts only as the check cell's own value, never as something displayed
            # (by a hook, say) while it ran; a displayed failure may stand (a missing answer).
            own = output.get("output_type") == "execute_result"
            if isinstance(record, dict) and record.get("task") == checked[0] in attempted \
                    and checked[0] not in results and (own or record.get("status") == FAILED):
                results[checked[0]] = _status(record, attempted[checked[0]], hide)
    for task, tried in attempted.items():
        if tried and task in crashed:
            interrupted = stopped and crashed[task].startswith("KeyboardInterrupt")
            results[task] = (CRASHED, stopped if interrupted else crashed[task])
        elif task not in results:
            results[task] = (CRASHED, stopped or say("its check did not run", "它的检查没有运行")) \
                if tried else (NOT_ATTEMPTED, "")
    return dict(sorted(results.items()))


def _error_line(error: dict) -> str:
    """`Name: message (line N: code)` of an error output: the student's own line, no grader path."""
    name, value = str(error.get("ename", "")), str(error.get("evalue", ""))
    value = re.sub(r" \(\d+\.py, line \d+\)", "", value)  # the kernel's name for the cell
    text = _ANSI.sub("", "\n".join(str(line) for line in error.get("traceback", [])))
    where = re.findall(r"Cell In\[\d+\], line (\d+)", text)
    code = re.findall(r"^-*> *\d+ (.*)$", text, re.M)
    line = f" ({say('line', '第')} {where[-1]}{'' if current_language() == 'en' else ' 行'}"
    line = line + (f": {code[0].strip()[:120]})" if code else ")") if where else ""
    if name == "SyntaxError" and not where:
        match = re.search(r"line (\d+)", text)
        line = f" ({say('line', '第')} {match.group(1)}{'' if current_language() == 'en' else ' 行'})" \
            if match else ""
    return f"{name}: {value[:200]}{line}"


def _hide(text: str, paths: list[str]) -> str:
    """Details without the grader's folders (the sandbox, the course, Python's own)."""
    for path in sorted({*paths, sys.prefix, sys.base_prefix}, key=len, reverse=True):
        text = text.replace(path, "…")
    return text


def _status(record: dict, attempted: bool, hide: list[str]) -> tuple[str, str]:
    if not attempted or record.get("status") == NOT_DONE:
        return NOT_ATTEMPTED, ""
    if record.get("status") == PASSED:
        return PASSED, ""
    details = record.get("details")
    detail = details.get(current_language()) if isinstance(details, dict) else None
    return FAILED, _hide(str(detail or record.get("detail", ""))[:500], hide)


def _earlier_results(table: Path) -> dict[str, Submission]:
    """What an earlier run (stopped or finished) already wrote to the table, by student."""
    done: dict[str, Submission] = {}
    with contextlib.suppress(OSError, csv.Error, UnicodeDecodeError), \
            open(table, encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle):
            if not row.get("sha256") or not row.get("score"):
                continue
            tasks = [c for c in row if c not in (*COLUMNS, "details", "sha256")]
            details = dict(part.split(": ", 1) for part in re.split(r"; (?=\d\d\.\d+: )", row["details"])
                           if ": " in part)
            status = {zh: en for en, zh in _STATUS_ZH.items()}
            results = {t: (status.get(row[t], row[t]), details.get(t, "")) for t in tasks if row[t]}
            student = _unquote(row["student"])
            done[student] = Submission(
                student, Path(), _unquote(row["exercise"]), row["language"], results,
                review=_unquote(row["review"]), seconds=float(row["seconds"] or 0), digest=row["sha256"])
    return done


def _quote(value: object) -> str:
    """A CSV cell a spreadsheet shows as text: formulas (=, +, -, @) are neutralised."""
    text = str(value)
    return "'" + text if text.startswith(_FORMULA) else text


def _unquote(text: str) -> str:
    return text[1:] if text.startswith("'") and text[1:].startswith(_FORMULA) else text


def write_table(submissions: list[Submission], table: Path, tasks: list[str]) -> None:
    """The CSV: one row per graded student, one column per task, the score and the details."""
    table.parent.mkdir(parents=True, exist_ok=True)
    partial = table.with_name(f".{table.name}.partial")
    with open(partial, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow([*COLUMNS, *tasks, "details", "sha256"])
        for s in submissions:
            if s.problem:
                row = [s.student, s.exercise, s.language, "", "", "", *[shown(INVALID)] * len(tasks),
                       s.problem, s.digest]
            elif s.results:
                details = "; ".join(f"{task}: {detail}" for task, (_, detail) in s.results.items() if detail)
                row = [s.student, s.exercise, s.language, s.score(), f"{s.seconds:.0f}", s.review,
                       *[shown(s.results[t][0]) if t in s.results else "" for t in tasks], details, s.digest]
            else:
                continue  # not graded yet
            writer.writerow([_quote(value) for value in row])
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(partial, table)


def summary(submissions: list[Submission]) -> str:
    """A short table for the screen, and every failure with its hint."""
    tasks = sorted({task for s in submissions for task in s.results})
    width = max([len(say("student", "学生"))] + [len(s.student) for s in submissions]) + 2
    lines = [say("student", "学生").ljust(width) + say("score", "得分").ljust(8)
             + "".join(t.ljust(15) for t in tasks)]
    for s in submissions:
        if s.problem:
            lines.append(s.student.ljust(width) + say("invalid submission: ", "无效的提交：") + s.problem)
        else:
            cells = "".join((shown(s.results[task][0]) if task in s.results else "-").ljust(15)
                            for task in tasks)
            lines.append(s.student.ljust(width) + s.score().ljust(8) + cells + s.review)
    notes = [f"  {s.student} {task}: {detail}" for s in submissions
             for task, (_, detail) in s.results.items() if detail]
    if notes:
        lines += ["", say("Details:", "详细信息："), *notes]
    complete = sum(bool(s.results) and all(v[0] == PASSED for v in s.results.values()) for s in submissions)
    flagged = sum(bool(s.review) for s in submissions)
    lines += ["", say(f"{len(submissions)} submission(s); {complete} with every task passed; "
                      f"{flagged} need(s) review.",
                      f"共 {len(submissions)} 份提交；其中 {complete} 份全部通过；"
                      f"{flagged} 份需要人工查看。")]
    return "\n".join(lines)
