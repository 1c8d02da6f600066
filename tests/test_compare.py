"""The strategy comparison: real TensorFlow under each strategy, the command line, and no orphans."""

import math
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from conftest import ROOT, alive, clean_env, descendants, run_pstutor, run_python

from pstutor import compare
from pstutor.tf_config import cluster_dict, make_tf_config


def test_every_strategy_trains_and_is_measured():
    lines = []
    results = compare.compare(compare.STRATEGIES, examples=1024, min_seconds=0.3, progress=lines.append)
    assert [r["strategy"] for r in results] == list(compare.STRATEGIES)
    for record in results:
        assert set(record) == {*compare.COLUMNS, *compare.DETAILS}
        assert record["examples_per_s"] > 0 and record["steps_per_s"] > 0, record
        assert math.isfinite(record["loss"]) and 0 < record["loss"] < 1.0, record
        assert record["startup_s"] > 0 and record["warmup_s"] > 0
        assert record["global_batch"] == 32 * record["replicas"]
        # timed for at least min_seconds, in whole epochs of `examples` (MWMS workers stop together)
        assert record["seconds"] >= 0.3 and record["examples"] % 1024 == 0, record
        assert record["examples_per_s"] == pytest.approx(record["examples"] / record["seconds"])
        # the loss comes after the warm-up (512) and the first timed epoch: as many examples for all
        assert record["loss_after_examples"] == 512 + 1024, record
    # alike set-ups: every worker its own process; the parameter server's ps and coordinator too
    assert {r["strategy"]: r["processes"] for r in results} == {"none": 1, "mirrored": 1, "ps": 4, "mwms": 2}
    replicas = {r["strategy"]: r["replicas"] for r in results}
    assert replicas["none"] == 1 and replicas["mwms"] % 2 == 0  # two workers, each its devices
    assert replicas["mirrored"] >= 1 and replicas["ps"] >= 1  # 2 logical CPUs here, or the GPUs
    # synchronous training with a scaled learning rate ends where one device ends
    losses = {r["strategy"]: r["loss"] for r in results}
    assert losses["mwms"] == pytest.approx(losses["none"], abs=0.01)
    assert sum("starting" in line for line in lines) == 4 and sum("examples/s" in line for line in lines) == 4
    assert not descendants(os.getpid()), "a child process outlived the comparison"


def test_table_and_code_diff():
    rows = [{"strategy": "none", "training": "-", "replicas": 1, "global_batch": 32,
             "examples_per_s": 40000.0, "steps_per_s": 1250.0, "loss": 0.25, "startup_s": 3.0,
             "warmup_s": 1.0,
             "changed_lines": 0}]
    table = compare.format_table(rows).splitlines()
    assert table[0].split()[:3] == ["strategy", "training", "replicas"]
    assert "40,000" in table[2] and "0.2500" in table[2]
    assert compare.strategy_code("mwms") == ["return tf.distribute.MultiWorkerMirroredStrategy()"]
    assert compare.changed_lines("none") == 0 and compare.changed_lines("mirrored") >= 3


@pytest.mark.parametrize("bad", [["none", "horovod"], [], "tpu"])
def test_unknown_strategies_are_refused(bad):
    with pytest.raises(ValueError, match="Choose from: none, mirrored, ps, mwms"):
        compare.compare(bad)


@pytest.mark.parametrize("field", ["examples", "batch_size", "steps_per_execution", "timeout"])
def test_non_positive_numbers_are_refused(field):
    with pytest.raises(ValueError, match=f"{field} must be a positive number"):
        compare.compare(["none"], **{field: 0})


def test_run_workers_gives_each_worker_its_own_tf_config_and_stops_them_on_failure(tmp_path):
    program = tmp_path / "program.py"
    program.write_text(textwrap.dedent("""\
        import json, os, sys, time
        task = json.loads(os.environ["TF_CONFIG"])["task"]
        print(task["type"], task["index"], sys.argv[1], flush=True)
        if task["index"] == 1:
            sys.exit(3)
        time.sleep(600)  # worker 0 would wait for worker 1 forever
    """))
    started = time.monotonic()
    runs = compare.run_workers(program, 2, args=["hello"], timeout=300)
    # stopped when worker 1 failed: seconds (two Python start-ups), not the 300 s timeout
    assert time.monotonic() - started < 120, "the failure must stop the other worker"
    assert runs[0].output.strip() == "worker 0 hello" and runs[1].output.strip() == "worker 1 hello"
    assert runs[1].returncode == 3 and runs[0].returncode != 0  # stopped, not finished
    assert not descendants(os.getpid())


def test_a_group_names_the_child_that_failed_not_a_server_it_stopped(tmp_path):
    """A server the group stops exits 143 (SIGTERM): the failure it records is the child that failed."""
    program = tmp_path / "fails.py"
    program.write_text("import sys\nsys.exit(3)\n")
    with compare.ProcessGroup() as group:
        group.spawn(["task_server"], {"TF_CONFIG": make_tf_config(cluster_dict(1, 1), "ps", 0).to_json()})
        deadline = time.monotonic() + 120
        while "READY ps 0" not in group.runs()[0].output and time.monotonic() < deadline:
            time.sleep(0.1)
        failing = group.spawn(["script", str(program)], {})
        group.wait(120)
        runs = group.runs()
    assert group.failed == failing and runs[failing].returncode == 3
    assert runs[0].returncode == 143 and "ps 0 stopped." in runs[0].output, runs[0]


def test_run_workers_times_out_and_leaves_nothing(tmp_path):
    program = tmp_path / "slow.py"
    program.write_text("import time\ntime.sleep(60)\n")
    with pytest.raises(compare.CompareError, match="no result within 2 s"):
        compare.run_workers(program, 2, timeout=2)
    assert not descendants(os.getpid())


def test_children_die_with_a_killed_parent(tmp_path):
    """SIGKILL the process that ran the comparison: its children end themselves."""
    program = tmp_path / "slow.py"
    program.write_text("import time\ntime.sleep(120)\n")
    code = textwrap.dedent(f"""\
        from pstutor import compare
        compare.run_workers({str(program)!r}, 2, timeout=120)
    """)
    env = dict(clean_env(), TMPDIR=str(tmp_path))  # where the children's logs would be
    parent = subprocess.Popen([sys.executable, "-c", code], env=env, cwd=ROOT)
    try:
        deadline = time.monotonic() + 30
        while len(descendants(parent.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        children = descendants(parent.pid)
        assert len(children) == 2
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 10
        while any(os.path.exists(f"/proc/{pid}") and alive(pid) for pid in children):
            assert time.monotonic() < deadline, "children outlived their parent"
            time.sleep(0.1)
        assert [p.name for p in tmp_path.iterdir()] == ["slow.py"], "the logs outlived the parent"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()



def test_cli_prints_progress_and_the_table():
    result = run_pstutor("compare", "--strategies", "none,ps", "--examples", "512")
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "[1/2] none     starting" in out and "[2/2] ps       starting" in out
    assert out.count("examples/s,") == 2
    header = next(line for line in out.splitlines() if line.startswith("strategy"))
    assert "examples/s" in header and "changed lines" in header


def test_cli_speaks_chinese():
    result = run_pstutor("--lang", "zh", "compare", "--strategies", "none", "--examples", "256")
    assert result.returncode == 0, result.stderr
    assert "正在比较" in result.stdout and "每秒" in result.stdout
    assert "正在启动（不使用策略）" in result.stdout


@pytest.mark.parametrize("args, message", [
    (["--strategies", "none,horovod"], "Unknown strategy name(s): 'horovod'"),
    (["--examples", "0"], "must be at least 1"),
    (["--examples", "-5"], "must be at least 1"),
    (["--batch-size", "x"], "must be a whole number, not 'x'"),
])
def test_cli_refuses_bad_input(args, message):
    result = run_pstutor("compare", *args)
    assert result.returncode == 2
    assert message in result.stderr


def test_every_run_reads_one_seeded_stream_and_parameter_server_workers_split_it():
    """One seeded order for every stream built the same way; the two ps workers read disjoint halves."""
    code = """
import numpy as np
import pstutor
pstutor.setup()
import tensorflow as tf
from pstutor import compare_worker

x, y = pstutor.toy_classification(64, compare_worker.NUM_FEATURES, seed=0)
stream = [b[0].numpy() for b in compare_worker._stream(tf, x, y, 16).take(4)]
again = [b[0].numpy() for b in compare_worker._stream(tf, x, y, 16).take(4)]
halves = [[b[0].numpy() for b in compare_worker._stream(tf, x, y, 16).shard(2, w).take(2)] for w in (0, 1)]
ps = compare_worker._dataset(tf, x, y, 16, by_worker=True)
print(all(np.array_equal(a, b) for a, b in zip(stream, again)),                         # seeded: one order
      all(np.array_equal(h, stream[2 * i + w]) for w in (0, 1) for i, h in enumerate(halves[w])),  # split
      not np.array_equal(halves[0][0], halves[1][0]),                                  # not the same batches
      type(ps).__name__)
"""
    result = run_python(code)  # a fresh process: setup() must come before TensorFlow's import
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["True", "True", "True", "DatasetCreator"]


def test_group_runs_keeps_one_record_per_setup_with_the_rounds_as_lists():
    runs = [{"round": n, "strategy": s, "training": "-", "replicas": 1, "global_batch": 32,
             "steps_per_execution": spe, "changed_lines": 0, "processes": 1, "examples_per_s": 10.0 * n + spe,
             "steps_per_s": 1.0, "loss": 0.5, "startup_s": 2.0, "warmup_s": 1.0, "seconds": 1.5}
            for n in (1, 2, 3) for s, spe in (("none", 8), ("ps", 8), ("ps", 1))]
    grouped = compare.group_runs(runs)
    assert [(g["strategy"], g["steps_per_execution"]) for g in grouped] == [("none", 8), ("ps", 8), ("ps", 1)]
    assert grouped[2]["examples_per_s"] == [11.0, 21.0, 31.0] and grouped[0]["replicas"] == 1


def test_the_stored_comparison_has_what_lesson_9_relies_on():
    """The benchmark's committed record: machine, date, >= 3 rounds, every run timed >= 1 s."""
    stored = compare.stored_results()
    assert {"date", "machine", "load_average", "settings", "runs"} <= set(stored)
    assert stored["machine"]["cores"] >= 1 and stored["machine"]["tensorflow"]
    assert stored["settings"]["rounds"] >= 3 and stored["settings"]["min_seconds"] >= 1
    grouped = compare.group_runs(stored["runs"])
    assert {g["strategy"] for g in grouped} == set(compare.STRATEGIES)
    for group in grouped:
        assert len(group["examples_per_s"]) == stored["settings"]["rounds"], group["strategy"]
        assert min(group["seconds"]) >= stored["settings"]["min_seconds"], group["strategy"]
