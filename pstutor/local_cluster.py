"""A local cluster of real processes: every worker and ps is its own operating-system
process running `tf.distribute.Server` with its own `TF_CONFIG`, exactly as on separate
machines, only all on 127.0.0.1. Tasks can be killed and restarted on the same address,
which is what the fault-tolerance lesson needs and an in-process cluster cannot do.

No orphans: tasks are stopped by `close()`, by leaving the `with` block, at normal
interpreter exit, and (see `task_server`) when this process is killed outright.
"""

from __future__ import annotations

import atexit
import gc
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from pstutor.language import say
from pstutor.processes import parent_env, stop
from pstutor.tf_config import TFConfigError, cluster_dict, make_tf_config, validate_cluster


class ClusterStartError(RuntimeError):
    """A task did not come up; the message names it and shows its last log lines."""


class LocalCluster:
    """Workers and ps as separate local processes, with a resolver for the coordinator."""

    def __init__(
        self, num_workers: int = 2, num_ps: int = 1, *, cluster: dict | None = None,
        start_timeout: float = 90.0, verbose: bool = False,
    ) -> None:
        """Describe the cluster; `cluster` fixes the addresses (else free loopback ports)."""
        if cluster is None:
            cluster = cluster_dict(num_workers, num_ps, chief=True)
        validate_cluster(cluster)
        if "chief" not in cluster or "worker" not in cluster:
            raise TFConfigError(say("A local cluster needs a chief and at least one worker.",
                                    "本地集群需要一个 chief 和至少一个工作进程。"))
        self.cluster = {job: list(addresses) for job, addresses in cluster.items()}
        self.start_timeout = start_timeout
        self.verbose = verbose
        # Created when the first task starts, removed by close().
        self.log_dir = Path(tempfile.gettempdir()) / f"pstutor-cluster-{os.getpid()}-{id(self):x}"
        self._processes: dict[tuple[str, int], subprocess.Popen] = {}
        self._log_start: dict[tuple[str, int], int] = {}  # where the current run's log begins
        self.killed_at: dict[tuple[str, int], float] = {}  # time.time() of each task's last kill

    @property
    def tasks(self) -> list[tuple[str, int]]:
        """Every task this cluster runs as a process (the chief is the caller)."""
        return [(job, i) for job in ("worker", "ps") for i in range(len(self.cluster.get(job, ())))]

    def address(self, task_type: str, task_index: int) -> str:
        """The `host:port` of one task."""
        self._check_task(task_type, task_index)
        return self.cluster[task_type][task_index]

    def tf_config(self, task_type: str = "chief", task_index: int = 0) -> str:
        """The `TF_CONFIG` of one task, as the JSON text to export."""
        return make_tf_config(self.cluster, task_type, task_index).to_json()

    def resolver(self):
        """A resolver for the coordinator (the chief task, i.e. this process)."""
        import tensorflow as tf

        return tf.distribute.cluster_resolver.SimpleClusterResolver(
            tf.train.ClusterSpec(self.cluster), task_type="chief", task_id=0, rpc_layer="grpc")

    def start(self) -> LocalCluster:
        """Start every task and wait until each listens; on failure stop them all."""
        busy = [a for a in self._all_addresses() if _port_in_use(a)]
        if busy:
            raise ClusterStartError(say(
                f"Port(s) already in use: {', '.join(busy)}. Choose other ports or stop "
                "the program that holds them.",
                f"端口已被占用：{', '.join(busy)}。请换用其他端口，或停止占用它们的程序。"))
        _LIVE.add(self)
        try:
            for task in self.tasks:
                self._spawn(*task)
            self._wait_ready(self.tasks)
        except BaseException:
            self.close()
            raise
        return self

    def kill(self, task_type: str, task_index: int, sig: int = signal.SIGKILL) -> None:
        """Kill one task's process (SIGKILL by default: a machine that vanishes)."""
        self._check_task(task_type, task_index)
        process = self._processes.get((task_type, task_index))
        if process is not None and process.poll() is None:
            process.send_signal(sig)
            process.wait(timeout=30)
            self.killed_at[(task_type, task_index)] = time.time()

    def restart(self, task_type: str, task_index: int) -> None:
        """Start a task again on its old address (killing it first if it still runs)."""
        self.kill(task_type, task_index)
        deadline = time.monotonic() + 30
        while _port_in_use(self.address(task_type, task_index)) and time.monotonic() < deadline:
            time.sleep(0.1)
        self._spawn(task_type, task_index)
        self._wait_ready([(task_type, task_index)])

    def alive(self, task_type: str, task_index: int) -> bool:
        """Whether the task's process is running."""
        process = self._processes.get((task_type, task_index))
        return process is not None and process.poll() is None

    def pids(self) -> list[int]:
        """Process ids of the running tasks."""
        return [p.pid for p in self._processes.values() if p.poll() is None]

    def close(self) -> None:
        """Stop every task: SIGTERM, then SIGKILL for any that lingers. Safe to call twice."""
        self._stop_coordinators()
        stop(self._processes.values())
        _LIVE.discard(self)
        shutil.rmtree(self.log_dir, ignore_errors=True)  # failures already quoted their logs

    def _stop_coordinators(self) -> None:
        """Stop the `ClusterCoordinator`s that use this cluster, while its tasks still answer.

        Once every worker is gone, TensorFlow's failure handler waits for them to come back
        while holding a lock that the coordinator's destructor needs: without this, the
        process would hang when it exits. The coordinators are unusable afterwards.
        """
        module = sys.modules.get("tensorflow.python.distribute.coordinator.cluster_coordinator")
        if module is None or not self._processes:
            return
        ours = set(self.cluster.get("worker", []))
        for obj in gc.get_objects():
            if not isinstance(obj, module.ClusterCoordinator) or "_cluster" not in vars(obj):
                continue
            resolver = getattr(obj.strategy, "_cluster_resolver", None)
            if resolver is None or set(resolver.cluster_spec().as_dict().get("worker", [])) != ours:
                continue
            cluster = obj._cluster
            stopper = threading.Thread(target=cluster.stop, daemon=True)
            stopper.start()
            stopper.join(timeout=5)  # blocks only if a worker was killed and never restarted
            cluster.stop = lambda: None  # the destructor must not wait on that lock again

    def log(self, task_type: str, task_index: int, lines: int = 20) -> str:
        """The last lines a task printed."""
        path = self._log_path(task_type, task_index)
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        jobs = ", ".join(f"{len(self.cluster.get(j, ()))} {j}" for j in ("worker", "ps"))
        return f"LocalCluster({jobs}, {len(self.pids())} processes running)"

    def _spawn(self, task_type: str, task_index: int) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        env.update({
            "TF_CONFIG": self.tf_config(task_type, task_index),
            **parent_env(),
            "PSTUTOR_VERBOSE": "1" if self.verbose else "0",
        })
        with open(self._log_path(task_type, task_index), "ab") as log:
            self._log_start[(task_type, task_index)] = log.tell()
            self._processes[(task_type, task_index)] = subprocess.Popen(
                [sys.executable, "-m", "pstutor.task_server"], env=env, stdout=log,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            )

    def _wait_ready(self, tasks: list[tuple[str, int]]) -> None:
        deadline = time.monotonic() + self.start_timeout
        waiting = list(tasks)
        while waiting:
            for task in list(waiting):
                process = self._processes[task]
                if process.poll() is not None:
                    raise ClusterStartError(self._failure(task, say(
                        f"exited with code {process.returncode} while starting",
                        f"启动过程中退出，退出码 {process.returncode}")))
                if f"READY {task[0]} {task[1]}" in self._current_log(task):
                    waiting.remove(task)
            if waiting and time.monotonic() > deadline:
                raise ClusterStartError(self._failure(waiting[0], say(
                    f"did not come up within {self.start_timeout:.0f} s",
                    f"在 {self.start_timeout:.0f} 秒内没有启动")))
            time.sleep(0.1)

    def _current_log(self, task: tuple[str, int]) -> str:
        path = self._log_path(*task)
        with open(path, "rb") as handle:
            handle.seek(self._log_start[task])
            return handle.read().decode(errors="replace")

    def _failure(self, task: tuple[str, int], what: str) -> str:
        lines = self.log(*task) or say("(no output)", "（没有输出）")
        return f"{task[0]} {task[1]} ({self.address(*task)}) {what}:\n{lines}"

    def _log_path(self, task_type: str, task_index: int) -> Path:
        return self.log_dir / f"{task_type}-{task_index}.log"

    def _all_addresses(self) -> list[str]:
        return [a for job in self.cluster.values() for a in job]

    def _check_task(self, task_type: str, task_index: int) -> None:
        if (task_type, task_index) not in self.tasks:
            raise TFConfigError(say(
                f"No task {task_type} {task_index} in this cluster; its tasks are "
                f"{', '.join(f'{t} {i}' for t, i in self.tasks)}.",
                f"集群中没有任务 {task_type} {task_index}；现有任务为 "
                f"{', '.join(f'{t} {i}' for t, i in self.tasks)}。"))


def _port_in_use(address: str) -> bool:
    """True when something already listens on (or holds) the address's port."""
    host, port = address.rsplit(":", 1)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("0.0.0.0" if host not in ("127.0.0.1", "localhost") else host, int(port)))
        except OSError:
            return True
    return False


_LIVE: set[LocalCluster] = set()


@atexit.register
def _close_all() -> None:
    """Normal interpreter exit, exceptions included: stop every cluster still running."""
    for cluster in list(_LIVE):
        cluster.close()
