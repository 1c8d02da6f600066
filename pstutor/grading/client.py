"""`python -m pstutor.grading.client JOB RESULT`: one submission's notebook run against its
kernel, in a process of its own.

Whatever the kernel sends lands first in the memory of the process that holds the sockets:
ZeroMQ caps each frame (`MAX_MESSAGE_BYTES`) but not how many frames make up one message,
and it delivers a message only once all its frames are in. A kernel that sends thousands of
frames would grow the grader itself by gigabytes. So the sockets live here, in a process
whose address space is capped (`ADDRESS_SPACE`): such a flood ends this process, and with
it only this submission's run (bubblewrap stops a kernel whose parent dies); the grader
reads the exit and says so.

JOB (written by `pstutor.grading.run.execute`) holds the notebook, the sandbox folder,
the time limit and the check cells. This process prints `kernel PID` as soon as the kernel
runs, so the grader watches it from its start, then writes RESULT: the executed notebook
and what stopped it early, if anything.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
import uuid
from pathlib import Path

MAX_OUTPUT_BYTES = 2 << 20  # kept output per submission; the rest of a flood is dropped
MAX_MESSAGE_BYTES = 8 << 20  # one frame from the kernel; a larger one closes the connection
ADDRESS_SPACE = 2 << 30  # this process: Python, ZeroMQ and nbclient take about 0.6 GiB of it
KERNEL_NAME = "pstutor-grading"

# Kernel messages that steer nbclient and are not counted as output: the fields it reads.
_CONTROL = {
    "status": {"execution_state": (str,)},
    "execute_input": {"execution_count": (int,)},
    "clear_output": {"wait": (bool,)},
}


def capped_client(check_cells: set[int]):
    """A NotebookClient that keeps at most MAX_OUTPUT_BYTES of output messages of any kind, and
    beyond that only the first value of each check cell; widget messages are ignored."""
    from nbclient import NotebookClient

    class CappedClient(NotebookClient):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            self.kept, self.results = 0, set()  # bytes kept; check cells whose value was kept
            self.requests: dict[int, str] = {}  # check cell -> the id of the request that ran it

        def process_message(self, msg, cell, cell_index):
            kind, content = str(msg.get("msg_type", "")), msg.get("content", {})
            if cell_index in check_cells:  # nbclient passes on only the replies to this cell's request
                self.requests.setdefault(cell_index, str(msg["parent_header"]["msg_id"]))
            if kind.startswith("comm") or not isinstance(content, dict):
                return None
            if kind in _CONTROL:  # uncounted, so only the fields nbclient reads, of their own types
                content = {key: content[key] for key, kinds in _CONTROL[kind].items()
                           if type(content.get(key)) in kinds}
                if kind == "status" and "execution_state" not in content:
                    return None
                return super().process_message({**msg, "content": content}, cell, cell_index)
            if "execution_count" in content and type(content["execution_count"]) is not int:
                msg = {**msg, "content": {k: v for k, v in content.items() if k != "execution_count"}}
            size = len(json.dumps(msg.get("content", {}), default=str))
            self.kept += size
            if self.kept > MAX_OUTPUT_BYTES:
                own_value = (
                    kind == "execute_result"
                    and cell_index in check_cells
                    and cell_index not in self.results
                    and size < 65536
                )
                if not own_value:
                    return None
            if kind == "execute_result":
                self.results.add(cell_index)
            return super().process_message(msg, cell, cell_index)

    return CappedClient


def unguessable_requests():
    """A jupyter_client Session whose request ids no answer can foresee: jupyter_client numbers
    them, so an answer that read its own cell's id could run a check under the next one, and the
    kernel seals each verdict with the id of the request that ran its check cell."""
    from jupyter_client.session import Session

    class UnguessableRequests(Session):
        @property
        def msg_id(self) -> str:
            return uuid.uuid4().hex

    return UnguessableRequests


def run(job: dict) -> dict:
    """Execute the job's notebook; the executed notebook, what stopped it early (None if nothing) and
    the id of the request each check cell ran in."""
    import nbformat
    from jupyter_client import AsyncKernelManager
    from jupyter_client.kernelspec import KernelSpecManager
    from nbclient.exceptions import CellTimeoutError
    from traitlets import default

    work, sandboxed, timeout = Path(job["work"]), job["sandboxed"], float(job["timeout"])
    notebook = nbformat.from_dict(job["notebook"])
    deadline = time.monotonic() + timeout

    class SandboxedKernels(AsyncKernelManager):
        @default("session")
        def _unguessable_requests(self):
            return unguessable_requests()(parent=self)

        @default("kernel_spec_manager")
        def _only_the_grading_kernel(self) -> KernelSpecManager:
            return KernelSpecManager(kernel_dirs=[str(work / "kernels")])

        @default("transport")
        def _local_sockets(self) -> str:  # no network in the sandbox: Unix sockets in its folder
            return "ipc" if sandboxed else "tcp"

        @default("ip")
        def _socket_prefix(self) -> str:
            return str(work / "kernel") if sandboxed else "127.0.0.1"

        @default("connection_file")
        def _connection_file_in_the_sandbox(self) -> str:
            return str(work / "connection.json")

        async def _async_post_start_kernel(self, **kw) -> None:
            await super()._async_post_start_kernel(**kw)
            print(f"kernel {self.provisioner.pid}", flush=True)  # watched from its very start

        @default("context")
        def _bounded_messages(self):
            import zmq
            import zmq.asyncio

            context = zmq.asyncio.Context()
            context.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE_BYTES)
            return context

    client = capped_client(set(job["checks"]))(
        notebook,
        kernel_name=KERNEL_NAME,
        allow_errors=True,
        record_timing=False,
        iopub_timeout=10,
        timeout_func=lambda cell: max(1, int(deadline - time.monotonic())),
        startup_timeout=int(timeout),
        shutdown_kernel="immediate",  # the results are in; a graceful stop only waits (3 s a kernel)
        resources={"metadata": {"path": str(work)}},
        kernel_manager_class=SandboxedKernels,
    )
    stopped = None
    try:
        client.execute(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # the kernel's own noise
    except Exception as err:  # time limit, a kernel that died: the student's code did it
        # nbclient's own cell timeout is the deadline in whole seconds, so it can fire just before it
        timed_out = isinstance(err, CellTimeoutError) or time.monotonic() >= deadline
        first = str(err).splitlines()[0][:200] if str(err) else ""
        stopped = {"timed_out": timed_out, "error": type(err).__name__, "first": first}
    return {"notebook": notebook, "stopped": stopped, "requests": client.requests}


def main(argv: list[str]) -> None:
    """Cap this process's address space, run the job, write the result."""
    # the soft limit only: the kernel, started from here, lifts it again (pstutor.sandbox)
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, resource.getrlimit(resource.RLIMIT_AS)[1]))
    job, result = Path(argv[0]), Path(argv[1])
    done = run(json.loads(job.read_text(encoding="utf-8")))
    partial = result.with_suffix(".partial")
    partial.write_text(json.dumps(done), encoding="utf-8")
    partial.replace(result)  # whole or absent: a run cut short leaves no half a result


if __name__ == "__main__":
    main(sys.argv[1:])
