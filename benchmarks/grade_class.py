"""Time `pstutor grade` on a made-up class: how long a teacher waits for N students.

    python benchmarks/grade_class.py [--students 22] [--jobs 2] [--exercise 01_cluster] [--course DIR]

A benchmark, not a test. The class is a fixed mix of the exercise's own notebooks: worked
solutions (English and Chinese), untouched student copies, and student copies with the
source's wrong answers, in that order round-robin, so two runs grade the same class. It
prints the wall time of the whole command, the machine's load average before and after
(the machine may be shared: say so when you quote a number), and the grader's summary line.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from pstutor import build
from pstutor.course import find_course


def make_class(course: Path, exercise: str, students: int, folder: Path) -> None:
    """`students` notebooks of one exercise in `folder`: solutions, empty copies, wrong answers."""
    source = course / "lessons" / "exercises" / f"{exercise}.md"
    wrong = {cell.task: cell.source for cell in build.read_lesson(source) if cell.kind == "wrong"}
    kinds = ["solution-en", "solution-zh", "empty", "wrong"]
    for index in range(students):
        kind = kinds[index % len(kinds)]
        path = folder / f"student{index + 1:02d}.ipynb"
        if kind.startswith("solution"):
            path.write_bytes(build.notebook_path(source, kind[-2:], "solution").read_bytes())
        elif kind == "empty":
            path.write_bytes(build.notebook_path(source, "en", "exercise").read_bytes())
        else:
            nbformat.write(build.render(source, "en", "solution", answers=wrong), path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=22)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--exercise", default="01_cluster")
    parser.add_argument("--course", type=Path, default=None)
    args = parser.parse_args()
    course = find_course(args.course)
    with tempfile.TemporaryDirectory(prefix="pstutor-bench-") as work:
        folder = Path(work) / "class"
        folder.mkdir()
        make_class(course, args.exercise, args.students, folder)
        before = os.getloadavg()
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "pstutor", "grade", str(folder), "--out",
                               str(Path(work) / "grades.csv"), "--jobs", str(args.jobs), "--course",
                               str(course)], capture_output=True, text=True)
        seconds = time.monotonic() - started
        after = os.getloadavg()
    lines = done.stdout.strip().splitlines()
    print(f"{args.students} students of {args.exercise}, --jobs {args.jobs}: {seconds:.1f} s "
          f"(exit {done.returncode}); load average {before[0]:.2f} before, {after[0]:.2f} after, "
          f"{os.cpu_count()} cores")
    print(lines[-2] if len(lines) >= 2 else done.stderr[-2000:])
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
