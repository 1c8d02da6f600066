"""Do the lessons' claims hold in every run? Execute lessons N times and check their claims.

    python benchmarks/rebuild_claims.py [--runs 3] [--lang en,zh] 04 05 07 09

Each run executes the notebook afresh (as `pstutor build` does, without writing it) and checks
every claim of its source on that run's outputs. A claim that fails in one run of three is an
effect the lesson's experiment does not make certain. Prints one line per run and a summary;
exit status 0 only when every claim held in every run.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from pstutor import build
from pstutor.course import CourseNotFoundError, find_course


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lessons", nargs="+", help="lesson numbers or stems, e.g. 04 05")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--lang", default="en,zh")
    parser.add_argument("--course", default=None)
    args = parser.parse_args(argv)
    try:
        root = find_course(args.course)
    except CourseNotFoundError as err:
        print(err, file=sys.stderr)
        return 2
    languages = args.lang.split(",")
    failed_runs = 0
    for source, variant, lang in build.targets(root, args.lessons):
        if lang not in languages or variant == "exercise":
            continue
        claims = build.claims_of(source)
        for run in range(1, args.runs + 1):
            notebook = build.render(source, lang, variant)
            started = time.perf_counter()
            with tempfile.TemporaryDirectory() as folder:  # what the run writes is thrown away
                build.execute(notebook, Path(folder))
            seconds = time.perf_counter() - started
            unshown = build.unshown_claims(source, json.loads(build.dumps(notebook)), lang, variant)
            failed_runs += bool(unshown)
            verdict = "ok" if not unshown else f"{len(unshown)} of {len(claims)} claims NOT shown"
            print(f"{source.stem} {variant} {lang} run {run}: {len(claims)} claims, {verdict}"
                  f" ({seconds:.0f} s)", flush=True)
            for line in unshown:
                print("   ", line.replace("\n", "\n    "))
    print(f"{failed_runs} run(s) did not show a claim" if failed_runs else "every claim held in every run")
    return 1 if failed_runs else 0


if __name__ == "__main__":
    sys.exit(main())
