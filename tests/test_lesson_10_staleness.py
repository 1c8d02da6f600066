"""Lesson 10's staleness (benchmarks/staleness.py, pstutor/staleness.py): how old the variables were
that each asynchronous update was computed from, and what that does to training.

One quick real run of the benchmark (1 round; in-process clusters of 1 and of 4 workers, each
step sleeping 0.2 s between its read and its write) feeds the tests of the design's effects:
no staleness with 1 worker, about workers - 1 with 4, a straggler's updates older by its
factor, and a learning rate that converges with 1 worker diverging with 4 unless it is
divided by 1 + staleness.
"""

import json
import statistics
import subprocess
import sys

import numpy as np
import pytest
from conftest import ROOT, clean_env

from pstutor import staleness as instrument

SCRIPT = ROOT / "benchmarks" / "staleness.py"
DELAY, UPDATES_PER_WORKER, SLOWDOWN = 0.2, 16, 3


@pytest.fixture(scope="module")
def stored(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("staleness")
    result = _benchmark("--rounds", "1", "--workers", "1,4", "--delay", str(DELAY),
                        "--slowdown", str(SLOWDOWN), "--updates-per-worker", str(UPDATES_PER_WORKER),
                        "--folder", str(folder), timeout=240)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    return json.loads((folder / "staleness.json").read_text())


def _run(stored: dict, workers: int, slowdown: float = 1, scaled: bool = False) -> dict:
    setup = next(s for s in stored["setups"]
                 if (s["workers"], s["slowdown"], s["scaled"]) == (workers, slowdown, scaled))
    return setup["runs"][0]


def _staleness(run: dict, workers=None) -> list[int]:
    return [w - r - 1 for worker, r, w in zip(run["worker"], run["read"], run["written"], strict=True)
            if workers is None or worker in workers]


def test_the_version_counts_every_update_and_each_update_spans_the_sleep(stored):
    """Each step's read comes before its input's sleep and its write after (the control
    dependencies of `make_step`)."""
    for setup in stored["setups"]:
        run = setup["runs"][0]
        assert max(run["written"]) == UPDATES_PER_WORKER * setup["workers"], setup["name"]
        slept = [DELAY * (setup["slowdown"] if w == setup["workers"] - 1 else 1) for w in run["worker"]]
        assert all(s >= delay for s, delay in zip(run["seconds"], slept, strict=True)), setup["name"]
    assert stored["machine"]["tensorflow"].startswith("2.") and len(stored["load_average"]["before"]) == 3


def test_one_worker_reads_the_newest_variables_and_four_read_three_updates_old(stored):
    assert set(_staleness(_run(stored, 1))) == {0}
    assert statistics.median(_staleness(_run(stored, 4))) == 3
    assert statistics.median(_staleness(_run(stored, 4, scaled=True))) == 3


def test_a_stragglers_updates_are_older_by_its_factor(stored):
    """Its last update may see few others: once the queue is empty the others stop."""
    run = _run(stored, 4, SLOWDOWN)
    straggler, others = _staleness(run, {3}), _staleness(run, {0, 1, 2})
    assert len(straggler) >= 3, run["worker"]
    assert statistics.median(straggler) >= SLOWDOWN * statistics.median(others), (straggler, others)
    assert statistics.median(straggler) > max(others), (straggler, others)


def test_a_rate_that_converges_with_one_worker_diverges_with_four_unless_scaled(stored):
    settings = stored["settings"]
    minimum, initial = settings["minimum_loss"], settings["initial_loss"]
    assert _run(stored, 1)["final_loss"] < 1.01 * minimum
    assert _run(stored, 4)["final_loss"] > 100 * initial
    assert _run(stored, 4, scaled=True)["final_loss"] < 1.01 * minimum  # the rate saw the staleness


@pytest.mark.parametrize("delay", [0, 1, 3, 9])
def test_the_stability_limit_is_where_the_delayed_iteration_turns_unstable(delay):
    """w <- w - a w_(t - delay): a root of z^(delay+1) - z^delay + a leaves the unit circle at the limit."""
    def largest_root(a: float) -> float:
        return max(abs(np.roots([1, -1, *[0] * (delay - 1), a] if delay else [1, a - 1])))

    limit = instrument.stability_limit(delay)
    assert largest_root(0.99 * limit) < 1 < largest_root(1.01 * limit)


@pytest.mark.parametrize("args", [["--slowdown", "1"], ["--workers", "0,2"], ["--rounds", "0"]])
def test_bad_arguments_start_nothing_and_write_nothing(tmp_path, args):
    result = _benchmark(*args, "--folder", str(tmp_path), timeout=60)
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not list(tmp_path.iterdir())


def _benchmark(*args: str, timeout: int) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=timeout, env=clean_env())
