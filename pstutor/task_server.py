"""The program every task of a local cluster runs: `python -m pstutor.task_server`.

It reads its role from `TF_CONFIG`, starts a `tf.distribute.Server` and serves until it is
stopped. It also ends itself when the process that started it dies (`processes.guard_parent`),
so that no server outlives a killed notebook kernel.
"""

from __future__ import annotations

import os
import threading

from pstutor.processes import guard_parent


def main() -> None:
    """Start this task's server from TF_CONFIG and serve until stopped or orphaned."""
    guard_parent()
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
    threading.Event().wait()  # serve until SIGTERM, or until guard_parent sees the parent go


if __name__ == "__main__":
    main()
