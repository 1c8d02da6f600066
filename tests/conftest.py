"""Shared test helpers, and the process-hygiene guard: nothing the suite starts may outlive it."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from skip_plan import pytest_collection_finish, pytest_collectreport  # noqa: F401  (hooks)

ROOT = Path(__file__).resolve().parent.parent


def descendants(pid: int) -> list[int]:
    """Every live process below `pid`, read from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":  # zombies are already dead
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def alive(pid: int) -> bool:
    """Whether process `pid` still runs (a zombie has already ended)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_gone(pids: list[int], seconds: float = 15.0) -> list[int]:
    """Wait up to `seconds` for the processes to end; the ones still running."""
    deadline = time.monotonic() + seconds
    while (left := [pid for pid in pids if alive(pid)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


_KERAS_3_SEEN: list[str] = []


@pytest.fixture(autouse=True)
def _tensorflow_stays_keras_2(request: pytest.FixtureRequest):
    """Fail the test that made this process's TensorFlow use Keras 3.

    Tests import TensorFlow in this process after `pstutor.setup()`; one that imports it
    before (directly, or through a helper that does) makes tf.keras Keras 3 for every later
    test, which then fail far from the cause. This names the cause, once.
    """
    yield
    tf = sys.modules.get("tensorflow")
    if tf is not None and not getattr(tf, "_tf_uses_legacy_keras", True) and not _KERAS_3_SEEN:
        _KERAS_3_SEEN.append(request.node.nodeid)
        pytest.fail("this test imported TensorFlow without pstutor.setup() first: tf.keras is now Keras 3 "
                    "for every later test in this process")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run if a kernel, server or child process started by a test is still alive."""
    deadline = time.monotonic() + 15
    while (left := descendants(os.getpid())) and time.monotonic() < deadline:
        time.sleep(0.2)
    if left:
        names = [Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")[:120].decode()
                 for pid in left if Path(f"/proc/{pid}").exists()]
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        print(f"\nprocesses left running by the suite (now killed): {names}", file=sys.stderr)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def clean_env() -> dict[str, str]:
    """This environment without TensorFlow's and gRPC's variables, like a fresh shell."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("TF_", "GRPC_"))}


def run_python(code: str, *args: str, env: dict | None = None, timeout: int = 180):
    """Run `code` in a fresh Python process (pstutor.setup() is once per process)."""
    full_env = clean_env()
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True,
        timeout=timeout, env=full_env, cwd=ROOT,
    )


def run_pstutor(*args: str, cwd: Path = ROOT, timeout: int = 300, env: dict[str, str] | None = None):
    """Run the `pstutor` command line in a fresh process (in `clean_env()` unless `env` is given)."""
    return subprocess.run(
        [sys.executable, "-m", "pstutor", *args], capture_output=True, text=True,
        timeout=timeout, env=clean_env() if env is None else env, cwd=cwd,
    )


def run_grader(folder: Path, table: Path, *args: str, cwd: Path = ROOT, timeout: int = 3600,
               env: dict[str, str] | None = None):
    """`pstutor grade FOLDER --out TABLE --course <this clone> ARGS...`, as a teacher runs it."""
    return run_pstutor("grade", str(folder), "--out", str(table), "--course", str(ROOT), *args,
                       cwd=cwd, timeout=timeout, env=env)


def write_kernelspec(jupyter_path: Path, name: str, python: Path | str, *,
                     env: dict[str, str] | None = None, exec_lines: tuple[str, ...] = ()) -> None:
    """A kernel named `name` that runs `python`, found by Jupyter when JUPYTER_PATH=jupyter_path."""
    import json

    argv = [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    if exec_lines:
        argv.append(f"--IPKernelApp.exec_lines={list(exec_lines)!r}")
    folder = jupyter_path / "kernels" / name
    folder.mkdir(parents=True, exist_ok=True)
    spec = {"argv": argv, "display_name": name, "language": "python", "env": env or {}}
    (folder / "kernel.json").write_text(json.dumps(spec, indent=1))


def export_tree(destination: Path) -> Path:
    """The clone's files as a fresh checkout has them (tracked or not ignored), nothing built."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=ROOT, capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        if (ROOT / name).is_file():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, destination / name)
    return destination
