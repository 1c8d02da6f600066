"""Grading a class: every submission identified, run `jobs` at a time, each result written as soon as
it is known (the package's docstring names the modules this ties together)."""

from __future__ import annotations

import concurrent.futures
import contextlib
import math
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from pstutor.course import find_course
from pstutor.grading import escape as safe
from pstutor.grading import export, record
from pstutor.grading.identify import Exercise, Identified, Invalid, catalogue, identify
from pstutor.grading.limits import Limits
from pstutor.grading.model import (
    FAILED_TO_GRADE,
    GRADED,
    NOT_ATTEMPTED,
    REFUSED,
    StudentResult,
    TaskResult,
    shown,
    text,
)
from pstutor.grading.run import Interrupted, execute, new_key, prepare, verdicts
from pstutor.language import say
from pstutor.sandbox import work_base

__all__ = ["GradingError", "GradingFailed", "grade", "summary"]
MEMORY_LIMIT = 6 << 30  # per submission, the kernel and everything it starts together
MIN_MEMORY = 1 << 30  # TensorFlow alone takes about 0.7 GiB
MIN_TIMEOUT = 30  # seconds: starting a kernel and importing TensorFlow take 10-20 s on 2 cores
summary = export.summary


class GradingError(ValueError):
    """The grading itself cannot start: bad settings, no course, no notebooks, no sandbox, a bad --out."""


class GradingFailed(RuntimeError):
    """The grader could not grade the one submission of a Gradescope or PrairieLearn run: no verdict."""


def default_jobs() -> int:
    """How many submissions this machine can run at once: one per core, memory permitting."""
    available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    with contextlib.suppress(OSError, ValueError, StopIteration):
        meminfo = Path("/proc/meminfo").read_text().splitlines()
        available = int(next(line for line in meminfo if line.startswith("MemAvailable")).split()[1]) * 1024
    return max(1, min(os.cpu_count() or 1, available // MEMORY_LIMIT))


def check_settings(timeout: float, memory: float, jobs: int | None) -> None:
    """Refuse settings that would turn every submission into a limit exceeded (one line each)."""
    if not (isinstance(timeout, int | float) and math.isfinite(timeout)) or timeout < MIN_TIMEOUT:
        raise GradingError(
            say(
                f"--timeout must be at least {MIN_TIMEOUT} seconds (a kernel and TensorFlow "
                f"take 10-20 s to start), not {timeout!r}",
                f"--timeout 至少为 {MIN_TIMEOUT} 秒（启动内核和 TensorFlow 需要 10–20 秒），"
                f"而不是 {timeout!r}",
            )
        )
    if not (isinstance(memory, int | float) and math.isfinite(memory)) or memory < MIN_MEMORY:
        raise GradingError(
            say(
                f"--memory must be at least {MIN_MEMORY >> 30} GiB (TensorFlow alone takes "
                f"about 0.7 GiB), not {memory / 2**30 if math.isfinite(memory) else memory!r}",
                f"--memory 至少为 {MIN_MEMORY >> 30} GiB（仅 TensorFlow 就要约 0.7 GiB），"
                f"而不是 {memory / 2**30 if math.isfinite(memory) else memory!r}",
            )
        )
    if jobs is not None and jobs < 1:
        raise GradingError(say("--jobs must be at least 1", "--jobs 至少为 1"))


def grade(
    folder: Path,
    out: Path,
    *,
    course: Path | None = None,
    timeout: float = 300,
    sandbox: bool = True,
    jobs: int | None = None,
    memory: int = MEMORY_LIMIT,
    format: str = "csv",
    exercise: str | None = None,
    accept: tuple[str, ...] = (),
    regrade: bool = False,
    use_cgroups: bool = True,
    log=print,
) -> list[StudentResult]:
    """Grade every `*.ipynb` in `folder` (one per student) into `out`, student by student."""
    folder, out = Path(folder), Path(out)
    check_settings(timeout, memory, jobs)
    memory = int(memory)
    if format not in export.FORMATS:
        raise GradingError(say(f"unknown format {format!r}", f"未知的格式 {format!r}"))
    course = find_course(course)
    if not (course / "exercises").is_dir():
        raise GradingError(
            say(
                f"{course} has no exercises/ folder to grade against",
                f"{course} 中没有用来评分的 exercises/ 文件夹",
            )
        )
    if not folder.is_dir():
        raise GradingError(say(f"{folder} is not a folder", f"{folder} 不是文件夹"))
    single = format in record.JSON_FORMATS
    paths = sorted(folder.glob("*.ipynb"))
    if not paths and not single:
        raise GradingError(say(f"no .ipynb files in {folder}", f"{folder} 中没有 .ipynb 文件"))
    try:
        record.check_output(out, format)
    except record.OutputError as err:
        raise GradingError(str(err)) from None
    exercises = catalogue(course)
    if exercise and not any(e.source.startswith(exercise) for e in exercises):
        raise GradingError(say(f"this course has no exercise {exercise!r}", f"本课程没有练习 {exercise!r}"))
    program = _sandbox_program() if sandbox else None
    sweep_folders()
    settings = {"timeout": timeout, "memory": memory, "sandbox": sandbox, "exercise": exercise or ""}
    results, todo = _identify_all(paths, exercises, exercise, settings, single)
    earlier = {} if regrade else record.earlier_results(out, format)
    runs = []
    for result, found in todo:
        kept = earlier.get((result.student, result.exercise))
        if found is None or (kept and kept.digest == result.digest and kept.settings == result.settings):
            if found is not None:
                _replace(results, result, kept)
            continue
        runs.append((result, found))
    unknown = [name for name in accept if not any(r.student == name for r in results)]
    if unknown:
        raise GradingError(
            say(
                f"--accept {unknown[0]}: no submission of that name in {folder}",
                f"--accept {unknown[0]}：{folder} 中没有这个名字的提交",
            )
        )
    for result in results:
        result.accepted = result.accepted or result.student in accept
    others = [r for key, r in earlier.items() if not any((x.student, x.exercise) == key for x in results)]
    writer = _Writer(out, format, exercises, others)
    writer.write(results)
    if len(runs) < len(results) and not single:
        log(
            say(
                f"{len(results) - len(runs)} submission(s) not run: invalid, or already graded in "
                f"{out.name} with the same file and settings (--regrade grades them again)",
                f"{len(results) - len(runs)} 份提交未运行：无效，"
                f"或者同一文件已用相同设置在 {out.name} 中评过分"
                "（--regrade 会重新评分）",
            )
        )
    if runs:
        limits = Limits(jobs or default_jobs(), memory, use_cgroups=use_cgroups)
        log(say(*limits.describe()))
        try:
            _run_all(
                runs, results, writer, limits, course, timeout, program, memory, jobs or default_jobs(), log
            )
        finally:
            limits.close()
    if single and results and results[0].state == FAILED_TO_GRADE:
        raise GradingFailed(
            say(
                f"the grader could not grade {results[0].student}: {results[0].problem.get('en', '')}",
                f"评分程序无法为 {results[0].student} 评分：{results[0].problem.get('zh', '')}",
            )
        )
    if single:  # one submission's results.json: graded, or invalid with the reason
        writer.finish(results[0])
    return results


def _sandbox_program() -> str:
    from pstutor.sandbox import bwrap

    program = bwrap()
    if program is None:
        raise GradingError(
            say(
                "the sandbox for the submissions is not available: install bubblewrap "
                "(apt-get install bubblewrap) on a system that allows user namespaces, or pass "
                "--no-sandbox if you trust every submission",
                "无法为提交建立沙箱：请安装 bubblewrap（apt-get install bubblewrap），"
                "并确保系统允许用户命名空间；或者在信任所有提交时加上 --no-sandbox",
            )
        )
    return program


def _identify_all(
    paths: list[Path], exercises: list[Exercise], only: str | None, settings: dict, single: bool
) -> tuple[list[StudentResult], list]:
    """A result for every submission, and the ones to run (with what identification found)."""
    results, todo = [], []
    for path in paths:
        result = StudentResult(path.name[: -len(".ipynb")])
        try:
            found = identify(path, exercises, only)
        except Invalid as err:
            result.state, result.problem, result.seconds = REFUSED, err.reason, 0.0
            results.append(result)
            continue
        except Exception as err:  # the grader's own trouble reading it: say so, go on with the others
            result.state = FAILED_TO_GRADE
            result.problem = text(
                f"could not be read: {type(err).__name__}: {str(err)[:200]}",
                f"无法读取：{type(err).__name__}：{str(err)[:200]}",
            )
            results.append(result)
            continue
        result.exercise, result.language, result.digest = (
            found.exercise.source,
            found.exercise.lang,
            found.digest,
        )
        result.matched = found.matched
        result.settings = record.fingerprint(settings, found.exercise.path)
        results.append(result)
        todo.append((result, found))
    if single and (len(todo) != 1 or len(results) != 1):  # Gradescope, PrairieLearn: one notebook
        lone = StudentResult(results[0].student if len(results) == 1 else "submission", state=REFUSED)
        lone.problem = (
            text(
                f"{len(todo)} gradable notebook(s) of {len(results)} in the submission: "
                "submit exactly one exercise notebook",
                f"提交中有 {len(results)} 个笔记本，其中可评分的 {len(todo)} 个：请只提交一个练习笔记本",
            )
            if len(results) != 1
            else results[0].problem
        )
        return [lone], []
    return results, todo


def _replace(results: list[StudentResult], current: StudentResult, kept: StudentResult) -> None:
    results[results.index(current)] = kept


class _Writer:
    """Writes the output after each student, inside its own guard: one student's bytes cannot stop it."""

    def __init__(
        self, out: Path, format: str, exercises: list[Exercise], others: list[StudentResult]
    ) -> None:
        self.out, self.format, self.others = out, format, others
        self.titles = {e.source: e.title for e in exercises if e.lang == "en"}
        self.tasks = {e.source: e.tasks for e in exercises if e.lang == "en"}
        self.lock = threading.Lock()

    def write(self, results: list[StudentResult]) -> None:
        done = [r for r in [*results, *self.others] if r.state]
        if self.format in record.JSON_FORMATS:
            return  # one submission: written once it is graded (`finish`)
        tasks = sorted({task for r in done for task in [*r.tasks, *self.tasks.get(r.exercise, [])]})
        data = (
            export.course_csv(done, tasks) if self.format == "csv" else export.canvas_csv(done, self.titles)
        )
        record.write(self.out, data, self.format, done)

    def finish(self, result: StudentResult) -> None:
        if self.format == "gradescope":
            record.write(self.out, export.gradescope_json(result), self.format, [result])
        elif self.format == "prairielearn":
            record.write(self.out, export.prairielearn_json(result), self.format, [result])


def _run_all(
    runs,
    results,
    writer: _Writer,
    limits: Limits,
    course: Path,
    timeout: float,
    program: str | None,
    memory: int,
    jobs: int,
    log,
) -> None:
    stopping, running = threading.Event(), set()
    slots: queue.Queue[int] = queue.Queue()
    for index in range(jobs):
        slots.put(index)
    finished = [0]

    def one(result: StudentResult, found: Identified) -> None:
        index = slots.get()
        started = time.monotonic()
        try:
            with limits.slot(index, f"student-{id(result)}") as slot:
                graded = grade_one(
                    found,
                    course,
                    timeout=timeout,
                    program=program,
                    slot=slot,
                    memory=memory,
                    running=running,
                    stopping=stopping,
                )
            result.tasks, result.state = graded, GRADED
        except Interrupted:
            return
        except Exception as err:  # the grader's own trouble with this one: no verdict, say so
            if stopping.is_set():
                return
            result.state = FAILED_TO_GRADE
            result.problem = text(
                f"the grader could not run it: {type(err).__name__}: {str(err)[:200]}",
                f"评分程序无法运行它：{type(err).__name__}：{str(err)[:200]}",
            )
        finally:
            slots.put(index)
        result.seconds = max(time.monotonic() - started, 0.1)
        with writer.lock:
            finished[0] += 1
            try:
                writer.write(results)
            except Exception as err:
                log(
                    say(
                        f"could not write {writer.out} after {result.student!a}: {type(err).__name__}: {err}",
                        f"在 {result.student!a} 之后无法写入 {writer.out}：{type(err).__name__}：{err}",
                    )
                )
            score = (
                f"{result.score():g}/{result.max_score():g}"
                if result.state == GRADED
                else safe.visible(shown(result.problem))
            )
            who = safe.on_screen(result.student)
            log(f"[{finished[0]}/{len(runs)}] {who}: {score} ({result.seconds:.0f} s)")

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=jobs)
    futures = [pool.submit(one, result, found) for result, found in runs]
    try:
        for future in concurrent.futures.as_completed(futures):
            future.result()
    except BaseException:
        stopping.set()
        for future in futures:
            future.cancel()
        from pstutor.grading.run import _kill_group

        for pid in list(running):
            _kill_group(pid)
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown()


def grade_one(
    found: Identified,
    course: Path,
    *,
    timeout: float,
    program: str | None,
    slot,
    memory: int,
    running: set[int],
    stopping: threading.Event,
) -> dict:
    """Run one identified submission; its task results (raises Interrupted when the grading stops)."""
    prepared = prepare(found)
    if not any(prepared.attempted.values()):  # a copy as handed out: no kernel could change its verdicts
        return {task: TaskResult(task, NOT_ATTEMPTED) for task in sorted(prepared.attempted)}
    work = Path(tempfile.mkdtemp(prefix=f"pstutor-grade-{os.getpid()}-", dir=work_base()))
    try:
        key = new_key()
        stopped = execute(
            prepared,
            work,
            timeout=timeout,
            sandbox=program,
            slot=slot,
            memory=memory,
            key=key,
            running=running,
            stopping=stopping,
        )
        return verdicts(prepared, stopped, key, hide=[str(work), str(course)])
    finally:
        remove(work)


def remove(folder: Path) -> None:
    """Delete a sandbox folder, whatever the submission made of it (no permissions, deep trees, odd names)."""
    if not folder.exists():
        return
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        subprocess.run(
            ["chmod", "-R", "u+rwX", "--", str(folder)], check=False, capture_output=True, timeout=300
        )
        subprocess.run(
            ["rm", "-rf", "--one-file-system", "--", str(folder)],
            check=False,
            capture_output=True,
            timeout=300,
        )
    if folder.exists():
        shutil.rmtree(folder, ignore_errors=True)


def sweep_folders() -> None:
    """Remove the sandbox folders of graders that were killed (their pid is gone)."""
    for folder in Path(work_base()).glob("pstutor-grade-*-*"):
        owner = folder.name[len("pstutor-grade-") :].split("-")[0]
        if owner.isdigit() and not Path(f"/proc/{owner}").exists():
            remove(folder)
