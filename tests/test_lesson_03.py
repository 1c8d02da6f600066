"""Lesson 03's stored benchmark: what the lesson shows instead of timing steps_per_execution itself."""

import datetime
import subprocess
import sys

from conftest import ROOT

import pstutor


def test_the_stored_steps_per_execution_measurement_is_long_enough_to_mean_something():
    stored = pstutor.measurement("steps_per_execution")
    datetime.date.fromisoformat(stored["date"])
    assert {"processor", "cores", "tensorflow"} <= set(stored["machine"])
    assert set(stored["load_average"]) == {"before", "after"}
    for clock in ("ms_per_step", "cpu_ms_per_step"):
        assert set(stored[clock]) == {"1", "10"}
        for rounds in stored[clock].values():
            assert len(rounds) == stored["rounds"] >= 4  # quartiles need four
            measured_ms = sum(rounds) * stored["steps_per_round"]
            assert measured_ms >= 1000, f"{clock}: {measured_ms:.0f} ms of measured work"


def test_the_benchmark_refuses_bad_arguments_in_one_line_before_it_starts_anything(tmp_path):
    script = ROOT / "benchmarks" / "steps_per_execution.py"
    done = subprocess.run([sys.executable, str(script), "--rounds", "2"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1 and "--rounds" in done.stderr
    assert "tensorflow" not in done.stderr.lower()
