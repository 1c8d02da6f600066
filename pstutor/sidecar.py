"""Run a program of yours as a child process beside the notebook, outside the cluster: an
evaluator built on `tf.keras.utils.SidecarEvaluator` (lesson 6), the way a sidecar evaluator
runs on its own machine, or a restarted coordinator (lesson 7). This module only starts,
watches and stops it.

The child is a `processes.Child` running `python -m pstutor.child program PROGRAM [ARGS...]`:
it ties its life to the parent, calls `pstutor.setup()` so that `tf.keras` is Keras 2, then
runs PROGRAM as `__main__`. No orphans: it is stopped by `close()`, by leaving the `with`
block (also on an exception), at normal interpreter exit, and it ends itself when this
process is killed; its log is an anonymous file that never outlives this process.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

from pstutor.language import say
from pstutor.processes import Child


class SidecarError(RuntimeError):
    """The program failed or did not finish; the message quotes its log."""


class Sidecar:
    """A program in a child process that never outlives this one."""

    def __init__(self, program: str | Path, *args: str, verbose: bool = False,
                 env: Mapping[str, str] | None = None) -> None:
        """Describe the run: `python PROGRAM ARGS...` with pstutor's setup done first.

        `env` adds variables to the program's environment, as a deployment sets them: an
        evaluator's own `TF_CONFIG`, for one. Without it the program gets no `TF_CONFIG`:
        it is not a task of the training cluster.
        """
        self.program = Path(program)
        self.args = [str(a) for a in args]
        self.verbose = verbose
        self.env = dict(env or {})
        self._child: Child | None = None

    def start(self) -> Sidecar:
        """Start the program and return at once (its TensorFlow import overlaps your work)."""
        if not self.program.is_file():
            raise SidecarError(say(f"No program at {self.program}.",
                                   f"找不到程序：{self.program}。"))
        if self.running:
            return self
        if self._child is None:
            self._child = Child("program", [str(self.program), *self.args], env={
                "TF_CONFIG": None,  # the evaluator is not a task of the training cluster
                "PSTUTOR_VERBOSE": "1" if self.verbose else "0", **self.env})
        self._child.start()
        return self

    @property
    def running(self) -> bool:
        """Whether the child process is alive."""
        return self._child is not None and self._child.running

    @property
    def pid(self) -> int | None:
        """The child's process id (None before `start`)."""
        return None if self._child is None else self._child.pid

    def wait_for(self, text: str, timeout: float = 60.0) -> None:
        """Wait until the program prints `text` (say, that it is ready); else raise `SidecarError`."""
        deadline = time.monotonic() + timeout
        while text not in self._output():
            if not self.running:
                raise SidecarError(self._failure(say(f"ended before printing {text!r}",
                                                     f"还没输出 {text!r} 就结束了")))
            if time.monotonic() > deadline:
                raise SidecarError(self._failure(say(f"did not print {text!r} within {timeout:.0f} s",
                                                     f"在 {timeout:.0f} 秒内没有输出 {text!r}")))
            time.sleep(0.05)

    def wait(self, timeout: float = 60.0) -> None:
        """Wait until the program ends by itself; raise `SidecarError` with its log unless it succeeded."""
        if self._child is None:
            raise SidecarError(say("The program was never started.", "程序还没有启动。"))
        try:
            code = self._child.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.close()
            raise SidecarError(self._failure(say(f"did not finish within {timeout:.0f} s",
                                                 f"在 {timeout:.0f} 秒内没有结束"))) from None
        if code != 0:
            raise SidecarError(self._failure(say(f"exited with code {code}", f"退出码为 {code}")))

    def log(self, lines: int = 20) -> str:
        """The last lines the program printed."""
        return "\n".join(self._output().splitlines()[-lines:])

    def _output(self) -> str:
        return "" if self._child is None else self._child.output()

    def close(self) -> None:
        """Stop the program: SIGTERM, then SIGKILL if it lingers. Safe to call twice."""
        if self._child is not None:
            self._child.stop()

    def __enter__(self) -> Sidecar:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"Sidecar({self.program.name}, {state})"

    def _failure(self, what: str) -> str:
        lines = self.log() or say("(no output)", "（没有输出）")
        return say(f"The program {self.program.name} {what}. Its last lines:\n{lines}",
                   f"程序 {self.program.name} {what}。它最后输出的内容：\n{lines}")

