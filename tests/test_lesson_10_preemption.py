"""Lesson 10's preemption (benchmarks/preemption.py, pstutor/preemption.py): one of two workers
killed mid-run. The parameter server finishes every scheduled step without a restart; the
MultiWorkerMirroredStrategy survivor fails within its collective timeout, and the restarted
job resumes from the last backup, redoing the steps after it.

Each fixture is one quick real run of the benchmark (1 round of one set-up, real processes):
the parameter server with 16 steps, worker 1 killed once 6 are applied; MWMS with 12 steps,
a backup every 4, worker 1 killed after step 6, so the job resumes from step 4 and redoes 2.
Every step waits 0.1 s, far longer than its CPU time.
"""

import json
import subprocess
import sys

import pytest
from conftest import ROOT, clean_env

from pstutor import preemption

SCRIPT = ROOT / "benchmarks" / "preemption.py"
DELAY = 0.1
PS_STEPS, PS_KILL_AFTER = 16, 6
MWMS_STEPS, MWMS_KILL_AFTER, SAVE_EVERY, COLLECTIVE_TIMEOUT = 12, 6, 4, 3.0


def _benchmark(folder, *args: str) -> dict:
    """One round of the benchmark with `args`; its stored record."""
    result = subprocess.run([sys.executable, str(SCRIPT), "--rounds", "1", "--delay", str(DELAY),
                             "--folder", str(folder), *args],
                            capture_output=True, text=True, timeout=240, env=clean_env(), cwd=ROOT)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    return json.loads((folder / "preemption.json").read_text())


@pytest.fixture(scope="module")
def ps(tmp_path_factory) -> dict:
    stored = _benchmark(tmp_path_factory.mktemp("ps"), "--setups", "ps", "--ps-steps", str(PS_STEPS),
                        "--ps-kill-after", str(PS_KILL_AFTER))
    return stored["rounds"][0]["ps"]


@pytest.fixture(scope="module")
def mwms(tmp_path_factory) -> dict:
    stored = _benchmark(tmp_path_factory.mktemp("mwms"), "--setups", "mwms", "--mwms-steps", str(MWMS_STEPS),
                        "--mwms-kill-after", str(MWMS_KILL_AFTER), "--save-every", str(SAVE_EVERY),
                        "--collective-timeout", str(COLLECTIVE_TIMEOUT))
    assert stored["machine"]["tensorflow"].startswith("2.") and len(stored["load_average"]["after"]) == 3
    return stored["rounds"][0]["mwms"]


def test_the_parameter_server_finishes_every_scheduled_step_without_a_restart(ps):
    assert ps["steps_applied_at_kill"] >= PS_KILL_AFTER and ps["steps_completed"] == PS_STEPS
    assert ps["steps_lost"] == 0 and ps["updates_applied_twice"] <= 1  # at most the step in flight
    assert not ps["worker_1_alive_at_end"] and ps["steps_after_kill_by_worker_1"] == 0
    assert ps["next_step_after_kill_s"] < DELAY + 1.0  # worker 0 never stopped


def test_the_step_lost_with_the_worker_runs_again_last_on_the_other_worker(ps):
    """The failed closure goes back to the end of the queue: the step that ended last is an
    early one (around the kill), run by worker 0."""
    assert ps["retried_on_worker"] == 0
    assert PS_KILL_AFTER - 1 <= ps["retried_step"] < PS_STEPS - 1
    by_index = sorted(ps["steps"], key=lambda s: s["index"])
    assert [s["index"] for s in by_index] == list(range(PS_STEPS))
    assert max(by_index, key=lambda s: s["ended"])["index"] == ps["retried_step"]


def test_the_mwms_survivor_fails_within_its_collective_timeout(mwms):
    """The survivor waits in the next step's all-reduce; the timeout ends it (and no step
    after the kill completed: it cannot without the other worker)."""
    assert mwms["survivor_last_step"] == MWMS_KILL_AFTER
    assert mwms["error"] == "DeadlineExceededError" and "timed out" in mwms["cause"]
    assert COLLECTIVE_TIMEOUT - 1 < mwms["failure_s"] < COLLECTIVE_TIMEOUT + DELAY + 1.5


def test_the_restarted_mwms_job_resumes_from_the_last_backup(mwms):
    last_backup = MWMS_KILL_AFTER // SAVE_EVERY * SAVE_EVERY
    assert mwms["resumed_from"] == last_backup > 0
    assert mwms["steps_redone"] == MWMS_KILL_AFTER - last_backup == 2
    assert mwms["final_step"] == MWMS_STEPS


def test_the_cause_of_an_op_error_is_its_message_without_traceback_and_node():
    message = ("Graph execution error:\n\nDetected at node X defined at (most recent call last):\n"
               '  File "a.py", line 1, in <module>\n\n  File "b.py", line 2, in f\n\n'
               "Collective has timed out during execution.\n\t [[{{node SGD/CollectiveReduceV2}}]] [Op:f]")
    assert preemption._cause(message) == "Collective has timed out during execution."
