"""Child processes that never outlive the process that started them, and leave nothing behind.

Every helper that starts processes (the local cluster's tasks, the sidecar evaluator, the
strategy comparison) starts them through `Child`, and every child runs the one entry point
`python -m pstutor.child ROLE ...` (`pstutor.child`). A fix to process hygiene made here
reaches all of them:

- the parent stops its children with `Child.stop()` / `stop()`: SIGTERM, then SIGKILL for
  any still there after a grace period; at normal interpreter exit every child still
  running is stopped (atexit);
- each child calls `guard_parent()` first, so that it also ends when its parent is killed
  outright: Linux then sends it SIGKILL (PR_SET_PDEATHSIG), and a watcher thread checks the
  parent every half second (for other systems, and for a parent that died before prctl took
  effect);
- a child's output goes to an anonymous temporary file (no name in any folder: `O_TMPFILE`
  on Linux, else created and unlinked at once) that the parent reads back. Nothing is left
  on disk whatever ends the parent, SIGTERM and SIGKILL included.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO

PARENT_ENV = "PSTUTOR_PARENT_PID"  # set by the parent: the pid its children watch
LANG_ENV = "PSTUTOR_LANG"  # the language of the parent's messages, for the child's


def parent_env() -> dict[str, str]:
    """The environment entries a child needs: the pid to watch, the language to speak."""
    from pstutor.language import current_language

    return {PARENT_ENV: str(os.getpid()), LANG_ENV: current_language()}


def guard_parent() -> None:
    """End this process as soon as the process that started it ends."""
    parent = int(os.environ.get(PARENT_ENV, os.getppid()))
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, name="pstutor-parent-watch", daemon=True).start()


class Child:
    """One `python -m pstutor.child ROLE ARGS...` process, with its output kept for the parent.

    `env` adds to this process's environment (a value of None removes the variable). The
    child can be started again after it ended (`start()` once more): its output is appended,
    and `output(current=True)` reads the latest run only.
    """

    def __init__(self, role: str, args: Sequence[str] = (), *, env: Mapping[str, str | None] | None = None,
                 cwd: str | Path | None = None) -> None:
        """Describe the child; nothing starts before `start()`."""
        self.role = role
        self.args = [str(a) for a in args]
        self.env = dict(env or {})
        self.cwd = cwd
        self._process: subprocess.Popen | None = None
        self._log: IO[bytes] | None = None
        self._run_start = 0  # where the latest run's output begins in the log

    def start(self) -> Child:
        """Start the child (again, if it ended) and return at once."""
        if self.running:
            return self
        if self._log is None:
            self._log = tempfile.TemporaryFile(prefix="pstutor-child-")  # noqa: SIM115 (closed by close())
        self._run_start = os.fstat(self._log.fileno()).st_size
        env = dict(os.environ)
        for name, value in self.env.items():
            if value is None:
                env.pop(name, None)
            else:
                env[name] = value
        env.update(parent_env(), PYTHONUNBUFFERED="1")  # prints reach the log at once
        _LIVE.add(self)
        self._process = subprocess.Popen(
            [sys.executable, "-m", "pstutor.child", self.role, *self.args], env=env, cwd=self.cwd,
            stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        return self

    @property
    def running(self) -> bool:
        """Whether the process is alive."""
        return self._process is not None and self._process.poll() is None

    @property
    def pid(self) -> int | None:
        """The process id of the latest run (None before `start`)."""
        return None if self._process is None else self._process.pid

    @property
    def returncode(self) -> int | None:
        """The exit code of the latest run (None while it runs or before `start`)."""
        return None if self._process is None else self._process.poll()

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the child to end; its exit code (`subprocess.TimeoutExpired` after `timeout`)."""
        if self._process is None:
            raise RuntimeError("the child was never started")
        return self._process.wait(timeout=timeout)

    def send_signal(self, sig: int, wait: float = 30.0) -> None:
        """Send `sig` to a running child and wait up to `wait` s for it to end."""
        if self.running:
            self._process.send_signal(sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._process.wait(timeout=wait)

    def output(self, current: bool = False) -> str:
        """What the child printed (all runs, or with `current` the latest run only)."""
        if self._log is None:
            return ""
        start = self._run_start if current else 0
        size = os.fstat(self._log.fileno()).st_size
        return os.pread(self._log.fileno(), max(0, size - start), start).decode(errors="replace")

    def tail(self, lines: int = 20) -> str:
        """The last lines the child printed."""
        return "\n".join(self.output().splitlines()[-lines:])

    def stop(self, grace: float = 5.0) -> None:
        """SIGTERM, then SIGKILL if still running after `grace` s. The output stays readable."""
        stop([self], grace)
        _LIVE.discard(self)

    def close(self) -> None:
        """Stop the child and forget its output. Safe to call twice."""
        self.stop()
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> Child:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Child({self.role}, pid {self.pid}, {'running' if self.running else 'stopped'})"


def stop(children: Iterable[Child | subprocess.Popen], grace: float = 5.0) -> None:
    """SIGTERM every child still running, then SIGKILL those still there after `grace` s."""
    processes = [c._process if isinstance(c, Child) else c for c in children]
    processes = [p for p in processes if p is not None]
    for process in processes:
        if process.poll() is None:
            process.terminate()
    deadline = time.monotonic() + grace
    for process in processes:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=max(0.0, deadline - time.monotonic()))
        if process.poll() is None:
            process.kill()
            process.wait()


_LIVE: set[Child] = set()


@atexit.register
def _stop_all() -> None:
    """Normal interpreter exit, exceptions included: stop every child still running."""
    stop(list(_LIVE))
