"""Resource limits per submission, enforced by the Linux kernel where it can, so that a classmate's
verdict never depends on what another submission does.

Each submission runs in a cgroup of its own, created under the grader's own cgroup:

- cgroup v2 (`memory.max` and `memory.swap.max`, where shared memory and page cache count;
  `pids.max`, where threads count; `cpu.max`; `cpuset.cpus`), where the grader's cgroup
  delegates those controllers (root, or `systemd-run --user --scope -p Delegate=yes`);
- cgroup v1, where the machine mounts those controllers separately (memory, pids, cpu,
  cpuset), with the same limits under their v1 names.

Slot i of `--jobs` is also given CPUs of its own (the cgroup's cpuset, and the process's
affinity), so a submission that keeps every core busy starves only itself, and its time
limit is charged to the time it spent. Where no cgroup can be made, what needs no privilege
still holds — CPU affinity, file-size and task rlimits, and the watchdog, which polls memory
(the files in the sandbox's in-memory /dev and /tmp included), processes and threads four
times a second — and `describe()` says which limits then do not hold.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import threading
import time
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
CONTROLLERS = ("memory", "pids", "cpu", "cpuset")
TASK_LIMIT = 4096  # processes and threads of one submission: TensorFlow starts a few hundred threads
PROCESS_LIMIT = 200
_PREFIX = "pstutor-grade-"


class LimitError(RuntimeError):
    """A cgroup could not be set up for a submission."""


@dataclasses.dataclass
class Slot:
    """The limits of one running submission: its cgroup folders and its CPUs."""

    cpus: list[int]
    cgroups: list[Path]  # one per hierarchy (v1) or one (v2); empty without cgroups
    version: int

    def reached(self) -> str:
        """Which enforced limit was hit ("memory", "tasks"), from the cgroup's own event counters."""
        for folder in self.cgroups:
            memory = _read_keys(folder / ("memory.events" if self.version == 2 else "memory.oom_control"))
            if memory.get("oom_kill", 0) > 0:
                return "memory"
            if _read_keys(folder / "pids.events").get("max", 0) > 0:
                return "tasks"
        return ""

    def stop(self) -> None:
        """Kill every process left in the submission's cgroups."""
        for folder in self.cgroups:
            kill = folder / "cgroup.kill"
            if self.version == 2 and kill.exists():
                with contextlib.suppress(OSError):
                    kill.write_text("1")
            for _ in range(50):
                pids = _pids(folder)
                if not pids:
                    break
                for pid in pids:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(pid, signal.SIGKILL)
                time.sleep(0.05)


class Limits:
    """How this grader limits its submissions; `slot(i)` makes the cgroups of one of them."""

    def __init__(
        self,
        jobs: int,
        memory: int,
        *,
        use_cgroups: bool = True,
        root: Path = CGROUP_ROOT,
        self_cgroup: str = "/proc/self/cgroup",
    ) -> None:
        self.memory, self.jobs = memory, jobs
        self.cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        self.root, self.version, self.bases, self.why = root, 0, {}, ""
        self._lock = threading.Lock()
        if use_cgroups:
            self._find(Path(self_cgroup))
        self.group = f"{_PREFIX}{os.getpid()}"
        if self.version:
            try:
                self._make_group()
                for folder in self._make_slot("probe", self.cpus_of(0)):  # can one be configured?
                    _remove_cgroup(folder)
            except (OSError, LimitError) as err:
                self.close()
                self.version, self.bases = 0, {}
                self.why = (
                    f"cannot create cgroups under the grader's own ({getattr(err, 'strerror', None) or err})"
                )

    def _find(self, self_cgroup: Path) -> None:
        try:
            lines = self_cgroup.read_text().splitlines()
        except OSError:
            self.why = "this system has no cgroups"
            return
        paths = {}
        for line in lines:
            _, names, path = line.split(":", 2)
            for name in names.split(",") if names else [""]:
                paths[name] = path.lstrip("/")
        v1 = {
            name: self.root / name / paths[name]
            for name in CONTROLLERS
            if name in paths and (self.root / name).is_dir()
        }
        if len(v1) == len(CONTROLLERS):
            self.version, self.bases = 1, v1
            return
        if "" in paths:
            unified = (
                self.root / "unified"
                if (self.root / "unified" / "cgroup.controllers").exists()
                else self.root
            )
            own = unified / paths[""]
            try:
                available = set((own / "cgroup.controllers").read_text().split())
            except OSError:
                available = set()
            missing = [name for name in CONTROLLERS if name not in available]
            if not missing:
                self.version, self.bases = 2, {"": own}
                return
            self.why = f"the grader's cgroup does not delegate {', '.join(missing)}"
            return
        self.why = "the memory, pids, cpu and cpuset controllers are not all mounted"

    def _make_group(self) -> None:
        """The folder under the grader's own cgroup that holds one cgroup per submission."""
        sweep(self)
        for name, base in self.bases.items():
            group = base / self.group
            group.mkdir(exist_ok=True)
            if self.version == 1 and name == "cpuset":
                for key in ("cpuset.cpus", "cpuset.mems"):
                    (group / key).write_text((base / key).read_text().strip() or "0")
        if self.version == 2:
            own = self.bases[""]
            wanted = " ".join(f"+{name}" for name in CONTROLLERS)
            try:
                (own / "cgroup.subtree_control").write_text(wanted)
            except OSError:
                self._leave_own_cgroup(own)
                (own / "cgroup.subtree_control").write_text(wanted)
            (own / self.group / "cgroup.subtree_control").write_text(wanted)

    def _leave_own_cgroup(self, own: Path) -> None:
        """cgroup v2 lets a cgroup with processes delegate nothing: move the grader into a leaf of its own."""
        leaf = own / f"{self.group}-grader"
        leaf.mkdir(exist_ok=True)
        (leaf / "cgroup.procs").write_text(str(os.getpid()))

    def describe(self) -> tuple[str, str]:
        """What holds, in English and Chinese, for the teacher's screen."""
        if self.version:
            names = ", ".join(CONTROLLERS)
            return (
                f"limits: cgroup v{self.version} per submission ({names}): memory (shared memory "
                "included), tasks (threads included) and CPUs enforced by the kernel",
                f"限制：每份提交一个 cgroup v{self.version}（{names}）：内存（含共享内存）、任务数（含线程）"
                "和 CPU 由内核强制执行",
            )
        return (
            f"limits: no cgroups ({self.why}); each submission has CPUs of its own by affinity and "
            "file-size and task rlimits; memory (the files in its in-memory /dev and /tmp included), "
            "processes and threads are polled 4 times a second — a submission can undo its affinity, "
            "memory not mapped by any process is not counted, and a thread flood can take tasks from "
            "classmates for up to a quarter second",
            f"限制：没有 cgroup（{self.why}）；每份提交通过亲和性使用自己的 CPU，"
            "并有文件大小和任务数的 rlimit；"
            "内存（含其内存中的 /dev 和 /tmp 里的文件）、进程和线程每秒检查 4 次——"
            "提交可以解除自己的亲和性，未被任何进程映射的内存不计入，线程洪水最多可在四分之一秒内占用同学的任务额度",
        )

    def cpus_of(self, index: int) -> list[int]:
        """The CPUs of slot `index`: disjoint while there are as many CPUs as jobs."""
        if not self.cpus:
            return []
        if self.jobs <= len(self.cpus):
            return self.cpus[index % self.jobs :: self.jobs]
        return [self.cpus[index % len(self.cpus)]]

    @contextlib.contextmanager
    def slot(self, index: int, name: str):
        """The cgroups of one submission for as long as it runs; everything in them is killed after."""
        cpus = self.cpus_of(index)
        folders: list[Path] = []
        if self.version:
            with self._lock:
                folders = self._make_slot(name, cpus)
        slot = Slot(cpus, folders, self.version)
        try:
            yield slot
        finally:
            slot.stop()
            for folder in folders:
                _remove_cgroup(folder)

    def _make_slot(self, name: str, cpus: list[int]) -> list[Path]:
        folders = []
        try:
            for controller, base in self.bases.items():
                folder = base / self.group / name
                folder.mkdir()
                folders.append(folder)
                self._configure(controller, folder, cpus)
        except OSError as err:
            for folder in folders:
                _remove_cgroup(folder)
            raise LimitError(f"cgroup {name}: {err.strerror}") from err
        return folders

    def _configure(self, controller: str, folder: Path, cpus: list[int]) -> None:
        cpu_list = ",".join(str(cpu) for cpu in cpus)
        quota = 100_000 * max(1, len(cpus))
        if self.version == 2:  # the controllers are enabled in the parent: their files are there
            (folder / "memory.max").write_text(str(self.memory))
            (folder / "pids.max").write_text(str(TASK_LIMIT))
            (folder / "cpu.max").write_text(f"{quota} 100000")
            _write_if_present(folder / "memory.swap.max", 0)  # absent where the kernel has no swap accounting
            if cpu_list:
                (folder / "cpuset.cpus").write_text(cpu_list)
        elif controller == "memory":
            (folder / "memory.limit_in_bytes").write_text(str(self.memory))
            _write_if_present(folder / "memory.memsw.limit_in_bytes", self.memory)
        elif controller == "pids":
            (folder / "pids.max").write_text(str(TASK_LIMIT))
        elif controller == "cpu":
            (folder / "cpu.cfs_period_us").write_text("100000")
            (folder / "cpu.cfs_quota_us").write_text(str(quota))
        elif controller == "cpuset":
            parent = folder.parent
            (folder / "cpuset.cpus").write_text(cpu_list or (parent / "cpuset.cpus").read_text().strip())
            (folder / "cpuset.mems").write_text((parent / "cpuset.mems").read_text().strip() or "0")

    def close(self) -> None:
        """Remove the grader's group (every submission's cgroup is gone by now)."""
        for base in self.bases.values():
            group = base / self.group
            for child in sorted(group.glob("*/"), reverse=True) if group.is_dir() else []:
                Slot([], [child], self.version).stop()
                _remove_cgroup(child)
            _remove_cgroup(group)


def sweep(limits: Limits) -> None:
    """Remove the cgroups an earlier grader left behind when it was killed (its pid is gone)."""
    for base in limits.bases.values():
        for group in base.glob(f"{_PREFIX}*"):
            owner = group.name[len(_PREFIX) :].split("-")[0]
            if owner.isdigit() and int(owner) != os.getpid() and not Path(f"/proc/{owner}").exists():
                for child in sorted(group.glob("*/"), reverse=True):
                    Slot([], [child], limits.version).stop()
                    _remove_cgroup(child)
                _remove_cgroup(group)


def join(folders: list[str]) -> None:
    """Move this process into the given cgroups (the sandbox's first step, before anything else starts)."""
    for folder in folders:
        (Path(folder) / "cgroup.procs").write_text(str(os.getpid()))


def _pids(folder: Path) -> list[int]:
    try:
        return [int(line) for line in (folder / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def _remove_cgroup(folder: Path) -> None:
    for _ in range(20):
        try:
            folder.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.05)


def _write_if_present(path: Path, value: object) -> None:
    if path.exists():
        path.write_text(str(value))


def _read_keys(path: Path) -> dict[str, int]:
    found = {}
    with contextlib.suppress(OSError):
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[1].isdigit():
                found[parts[0]] = int(parts[1])
    return found


class Watchdog:
    """Stops a sandbox (and all it started) that uses too much memory, processes or threads.

    With cgroups the kernel enforces these limits and the watchdog is a second line; without
    them it is the only one, so it also counts the files in the sandbox's private, in-memory
    /dev (shared memory) and /tmp, and threads.
    """

    def __init__(
        self, pid: int, *, memory: int, processes: int = PROCESS_LIMIT, tasks: int = TASK_LIMIT, on_limit
    ) -> None:
        self.pid, self.memory, self.processes, self.tasks, self.on_limit = (
            pid,
            memory,
            processes,
            tasks,
            on_limit,
        )
        self.exceeded = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.wait(0.25):
            pids = descendants(self.pid)
            used = sum(_rss(pid) for pid in pids) + _in_memory_files(pids)
            threads = sum(_threads(pid) for pid in pids)
            exceeded = (
                "memory"
                if used > self.memory
                else "processes"
                if len(pids) > self.processes
                else "tasks"
                if threads > self.tasks
                else ""
            )
            if exceeded:
                self.exceeded = exceeded
                self.on_limit()
                return

    def stop(self) -> None:
        """Stop watching."""
        self._stop.set()
        self._thread.join()


def descendants(pid: int) -> list[int]:
    """Every process below `pid`, read from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                stat = Path(f"/proc/{entry}/stat").read_text()
                parent = int(stat.rsplit(")", 1)[1].split()[1])
                children.setdefault(parent, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _rss(pid: int) -> int:
    with contextlib.suppress(OSError, ValueError, IndexError):
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    return 0


def _threads(pid: int) -> int:
    with contextlib.suppress(OSError, ValueError, StopIteration):
        status = Path(f"/proc/{pid}/status").read_text().splitlines()
        return int(next(line for line in status if line.startswith("Threads:")).split()[1])
    return 0


def _in_memory_files(pids: list[int]) -> int:
    """Bytes held by the sandbox's own tmpfs mounts, its /dev (shared memory) and its /tmp, seen
    through its first process; a folder that is the grader's own (no walls) is not counted."""
    if not pids:
        return 0
    used = 0
    for folder in ("dev", "tmp"):
        seen = f"/proc/{pids[0]}/root/{folder}"
        with contextlib.suppress(OSError):
            if os.stat(seen).st_dev != os.stat(f"/{folder}").st_dev:
                info = os.statvfs(seen)
                used += (info.f_blocks - info.f_bfree) * info.f_frsize
    return used
