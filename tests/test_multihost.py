"""A multi-host rehearsal of the launch files: one network namespace per "host".

The test makes its own private network: a namespace holding a bridge, and one namespace per
task ("host"), each with its own address (10.200.N.x/24) on a veth link to that bridge. No
link, address or route touches this machine's own network namespace, so traffic stays
inside the namespaces the test made. Each generated `start-<task>.sh` runs unchanged in its
host's namespace (same port on every host, as on real machines), the chief trains a few
steps, a worker is killed mid-training (its steps are retried on the other worker), started
again with its unchanged script, and shown to rejoin (it runs steps again, counted in a
per-worker variable, which the chief reads as a real chief must: while the killed worker's
copy is gone, reading it raises CancelledError, so the chief trains on and reads again).
Ctrl-C ends each server with one line. Nothing is left behind: no namespace, link or
process, also when the test fails (try/finally inside the fixture).

Needs root and `ip netns` (iproute2); skipped with the reason elsewhere. CI runs as root.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import clean_env, wait_gone

from pstutor.launch_files import write_launch_files

PORT = 2222
TASKS = ["chief-0", "worker-0", "worker-1", "ps-0"]  # the order of write_launch_files' hosts


def _netns_reason() -> str | None:
    """Why namespaces cannot be made here (None when they can)."""
    if not sys.platform.startswith("linux"):
        return "network namespaces exist on Linux only"
    if os.geteuid() != 0:
        return "making network namespaces needs root (CI runs this test as root)"
    if shutil.which("ip") is None:
        return "the `ip` command (iproute2) is not installed"
    probe = f"pstutor-probe-{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"`ip netns add` is not allowed here: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], check=True)
    return None


REASON = _netns_reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")

CHIEF = textwrap.dedent("""\
    # train.py of the rehearsal: the chief's program, started by start-chief-0.sh.
    import os, time
    import pstutor

    pstutor.setup()
    import tensorflow as tf
    from tensorflow.python.data.experimental.ops.testing import sleep  # not in the public API

    def wait_for(name):
        while not os.path.exists(name):
            time.sleep(0.05)

    started = time.monotonic()
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    strategy = tf.distribute.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    with strategy.scope():
        total = tf.Variable(0.0)
        mine = tf.Variable(0.0, per_worker_variable=True)  # steps run by each worker

    def slow_ones():  # each element takes 0.1 s on the worker, without using the CPU
        return tf.data.Dataset.from_tensors(1.0).repeat().apply(sleep(100_000))

    iterator = iter(coordinator.create_per_worker_dataset(slow_ones))

    @tf.function
    def step(iterator):
        def replica_step(x):
            mine.assign_add(x)
            return total.assign_add(x)

        return strategy.run(replica_step, args=(next(iterator),))

    def train(steps):
        begin = time.monotonic()
        for _ in range(steps):
            coordinator.schedule(step, args=(iterator,))
        print("SCHEDULED", flush=True)
        coordinator.join()
        print(f"TRAINED {total.numpy():.0f} {time.monotonic() - begin:.2f}", flush=True)

    # A per-worker variable lives in its worker's memory and dies with it: the coordinator marks
    # it aborted when one of that worker's closures fails. Once the worker answers again, the
    # coordinator creates it there anew (from 0) before giving it anything else; until then,
    # reading it raises CancelledError ("The corresponding function is aborted"). Source:
    # tensorflow/python/distribute/coordinator/cluster_coordinator.py (Worker._on_closure_failure,
    # Worker._on_worker_recovery), coordinator/values.py (RemoteValueImpl._wait_and_maybe_error).
    def steps_per_worker():  # steps each worker ran since it started; None while a copy is gone
        try:
            return [int(v.numpy()) for v in mine.read_all()]
        except tf.errors.CancelledError:
            return None

    train(10)
    print(f"CONNECTED {time.monotonic() - started:.2f}", flush=True)
    train(40)  # worker-1 is killed while these run
    print(f"WHILE DOWN {steps_per_worker()}", flush=True)
    wait_for("worker-1-restarted")
    begin = time.monotonic()
    # Train in rounds until the restarted worker has run steps again: it needs a moment to be
    # noticed, and a round may end before the coordinator has rebuilt its copy.
    while (steps := steps_per_worker()) is None or steps[1] == 0:
        if time.monotonic() - begin > 120:
            break
        train(10)
    print(f"REJOINED {steps[1] if steps else 0} {time.monotonic() - begin:.2f}", flush=True)
""")


class Hosts:
    """One network namespace per task on a private bridge; each task's folder is its disk."""

    def __init__(self, root: Path) -> None:
        self.tag = f"pst{os.getpid()}"
        self.subnet = f"10.200.{os.getpid() % 250}"
        self.bridge = f"{self.tag}-br"
        self.namespaces = {task: f"{self.tag}-{i}" for i, task in enumerate(TASKS)}
        self.addresses = {task: f"{self.subnet}.{i + 1}" for i, task in enumerate(TASKS)}
        self.folders = {task: root / task for task in TASKS}
        self.processes: dict[str, subprocess.Popen] = {}

    def make(self) -> None:
        """The bridge namespace, then per host: namespace, veth into the bridge, address."""
        _ip("netns", "add", self.bridge)
        _ip("-n", self.bridge, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.bridge, "link", "set", "br0", "up")
        for i, task in enumerate(TASKS):
            namespace = self.namespaces[task]
            _ip("netns", "add", namespace)
            _ip("-n", namespace, "link", "set", "lo", "up")
            _ip("-n", namespace, "link", "add", "eth0", "type", "veth", "peer", "name", f"port{i}",
                "netns", self.bridge)
            _ip("-n", self.bridge, "link", "set", f"port{i}", "master", "br0", "up")
            _ip("-n", namespace, "addr", "add", f"{self.addresses[task]}/24", "dev", "eth0")
            _ip("-n", namespace, "link", "set", "eth0", "up")
            self.folders[task].mkdir(parents=True)

    def start(self, task: str, launch: Path) -> None:
        """Run the task's start script, unchanged, in its namespace and its folder."""
        env = clean_env()  # as on a real machine: the fixture stops whatever runs in the namespaces
        env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env["PATH"]  # `python`
        with open(self.folders[task] / "task.log", "ab") as log:
            self.processes[task] = subprocess.Popen(
                ["ip", "netns", "exec", self.namespaces[task], "bash", str(launch / f"start-{task}.sh")],
                cwd=self.folders[task], env=env, stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL)

    def log(self, task: str) -> str:
        return (self.folders[task] / "task.log").read_text(errors="replace")

    def wait_for(self, task: str, text: str, timeout: float = 180, count: int = 1) -> float:
        """Seconds until the task's log holds `text` `count` times; fail early if it exits."""
        started = time.monotonic()
        while self.log(task).count(text) < count:
            process = self.processes[task]
            assert process.poll() is None, f"{task} exited ({process.returncode}):\n{self.log(task)}"
            assert time.monotonic() - started < timeout, f"{task}: no {text!r}:\n{self.log(task)}"
            time.sleep(0.05)
        return time.monotonic() - started

    def remove(self) -> None:
        """Stop every process in the namespaces, then delete them (their links go with them)."""
        for process in self.processes.values():
            if process.poll() is None:
                process.kill()
            process.wait()
        for namespace in [*self.namespaces.values(), self.bridge]:
            pids = subprocess.run(["ip", "netns", "pids", namespace], capture_output=True,
                                  text=True).stdout.split()
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
            wait_gone([int(p) for p in pids])
            subprocess.run(["ip", "netns", "del", namespace], capture_output=True)

    def left_behind(self) -> list[str]:
        """Namespaces of this test still present (none after `remove`)."""
        listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        return [line.split()[0] for line in listed.splitlines() if line.startswith(self.tag)]


@pytest.fixture
def hosts(tmp_path):
    made = Hosts(tmp_path)
    try:
        made.make()
        yield made
    finally:
        made.remove()
        assert made.left_behind() == [], "namespaces left behind"


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


def test_the_start_scripts_run_a_cluster_on_four_hosts(hosts, tmp_path):
    launch = tmp_path / "launch"
    write_launch_files(launch, [hosts.addresses[t] for t in TASKS], 2, 1, port=PORT)
    (hosts.folders["chief-0"] / "train.py").write_text(CHIEF)
    timings = {}

    started = time.monotonic()
    for task in ("ps-0", "worker-0", "worker-1"):
        hosts.start(task, launch)
    for task in ("ps-0", "worker-0", "worker-1"):
        hosts.wait_for(task, "READY")
    timings["servers up"] = time.monotonic() - started

    hosts.start("chief-0", launch)
    timings["chief started, connected, first 10 steps"] = hosts.wait_for("chief-0", "CONNECTED")
    assert "TRAINED 10 " in hosts.log("chief-0")

    hosts.wait_for("chief-0", "SCHEDULED", count=2)
    time.sleep(0.5)  # 40 steps of 0.1 s on two workers: about 2 s; kill one in the middle
    hosts.processes["worker-1"].send_signal(signal.SIGKILL)
    hosts.processes["worker-1"].wait()
    hosts.wait_for("chief-0", "TRAINED", count=2)
    trained = hosts.log("chief-0").split("TRAINED ")[2].split()
    assert int(trained[0]) >= 50, "the killed worker's steps were not retried"  # at least once
    timings["40 steps, worker-1 killed during them"] = float(trained[1])
    hosts.wait_for("chief-0", "WHILE DOWN")  # its copy of the per-worker variable died with it
    assert "WHILE DOWN None" in hosts.log("chief-0"), hosts.log("chief-0")

    started = time.monotonic()
    hosts.start("worker-1", launch)  # the same script again, on the same host
    hosts.wait_for("worker-1", "READY", count=2)
    timings["worker-1 restarted"] = time.monotonic() - started
    (hosts.folders["chief-0"] / "worker-1-restarted").touch()
    hosts.wait_for("chief-0", "REJOINED", timeout=300)
    rejoined = hosts.log("chief-0").split("REJOINED ")[1].split()
    assert int(rejoined[0]) > 0, "the restarted worker did not rejoin"
    timings["until the restarted worker ran steps"] = float(rejoined[1])
    assert hosts.processes["chief-0"].wait(timeout=60) == 0, hosts.log("chief-0")

    # Ctrl-C on a server: one line, exit code 0; SIGTERM (a drain, an eviction): one line, 143,
    # a failure, so that a Kubernetes Job restarts the server instead of counting it complete
    for task, sig, code in (("ps-0", signal.SIGTERM, 143), ("worker-0", signal.SIGINT, 0),
                            ("worker-1", signal.SIGINT, 0)):
        hosts.processes[task].send_signal(sig)
        assert hosts.processes[task].wait(timeout=30) == code
        name = task.replace("-", " ")
        tail = hosts.log(task).split(f"READY {name}")[-1]
        assert tail.strip().splitlines() == [f"{name} stopped."], tail  # no traceback, no gRPC noise
    print("\nmulti-host rehearsal:", ", ".join(f"{k} {v:.1f} s" for k, v in timings.items()))
