"""Execute every notebook in a fresh kernel; print wall time (kernel start included) and peak memory.

    python benchmarks/notebooks.py [--lang en|zh|all] [--folders notebooks,solutions,exercises]
                                   [--rounds N] [--guide parameter_server_training.ipynb] [NN ...]

A benchmark, not a test: run it on an otherwise idle target machine (2 cores). Each row is
marked against the course's budgets, declared in lessons/course.toml (`pstutor.manifest`):
each lesson's `budget_seconds`, and `total_budget_seconds` for the lessons of one language
together.

With `--guide`, the official guide's notebook (tensorflow/docs
site/en/tutorials/distribute/parameter_server_training.ipynb; its pip cell dropped and
`pstutor.setup()` put first, so that it runs under tf-keras) runs before every notebook, and
each row is also marked against the guide's median of the same run: a lesson's notebooks may
take `guide_ratio` times as long. A row shows the median of `--rounds` runs and their lowest
and highest.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import nbformat
import psutil
from nbclient import NotebookClient

from pstutor import manifest
from pstutor.course import CourseNotFoundError, find_course


def run(path: Path) -> tuple[float, float]:
    """Seconds to execute `path` from kernel start to last cell, and the kernel's peak RSS in MiB."""
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(notebook, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    peak, done = [0], threading.Event()

    def sample() -> None:
        while not done.wait(0.1):
            kernel = getattr(client.km, "provisioner", None)
            pid = getattr(getattr(kernel, "process", None), "pid", None)
            if pid and psutil.pid_exists(pid):
                proc = psutil.Process(pid)
                rss = proc.memory_info().rss + sum(
                    c.memory_info().rss for c in proc.children(recursive=True))
                peak[0] = max(peak[0], rss)

    started = time.perf_counter()
    with client.setup_kernel(stderr=subprocess.DEVNULL):  # shutdown noise of TensorFlow's C++
        watcher = threading.Thread(target=sample, daemon=True)
        watcher.start()
        for index, cell in enumerate(notebook.cells):
            client.execute_cell(cell, index)
        done.set()
    return time.perf_counter() - started, peak[0] / 2**20


def guide_notebook(path: Path, folder: Path) -> Path:
    """The official guide as it can run here: no pip cell, `pstutor.setup()` first."""
    notebook = nbformat.read(path, as_version=4)
    notebook.cells = [cell for cell in notebook.cells
                      if not (cell.cell_type == "code" and cell.source.lstrip().startswith("!pip"))]
    notebook.cells.insert(0, nbformat.v4.new_code_cell("import pstutor\npstutor.setup()"))
    runnable = folder / "parameter_server_training.ipynb"
    nbformat.write(notebook, runnable)
    return runnable


def main() -> None:
    """Run the chosen notebooks and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lang", choices=("en", "zh", "all"), default="all")
    parser.add_argument("--folders", default="notebooks,solutions,exercises")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--guide", type=Path, default=None,
                        help="the official guide's notebook, to run before every notebook and compare with")
    parser.add_argument("--course", type=Path, default=None,
                        help="the clone of the course (default: found from the working directory)")
    parser.add_argument("lessons", nargs="*")
    args = parser.parse_args()
    try:
        root = find_course(args.course)
        course = manifest.read(root)
    except (CourseNotFoundError, manifest.ManifestError) as err:
        parser.error(str(err))
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    with tempfile.TemporaryDirectory() as scratch:
        guide = guide_notebook(args.guide, Path(scratch)) if args.guide else None
        report(root, course, args, guide)


def report(root: Path, course: manifest.Course, args: argparse.Namespace, guide: Path | None) -> None:
    """Time each lesson's notebooks `args.rounds` times (the guide before each run) and print the rows."""
    langs = ("en", "zh") if args.lang == "all" else (args.lang,)
    totals: dict[tuple[str, str], float] = {}
    guide_runs: list[float] = []
    rows = []
    header = f"{'notebook':<42} {'median s':>8} {'low-high':>11} {'budget':>7} {'peak MiB':>9}"
    print(header)
    for folder in args.folders.split(","):
        for lang in langs:
            for lesson in course.lessons:
                if args.lessons and not any(lesson.slug.startswith(n) for n in args.lessons):
                    continue
                path = root / folder / lang / f"{lesson.slug}.ipynb"
                runs, peak = [], 0.0
                for _ in range(args.rounds):
                    if guide:
                        guide_runs.append(run(guide)[0])
                    seconds, mib = run(path)
                    runs.append(seconds)
                    peak = max(peak, mib)
                seconds = statistics.median(runs)
                totals[folder, lang] = totals.get((folder, lang), 0.0) + seconds
                mark = "ok" if seconds <= lesson.budget_seconds else "OVER"
                name = f"{folder}/{lang}/{path.name}"
                line = f"{name:<42} {seconds:8.1f} {min(runs):5.1f}-{max(runs):<5.1f} {mark:>7} {peak:9.0f}"
                print(line, flush=True)
                rows.append((lesson, seconds, line))
    for (folder, lang), total in totals.items():
        mark = ("ok" if total <= course.total_budget_seconds else "OVER") if folder == "notebooks" else ""
        print(f"{'total ' + folder + '/' + lang:<42} {total:8.1f} {'':11} {mark:>7}")
    if guide_runs:
        middle = statistics.median(guide_runs)
        print(f"\nthe guide: median {middle:.1f} s of {len(guide_runs)} runs "
              f"({min(guide_runs):.1f}-{max(guide_runs):.1f} s)\n{header} {'/ guide':>8}")
        for lesson, seconds, line in rows:
            ratio = seconds / middle
            print(f"{line} {ratio:7.2f}x {'ok' if ratio <= lesson.guide_ratio else 'OVER'}")


if __name__ == "__main__":
    main()
