"""Child processes that never outlive the process that started them.

Every helper that starts processes (the local cluster's tasks, the sidecar evaluator, the
strategy comparison) uses both halves. The parent stops its children with `stop()`. Each
child calls `guard_parent()` first, so that it also ends when its parent is killed
outright: Linux then sends it SIGKILL (PR_SET_PDEATHSIG), and a watcher thread checks the
parent every half second (for other systems, and for a parent that died before prctl took
effect).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable

PARENT_ENV = "PSTUTOR_PARENT_PID"  # set by the parent: the pid its children watch


def parent_env() -> dict[str, str]:
    """The environment entry a child needs to watch this process."""
    return {PARENT_ENV: str(os.getpid())}


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


def stop(processes: Iterable[subprocess.Popen], grace: float = 5.0) -> None:
    """SIGTERM every process still running, then SIGKILL those still there after `grace` s."""
    processes = list(processes)
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
