"""Staleness of asynchronous updates and what it does to training: lesson 10's measurement.

    python benchmarks/staleness.py [--rounds 3] [--delay 0.2] [--updates-per-worker 32] [--dry-run]

Every update of parameter server training records the version of the variables it read and
the version it wrote (`pstutor.staleness.make_step`); staleness = written - read - 1, the
updates other workers applied in between. The set-ups: 1, 2 and 4 equal workers, and 4
workers of which the last is `--slowdown` times slower (a straggler), each trained on the
same linear regression from zero weights, with one learning rate (`--rate` x the curvature,
which converges with 1 worker but is above the stability limit of gradients 3 updates old),
and, with more than one worker, again with that rate divided by 1 + staleness. Every worker
sleeps `--delay` s between its read and its write, far longer than a step's CPU time, so
the staleness comes from the design, not from how busy the machine is.

A worker count's cluster (in-process, 1 ps) runs in a fresh process (`pstutor.compare.run_program`)
for each round: a process can only hold one in-process cluster. Each run trains for
`--updates-per-worker` x workers updates, about the same wall time for every set-up. The
results go to `pstutor/measurements/staleness.json`: every update of every run (worker,
versions, loss, times), the summaries the lesson states, the settings, the load average.
About 4 minutes with the defaults.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import pstutor
from pstutor import measured
from pstutor import staleness as instrument
from pstutor.compare import CompareError, run_program
from pstutor.language import say

RESULT = "RESULT "
COLUMNS = {  # what each run stores per update, in the order the updates were written
    "worker": "the worker that computed the update",
    "read": "the version of the variables its step read",
    "written": "the version after its write (staleness = written - read - 1)",
    "loss": "the loss at the weights it read",
    "started": "when its step read the variables (s after the run's first read)",
    "seconds": "from its read to its write (s)",
}


def setups(worker_counts: list[int], slowdown: float) -> list[dict]:
    """The set-ups, in the order they run: per worker count the plain rate, then (with more than
    one worker) the scaled one; the straggler runs with the largest worker count."""
    found = []
    for workers in worker_counts:
        slowdowns = (1.0, slowdown) if workers == max(worker_counts) > 1 else (1.0,)
        for slow in slowdowns:
            for scaled in (False, True) if workers > 1 else (False,):
                found.append({"workers": workers, "slowdown": slow, "scaled": scaled})
    return found


def name(setup: dict, lang: str | None = None) -> str:
    """'4 workers, the last one 3x slower, rate / (1 + staleness)'."""
    workers, slow = setup["workers"], setup["slowdown"]
    text = say(f"{workers} worker{'s' if workers > 1 else ''}", f"{workers} 个工作进程", lang)
    if slow > 1:
        text += say(f", the last one {slow:g}x slower", f"，最后一个慢 {slow:g} 倍", lang)
    if setup["scaled"]:
        text += say(", rate / (1 + staleness)", "，学习率 / (1 + 陈旧度)", lang)
    return text


def staleness(run: dict) -> list[int]:
    """The staleness of each update of a run, in the order they were written."""
    return [w - r - 1 for r, w in zip(run["read"], run["written"], strict=True)]


def median_gap_ms(run: dict) -> float:
    """The median time from a worker's write to its next read: the steps' share not inside an
    update (dispatch by the coordinator). Another worker's write that falls in it is counted
    by no update of this worker, which is why staleness can fall below workers - 1."""
    ends: dict[int, list[tuple[float, float]]] = collections.defaultdict(list)
    for worker, started, seconds in zip(run["worker"], run["started"], run["seconds"], strict=True):
        ends[worker].append((started, started + seconds))
    gaps = [later[0] - earlier[1] for spans in ends.values() for earlier, later in zip(
        sorted(spans), sorted(spans)[1:], strict=False)]
    return round(1000 * statistics.median(gaps), 1) if gaps else 0.0


def child(args: argparse.Namespace) -> int:
    """One round of every set-up with `args.child` workers, on a fresh in-process cluster."""
    import tensorflow as tf

    workers = args.child
    strategy = tf.distribute.ParameterServerStrategy(pstutor.in_process_cluster(workers, 1))
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    problem = instrument.regression_problem()
    runs = []
    for setup in (s for s in setups(args.worker_counts, args.slowdown) if s["workers"] == workers):
        load = os.getloadavg()[0]
        result = instrument.train(
            strategy, coordinator, workers, problem, updates=args.updates_per_worker * workers,
            delay=args.delay, rate=args.rate, slowdown=setup["slowdown"], scale_by_staleness=setup["scaled"])
        columns = {key: [record[key] for record in result["records"]] for key in result["records"][0]}
        columns.update(loss=[float(f"{loss:.4g}") for loss in columns["loss"]],
                       started=[round(t, 4) for t in columns["started"]],
                       seconds=[round(t, 4) for t in columns["seconds"]])
        runs.append({**setup, "wall_seconds": round(result["seconds"], 3), "final_loss": result["final_loss"],
                     "load_average_at_start": round(load, 2), **columns})
    print(RESULT + json.dumps(runs))
    return 0


def settled(losses: list[float], minimum: float) -> int | None:
    """How many updates it took until the loss stayed within 1% of `minimum` (None: it never did).

    `losses[i]` is the loss at the weights the update written as version i + 1 read: after i updates.
    """
    count = len(losses)
    while count > 0 and losses[count - 1] < 1.01 * minimum:
        count -= 1
    return None if count == len(losses) else count


def summary(setup: dict, runs: list[dict], minimum: float) -> dict:
    """What the lesson states about one set-up, from its runs (one per round). Staleness is kept
    apart for the updates of the workers at the normal speed ('equal') and the straggler's."""
    straggling, last = setup["slowdown"] > 1, setup["workers"] - 1
    kinds: dict[str, list[int]] = collections.defaultdict(list)
    for run in runs:
        for worker, value in zip(run["worker"], staleness(run), strict=True):
            kinds["straggler" if straggling and worker == last else "equal"].append(value)
    rates = [len(run["read"]) / run["wall_seconds"] for run in runs]
    updates = [settled(run["loss"], minimum) for run in runs]
    return {
        "staleness_histogram": {kind: dict(sorted(collections.Counter(values).items()))
                                for kind, values in kinds.items()},
        "median_staleness": {kind: float(statistics.median(values)) for kind, values in kinds.items()},
        "final_loss": [run["final_loss"] for run in runs],
        "updates_to_settle": updates,  # until the loss stays within 1% of the minimum, per round
        "seconds_to_settle": [None if count is None else run["started"][count]
                              for count, run in zip(updates, runs, strict=True)],
        "updates_per_second": {"median": round(statistics.median(rates), 2),
                               "min": round(min(rates), 2), "max": round(max(rates), 2)},
        "duplicate_versions": [len(run["written"]) - len(set(run["written"])) for run in runs],
        "median_gap_ms": [median_gap_ms(run) for run in runs],
    }


def report(setup: dict, result: dict, initial_loss: float) -> str:
    """One line per set-up: its staleness, its final losses, its updates per second."""
    medians = ", ".join(f"{kind} {value:g}" for kind, value in result["median_staleness"].items())
    losses = ", ".join(f"{loss:.3g}" for loss in result["final_loss"])
    rate = result["updates_per_second"]
    return say(f"{name(setup)}: median staleness {medians}; final loss per round {losses} "
               f"(from {initial_loss:.3g}); {rate['median']:g} updates/s ({rate['min']:g}-{rate['max']:g})",
               f"{name(setup)}：陈旧度中位数 {medians}；各轮最终损失 {losses}（初始 {initial_loss:.3g}）；"
               f"每秒 {rate['median']:g} 次更新（{rate['min']:g}-{rate['max']:g}）")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--delay", type=float, default=0.2, help="sleep between a step's read and write (s)")
    parser.add_argument("--updates-per-worker", type=int, default=32)
    parser.add_argument("--rate", type=float, default=0.8, help="learning rate x curvature")
    parser.add_argument("--slowdown", type=float, default=3.0, help="how much slower the straggler is")
    parser.add_argument("--workers", default="1,2,4", help="comma-separated worker counts")
    parser.add_argument("--folder", type=Path, default=measured.FOLDER, help="where staleness.json goes")
    parser.add_argument("--dry-run", action="store_true", help="print the results, write nothing")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)  # internal: one round of one cluster
    args = parser.parse_args(argv)
    try:
        args.worker_counts = sorted({int(item) for item in args.workers.split(",")})
    except ValueError:
        args.worker_counts = []
    if (args.rounds < 1 or args.delay <= 0 or args.updates_per_worker < 2 or args.slowdown <= 1
            or not args.worker_counts or min(args.worker_counts) < 1):
        print(say("--rounds and --updates-per-worker (at least 2), --delay, and the worker counts must be "
                  "positive, --slowdown above 1",
                  "--rounds 与 --updates-per-worker（至少为 2）、--delay 以及工作进程数都必须为正数，"
                  "--slowdown 必须大于 1"), file=sys.stderr)
        return 2
    pstutor.setup()  # before TensorFlow: the child trains, this process records the machine
    if args.child:
        return child(args)
    load_before, start = os.getloadavg(), time.perf_counter()
    try:
        runs = [run for round_ in range(1, args.rounds + 1) for workers in args.worker_counts
                for run in one_round(args, round_, workers)]
    except CompareError as err:
        print(err, file=sys.stderr)
        return 1
    results = record(args, runs)
    results.update(seconds=round(time.perf_counter() - start, 1), load_average={
        "before": [round(x, 2) for x in load_before], "after": [round(x, 2) for x in os.getloadavg()]})
    if not args.dry_run:
        print(say("written:", "已写入："), measured.store("staleness", results, args.folder))
    return 0


def one_round(args: argparse.Namespace, round_: int, workers: int) -> list[dict]:
    """Run the set-ups of `workers` workers once, in a fresh process; their runs."""
    print(say(f"round {round_}: {workers} worker(s)", f"第 {round_} 轮：{workers} 个工作进程"), flush=True)
    passed = [f"--{key}={value}" for key, value in (
        ("delay", args.delay), ("updates-per-worker", args.updates_per_worker), ("rate", args.rate),
        ("slowdown", args.slowdown), ("workers", args.workers), ("child", workers))]
    done = run_program(__file__, args=passed, timeout=600)
    line = next((line for line in done.output.splitlines() if line.startswith(RESULT)), None)
    if done.returncode != 0 or line is None:
        raise CompareError(say(f"the {workers}-worker run failed:\n", f"{workers} 个工作进程的运行失败：\n")
                           + done.output[-3000:])
    return [{"round": round_, **run} for run in json.loads(line[len(RESULT):])]


def record(args: argparse.Namespace, runs: list[dict]) -> dict:
    """The results to store: the settings, and per set-up its summary and its runs; each
    set-up's summary is printed."""
    problem = instrument.regression_problem()
    initial_loss = problem.loss(np.zeros(instrument.NUM_FEATURES))
    results = {
        "settings": {"delay_s": args.delay, "updates_per_worker": args.updates_per_worker,
                     "rate_times_curvature": args.rate, "learning_rate": args.rate / problem.curvature,
                     "curvature": problem.curvature, "slowdown": args.slowdown, "ps": 1,
                     "examples": instrument.NUM_EXAMPLES, "features": instrument.NUM_FEATURES,
                     "initial_loss": initial_loss, "minimum_loss": problem.minimum_loss,
                     "rounds": args.rounds},
        "stability_limit_by_delay": {str(delay): round(instrument.stability_limit(delay), 4)
                                     for delay in range(10)},
        "columns": COLUMNS,
        "setups": [],
    }
    for setup in setups(args.worker_counts, args.slowdown):
        mine = [{k: v for k, v in run.items() if k not in setup} for run in runs if all(
            run[key] == value for key, value in setup.items())]
        found = summary(setup, mine, problem.minimum_loss)
        results["setups"].append({**setup, "name": name(setup, "en"), "summary": found, "runs": mine})
        print(report(setup, found, initial_loss))
    return results


if __name__ == "__main__":
    sys.exit(main())
