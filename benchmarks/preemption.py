"""What a lost worker costs under each strategy: lesson 10's preemption measurement.

    python benchmarks/preemption.py [--rounds 3] [--delay 0.2] [--collective-timeout 3]
                                    [--setups ps,mwms,mwms_default] [--folder DIR] [--dry-run]

One worker of two is killed (SIGKILL) in the middle of training, under three set-ups
(`pstutor.preemption` runs them, each round in fresh processes):

- `ps`: ParameterServerStrategy (2 worker processes, 1 ps process, the coordinator in a
  process of its own) schedules `--ps-steps` steps; worker 1 is killed once `--ps-kill-after`
  have been applied. Measured: steps applied against steps scheduled (`optimizer.iterations`,
  on the ps), which step ran again and where, the seconds from the kill to the next step
  that ended, and from the kill to the end of training;
- `mwms`: MultiWorkerMirroredStrategy (2 worker processes), `Model.fit` with
  `BackupAndRestore(save_freq=--save-every)` and `CommunicationOptions(timeout_seconds=
  --collective-timeout)`; worker 1 is killed after step `--mwms-kill-after`. Measured: how
  long the survivor took to fail and to exit, the step the restarted job resumed from, the
  steps it redid, and the seconds from the kill to the restarted job's first step;
- `mwms_default`: the same without a collective timeout (TensorFlow's default), where the
  failure reaches the survivor through the coordination service's heartbeats.

Every step waits `--delay` s without using the CPU, far longer than its CPU time, and the
MWMS worker to be killed holds after its step until it is killed, so the kill falls after a
known step whatever the load. The set-ups run in turn, in reverse order in even rounds.
The results go to `pstutor/measurements/preemption.json`: every round's raw numbers, the
medians and ranges, the settings, the machine and the load average before and after.
About 5 minutes with the defaults.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

from pstutor import measured, preemption
from pstutor.language import say

SETUPS = ("ps", "mwms", "mwms_default")
SUMMARIZED = {  # the numbers given as median and range, per kind of set-up
    "ps": ("steps_lost", "updates_applied_twice", "next_step_after_kill_s", "kill_to_end_s", "total_s"),
    "mwms": ("failure_s", "survivor_exit_s", "steps_redone", "restart_to_first_step_s",
             "kill_to_training_again_s"),
}


def run(setup: str, args: argparse.Namespace) -> dict:
    """One round of one set-up: its record."""
    if setup == "ps":
        return preemption.ps_round(args.ps_steps, args.ps_kill_after, args.delay)
    timeout = args.collective_timeout if setup == "mwms" else 0.0
    return preemption.mwms_round(args.mwms_steps, args.mwms_kill_after, args.save_every, args.delay, timeout)


def spread(values: list[float]) -> dict:
    """Median, lowest and highest of one number over the rounds."""
    return {"median": round(statistics.median(values), 3), "min": min(values), "max": max(values)}


def summary(rounds: list[dict], setups: list[str]) -> dict:
    """Per set-up: median and range of its numbers, and what held in every round."""
    found = {}
    for setup in setups:
        records = [r[setup] for r in rounds]
        found[setup] = {field: spread([r[field] for r in records])
                        for field in SUMMARIZED["ps" if setup == "ps" else "mwms"]}
        if setup == "ps":
            found[setup]["every_step_completed_every_round"] = all(
                r["steps_completed"] == r["steps_scheduled"] <= r["steps_applied"] for r in records)
            found[setup]["retried_last_on_worker_0_every_round"] = all(
                r["retried_on_worker"] == 0 and r["retried_step"] < r["steps_scheduled"] - 1 for r in records)
        else:
            found[setup]["errors"] = sorted({r["error"] for r in records})
            found[setup]["resumed_from"] = sorted({r["resumed_from"] for r in records})
    return found


def _seconds(number: dict) -> str:
    return f"{number['median']:.2f} s ({number['min']:.2f}-{number['max']:.2f})"


def report(found: dict, args: argparse.Namespace) -> None:
    """The results, one line per set-up, in the course's language (medians, ranges in brackets)."""
    if "ps" in found:
        ps = found["ps"]
        lost, twice = ps["steps_lost"]["max"], ps["updates_applied_twice"]["max"]
        print(say(
            f"parameter server: {args.ps_steps} steps scheduled, at most {lost} lost and {twice} update(s) "
            f"applied twice per round; the next step ended {_seconds(ps['next_step_after_kill_s'])} after "
            f"the kill, training {_seconds(ps['kill_to_end_s'])} after it, without a restart",
            f"参数服务器：调度 {args.ps_steps} 步，每轮最多丢失 {lost} 步、重复应用 {twice} 次更新；"
            f"杀掉工作进程后 {_seconds(ps['next_step_after_kill_s'])} 就有下一步完成，"
            f"{_seconds(ps['kill_to_end_s'])} 后训练结束，没有重启"))
    names = {"mwms": say(f"MWMS, timeout_seconds={args.collective_timeout:g}",
                         f"MWMS，timeout_seconds={args.collective_timeout:g}"),
             "mwms_default": say("MWMS, default (no timeout)", "MWMS，默认设置（没有超时）")}
    for setup in (s for s in names if s in found):
        record = found[setup]
        errors, resumed = ", ".join(record["errors"]), ", ".join(map(str, record["resumed_from"]))
        redone = record["steps_redone"]["median"]
        print(say(
            f"{names[setup]}: the survivor failed ({errors}) {_seconds(record['failure_s'])} after the kill; "
            f"the restarted job resumed from step {resumed}, redid {redone:g} steps and trained again "
            f"{_seconds(record['kill_to_training_again_s'])} after the kill",
            f"{names[setup]}：杀掉工作进程后 {_seconds(record['failure_s'])}，"
            f"幸存的工作进程失败（{errors}）；"
            f"重启后的作业从第 {resumed} 步继续，重做了 {redone:g} 步，在杀掉进程 "
            f"{_seconds(record['kill_to_training_again_s'])} 后重新开始训练"))


def check(args: argparse.Namespace) -> str | None:
    """What is wrong with the settings, in the course's language; None if nothing."""
    if args.rounds < 1 or args.delay <= 0 or args.collective_timeout <= 0:
        return say("--rounds must be at least 1, --delay and --collective-timeout positive",
                   "--rounds 至少为 1，--delay 和 --collective-timeout 必须为正数")
    if not set(args.setups.split(",")) <= set(SETUPS):
        return say(f"--setups takes names from {','.join(SETUPS)}", f"--setups 只能取 {'、'.join(SETUPS)}")
    if not 0 < args.ps_kill_after < args.ps_steps - 2 or not 0 < args.mwms_kill_after < args.mwms_steps:
        return say("each kill must come after the first step and before the last steps",
                   "每次杀进程都必须在第一步之后、最后几步之前")
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--delay", type=float, default=0.2, help="seconds every step waits")
    parser.add_argument("--ps-steps", type=int, default=32)
    parser.add_argument("--ps-kill-after", type=int, default=10)
    parser.add_argument("--mwms-steps", type=int, default=24)
    parser.add_argument("--mwms-kill-after", type=int, default=13)
    parser.add_argument("--save-every", type=int, default=5, help="BackupAndRestore's save_freq (steps)")
    parser.add_argument("--collective-timeout", type=float, default=3.0, help="timeout_seconds of mwms")
    parser.add_argument("--setups", default=",".join(SETUPS), help="comma-separated set-ups to run")
    parser.add_argument("--folder", type=Path, default=measured.FOLDER, help="where preemption.json goes")
    parser.add_argument("--dry-run", action="store_true", help="print the results, write nothing")
    args = parser.parse_args(argv)
    problem = check(args)
    if problem is not None:
        print(problem, file=sys.stderr)
        return 2
    setups = [setup for setup in SETUPS if setup in args.setups.split(",")]
    import pstutor

    pstutor.setup()
    load_before = os.getloadavg()
    began = time.time()
    rounds = []
    for number in range(1, args.rounds + 1):
        order = setups if number % 2 else setups[::-1]
        records = {}
        for setup in order:
            records[setup] = run(setup, args)
            print(say(f"round {number}: {setup} done", f"第 {number} 轮：{setup} 完成"), flush=True)
        rounds.append({"round": number, "order": order, **records})
    found = summary(rounds, setups)
    report(found, args)
    settings = {key: value for key, value in vars(args).items() if key not in ("dry_run", "folder")}
    results = {
        "settings": {**settings, "setups": setups},
        "order": "the set-ups in the order of settings.setups in odd rounds, reversed in even rounds",
        "rounds": rounds,
        "summary": found,
        "wall_s": round(time.time() - began, 1),
        "load_average": {"before": [round(v, 2) for v in load_before],
                         "after": [round(v, 2) for v in os.getloadavg()]},
    }
    if not args.dry_run:
        print(say("written:", "已写入："), measured.store("preemption", results, args.folder))
    return 0


if __name__ == "__main__":
    sys.exit(main())
