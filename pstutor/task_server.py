"""A worker or ps of a cluster: `python -m pstutor.task_server` (or role `task_server` of
`pstutor.child`).

It reads its role from `TF_CONFIG`, starts a `tf.distribute.Server` and serves until it is
stopped. Stopped by Ctrl-C or SIGTERM it says so in one line and exits at once (no traceback,
no gRPC shutdown noise): with code 0 after Ctrl-C, which a person at its terminal typed, and
with 143 = 128 + SIGTERM after SIGTERM, as a process the signal ended. On Kubernetes a drain,
an eviction or a preemption stops a pod with SIGTERM, and a Job with `restartPolicy:
OnFailure` restarts only a failed pod: exit code 0 would complete the server's Job, and no
pod would replace it. pstutor's own helpers stop their tasks with SIGTERM too and read no
exit code of a task they stopped themselves. Started by pstutor, it also ends itself when the
process that started it dies (`processes.guard_parent`), so that no server outlives a killed
notebook kernel; started by a launch file's script on a real machine, it does not.

A port that another program holds ends it with one line naming the port and the task, exit
code 1: the port is probed before TensorFlow binds it, and should the bind fail all the same
(a program that took the port in between), gRPC's own lines are kept off the screen.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import socket
import sys
import tempfile
import time


def serve() -> int:
    """Start this task's server from TF_CONFIG and serve until stopped or orphaned."""
    import tensorflow as tf

    import pstutor
    from pstutor.language import say

    config = pstutor.parse_tf_config()
    task = f"{config.task_type} {config.task_index}"

    def stopped(signum: int, frame: object) -> None:
        print(say(f"{task} stopped.", f"{task} 已停止。"), flush=True)
        # at once: a clean gRPC shutdown would only print errors about the peers
        os._exit(0 if signum == signal.SIGINT else 128 + signum)

    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:  # ignored under a pstutor parent
        signal.signal(signal.SIGINT, stopped)
    signal.signal(signal.SIGTERM, stopped)
    port = int(config.cluster[config.task_type][config.task_index].rsplit(":", 1)[1])
    busy = say(f"{task} cannot start: port {port} is already in use on this machine; stop the program "
               f"that holds it, or give {task} another port in TF_CONFIG.",
               f"{task} 无法启动：本机的端口 {port} 已被占用；请停止占用它的程序，"
               f"或在 TF_CONFIG 中给 {task} 换一个端口。")
    if port_in_use(port):
        print(busy, file=sys.stderr, flush=True)
        return 1
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    server_config = None
    if config.task_type == "worker":
        server_config = pstutor.worker_config(len(config.cluster["worker"]))
    try:
        with _native_stderr_hidden(os.environ.get("PSTUTOR_VERBOSE") != "1"):
            tf.distribute.Server(
                resolver.cluster_spec(), job_name=config.task_type, task_index=config.task_index,
                config=server_config, protocol="grpc", start=True,
            )
    except tf.errors.OpError:
        if not port_in_use(port):
            raise
        print(busy, file=sys.stderr, flush=True)
        return 1
    print(f"READY {task}", flush=True)
    # Serve until a signal, or until guard_parent sees the parent go. Not a blocking wait: the
    # kernel may hand the signal to one of TensorFlow's threads, and then Python runs the
    # handler only once the main thread runs again (seen: a SIGTERM unanswered for 60 s).
    while True:
        time.sleep(0.5)


def port_in_use(port: int) -> bool:
    """Whether a server could not listen on `port` of every interface, as TensorFlow's does.

    Tried as TensorFlow's gRPC does: IPv6 and IPv4 at once, or IPv4 alone where this machine
    (a container, a network namespace) has no IPv6. Only "address in use" means in use.
    """
    for family, address in ((socket.AF_INET6, "::"), (socket.AF_INET, "0.0.0.0")):
        try:
            probe = socket.socket(family, socket.SOCK_STREAM)
        except OSError:  # no such family here
            continue
        with probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gRPC: TIME_WAIT is no owner
            if family == socket.AF_INET6:
                probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            try:
                probe.bind((address, port))
            except OSError as err:
                if err.errno == errno.EADDRINUSE:
                    return True
                continue  # e.g. IPv6 switched off: the IPv4 probe decides
            return False
    return False


@contextlib.contextmanager
def _native_stderr_hidden(hide: bool):
    """While inside, send what native code writes to file descriptor 2 to a temporary file."""
    if not hide:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


if __name__ == "__main__":
    from pstutor.child import main

    sys.exit(main(["task_server"]))
