"""Lesson 10's stragglers (benchmarks/stragglers.py): synchronous training goes at the slowest
worker's pace, asynchronous training at the sum of the workers' paces.

The measured tests read one quick real run of the benchmark (2 worker processes for
MultiWorkerMirroredStrategy, then 2 workers, 1 ps and a coordinator for the parameter
server; d = 50 ms, k = 1 and 4), the lesson's run made shorter. The bands are wide next to
what the waits fix (sync at k=4 is a quarter of k=1's, async 2.5 times sync's), narrow next
to what a mistake in the design would give (no straggler: 1; a busy loop on a loaded
machine: anything).
"""

import importlib.util
import sys
import time

import pytest
from conftest import ROOT

SCRIPT = ROOT / "benchmarks" / "stragglers.py"


def _script():
    """The benchmark script as a module (benchmarks/ is no package; its dataclass needs sys.modules)."""
    spec = importlib.util.spec_from_file_location("stragglers", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


BENCHMARK = _script()
QUICK = BENCHMARK.Settings(factors=(1.0, 4.0), workers=2, delay=0.05, rounds=3, round_seconds=0.5)


@pytest.fixture(scope="module")
def by_factor() -> dict[float, dict]:
    record = BENCHMARK.measure(QUICK, timeout=240)
    return {result["factor"]: result for result in record["results"]}


def test_sync_goes_at_the_slowest_workers_pace(by_factor):
    one, four = (by_factor[k]["sync"]["examples_per_s"]["median"] for k in (1.0, 4.0))
    assert 0.18 < four / one < 0.35, (one, four)  # by design 1/4
    for k, result in by_factor.items():
        measured, predicted = result["sync"]["examples_per_s"]["median"], result["predicted"]["sync"]
        assert abs(measured / predicted - 1) < 0.15, (k, measured, predicted)


def test_async_goes_at_the_sum_of_the_workers_paces_and_beats_sync_with_a_straggler(by_factor):
    four = by_factor[4.0]
    sync, async_ = four["sync"]["examples_per_s"], four["async"]["examples_per_s"]
    assert async_["median"] > 1.8 * sync["median"], (sync, async_)  # by design 2.5 times
    assert four["faster_in_every_round"] == "async"
    for k, result in by_factor.items():
        measured, predicted = result["async"]["examples_per_s"]["median"], result["predicted"]["async"]
        assert abs(measured / predicted - 1) < 0.15, (k, measured, predicted)


def test_under_the_ps_the_fast_worker_ran_more_steps_than_the_slow_one(by_factor):
    """Which worker runs a closure is the coordinator's choice; each step says where it ran."""
    for round_ in by_factor[4.0]["async"]["rounds"]:
        fast, slow = round_["steps_by_worker"]
        assert fast >= 3 * slow >= 3, round_  # by design 4 times
    for round_ in by_factor[1.0]["async"]["rounds"]:  # no straggler: about as many
        fast, slow = round_["steps_by_worker"]
        assert 0.7 < fast / slow < 1.4, round_


def test_every_round_lasts_at_least_the_round_time(by_factor):
    for result in by_factor.values():
        for strategy in ("sync", "async"):
            assert all(r["seconds"] >= QUICK.round_seconds for r in result[strategy]["rounds"]), result


def test_a_slowed_dataset_waits_before_each_element_without_using_the_cpu():
    import pstutor

    pstutor.setup()
    import tensorflow as tf

    from pstutor.slow_input import slowed

    dataset = slowed(tf.data.Dataset.range(5), 0.1)
    wall, cpu = time.perf_counter(), time.process_time()
    assert [int(x) for x in dataset] == [0, 1, 2, 3, 4]
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert wall >= 0.5 and cpu < 0.25 * wall, (wall, cpu)  # 5 waits of 0.1 s (and one before the end)


def test_rounds_past_the_last_closure_are_refused():
    """Once the queue is empty the fast worker idles: a round that ends later would be wrong."""
    settings = BENCHMARK.Settings(factors=(2.0,), workers=2, delay=0.1, rounds=3, round_seconds=0.2)
    needed = settings.slow_steps(2.0)
    steps = [[1.0, 0.2 * i, 0.2 * (i + 1)] for i in range(needed)]  # the slow worker's steps only
    with pytest.raises(BENCHMARK.StragglerError):
        BENCHMARK.async_rounds(steps, 2.0, settings)  # its last measured step ended after the last began
    steps.append([0.0, 0.2 * needed + 1, 0.2 * needed + 1.05])  # one more closure, begun after them all
    rounds = BENCHMARK.async_rounds(steps, 2.0, settings)
    assert [r["steps_by_worker"] for r in rounds] == [[0, 1]] * 3
