"""The program every task of a local cluster runs: `python -m pstutor.task_server`.

It reads its role from `TF_CONFIG`, starts a `tf.distribute.Server` and serves until it is
stopped. It also ends itself when the process that started it dies, so that no server
outlives a killed notebook kernel: on Linux the kernel sends it SIGKILL then
(PR_SET_PDEATHSIG); everywhere it also checks its parent every half second.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time

PARENT_ENV = "PSTUTOR_PARENT_PID"


def _die_with_parent(parent: int) -> None:
    """Ask Linux to SIGKILL this process when its parent ends (no-op elsewhere)."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)


def main() -> None:
    """Start this task's server from TF_CONFIG and serve until stopped or orphaned."""
    parent = int(os.environ.get(PARENT_ENV, os.getppid()))
    _die_with_parent(parent)
    import pstutor

    pstutor.setup(verbose=os.environ.get("PSTUTOR_VERBOSE") == "1")
    import tensorflow as tf

    config = pstutor.parse_tf_config()
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    server_config = None
    if config.task_type == "worker":
        server_config = pstutor.worker_config(len(config.cluster["worker"]))
    tf.distribute.Server(
        resolver.cluster_spec(), job_name=config.task_type, task_index=config.task_index,
        config=server_config, protocol="grpc", start=True,
    )
    print(f"READY {config.task_type} {config.task_index}", flush=True)
    while os.getppid() == parent:
        time.sleep(0.5)


if __name__ == "__main__":
    main()
