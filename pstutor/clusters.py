"""Clusters for the course. In-process: every worker and ps is a `tf.distribute.Server` in
this Python process, which acts as the coordinator (the chief).

Lesson 01 writes this function out itself; later lessons call it. In-process servers
cannot be stopped, and models built on one cluster break once a second cluster is created
in the same process, so asking again for the same shape returns the cluster already running.
"""

from __future__ import annotations

import os

from pstutor.language import say
from pstutor.tf_config import TFConfigError, cluster_dict

_running: dict[str, object] = {}  # "shape" -> (num_workers, num_ps), "resolver" -> resolver


def usable_cores() -> int:
    """The number of cores this process may run on (its affinity mask where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def worker_config(num_workers: int):
    """A session config giving each worker enough inter-op threads.

    With fewer cores than workers + 1, TensorFlow's default thread pools are too small for
    several in-process workers and training can deadlock. It counts the cores this process
    may run on (`os.sched_getaffinity`, as lesson 01 does), not the host's: a container
    pinned to 2 of 64 cores has 2.

    A server builds its devices from this config, not from the eager context: GPUs this
    process hid with `tf.config.set_visible_devices([], "GPU")` (lesson 06 does on machines
    with two or more) are hidden from its in-process workers only through `device_count`.
    """
    import tensorflow as tf

    config = tf.compat.v1.ConfigProto()
    if usable_cores() < num_workers + 1:
        config.inter_op_parallelism_threads = num_workers + 1
    if not tf.config.get_visible_devices("GPU"):
        config.device_count["GPU"] = 0
    return config


def in_process_cluster(num_workers: int = 3, num_ps: int = 2):
    """Start (once) `num_workers` workers and `num_ps` ps in this process; return the resolver.

    Tasks address each other at 127.0.0.1 on free ports, so no traffic leaves the machine.
    (TensorFlow's gRPC server itself always listens on every interface: its bind address,
    0.0.0.0, is hard-coded in grpc_server_lib.cc and cannot be configured from Python.)
    Calling it again with the same shape returns the running cluster; a different shape
    starts a new one and says so.
    """
    for name, value in (("num_workers", num_workers), ("num_ps", num_ps)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise TFConfigError(
                say(
                    f"{name} must be an integer of at least 1, not {value!r}: parameter server "
                    "training needs at least one worker and one ps.",
                    f"{name} 必须是不小于 1 的整数，而不是 {value!r}：参数服务器训练至少需要"
                    "一个工作进程和一个参数服务器。",
                )
            )
    shape = (num_workers, num_ps)
    if _running.get("shape") == shape:
        return _running["resolver"]
    if _running:
        print(
            say(
                f"Starting a new in-process cluster ({num_workers} workers, {num_ps} ps). "
                "Models and strategies built on the previous cluster no longer work; "
                "restart the kernel to free its servers.",
                f"正在启动新的进程内集群（{num_workers} 个工作进程、{num_ps} 个参数服务器）。"
                "基于上一个集群创建的模型和策略将无法再使用；如需释放其服务器，请重启内核。",
            )
        )
    import tensorflow as tf  # after the checks: a refused shape imports nothing

    cluster = cluster_dict(num_workers, num_ps)
    spec = tf.train.ClusterSpec(cluster)
    for index in range(num_workers):
        tf.distribute.Server(
            spec, job_name="worker", task_index=index,
            config=worker_config(num_workers), protocol="grpc",
        )
    for index in range(num_ps):
        tf.distribute.Server(spec, job_name="ps", task_index=index, protocol="grpc")
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(spec, rpc_layer="grpc")
    _running.update(shape=shape, resolver=resolver)
    return resolver
