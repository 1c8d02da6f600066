"""Execute every notebook in a fresh kernel; print wall time (kernel start included) and peak memory.

    python benchmarks/notebooks.py [--lang en|zh|all] [--folders notebooks,solutions,exercises] [NN ...]

A benchmark, not a test: run it on an otherwise idle target machine (2 cores). Each row is
marked against the course's budget: lessons 01-06 under 20 s each, 07-09 under 45 s, and
the nine lessons of one language under 3 minutes together.
"""

from __future__ import annotations

import argparse
import subprocess
import threading
import time
from pathlib import Path

import nbformat
import psutil
from nbclient import NotebookClient

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


def budget(path: Path) -> float:
    """Seconds a notebook may take on the 2-core machine."""
    return 45.0 if path.stem[:2] in ("07", "08", "09") else 20.0


def main() -> None:
    """Run the chosen notebooks and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lang", choices=("en", "zh", "all"), default="all")
    parser.add_argument("--folders", default="notebooks,solutions,exercises")
    parser.add_argument("--course", type=Path, default=None,
                        help="the clone of the course (default: found from the working directory)")
    parser.add_argument("lessons", nargs="*")
    args = parser.parse_args()
    try:
        root = find_course(args.course)
    except CourseNotFoundError as err:
        parser.error(str(err))
    langs = ("en", "zh") if args.lang == "all" else (args.lang,)
    totals: dict[tuple[str, str], float] = {}
    print(f"{'notebook':<42} {'seconds':>8} {'budget':>7} {'peak MiB':>9}")
    for folder in args.folders.split(","):
        for lang in langs:
            for path in sorted((root / folder / lang).glob("*.ipynb")):
                if args.lessons and not any(path.stem.startswith(n) for n in args.lessons):
                    continue
                seconds, mib = run(path)
                totals[folder, lang] = totals.get((folder, lang), 0.0) + seconds
                mark = "ok" if seconds <= budget(path) else "OVER"
                name = f"{folder}/{lang}/{path.name}"
                print(f"{name:<42} {seconds:8.1f} {mark:>7} {mib:9.0f}", flush=True)
    for (folder, lang), total in totals.items():
        mark = ("ok" if total <= 180 else "OVER") if folder == "notebooks" else ""
        print(f"{'total ' + folder + '/' + lang:<42} {total:8.1f} {mark:>7}")


if __name__ == "__main__":
    main()
