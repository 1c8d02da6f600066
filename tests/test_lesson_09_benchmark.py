"""benchmarks/compare_strategies.py: the measurement lesson 9 reads, recorded with its machine and date."""

import importlib.util
import json
import subprocess
import sys

import pytest
from conftest import ROOT, clean_env

SCRIPT = ROOT / "benchmarks" / "compare_strategies.py"


def test_the_benchmark_records_every_run_with_the_machine_and_the_date(tmp_path):
    out = tmp_path / "comparison.json"
    result = _benchmark("--rounds", "2", "--examples", "256", "--min-seconds", "0.2",
                        "--setups", "none:8,none:1", "--out", str(out), timeout=900)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    stored = json.loads(out.read_text())
    assert stored["machine"]["cores"] >= 1 and stored["machine"]["tensorflow"].startswith("2.")
    assert stored["date"].endswith("UTC") and len(stored["load_average"]["before"]) == 3
    assert [(r["round"], r["strategy"], r["steps_per_execution"]) for r in stored["runs"]] == \
        [(1, "none", 8), (1, "none", 1), (2, "none", 1), (2, "none", 8)]  # the order reversed in round 2
    assert all(r["seconds"] >= 0.2 for r in stored["runs"])
    assert all(r["load_average_at_start"] >= 0 for r in stored["runs"])  # a trend within rounds is visible


def test_the_order_of_the_setups_alternates_from_round_to_round():
    """A fixed order would let a load that changes over a round favour the same set-ups every round."""
    setups = [("none", 8), ("mirrored", 8), ("ps", 1)]
    orders = [_script().round_order(setups, number) for number in (1, 2, 3, 4)]
    assert orders[0] == orders[2] == setups and orders[1] == orders[3] == setups[::-1], orders
    assert all(sorted(order) == sorted(setups) for order in orders), orders  # every set-up runs once a round


@pytest.mark.parametrize("args", [["--setups", "none:8,horovod:1"], ["--setups", "none"], ["--rounds", "0"]])
def test_bad_arguments_start_nothing_and_write_nothing(tmp_path, args):
    out = tmp_path / "comparison.json"
    result = _benchmark(*args, "--out", str(out))
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not out.exists()


def _benchmark(*args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=timeout, env=clean_env())


def _script():
    """The benchmark script as a module (benchmarks/ is no package)."""
    spec = importlib.util.spec_from_file_location("compare_strategies", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
