"""Limits the kernel enforces per submission, so a classmate's verdict never depends on what another
submission does: a cgroup each (v1 on this machine, v2 checked on a tree laid out like cgroupfs),
CPUs of its own, and — beside submissions that hog CPUs from their own sessions, flood threads,
fill shared memory, try to fill the disk, flood the sandbox folder with sockets and flood
output — a correct solution graded with --jobs 2 keeps its verdict."""

import csv
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import pytest
from attacks import CPU_HOG, DISK_FILL, FRAME_FLOOD, OUTPUT_FLOOD, SHARED_MEMORY, SOCKET_FLOOD, THREAD_FLOOD
from conftest import ROOT, clean_env, descendants, run_grader

from pstutor import build, metadata
from pstutor.grading.limits import TASK_LIMIT, Limits
from pstutor.sandbox import SCRATCH_LIMIT, bwrap, landlock_version, work_base

SOURCE = ROOT / "lessons" / "exercises" / "01_cluster.md"
V1 = (
    all(Path(f"/sys/fs/cgroup/{name}").is_dir() for name in ("memory", "pids", "cpu", "cpuset"))
    and os.geteuid() == 0
)
needs_bwrap = pytest.mark.skipif(bwrap() is None, reason="needs bubblewrap (apt-get install bubblewrap)")


def _fake_v2(tmp_path) -> tuple[Path, Path]:
    """A cgroup2 tree as the kernel lays it out, with the grader in /user.slice/grader.scope."""
    own = tmp_path / "cgroup" / "user.slice" / "grader.scope"
    own.mkdir(parents=True)
    (own / "cgroup.controllers").write_text("cpuset cpu io memory hugetlb pids rdma misc\n")
    (own / "cgroup.subtree_control").write_text("")
    self_cgroup = tmp_path / "self-cgroup"
    self_cgroup.write_text("0::/user.slice/grader.scope\n")
    return own, self_cgroup


def test_cgroup_v2_limits_are_written_under_the_graders_own_cgroup(tmp_path):
    own, self_cgroup = _fake_v2(tmp_path)
    limits = Limits(2, 3 << 30, root=tmp_path / "cgroup", self_cgroup=str(self_cgroup))
    assert limits.version == 2 and "cgroup v2" in limits.describe()[0]
    assert "+memory" in (own / "cgroup.subtree_control").read_text()
    with limits.slot(1, "student") as slot:
        folder = slot.cgroups[0]
        assert folder.parent == own / limits.group
        assert (folder / "memory.max").read_text() == str(3 << 30)
        assert (folder / "pids.max").read_text() == str(TASK_LIMIT)
        assert (folder / "cpu.max").read_text() == f"{100_000 * len(slot.cpus)} 100000"
        (folder / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
        assert slot.reached() == "memory"


def test_without_delegated_controllers_the_grader_says_what_does_not_hold(tmp_path):
    own, self_cgroup = _fake_v2(tmp_path)
    (own / "cgroup.controllers").write_text("cpu io\n")
    limits = Limits(2, 3 << 30, root=tmp_path / "cgroup", self_cgroup=str(self_cgroup))
    english, chinese = limits.describe()
    assert limits.version == 0 and "does not delegate memory, pids, cpuset" in english
    assert "affinity" in english and "can undo" in english and "亲和性" in chinese
    with limits.slot(0, "student") as slot:
        assert slot.cgroups == [] and slot.cpus == limits.cpus_of(0)


def test_each_job_gets_cpus_of_its_own():
    limits = Limits(2, 3 << 30, use_cgroups=False)
    limits.cpus = [0, 1, 2, 3]
    assert limits.cpus_of(0) == [0, 2] and limits.cpus_of(1) == [1, 3]
    limits.jobs, limits.cpus = 3, [0, 1]
    assert [limits.cpus_of(i) for i in range(3)] == [[0], [1], [0]]


@pytest.mark.skipif(not V1, reason="needs root and cgroup v1 controllers (memory, pids, cpu, cpuset)")
def test_cgroup_v1_limits_hold_a_process_and_are_removed():
    limits = Limits(2, 1 << 30)
    assert limits.version == 1, limits.why
    try:
        with limits.slot(1, "probe-test") as slot:
            memory = next(folder for folder in slot.cgroups if "/memory/" in str(folder))
            assert (memory / "memory.limit_in_bytes").read_text().strip() == str(1 << 30)
            cpuset = next(folder for folder in slot.cgroups if "/cpuset/" in str(folder))
            assert (cpuset / "cpuset.cpus").read_text().strip() == ",".join(map(str, slot.cpus)) or len(
                slot.cpus
            ) > 1
            child = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "pstutor.sandbox",
                    "--no-walls",
                    *(f"--cgroup={folder}" for folder in slot.cgroups),
                    "/tmp",
                    "--",
                    "sleep",
                    "30",
                ]
            )
            deadline = time.monotonic() + 120  # a Python start-up on a busy machine
            while child.pid not in [int(p) for p in (memory / "cgroup.procs").read_text().split()]:
                assert time.monotonic() < deadline
                time.sleep(0.1)
        assert child.wait(timeout=10) != 0  # the slot's end killed it
        assert not any(folder.exists() for folder in slot.cgroups)
    finally:
        limits.close()
    assert not list(Path("/sys/fs/cgroup/pids").glob(f"{limits.group}*"))


@needs_bwrap
@pytest.mark.skipif(landlock_version() < 1, reason="needs Landlock (Linux 5.13+)")
def test_what_a_submission_writes_stays_in_memory_and_under_its_limit(tmp_path):
    """Its /tmp, home and working folder are one tmpfs of SCRATCH_LIMIT bytes; the sandbox folder,
    on the grader's disk, takes sockets only."""
    work = Path(tempfile.mkdtemp(prefix="pstutor-disk-", dir=work_base()))
    try:
        (work / "connection.json").write_text("{}")
        report = "import shutil, socket\n"
        report += "socket.socket(socket.AF_UNIX).bind(os.path.join(targets[-1], 'k-1'))\n"
        report += "print(shutil.disk_usage('/tmp').used, sorted(os.listdir(targets[-1])))"
        done = subprocess.run([sys.executable, "-m", "pstutor.sandbox", str(work), "--", sys.executable, "-c",
                               DISK_FILL + "\n" + report, str(work / "connection.json")],
                              capture_output=True, text=True, timeout=300, cwd=work)
        assert done.returncode == 0, done.stderr[-2000:]
        used, listed = done.stdout.split(" ", 1)
        assert SCRATCH_LIMIT // 2 < int(used) <= SCRATCH_LIMIT, done.stdout  # it wrote what it could
        assert listed.strip() == "['connection.json', 'k-1']", done.stdout  # a socket, no file
        on_disk = sum(path.stat().st_size for path in work.rglob("*") if path.is_file())
        assert on_disk < 1 << 10, on_disk
    finally:
        subprocess.run(["rm", "-rf", str(work)], check=False)


def _peak_memory(pid: int) -> int:
    """The highest resident memory a process has had so far, in bytes (VmHWM)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    return next((int(line.split()[1]) << 10 for line in status.splitlines() if line.startswith("VmHWM:")), 0)


@needs_bwrap
def test_a_flood_of_frames_grows_only_its_own_notebook_client(tmp_path):
    """One message of 400 frames, each under the cap on a frame: 3.2 GB that ZeroMQ gathers
    before it delivers any. It lands in the submission's notebook client, whose address space
    is capped; the grader itself stays small and the submission scores nothing."""
    folder = tmp_path / "class"
    folder.mkdir()
    _submission(folder / "frames.ipynb", {"01.1": FRAME_FLOOD})
    table = tmp_path / "grades.csv"
    grader = subprocess.Popen(
        [sys.executable, "-m", "pstutor", "grade", str(folder), "--out", str(table), "--course", str(ROOT),
         "--timeout", "150"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env=clean_env(), cwd=ROOT)
    peak = 0
    while grader.poll() is None:
        peak = max(peak, _peak_memory(grader.pid))
        time.sleep(0.2)
    assert grader.returncode == 0, grader.stderr.read()[-3000:]
    print(f"the grader's peak memory: {peak / 2**20:.0f} MiB")
    assert 0 < peak < 512 << 20  # without the client of its own: 3.3 GiB here
    with open(table, encoding="utf-8") as handle:
        row = next(csv.DictReader(handle))
    assert row["score"] == "0" and row["01.1"] != "passed", row
    assert descendants(os.getpid()) == []


def _submission(path, answers: dict[str, str]) -> None:
    notebook = build.render(SOURCE, "en", "exercise")
    solution = build.render(SOURCE, "en", "solution")
    for cell, solved in zip(notebook.cells, solution.cells, strict=True):
        tasks = metadata.tasks_of(cell)
        if tasks and tasks[0] in answers:
            cell.source = solved.source if answers[tasks[0]] == "SOLUTION" else answers[tasks[0]]
    nbformat.write(notebook, path)


@needs_bwrap
def test_no_classmate_verdict_changes_beside_resource_attacks(tmp_path):
    folder = tmp_path / "class"
    folder.mkdir()
    for name in ("ada", "bea"):
        (folder / f"{name}.ipynb").write_bytes(build.notebook_path(SOURCE, "en", "solution").read_bytes())
    for name, attack in (
        ("cpu", CPU_HOG),
        ("shm", SHARED_MEMORY),
        ("threads", THREAD_FLOOD),
        ("disk", DISK_FILL),
        ("output", OUTPUT_FLOOD),
        ("sockets", SOCKET_FLOOD),
    ):
        _submission(folder / f"hog-{name}.ipynb", {"01.1": attack})
    table = tmp_path / "grades.csv"
    started = time.monotonic()
    result = run_grader(folder, table, "--jobs", "2", "--timeout", "150", "--memory", "2", timeout=1800)
    print(f"graded 7 submissions beside hogs in {time.monotonic() - started:.0f} s")
    assert result.returncode == 0, result.stderr[-3000:]
    with open(table, encoding="utf-8") as handle:
        rows = {row["student"]: row for row in csv.DictReader(handle)}
    for name in ("ada", "bea"):
        assert rows[name]["score"] == "3" and rows[name]["review"] == "", rows[name]
        assert float(rows[name]["seconds"]) < 150
    assert "time limit" in rows["hog-cpu"]["details"]  # charged to the submission that spent it
    assert "memory limit of 2 GiB" in rows["hog-shm"]["details"], rows["hog-shm"]
    assert rows["hog-threads"]["01.1"] == "crashed", rows["hog-threads"]
    assert rows["hog-disk"]["score"] == "0" and rows["hog-disk"]["details"] == "", rows["hog-disk"]
    assert rows["hog-output"]["score"] == "0" and len(table.read_bytes()) < 1 << 20
    # from the seal on, nothing is made or removed in the sandbox folder, on the grader's disk
    assert "sockets made: 0; connection file kept" in rows["hog-sockets"]["details"], rows["hog-sockets"]
    assert descendants(os.getpid()) == []
