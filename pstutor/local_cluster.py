"""A local cluster of real processes: every worker and ps is its own operating-system
process running `tf.distribute.Server` with its own `TF_CONFIG`, exactly as on separate
machines, only all on 127.0.0.1. Tasks can be killed and restarted on the same address,
which is what the fault-tolerance lesson needs and an in-process cluster cannot do.

No orphans: tasks are started as `processes.Child`ren: stopped by `close()`, by leaving the
`with` block, at normal interpreter exit, and they end themselves when this process is killed
outright. Their logs live in anonymous files, so nothing is left on disk either.

A cluster the machine cannot hold is refused before anything starts: each task process
takes about `TASK_MEMORY_GB` of memory.
"""

from __future__ import annotations

import atexit
import gc
import signal
import sys
import threading
import time
from pathlib import Path

from pstutor.language import say
from pstutor.processes import Child, stop
from pstutor.task_server import port_in_use
from pstutor.tf_config import TFConfigError, cluster_dict, make_tf_config, validate_cluster

TASK_MEMORY_GB = 0.7  # resident memory of one task process (TensorFlow loaded, server running)


class ClusterStartError(RuntimeError):
    """A task did not come up; the message names it and shows its last log lines."""


class LocalCluster:
    """Workers and ps as separate local processes, with a resolver for the coordinator."""

    def __init__(
        self, num_workers: int = 2, num_ps: int = 1, *, cluster: dict | None = None,
        start_timeout: float = 90.0, verbose: bool = False,
    ) -> None:
        """Describe the cluster; `cluster` fixes the addresses (else free loopback ports)."""
        self._picked = cluster is None  # free ports it chose itself: it may choose again (start)
        if cluster is None:
            check_memory(num_workers, num_ps)
            cluster = cluster_dict(num_workers, num_ps, chief=True)
        validate_cluster(cluster)
        if "chief" not in cluster or "worker" not in cluster:
            raise TFConfigError(say("A local cluster needs a chief and at least one worker.",
                                    "本地集群需要一个 chief 和至少一个工作进程。"))
        self.cluster = {job: list(addresses) for job, addresses in cluster.items()}
        self.start_timeout = start_timeout
        self.verbose = verbose
        self._children: dict[tuple[str, int], Child] = {}
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
        """Start every task and wait until each listens; on failure stop them all.

        On ports it picked itself, a port that another program takes between the pick and the
        bind (on a busy machine other clusters pick free ports too) costs a new try on fresh
        ports, at most twice, not the run. Ports given in `cluster` are used as they are.
        """
        for attempt in range(3):
            try:
                return self._start_once()
            except ClusterStartError:
                taken = [a for a in self._all_addresses() if _port_in_use(a)]
                if not (self._picked and taken) or attempt == 2:
                    raise
                self.cluster = cluster_dict(len(self.cluster["worker"]), len(self.cluster.get("ps", [])),
                                            chief=True)
                self._children = {}
        raise AssertionError("unreachable")

    def _start_once(self) -> LocalCluster:
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
        """Kill one task's process (SIGKILL by default: a process that crashes).

        Its host keeps running and closes the dead process's connections at once, so
        peers notice quickly; a machine that loses power or network closes nothing.
        """
        self._check_task(task_type, task_index)
        child = self._children.get((task_type, task_index))
        if child is not None and child.running:
            child.send_signal(sig)
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
        child = self._children.get((task_type, task_index))
        return child is not None and child.running

    def pid(self, task_type: str, task_index: int) -> int | None:
        """The process id of one task while it runs (None when it is down)."""
        child = self._children.get((task_type, task_index))
        return child.pid if child is not None and child.running else None

    def pids(self) -> list[int]:
        """Process ids of the running tasks."""
        return [c.pid for c in self._children.values() if c.running]

    def close(self) -> None:
        """Stop every task: SIGTERM, then SIGKILL for any that lingers. Safe to call twice."""
        self._stop_coordinators()
        stop(self._children.values())
        for child in self._children.values():
            child.close()  # failures already quoted their logs
        _LIVE.discard(self)

    def _stop_coordinators(self) -> None:
        """Stop the `ClusterCoordinator`s that use this cluster, while its tasks still answer.

        Once every worker is gone, TensorFlow's failure handler waits for them to come back
        while holding a lock that the coordinator's destructor needs: without this, the
        process would hang when it exits. The coordinators are unusable afterwards.
        """
        module = sys.modules.get("tensorflow.python.distribute.coordinator.cluster_coordinator")
        if module is None or not self._children:
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
        child = self._children.get((task_type, task_index))
        return "" if child is None else child.tail(lines)

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        jobs = ", ".join(f"{len(self.cluster.get(j, ()))} {j}" for j in ("worker", "ps"))
        return f"LocalCluster({jobs}, {len(self.pids())} processes running)"

    def _spawn(self, task_type: str, task_index: int) -> None:
        task = (task_type, task_index)
        if task not in self._children:
            self._children[task] = Child("task_server", env={
                "TF_CONFIG": self.tf_config(task_type, task_index),
                "PSTUTOR_VERBOSE": "1" if self.verbose else "0"})
        self._children[task].start()

    def _wait_ready(self, tasks: list[tuple[str, int]]) -> None:
        deadline = time.monotonic() + self.start_timeout
        waiting = list(tasks)
        while waiting:
            for task in list(waiting):
                child = self._children[task]
                if child.returncode is not None:
                    raise ClusterStartError(self._failure(task, say(
                        f"exited with code {child.returncode} while starting",
                        f"启动过程中退出，退出码 {child.returncode}")))
                if f"READY {task[0]} {task[1]}" in child.output(current=True):
                    waiting.remove(task)
            if waiting and time.monotonic() > deadline:
                raise ClusterStartError(self._failure(waiting[0], say(
                    f"did not come up within {self.start_timeout:.0f} s",
                    f"在 {self.start_timeout:.0f} 秒内没有启动")))
            time.sleep(0.1)

    def _failure(self, task: tuple[str, int], what: str) -> str:
        lines = self.log(*task) or say("(no output)", "（没有输出）")
        return f"{task[0]} {task[1]} ({self.address(*task)}) {what}:\n{lines}"

    def _all_addresses(self) -> list[str]:
        return [a for job in self.cluster.values() for a in job]

    def _check_task(self, task_type: str, task_index: int) -> None:
        if (task_type, task_index) not in self.tasks:
            raise TFConfigError(say(
                f"No task {task_type} {task_index} in this cluster; its tasks are "
                f"{', '.join(f'{t} {i}' for t, i in self.tasks)}.",
                f"集群中没有任务 {task_type} {task_index}；现有任务为 "
                f"{', '.join(f'{t} {i}' for t, i in self.tasks)}。"))


def check_memory(num_workers: object, num_ps: object) -> None:
    """Refuse, with the numbers, a cluster whose task processes this machine cannot hold."""
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in (num_workers, num_ps)):
        return  # cluster_dict names the bad count
    tasks = num_workers + num_ps
    short = memory_shortfall(tasks, TASK_MEMORY_GB)
    if short is not None:
        need, have, most = short
        raise ClusterStartError(say(
            f"{tasks} task processes need about {need:,.1f} GB of memory ({TASK_MEMORY_GB} GB each); "
            f"this machine has {have:,.1f} GB available, enough for {most}. Use fewer workers or ps.",
            f"{tasks} 个任务进程约需 {need:,.1f} GB 内存（每个 {TASK_MEMORY_GB} GB）；"
            f"本机可用 {have:,.1f} GB，最多容纳 {most} 个。请减少工作进程或参数服务器的数量。"))


def memory_shortfall(count: int, gb_each: float, base_gb: float = 0.0) -> tuple[float, float, int] | None:
    """(needed GB, available GB, how many fit) when `count` things of `gb_each` do not fit; else None.

    `base_gb` is needed once, whatever the count (the process that holds them all). The one
    test of "does this machine hold it" behind `cluster up`, `demo` and `compare`.
    """
    need, have = base_gb + count * gb_each, available_memory_gb()
    if have is None or need <= have:
        return None
    return need, have, max(0, int((have - base_gb) // gb_each))


def available_memory_gb() -> float | None:
    """Memory available to new processes: MemAvailable, capped by this cgroup's limit (Linux)."""
    try:
        with open("/proc/meminfo") as meminfo:
            kb = next(int(line.split()[1]) for line in meminfo if line.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError):
        return None
    have = kb / 1024**2
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        used = int(Path("/sys/fs/cgroup/memory.current").read_text())
        if limit != "max":
            have = min(have, (int(limit) - used) / 1024**3)
    except (OSError, ValueError):
        pass
    return max(have, 0.0)


def _port_in_use(address: str) -> bool:
    """True when something already listens on (or holds) the address's port."""
    return port_in_use(int(address.rsplit(":", 1)[1]))


_LIVE: set[LocalCluster] = set()


@atexit.register
def _close_all() -> None:
    """Normal interpreter exit, exceptions included: stop every cluster still running."""
    for cluster in list(_LIVE):
        cluster.close()
