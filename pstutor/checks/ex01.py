"""Checks of exercise 1: the in-process cluster, a `TF_CONFIG`, computing on a worker."""

from __future__ import annotations

import json
import socket

from pstutor.checks import expect, task

WORKER_1 = "/job:worker/replica:0/task:1"


@task("01.1")
def cluster_and_strategy(resolver, strategy) -> None:
    """2 workers and 1 ps, all listening, with a ParameterServerStrategy on them."""
    import tensorflow as tf

    expect(isinstance(resolver, tf.distribute.cluster_resolver.ClusterResolver),
           ("`resolver` is a cluster resolver", "`resolver` 是一个集群解析器"), "resolver",
           ("wrap the ClusterSpec in a resolver (section 5 of lesson 1)",
            "用一个解析器把 ClusterSpec 包装起来（第 1 课第 5 节）"))
    jobs = resolver.cluster_spec().as_dict()
    expect(len(jobs.get("worker", [])) == 2,
           ("the cluster has 2 workers", "集群有 2 个工作进程"), "worker-count",
           (f"the cluster has {len(jobs.get('worker', []))} workers; count the tasks of the 'worker' job",
            f"集群中有 {len(jobs.get('worker', []))} 个工作进程；数一数 'worker' 作业里的任务"))
    expect(len(jobs.get("ps", [])) == 1,
           ("the cluster has 1 parameter server", "集群有 1 个参数服务器"), "ps-count",
           ("count the tasks of the 'ps' job", "数一数 'ps' 作业里的任务"))
    addresses = [address for job in ("worker", "ps") for address in jobs[job]]
    expect(all(_listening(address) for address in addresses),
           ("every task's server is listening", "每个任务的服务器都在监听"), "servers",
           ("each task needs its own tf.distribute.Server, started in this process",
            "每个任务都需要在本进程中启动自己的 tf.distribute.Server"))
    expect(isinstance(strategy, tf.distribute.ParameterServerStrategy),
           ("`strategy` is a ParameterServerStrategy", "`strategy` 是 ParameterServerStrategy"), "strategy",
           ("create the strategy from the resolver", "用解析器创建策略"))
    expect(strategy._cluster_resolver is resolver,
           ("the strategy runs on this resolver's cluster", "策略运行在这个解析器描述的集群上"),
           "same-cluster",
           ("pass your `resolver` to the strategy", "把你的 `resolver` 传给策略"))


@task("01.2")
def tf_config_of_worker_1(tf_config_json) -> None:
    """The TF_CONFIG of worker 1 in the four-machine cluster of the exercise."""
    from pstutor.tf_config import TFConfigError, parse_tf_config

    expect(isinstance(tf_config_json, str),
           ("`tf_config_json` is a string", "`tf_config_json` 是字符串"), "string",
           ("TF_CONFIG is an environment variable: turn the dict into text with json.dumps",
            "TF_CONFIG 是环境变量：用 json.dumps 把字典变成文本"))
    try:
        config = parse_tf_config(tf_config_json)
        problem = ""
    except TFConfigError as err:
        config, problem = None, str(err)
    expect(config is not None, ("TensorFlow can read it", "TensorFlow 能读懂它"), "invalid",
           (problem, problem))
    cluster = json.loads(tf_config_json)["cluster"]
    expect("chief" in cluster,
           ("the cluster lists the chief", "集群描述中列出了 chief"), "chief-missing",
           (f"the cluster lists only {sorted(cluster)}: every task sees the whole cluster, the "
            "coordinator (chief) included",
            f"集群描述中只有 {sorted(cluster)}：每个任务看到的都是完整的集群，其中也包括协调器（chief）"))
    expected = {"chief": ["10.0.0.1:2222"], "worker": ["10.0.0.2:2222", "10.0.0.3:2222"],
                "ps": ["10.0.0.4:2222"]}
    expect(cluster == expected,
           ("every job lists the right addresses, in order", "每个作业的地址都正确且顺序无误"), "addresses",
           ("compare each job's list with the table: host:port, in task order",
            "对照表格检查每个作业的列表：host:port，按任务编号排列"))
    expect(config.task_type == "worker",
           ("the task type is 'worker'", "任务类型是 'worker'"), "task-type",
           ("which job does the machine 10.0.0.3 belong to?", "10.0.0.3 这台机器属于哪个作业？"))
    expect(config.task_index == 1,
           ("the task index is that of 10.0.0.3", "任务编号对应 10.0.0.3"), "task-index",
           (f"index {config.task_index} is not 10.0.0.3's position in the worker list; "
            "indices count from 0",
            f"编号 {config.task_index} 不是 10.0.0.3 在工作进程列表中的位置；编号从 0 开始"))


@task("01.3")
def computed_on_worker_1(counter, doubled) -> None:
    """A variable on the ps, read by an operation placed on worker 1."""
    expect("/job:ps/" in counter.device,
           ("`counter` lives on the parameter server", "`counter` 存放在参数服务器上"), "on-ps",
           ("variables go to the parameter servers only when created inside strategy.scope()",
            "只有在 strategy.scope() 内创建的变量才会被放到参数服务器上"))
    expect(doubled.device.startswith(WORKER_1),
           ("`doubled` was computed on worker 1", "`doubled` 是在 1 号工作进程上计算的"), "device",
           (f"it was computed on {doubled.device or 'this process'}; place the operation with tf.device",
            f"它是在 {doubled.device or '当前进程'} 上计算的；用 tf.device 指定运算的位置"))
    expect(int(doubled) == 2 * int(counter.numpy()),
           ("its value is twice the counter", "它的值是计数器的两倍"), "value",
           ("multiply the variable by 2", "把变量乘以 2"))


def _listening(address: str) -> bool:
    host, port = address.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=1):
            return True
    except OSError:
        return False
