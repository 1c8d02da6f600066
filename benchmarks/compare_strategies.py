"""Measure the strategy comparison of lesson 9 properly: several rounds, each run timed >= 1 s.

    python benchmarks/compare_strategies.py [--rounds 5] [--examples 8192] [--min-seconds 1]

A live comparison inside a lesson would have to be short, and a short one ranks noise (a
rate over 15 ms of work flips from run to run). This script runs every set-up of the lesson
- no strategy, MirroredStrategy, MultiWorkerMirroredStrategy and ParameterServerStrategy with
`steps_per_execution=8`, and the parameter server again with 1 step per closure - in rounds
(round-robin, in the given order in odd rounds and reversed in even ones, so that a change
of the machine's load over a round's minutes does not always favour the same set-ups; a
burst of seconds still hits whichever run is going), each in fresh
processes through `pstutor.compare.compare`, and writes every run with the machine, the date
and the load into `pstutor/measurements/compare_strategies.json`, which lesson 9 reads
(`pstutor.compare.stored_results()`). Nothing is written unless every run measured at least
`--min-seconds`. Takes 20 minutes or more (the stored run: about 23 minutes of start-up,
warm-up and timed work over its 25 runs).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
from pathlib import Path

from pstutor import compare
from pstutor.pictures import cpu_cores

# (strategy, steps_per_execution): the set-ups lesson 9 shows
SETUPS = (("none", 8), ("mirrored", 8), ("mwms", 8), ("ps", 8), ("ps", 1))
BATCH_SIZE, LEARNING_RATE = 32, 0.05  # per replica; scaled with the replicas


def machine() -> dict:
    """What the numbers were measured on."""
    import tensorflow as tf
    import tf_keras

    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").exists() \
        else platform.processor()
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {"cpu": model, "cores": cpu_cores(), "memory_gib": round(memory, 1),
            "system": f"{platform.system()} {platform.release()}", "python": platform.python_version(),
            "tensorflow": tf.__version__, "tf_keras": tf_keras.__version__,
            "gpus": len(tf.config.list_physical_devices("GPU"))}


def _setup(item: str) -> tuple[str, int]:
    """'ps:8' -> ('ps', 8)."""
    name, _, spe = item.partition(":")
    if not spe.isdigit() or int(spe) < 1:
        raise ValueError(f"{item!r} is not STRATEGY:STEPS_PER_EXECUTION (e.g. ps:8)")
    return name.strip(), int(spe)


def round_order(setups: list[tuple[str, int]], number: int) -> list[tuple[str, int]]:
    """The set-ups in the order they run in round `number` (from 1): reversed in even rounds.

    A fixed order would put every set-up at the same place in every round, so a load that
    rises or falls over a round (minutes) would always favour the earlier ones, and the
    paired counts of lesson 9 (set-up A beat B in k of n rounds) could not rule that out.
    """
    return list(setups) if number % 2 else list(reversed(setups))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--examples", type=int, default=8192, help="examples per timed epoch")
    parser.add_argument("--min-seconds", type=float, default=1.0, help="measured seconds per run, at least")
    parser.add_argument("--setups", default=",".join(f"{name}:{spe}" for name, spe in SETUPS),
                        help="comma-separated STRATEGY:STEPS_PER_EXECUTION")
    parser.add_argument("--out", type=Path, default=compare.RESULTS)
    args = parser.parse_args(argv)
    try:
        setups = [_setup(item) for item in args.setups.split(",")]
        compare.check_strategies([name for name, _ in setups])
    except ValueError as err:
        print(f"compare_strategies: bad --setups: {err}", file=sys.stderr)
        return 2
    if args.rounds < 1 or args.examples < 1 or args.min_seconds < 0:
        print("compare_strategies: --rounds and --examples must be positive, --min-seconds >= 0",
              file=sys.stderr)
        return 2
    import pstutor

    pstutor.setup()
    started = datetime.datetime.now(datetime.timezone.utc)
    load_before = os.getloadavg()
    runs = []
    for number in range(1, args.rounds + 1):
        def report(line: str, number: int = number) -> None:
            print(f"round {number}: {line}", flush=True)

        for name, spe in round_order(setups, number):
            load_at_start = os.getloadavg()[0]  # the machine's load as each run begins, not only at the ends
            (record,) = compare.compare([name], args.examples, batch_size=BATCH_SIZE,
                                        learning_rate=LEARNING_RATE, steps_per_execution=spe,
                                        min_seconds=args.min_seconds, timeout=600,
                                        progress=report)
            runs.append({"round": number, "load_average_at_start": round(load_at_start, 2), **record})
    short = [run for run in runs if run["seconds"] < args.min_seconds]
    if short:
        print(f"compare_strategies: {len(short)} run(s) measured less than {args.min_seconds} s; "
              "nothing written", file=sys.stderr)
        return 1
    result = {
        "benchmark": "benchmarks/compare_strategies.py",
        "date": started.strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine(),
        "load_average": {"before": [round(v, 2) for v in load_before],
                         "after": [round(v, 2) for v in os.getloadavg()]},
        "settings": {"rounds": args.rounds, "examples": args.examples, "min_seconds": args.min_seconds,
                     "batch_size": BATCH_SIZE, "learning_rate": LEARNING_RATE,
                     "setups": [{"strategy": name, "steps_per_execution": spe} for name, spe in setups],
                     "order": "the setups' order in odd rounds, reversed in even rounds"},
        "runs": runs,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out} ({len(runs)} runs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
