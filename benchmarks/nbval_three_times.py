"""Flakiness check: run the nbval suite of every stored notebook N times (default 3) with no
change in between, and report each cell whose output differed from the stored one in any run.

    python benchmarks/nbval_three_times.py [--runs 3] [PATH ...]

Exit status 0 only when every run was green. Each run is an ordinary pytest run (the
project's nbval options and sanitizer from pyproject.toml), so what this proves is exactly
what CI checks, three times over.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from pstutor.course import CourseNotFoundError, find_course

DEFAULT_PATHS = ["notebooks", "solutions", "exercises"]


def run_once(root: Path, paths: list[str], report: Path) -> tuple[int, dict[str, str], float]:
    """One pytest run; returns the number of cells checked, the failed ones with a reason, seconds."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pytest", "-q", f"--junitxml={report}", *paths],
                   cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    seconds = time.perf_counter() - started
    if not report.exists():
        return 0, {"(pytest)": "no report: pytest did not run"}, seconds
    cases = ET.parse(report).getroot().iter("testcase")
    checked, failed = 0, {}
    for case in cases:
        checked += 1
        problem = case.find("failure")
        if problem is None:
            problem = case.find("error")
        if problem is not None:
            name = f"{case.get('classname', '')}::{case.get('name', '')}"
            message = (problem.get("message") or "").strip()
            failed[name] = message.splitlines()[0][:160] if message else ""
    return checked, failed, seconds


def main() -> int:
    """Run the suite N times and print which cells differed in which run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--course", type=Path, default=None,
                        help="the clone of the course (default: found from the working directory)")
    parser.add_argument("paths", nargs="*", default=DEFAULT_PATHS)
    args = parser.parse_args()
    try:
        root = find_course(args.course)
    except CourseNotFoundError as err:
        parser.error(str(err))
    differed: dict[str, list[int]] = {}
    with tempfile.TemporaryDirectory() as folder:
        for run in range(1, args.runs + 1):
            checked, failed, seconds = run_once(root, args.paths, Path(folder) / f"run{run}.xml")
            print(f"run {run}: {checked} cells checked, {len(failed)} differed ({seconds:.0f} s)", flush=True)
            for name, reason in failed.items():
                differed.setdefault(name, []).append(run)
                print(f"    {name}: {reason}", flush=True)
    if differed:
        print("\ncells that differed (runs):")
        for name, runs in sorted(differed.items()):
            print(f"  {name}  {runs}")
        return 1
    print(f"\nall {args.runs} runs green: no cell differed.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
