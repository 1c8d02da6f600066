"""The tour of bad input, as a user meets it: every case of tests/cli_cases.py run as a real
`pstutor` process in a sandbox folder of its own, then a table of what each did.

    python benchmarks/cli_tour.py [--jobs 2] [--only TEXT] [--no-stops]

Columns: the input, the exit code, the first line of its output, the verdict ("refused" or
what went wrong: traceback, wrongly accepted, files changed, processes left, ...), then the
totals. A second table stops running commands (`demo`, `cluster up`, `compare`, `doctor`) by a
closed pipe, `kill` and Ctrl-C: exit code, what it said, processes left. Exit status 0 only
when every case was refused cleanly and every stop was clean.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from cli_cases import Case, Outcome, cases, run_in_subprocess, run_stop, stop_problems, stops

from pstutor.tables import align, text_width


def run(case: Case) -> tuple[Case, Outcome]:
    with tempfile.TemporaryDirectory(prefix="pstutor-tour-") as folder:
        return case, run_in_subprocess(case, Path(folder))


def main() -> int:
    options = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    options.add_argument("--jobs", type=int, default=2, help="cases run at once (default: 2)")
    options.add_argument("--only", default="", help="run only the cases whose name contains this")
    options.add_argument("--no-stops", action="store_true", help="skip the closed pipes and signals")
    args = options.parse_args()
    chosen = [case for case in cases() if args.only in case.name]
    started = time.perf_counter()
    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(run, chosen))
    rows = [["input", "exit", "first line of output", "verdict"]]
    totals = {"refused": 0, "traceback": 0, "wrongly accepted": 0, "files changed": 0, "processes left": 0,
              "other": 0}
    for case, outcome in results:
        problems = outcome.problems(case)
        first = (outcome.stderr.strip() or outcome.stdout.strip()).splitlines()[:1]
        rows.append([_clip(case.name, 44), str(outcome.code), _clip(first[0] if first else "", 90),
                     ", ".join(problems) or "refused"])
        if not problems:
            totals["refused"] += 1
        for kind in ("traceback", "wrongly accepted", "files changed"):
            totals[kind] += kind in problems
        totals["processes left"] += any(p.endswith("processes left") for p in problems)
        totals["other"] += bool(problems) and not any(
            p in ("traceback", "wrongly accepted", "files changed") or p.endswith("processes left")
            for p in problems)
    print("\n".join(line.rstrip() for line in align(rows, [False, True, False, False])))
    print()
    print(f"{len(results)} inputs in {time.perf_counter() - started:.0f} s: "
          + ", ".join(f"{count} {kind}" for kind, count in totals.items()))
    clean = totals["refused"] == len(results)
    if not args.no_stops:
        clean &= _stops()
    return 0 if clean else 1


def _stops() -> bool:
    """Closed pipes and signals on running commands (one at a time: each starts TensorFlow)."""
    rows = [["running command stopped", "exit", "stderr", "verdict"]]
    started, clean = time.perf_counter(), 0
    for stop in stops():
        with tempfile.TemporaryDirectory(prefix="pstutor-tour-") as folder:
            outcome = run_stop(stop, Path(folder))
        problems = stop_problems(stop, outcome)
        clean += not problems
        said = _clip(outcome.stderr.strip(), 60)
        rows.append([stop.name, str(outcome.code), said, ", ".join(problems) or "clean"])
    print()
    print("\n".join(line.rstrip() for line in align(rows, [False, True, False, False])))
    print()
    print(f"{len(rows) - 1} stops in {time.perf_counter() - started:.0f} s: {clean} clean")
    return clean == len(rows) - 1


def _clip(text: str, width: int) -> str:
    """`text` cut to `width` display columns (CJK characters count two)."""
    if text_width(text) <= width:
        return text
    while text_width(text) > width - 1:
        text = text[:-1]
    return text + "…"


if __name__ == "__main__":
    sys.exit(main())
