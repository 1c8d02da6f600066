"""Checks of exercise 1: the in-process cluster, a `TF_CONFIG`, computing on a worker."""

from __future__ import annotations

from pstutor.checks import expect, genuine, task

WORKER_1 = "/job:worker/replica:0/task:1"


@task("01.1")
def cluster_and_strategy(resolver, strategy) -> None:
    """2 workers and 1 ps, each a TensorFlow server, with a ParameterServerStrategy on them."""
    import tensorflow as tf

    expect(genuine(resolver, tf.distribute.cluster_resolver.ClusterResolver),
           ("`resolver` is a cluster resolver", "`resolver` 是一个集群解析器"), "resolver",
           ("wrap the ClusterSpec in a resolver (section 5 of lesson 1)",
            "用一个解析器把 ClusterSpec 包装起来（第 1 课第 5 节）"),
           (f"`resolver` is a {type(resolver).__name__}, not a cluster resolver",
            f"`resolver` 是 {type(resolver).__name__}，不是集群解析器"))
    jobs = resolver.cluster_spec().as_dict()
    workers, ps = len(jobs.get("worker", [])), len(jobs.get("ps", []))
    expect(workers == 2,
           ("the cluster has 2 workers", "集群有 2 个工作进程"), "worker-count",
           ("count the tasks of the 'worker' job", "数一数 'worker' 作业里的任务"),
           (f"the cluster has {workers} workers, the task asks for 2",
            f"集群中有 {workers} 个工作进程，任务要求 2 个"))
    expect(ps == 1,
           ("the cluster has 1 parameter server", "集群有 1 个参数服务器"), "ps-count",
           ("count the tasks of the 'ps' job", "数一数 'ps' 作业里的任务"),
           (f"the cluster has {ps} parameter servers, the task asks for 1",
            f"集群中有 {ps} 个参数服务器，任务要求 1 个"))
    from tensorflow.python.distribute.parameter_server_strategy_v2 import (
        ParameterServerStrategyV2Extended as Extended,
    )

    made = genuine(strategy, tf.distribute.ParameterServerStrategy)  # and created, not just allocated:
    expect(made and genuine(strategy.__dict__.get("_extended"), Extended),
           ("`strategy` is a ParameterServerStrategy", "`strategy` 是 ParameterServerStrategy"), "strategy",
           ("create the strategy from the resolver", "用解析器创建策略"),
           (f"`strategy` is a {type(strategy).__name__}" + (" that was never set up" if made else ""),
            f"`strategy` 是 {type(strategy).__name__}" + ("，但从未真正创建" if made else "")))
    expect(strategy._cluster_resolver is resolver,
           ("the strategy runs on this resolver's cluster", "策略运行在这个解析器描述的集群上"),
           "same-cluster",
           ("pass your `resolver` to the strategy", "把你的 `resolver` 传给策略"),
           ("the strategy was created from another resolver than `resolver`",
            "策略是用另一个解析器创建的，不是 `resolver`"))
    devices = [device.name for device in tf.config.list_logical_devices()]
    silent = [f"{job} {index}" for job in ("worker", "ps") for index in range(len(jobs.get(job, [])))
              if not _runs_an_operation(tf, devices, f"/job:{job}/replica:0/task:{index}")]
    expect(not silent,
           ("every task's server runs operations", "每个任务的服务器都能执行运算"), "servers",
           ("each task needs its own tf.distribute.Server, started in this process",
            "每个任务都需要在本进程中启动自己的 tf.distribute.Server"),
           (f"no TensorFlow server runs operations for {', '.join(silent)}",
            f"没有 TensorFlow 服务器为 {', '.join(silent)} 执行运算"))


@task("01.2")
def tf_config_of_worker_1(tf_config_json) -> None:
    """The TF_CONFIG of worker 1 in the four-machine cluster of the exercise."""
    from pstutor.tf_config import TFConfigError, parse_tf_config

    expect(isinstance(tf_config_json, str),
           ("`tf_config_json` is a string", "`tf_config_json` 是字符串"), "string",
           ("TF_CONFIG is an environment variable: turn the dict into text with json.dumps",
            "TF_CONFIG 是环境变量：用 json.dumps 把字典变成文本"),
           (f"`tf_config_json` is a {type(tf_config_json).__name__}, not a string",
            f"`tf_config_json` 是 {type(tf_config_json).__name__}，不是字符串"))
    try:
        config = parse_tf_config(tf_config_json)
        problem = ""
    except TFConfigError as err:
        config, problem = None, str(err)
    expect(config is not None, ("TensorFlow can read it", "TensorFlow 能读懂它"), "invalid",
           ("TF_CONFIG holds the whole cluster and this task's type and index, valid in that cluster",
            "TF_CONFIG 包含整个集群，以及本任务在该集群中有效的类型和编号"),
           (f"TensorFlow cannot use it: {problem}", f"TensorFlow 用不了它：{problem}"))
    cluster = config.cluster  # as parse_tf_config read it, with a fresh decoder
    expect("chief" in cluster,
           ("the cluster lists the chief", "集群描述中列出了 chief"), "chief-missing",
           ("every task sees the whole cluster, the coordinator (chief) included",
            "每个任务看到的都是完整的集群，其中也包括协调器（chief）"),
           (f"the cluster lists only {sorted(cluster)}, no chief",
            f"集群描述中只有 {sorted(cluster)}，没有 chief"))
    expected = {"chief": ["10.0.0.1:2222"], "worker": ["10.0.0.2:2222", "10.0.0.3:2222"],
                "ps": ["10.0.0.4:2222"]}
    expect(cluster == expected,
           ("every job lists the right addresses, in order", "每个作业的地址都正确且顺序无误"), "addresses",
           ("compare each job's list with the table: host:port, in task order",
            "对照表格检查每个作业的列表：host:port，按任务编号排列"),
           (f"the cluster is {cluster}", f"集群描述是 {cluster}"))
    expect(config.task_type == "worker",
           ("the task type is 'worker'", "任务类型是 'worker'"), "task-type",
           ("which job does the machine 10.0.0.3 belong to?", "10.0.0.3 这台机器属于哪个作业？"),
           (f"the task type is {config.task_type!r}", f"任务类型是 {config.task_type!r}"))
    expect(config.task_index == 1,
           ("the task index is that of 10.0.0.3", "任务编号对应 10.0.0.3"), "task-index",
           ("the index is the machine's position in its job's list, counted from 0",
            "编号是机器在它所属作业列表中的位置，从 0 开始"),
           (f"the task index is {config.task_index}, which is "
            f"{cluster['worker'][config.task_index] if config.task_index < 2 else 'no worker'}",
            f"任务编号是 {config.task_index}，对应的是 "
            f"{cluster['worker'][config.task_index] if config.task_index < 2 else '不存在的工作进程'}"))


@task("01.3")
def computed_on_worker_1(counter, doubled) -> None:
    """A variable on the ps, read by an operation placed on worker 1."""
    import tensorflow as tf

    expect(genuine(counter, tf.Variable),
           ("`counter` is a tf.Variable", "`counter` 是 tf.Variable"), "variable",
           ("create it with tf.Variable(5) under strategy.scope()",
            "在 strategy.scope() 下用 tf.Variable(5) 创建它"),
           (f"`counter` is a {type(counter).__name__}", f"`counter` 是 {type(counter).__name__}"))
    expect(type(doubled) is type(tf.constant(0)),  # TensorFlow's own eager tensor, not a look-alike subclass
           ("`doubled` is a tensor", "`doubled` 是张量"), "tensor",
           ("compute it from the variable with TensorFlow: counter * 2",
            "用 TensorFlow 由变量算出它：counter * 2"),
           (f"`doubled` is a {type(doubled).__name__}", f"`doubled` 是 {type(doubled).__name__}"))
    expect("/job:ps/" in counter.device,
           ("`counter` lives on the parameter server", "`counter` 存放在参数服务器上"), "on-ps",
           ("variables go to the parameter servers only when created inside strategy.scope()",
            "只有在 strategy.scope() 内创建的变量才会被放到参数服务器上"),
           (f"`counter` lives on {counter.device or 'this process'}",
            f"`counter` 存放在 {counter.device or '当前进程'} 上"))
    expect(doubled.device.startswith(WORKER_1),
           ("`doubled` was computed on worker 1", "`doubled` 是在 1 号工作进程上计算的"), "device",
           ("an operation runs where tf.device places it; name worker 1's device",
            "运算在 tf.device 指定的位置上执行；写出 1 号工作进程的设备名"),
           (f"`doubled` was computed on {doubled.device or 'this process'}",
            f"`doubled` 是在 {doubled.device or '当前进程'} 上计算的"))
    expect(int(doubled) == 2 * int(counter.numpy()),
           ("its value is twice the counter", "它的值是计数器的两倍"), "value",
           ("multiply the variable by 2", "把变量乘以 2"),
           (f"`doubled` is {int(doubled)}, the counter {int(counter.numpy())}",
            f"`doubled` 是 {int(doubled)}，计数器是 {int(counter.numpy())}"))


def _runs_an_operation(tf, devices: list[str], task_device: str) -> bool:
    """Whether this process reaches a TensorFlow server for `task_device` (among the logical
    `devices`) and an operation placed there runs there (any program can listen on a port; only a
    connected server runs operations)."""
    if not any(name.startswith(task_device + "/") for name in devices):
        return False
    try:
        with tf.device(task_device):
            result = tf.constant(1) + 1
        return result.device.startswith(task_device + "/") and int(result) == 2
    except (tf.errors.OpError, ValueError, RuntimeError):
        return False
