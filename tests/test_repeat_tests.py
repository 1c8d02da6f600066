"""benchmarks/repeat_tests.py: N fresh pytest runs in a row, and every test that failed in any of them.

Played on a small course folder of its own whose one test fails on every second run (it counts
its runs in a file), so a flake is there for the script to find; and on one whose test skips.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from conftest import ROOT, clean_env

SCRIPT = ROOT / "benchmarks" / "repeat_tests.py"


def _course(folder: Path, test: str) -> Path:
    """A folder the course tools take for a clone (pyproject.toml with [tool.pstutor], lessons/)."""
    (folder / "lessons").mkdir(parents=True)
    (folder / "pyproject.toml").write_text('[tool.pstutor]\nrepository = "x/y"\n')
    (folder / "tests").mkdir()
    (folder / "tests" / "test_timing.py").write_text(textwrap.dedent(test))
    return folder


def _repeat(course: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), "--course", str(course), *args],
                          capture_output=True, text=True, env=clean_env(), timeout=300)


FLAKY = """
    from pathlib import Path

    def test_steady():
        pass

    def test_every_second_run():
        counter = Path(__file__).with_name("runs")
        runs = int(counter.read_text()) + 1 if counter.exists() else 1
        counter.write_text(str(runs))
        assert runs % 2, f"run {runs} is even"
"""


def test_a_test_that_fails_in_some_runs_is_named_with_those_runs(tmp_path):
    done = _repeat(_course(tmp_path, FLAKY), "--runs", "3", "tests/test_timing.py")
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert [line.split(" (")[0] for line in lines if line.startswith("run ")] == [
        "run 1: 2 passed, 0 failed, 0 skipped", "run 2: 1 passed, 1 failed, 0 skipped",
        "run 3: 2 passed, 0 failed, 0 skipped"]
    assert "    ✗ tests.test_timing::test_every_second_run: AssertionError: run 2 is even" in lines
    assert lines[-1] == "  tests.test_timing::test_every_second_run  [2]"


def test_all_runs_green_exit_0_and_a_skip_counts_against(tmp_path):
    green = _repeat(_course(tmp_path / "green", "def test_ok():\n    pass\n"), "--runs", "2",
                    "tests/test_timing.py")
    assert green.returncode == 0 and green.stdout.strip().endswith("all 2 runs green: no test failed.")
    skipping = _course(tmp_path / "skips", "import pytest\n\n@pytest.mark.skip(reason='needs root')\n"
                                           "def test_skipped():\n    pass\n")
    skipped = _repeat(skipping, "--runs", "1", "--lang", "zh", "tests/test_timing.py")
    assert skipped.returncode == 1, skipped.stdout
    assert "被跳过，因此没有测试：tests.test_timing::test_skipped：needs root" in skipped.stdout


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    course = _course(tmp_path, "def test_ok():\n    pass\n")
    for args, message in ((["--runs", "0"], "--runs must be at least 1, not 0"),
                          (["tests/nothing.py"], "no such test file or folder: tests/nothing.py")):
        done = _repeat(course, *args)
        assert done.returncode == 2 and message in done.stderr, done.stderr
        assert done.stdout == "" and not (course / "tests" / "runs").exists()
