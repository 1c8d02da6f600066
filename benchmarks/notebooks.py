"""Execute every notebook in a fresh kernel; print wall time (kernel start included) and peak memory.

    python benchmarks/notebooks.py [--lang en|zh|all] [NN ...]

A benchmark, not a test: run it on the target machine (2 cores) and compare with the
course's budget (lessons 01-06 under 20 s each, 07-09 under 45 s).
"""

from __future__ import annotations

import argparse
import threading
import time
from pathlib import Path

import nbformat
import psutil
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent


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
    with client.setup_kernel():
        watcher = threading.Thread(target=sample, daemon=True)
        watcher.start()
        for index, cell in enumerate(notebook.cells):
            client.execute_cell(cell, index)
        done.set()
    return time.perf_counter() - started, peak[0] / 2**20


def main() -> None:
    """Run the chosen notebooks and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lang", choices=("en", "zh", "all"), default="all")
    parser.add_argument("lessons", nargs="*")
    args = parser.parse_args()
    langs = ("en", "zh") if args.lang == "all" else (args.lang,)
    totals = dict.fromkeys(langs, 0.0)
    print(f"{'notebook':<32} {'seconds':>8} {'peak MiB':>9}")
    for lang in langs:
        for path in sorted((ROOT / "notebooks" / lang).glob("*.ipynb")):
            if args.lessons and not any(path.stem.startswith(n) for n in args.lessons):
                continue
            seconds, mib = run(path)
            totals[lang] += seconds
            print(f"{lang}/{path.name:<29} {seconds:8.1f} {mib:9.0f}", flush=True)
    for lang, total in totals.items():
        print(f"total {lang:<26} {total:8.1f}")


if __name__ == "__main__":
    main()
