"""benchmarks/compare_strategies.py: the measurement lesson 9 reads, recorded with its machine and date."""

import json
import subprocess
import sys

import pytest
from conftest import ROOT, clean_env

SCRIPT = ROOT / "benchmarks" / "compare_strategies.py"


def test_the_benchmark_records_every_run_with_the_machine_and_the_date(tmp_path):
    out = tmp_path / "comparison.json"
    result = _benchmark("--rounds", "2", "--examples", "256", "--min-seconds", "0.2", "--setups", "none:8",
                        "--out", str(out), timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    stored = json.loads(out.read_text())
    assert stored["machine"]["cores"] >= 1 and stored["machine"]["tensorflow"].startswith("2.")
    assert stored["date"].endswith("UTC") and len(stored["load_average"]["before"]) == 3
    assert [(r["round"], r["strategy"], r["steps_per_execution"]) for r in stored["runs"]] == \
        [(1, "none", 8), (2, "none", 8)]
    assert all(r["seconds"] >= 0.2 for r in stored["runs"])


@pytest.mark.parametrize("args", [["--setups", "none:8,horovod:1"], ["--setups", "none"], ["--rounds", "0"]])
def test_bad_arguments_start_nothing_and_write_nothing(tmp_path, args):
    out = tmp_path / "comparison.json"
    result = _benchmark(*args, "--out", str(out))
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not out.exists()


def _benchmark(*args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=timeout, env=clean_env())
