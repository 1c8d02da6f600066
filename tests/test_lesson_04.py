"""Lesson 04's stored benchmark: what the lesson's conclusion on lookup tables rests on."""

import datetime
import subprocess
import sys

from conftest import ROOT

import pstutor

WAYS = ["under the scope", "outside the scope", "inside dataset_fn"]


def test_the_stored_lookup_measurement_is_long_enough_to_mean_something():
    stored = pstutor.measurement("lookup_placement")
    datetime.date.fromisoformat(stored["date"])
    assert {"processor", "cores", "tensorflow"} <= set(stored["machine"])
    assert set(stored["load_average"]) == {"before", "after"}
    # the lesson pairs these with its own `ways` by position: the order must be the lesson's
    assert list(stored["seconds_per_round"]) == WAYS
    for way, rounds in stored["seconds_per_round"].items():
        assert len(rounds) == stored["rounds"] >= 3
        assert sum(rounds) >= 1.0, f"{way}: {sum(rounds):.2f} s of measured work"


def test_the_benchmark_refuses_bad_arguments_in_one_line_before_it_starts_anything(tmp_path):
    script = ROOT / "benchmarks" / "lookup_placement.py"
    done = subprocess.run([sys.executable, str(script), "--rounds", "2"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1 and "--rounds" in done.stderr
    assert "tensorflow" not in done.stderr.lower()
