"""A worker or ps of a cluster: `python -m pstutor.task_server` (or role `task_server` of
`pstutor.child`).

It reads its role from `TF_CONFIG`, starts a `tf.distribute.Server` and serves until it is
stopped. Stopped by Ctrl-C or SIGTERM it says so in one line and exits with code 0 at once
(no traceback, no gRPC shutdown noise). Started by pstutor, it also ends itself when the
process that started it dies (`processes.guard_parent`), so that no server outlives a killed
notebook kernel; started by a launch file's script on a real machine, it does not.
"""

from __future__ import annotations

import os
import signal
import sys
import threading


def serve() -> int:
    """Start this task's server from TF_CONFIG and serve until stopped or orphaned."""
    import tensorflow as tf

    import pstutor
    from pstutor.language import say

    config = pstutor.parse_tf_config()
    task = f"{config.task_type} {config.task_index}"

    def stopped(signum: int, frame: object) -> None:
        print(say(f"{task} stopped.", f"{task} 已停止。"), flush=True)
        os._exit(0)  # at once: a clean gRPC shutdown would only print errors about the peers

    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:  # ignored under a pstutor parent
        signal.signal(signal.SIGINT, stopped)
    signal.signal(signal.SIGTERM, stopped)
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    server_config = None
    if config.task_type == "worker":
        server_config = pstutor.worker_config(len(config.cluster["worker"]))
    tf.distribute.Server(
        resolver.cluster_spec(), job_name=config.task_type, task_index=config.task_index,
        config=server_config, protocol="grpc", start=True,
    )
    print(f"READY {task}", flush=True)
    threading.Event().wait()  # serve until a signal, or until guard_parent sees the parent go
    return 0


if __name__ == "__main__":
    from pstutor.child import main

    sys.exit(main(["task_server"]))
