"""Flakiness check for the timing-dependent tests: run them N times in a row (default 5) and
report every test that failed in any run.

    python benchmarks/repeat_tests.py [--runs 5] [--lang zh] [PATH ...]

Timing-dependent means the outcome hangs on how fast processes start, die and are noticed:
the multi-host rehearsal (a worker killed mid-training, restarted, rejoining), the local
clusters (killed and restarted tasks), child processes that must end with their parent, the
sidecar evaluator following checkpoints, and lesson 07's notebook (kills and restarts, stored
outputs). PATH arguments replace that list.

Each run is a fresh pytest process with the project's options, as CI runs it, rather than
tests repeated inside one process (pytest-repeat): a session's own set-up and end — importing
TensorFlow, pstutor.setup(), module-level probes, the check that no process outlived the
suite — can flake too, and one process would share them between runs. Exit status 0 only when
every run ran every test and none failed; a skipped test proves nothing, so it counts against.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from pstutor.course import CourseNotFoundError, find_course
from pstutor.language import say, set_language

TIMING_DEPENDENT = [
    "tests/test_multihost.py",
    "tests/test_local_cluster.py",
    "tests/test_processes.py",
    "tests/test_evaluation.py",
    "notebooks/en/07_fault_tolerance.ipynb",
]


@dataclass
class Run:
    """What one pytest run did: tests passed, failed (name -> first line of why), skipped, seconds."""

    passed: int = 0
    failed: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0


def run_once(root: Path, paths: list[str], report: Path) -> Run:
    """One pytest run of `paths` in the clone `root`, read back from its JUnit report."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pytest", "-q", f"--junitxml={report}", *paths],
                   cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    run = Run(seconds=time.perf_counter() - started)
    if not report.exists():
        run.failed["(pytest)"] = say("no report: pytest did not run", "没有报告：pytest 没有运行")
        return run
    for case in ET.parse(report).getroot().iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        problem = case.find("failure")
        if problem is None:
            problem = case.find("error")
        skip = case.find("skipped")
        if problem is not None:
            run.failed[name] = _first_line(problem)
        elif skip is not None:
            run.skipped[name] = _first_line(skip)
        else:
            run.passed += 1
    if not (run.passed or run.failed or run.skipped):
        run.failed["(pytest)"] = say("ran no test", "没有运行任何测试")
    return run


def _first_line(element: ET.Element) -> str:
    text = (element.get("message") or element.text or "").strip()
    return text.splitlines()[0][:160] if text else ""


def main(argv: list[str] | None = None) -> int:
    """Run the tests N times; print each run's counts, then every test that did not pass, with its runs."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--lang", choices=["en", "zh"], default="en")
    parser.add_argument("--course", type=Path, default=None,
                        help="the clone of the course (default: found from the working directory)")
    parser.add_argument("paths", nargs="*", default=TIMING_DEPENDENT)
    args = parser.parse_args(argv)
    set_language(args.lang)
    if args.runs < 1:
        parser.error(say(f"--runs must be at least 1, not {args.runs}",
                         f"--runs 至少为 1，而不是 {args.runs}"))
    try:
        root = find_course(args.course)
    except CourseNotFoundError as err:
        parser.error(str(err))
    missing = [path for path in args.paths if not (root / path).exists()]
    if missing:
        parser.error(say(f"no such test file or folder: {', '.join(missing)}",
                         f"没有这个测试文件或文件夹：{', '.join(missing)}"))

    failed: dict[str, list[int]] = {}
    skipped: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as folder:
        for number in range(1, args.runs + 1):
            run = run_once(root, args.paths, Path(folder) / f"run{number}.xml")
            print(say(f"run {number}: {run.passed} passed, {len(run.failed)} failed, "
                      f"{len(run.skipped)} skipped ({run.seconds:.0f} s)",
                      f"第 {number} 轮：{run.passed} 个通过，{len(run.failed)} 个失败，"
                      f"{len(run.skipped)} 个跳过（{run.seconds:.0f} 秒）"), flush=True)
            for name, why in run.failed.items():
                failed.setdefault(name, []).append(number)
                print(f"    ✗ {name}: {why}", flush=True)
            skipped.update(run.skipped)
    for name, why in sorted(skipped.items()):
        print(say(f"skipped, so not tested: {name}: {why}", f"被跳过，因此没有测试：{name}：{why}"))
    if failed:
        print(say("\ntests that failed (runs):", "\n失败的测试（轮次）："))
        for name, runs in sorted(failed.items()):
            print(f"  {name}  {runs}")
        return 1
    if skipped:
        return 1
    print(say(f"\nall {args.runs} runs green: no test failed.", f"\n{args.runs} 轮全部通过：没有测试失败。"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
