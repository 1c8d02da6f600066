"""Local clusters of real processes: they train, survive a killed worker, and never leave orphans."""

import json
import os
import signal
import socket
import subprocess
import sys

import pytest
from conftest import ROOT, alive, clean_env, descendants, run_python, wait_gone

from pstutor import TFConfigError
from pstutor.local_cluster import LocalCluster

TRAIN = """
import json, pstutor
pstutor.setup()
import tensorflow as tf
from pstutor.local_cluster import LocalCluster
report = {}
with LocalCluster(2, 1) as cluster:
    report["pids"] = cluster.pids()
    strategy = tf.distribute.ParameterServerStrategy(cluster.resolver())
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    with strategy.scope():
        total = tf.Variable(0.0)

    @tf.function
    def step():
        return strategy.run(lambda: total.assign_add(1.0))

    def train_ten_steps():
        for _ in range(10):
            coordinator.schedule(step)
        coordinator.join()
        return float(total.numpy())

    report["before"] = train_ten_steps()
    cluster.kill("worker", 1)
    report["killed_alive"] = cluster.alive("worker", 1)
    report["after_kill"] = train_ten_steps()
    cluster.restart("worker", 1)
    report["restarted_alive"] = cluster.alive("worker", 1)
    report["after_restart"] = train_ten_steps()
    report["all_pids"] = cluster.pids()
print(json.dumps(report))
"""


def test_a_local_cluster_trains_survives_a_killed_worker_and_cleans_up():
    result = run_python(TRAIN, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.splitlines()[-1])
    assert len(report["pids"]) == 3
    assert report["before"] == 10.0
    assert report["killed_alive"] is False
    assert report["after_kill"] == 20.0  # the killed worker's closures ran elsewhere
    assert report["restarted_alive"] is True
    assert report["after_restart"] == 30.0
    assert wait_gone(report["all_pids"]) == []


def test_killing_the_parent_outright_leaves_no_task_running(tmp_path):
    script = (
        "import time\nfrom pstutor.local_cluster import LocalCluster\n"
        "cluster = LocalCluster(1, 1).start()\n"
        "print(' '.join(map(str, cluster.pids())), flush=True)\n"
        "time.sleep(600)\n"
    )
    temp = tmp_path / "tmp"
    temp.mkdir()
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                              cwd=ROOT, env=dict(clean_env(), TMPDIR=str(temp)))
    try:
        pids = [int(p) for p in parent.stdout.readline().split()]
        assert len(pids) == 2 and all(alive(p) for p in pids)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=30)
        assert wait_gone(pids) == [], "task processes outlived their parent"
        assert list(temp.iterdir()) == [], "the cluster's logs outlived it"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


def test_an_exception_in_the_with_block_still_stops_every_task():
    result = run_python(
        "from pstutor.local_cluster import LocalCluster\n"
        "try:\n"
        "    with LocalCluster(1, 1) as cluster:\n"
        "        print(' '.join(map(str, cluster.pids())), flush=True)\n"
        "        raise KeyError('boom')\n"
        "except KeyError:\n"
        "    pass\n", timeout=180)
    assert result.returncode == 0, result.stderr
    assert wait_gone([int(p) for p in result.stdout.split()]) == []


def test_ports_in_use_are_refused_before_anything_starts():
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        cluster = {"chief": ["127.0.0.1:1"], "worker": [f"127.0.0.1:{port}"], "ps": ["127.0.0.1:2"]}
        cluster["chief"] = [f"127.0.0.1:{_free_port()}"]
        cluster["ps"] = [f"127.0.0.1:{_free_port()}"]
        local = LocalCluster(cluster=cluster)
        with pytest.raises(RuntimeError, match=f"already in use: 127.0.0.1:{port}"):
            local.start()
        assert local.pids() == []


def test_a_task_that_crashes_at_start_is_named_with_its_log_and_the_rest_are_stopped(tmp_path):
    (tmp_path / "sitecustomize.py").write_text(
        "import json, os, sys\n"
        "config = json.loads(os.environ.get('TF_CONFIG', '{}'))\n"
        "if config.get('task', {}).get('type') == 'ps':\n"
        "    sys.exit('simulated crash of the ps at start-up')\n")
    result = run_python(
        "from pstutor.local_cluster import LocalCluster, ClusterStartError\n"
        "cluster = LocalCluster(2, 1)\n"
        "try:\n"
        "    cluster.start()\n"
        "except ClusterStartError as err:\n"
        "    print(err)\n"
        "print('left:', cluster.pids())\n",
        env={"PYTHONPATH": str(tmp_path)}, timeout=180)
    assert result.returncode == 0, result.stderr
    assert "ps 0 (127.0.0.1:" in result.stdout and "exited with code 1" in result.stdout
    assert "simulated crash of the ps at start-up" in result.stdout
    assert "left: []" in result.stdout


def test_bad_tasks_and_shapes_are_named():
    cluster = LocalCluster(2, 1)
    with pytest.raises(TFConfigError, match="No task worker 5"):
        cluster.kill("worker", 5)
    with pytest.raises(TFConfigError, match="No task evaluator 0"):
        cluster.restart("evaluator", 0)
    with pytest.raises(TFConfigError, match="at least 1"):
        LocalCluster(0, 1)
    with pytest.raises(TFConfigError, match="needs a chief"):
        LocalCluster(cluster={"worker": ["127.0.0.1:5000"]})
    assert json.loads(cluster.tf_config("worker", 1))["task"] == {"type": "worker", "index": 1}


def test_cluster_up_runs_until_ctrl_c_and_stops_its_tasks_quietly():
    """Ctrl-C in a terminal signals the whole process group: one line, no traceback, no gRPC noise."""
    process = subprocess.Popen([sys.executable, "-m", "pstutor", "cluster", "up", "--workers", "1",
                                "--ps", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               cwd=ROOT, env=clean_env(), start_new_session=True)
    lines = []
    try:
        for line in process.stdout:
            lines.append(line)
            if "Ctrl-C" in line:
                break
        text = "".join(lines)
        assert "every server listens on all IPv4 and IPv6 interfaces, without authentication" in text
        assert "export TF_CONFIG='" in text
        config = json.loads(text.split("export TF_CONFIG='")[1].split("'")[0])
        assert config["task"] == {"type": "chief", "index": 0}
        assert set(config["cluster"]) == {"chief", "worker", "ps"}
        children = _children(process.pid)
        assert len(children) == 2
        os.killpg(process.pid, signal.SIGINT)
        out, err = process.communicate(timeout=60)
        assert process.returncode == 0
        assert out.strip() == "stopping ..." and err == ""
        assert wait_gone(children) == []
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _children(pid: int) -> list[int]:
    return [p for p in descendants(pid) if "task_server" in open(f"/proc/{p}/cmdline").read()]
