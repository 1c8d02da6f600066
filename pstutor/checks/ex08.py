"""Checks of exercise 8: every task's `TF_CONFIG`, a coordinator connected through
`TFConfigClusterResolver`, and a checkpoint whose files only the chief touches."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np

from pstutor.checks import expect, task

PLAN = {
    "chief": ["192.168.1.10:2222"],
    "worker": ["192.168.1.11:2222", "192.168.1.12:2222", "192.168.1.13:2222"],
    "ps": ["192.168.1.20:2222", "192.168.1.21:2222"],
}


@task("08.1")
def every_tf_config(tf_configs) -> None:
    """One valid TF_CONFIG per task of the plan, all sharing the plan's cluster."""
    from pstutor.tf_config import TFConfigError, parse_tf_config

    expect(isinstance(tf_configs, (list, tuple)),
           ("`tf_configs` is a list", "`tf_configs` 是一个列表"), "list",
           ("a launch script needs one TF_CONFIG per task: collect them in a list",
            "启动脚本需要每个任务一份 TF_CONFIG：把它们收集到一个列表里"),
           (f"`tf_configs` is a {type(tf_configs).__name__}", f"`tf_configs` 是 {type(tf_configs).__name__}"))
    expect(all(isinstance(item, str) for item in tf_configs),
           ("every item is a JSON string", "每一项都是 JSON 字符串"), "strings",
           ("TF_CONFIG is an environment variable: turn each dict into text with json.dumps",
            "TF_CONFIG 是环境变量：用 json.dumps 把每个字典变成文本"),
           (f"the items are {sorted({type(item).__name__ for item in tf_configs})}",
            f"各项是 {sorted({type(item).__name__ for item in tf_configs})}"))
    configs, problem = [], ""
    for position, item in enumerate(tf_configs):
        try:
            configs.append(parse_tf_config(item))
        except TFConfigError as err:
            problem = f"tf_configs[{position}]: {err}"
            break
    expect(not problem, ("TensorFlow can read every one", "TensorFlow 能读懂每一份"), "invalid",
           ("each TF_CONFIG holds the whole cluster and its task's type and index, valid in that cluster",
            "每份 TF_CONFIG 都包含整个集群，以及本任务在该集群中有效的类型和编号"),
           (f"TensorFlow cannot use {problem}", f"TensorFlow 用不了 {problem}"))
    clusters = {json.dumps(config.cluster, sort_keys=True) for config in configs}
    expect(len(clusters) <= 1,
           ("all of them describe one and the same cluster", "它们描述的是同一个集群"), "same-cluster",
           ("the 'cluster' part is identical on every machine; only 'task' differs",
            "'cluster' 部分在每台机器上都完全相同，只有 'task' 部分不同"),
           (f"they describe {len(clusters)} different clusters", f"它们描述了 {len(clusters)} 个不同的集群"))
    cluster = configs[0].cluster if configs else {}
    expect("chief" in cluster,
           ("the cluster lists the chief", "集群描述中列出了 chief"), "chief-missing",
           ("every task sees the whole cluster, the coordinator (chief) included",
            "每个任务看到的都是完整的集群，其中也包括协调器（chief）"),
           (f"the cluster lists only {sorted(cluster)}, no chief",
            f"集群描述中只有 {sorted(cluster)}，没有 chief"))
    job = _differing_job(cluster)
    expect(cluster == PLAN,
           ("the cluster is the plan's, address for address", "集群与规划逐个地址一致"), "addresses",
           ("use `plan` itself as the 'cluster' part", "直接把 `plan` 用作 'cluster' 部分"),
           (f"the cluster's '{job}' is {cluster.get(job)}, the plan's {PLAN.get(job)}",
            f"集群中的 '{job}' 是 {cluster.get(job)}，规划中是 {PLAN.get(job)}"))
    counts = Counter((config.task_type, config.task_index) for config in configs)
    twice = sorted(name for name, count in counts.items() if count > 1)
    expect(not twice,
           ("no task appears twice", "没有任务重复出现"), "task-twice",
           ("each task of a job has its own index, its position in the job's address list",
            "同一作业中的每个任务都有自己的编号，也就是它在该作业地址列表中的位置"),
           (f"{_names(twice)} appear(s) more than once", f"{_names(twice)} 出现了不止一次"))
    missing = sorted((job, index) for job, addresses in PLAN.items() for index in range(len(addresses))
                     if (job, index) not in counts)
    expect(not missing,
           ("every task of the plan has its TF_CONFIG", "规划中的每个任务都有自己的 TF_CONFIG"),
           "task-missing",
           ("every process of the cluster needs one, the chief too",
            "集群中的每个进程都需要一份，chief 也不例外"),
           (f"no TF_CONFIG for {_names(missing)}", f"{_names(missing)} 没有 TF_CONFIG"))


@task("08.2")
def coordinator_from_tf_config(resolver, strategy, local_cluster) -> None:
    """A TFConfigClusterResolver that reads the chief's TF_CONFIG of the running cluster."""
    import tensorflow as tf

    expect(isinstance(resolver, tf.distribute.cluster_resolver.TFConfigClusterResolver),
           ("`resolver` is a TFConfigClusterResolver", "`resolver` 是 TFConfigClusterResolver"),
           "tf-config-resolver",
           ("on a real chief the cluster comes from the TF_CONFIG environment variable, read by "
            "the resolver made for it",
            "在真实的 chief 上，集群信息来自环境变量 TF_CONFIG，应由专门读取它的解析器来读"),
           (f"`resolver` is a {type(resolver).__name__}", f"`resolver` 是 {type(resolver).__name__}"))
    found = resolver.cluster_spec().as_dict()
    expect(found == local_cluster.cluster,
           ("its cluster is the running LocalCluster", "它的集群就是正在运行的 LocalCluster"), "cluster",
           ("set os.environ['TF_CONFIG'] before you use the resolver, with local.cluster as its "
            "'cluster' part" if found else "the resolver found no cluster: is os.environ['TF_CONFIG'] set?",
            "在使用解析器之前设置 os.environ['TF_CONFIG']，并以 local.cluster 作为其中的 'cluster' 部分"
            if found else "解析器没有找到集群：os.environ['TF_CONFIG'] 设置了吗？"),
           (f"the resolver's cluster is {found or 'empty'}", f"解析器的集群是 {found or '空的'}"))
    said = _task_of_environment()
    expect((resolver.task_type, resolver.task_id) == ("chief", 0) and said == ("chief", 0),
           ("its task is chief 0", "它的任务是 chief 0"), "task-type",
           ("with another role the same program would start a server instead of coordinating; this "
            "process is the chief, and TF_CONFIG itself says so (other tools read it too)",
            "换成别的角色，同一个程序会去启动服务器，而不是担任协调器；本进程是 chief，"
            "而且 TF_CONFIG 本身就要这样写（其他工具也会读取它）"),
           (f"the TF_CONFIG says {said[0]} {said[1]}, the resolver {resolver.task_type} {resolver.task_id}",
            f"TF_CONFIG 写的是 {said[0]} {said[1]}，解析器给出的是 {resolver.task_type} {resolver.task_id}"))
    expect(isinstance(strategy, tf.distribute.ParameterServerStrategy),
           ("`strategy` is a ParameterServerStrategy", "`strategy` 是 ParameterServerStrategy"), "strategy",
           ("create the strategy from the resolver", "用解析器创建策略"),
           (f"`strategy` is a {type(strategy).__name__}", f"`strategy` 是 {type(strategy).__name__}"))
    expect(strategy._cluster_resolver is resolver,
           ("the strategy was created from this resolver", "策略是用这个解析器创建的"), "same-resolver",
           ("pass your `resolver` to the strategy", "把你的 `resolver` 传给策略"),
           ("the strategy was created from another resolver than `resolver`",
            "策略是用另一个解析器创建的，不是 `resolver`"))


@task("08.3")
def saved_by_the_chief(options, checkpoint_path, restored_weights, restored_step, weights, step,
                       checkpoint_dir) -> None:
    """Checkpoint options with the chief as I/O device, a checkpoint on disk, values restored."""
    import tensorflow as tf

    expect(isinstance(options, tf.train.CheckpointOptions),
           ("`options` is a tf.train.CheckpointOptions", "`options` 是 tf.train.CheckpointOptions"),
           "options",
           ("the saving options of a checkpoint have their own class in tf.train",
            "检查点的保存选项在 tf.train 中有专门的类"),
           (f"`options` is a {type(options).__name__}", f"`options` 是 {type(options).__name__}"))
    device = options.experimental_io_device
    expect(device,
           ("one device does all the file reading and writing", "所有文件读写都由一个设备完成"), "io-device",
           ("by default each parameter server writes its own part of the checkpoint to its own disk; "
            "name the device that should touch the files",
            "默认情况下，每个参数服务器都把自己那部分检查点写到自己的磁盘上；请指定由哪个设备负责读写文件"),
           ("`options` names no I/O device", "`options` 没有指定 I/O 设备"))
    expect(tf.DeviceSpec.from_string(device).job in ("chief", None),
           ("that device is the chief's", "这个设备属于 chief"), "io-device-chief",
           ("the files must be written where the program that saves and restores runs",
            "文件应当由运行保存和恢复代码的那台机器来写"),
           (f"the I/O device is {device}, on another machine", f"I/O 设备是 {device}，在另一台机器上"))
    expect(isinstance(checkpoint_path, str) and tf.io.gfile.exists(checkpoint_path + ".index"),
           ("the checkpoint is on disk", "检查点已经写到磁盘上"), "saved",
           ("keep the path that save() returns (the prefix with a number appended)",
            "保存 save() 返回的路径（前缀后面会加上一个编号）"),
           (f"there is no checkpoint at {checkpoint_path!r}", f"{checkpoint_path!r} 处没有检查点"))
    expect(checkpoint_path.startswith(checkpoint_dir),
           ("it is in `checkpoint_dir`", "它位于 `checkpoint_dir` 中"), "folder",
           ("save under os.path.join(checkpoint_dir, 'ckpt')",
            "以 os.path.join(checkpoint_dir, 'ckpt') 为前缀保存"),
           (f"the checkpoint is at {checkpoint_path}, outside checkpoint_dir",
            f"检查点位于 {checkpoint_path}，不在 checkpoint_dir 中"))
    reader = tf.train.load_checkpoint(checkpoint_path)
    saved = [reader.get_tensor(key) for key in reader.get_variable_to_shape_map()
             if key != "_CHECKPOINTABLE_OBJECT_GRAPH"]
    absent = [name for name, variable in (("weights", weights), ("step", step))
              if not any(_same(value, variable) for value in saved)]
    expect(not absent,
           ("it holds `weights` and `step`", "它保存了 `weights` 和 `step`"), "contents",
           ("give both variables to the tf.train.Checkpoint, by keyword",
            "把两个变量都以关键字参数交给 tf.train.Checkpoint"),
           (f"the checkpoint holds no value of {', '.join(f'`{name}`' for name in absent)}",
            f"检查点中没有 {', '.join(f'`{name}`' for name in absent)} 的值"))
    restored = (restored_weights, restored_step)
    expect(restored_weights is not weights and restored_step is not step,
           ("the values were restored into new variables", "这些值被恢复到了新的变量中"), "new-variables",
           ("after a restart the saved variables are gone: create new ones and restore into them",
            "重启之后，保存时的变量已经不存在了：创建新的变量，再把检查点恢复到它们中"),
           ("`restored_weights` and `restored_step` are the variables that were saved",
            "`restored_weights` 和 `restored_step` 就是被保存的那两个变量"))
    expect(all(isinstance(v, tf.Variable) and "/job:ps/" in v.device for v in restored),
           ("the restored variables live on the parameter server", "恢复出的变量存放在参数服务器上"), "on-ps",
           ("after a restart the model is built again inside strategy.scope()",
            "重启之后，模型同样要在 strategy.scope() 内重新构建"),
           (f"the restored values are {_where(restored_weights)} and {_where(restored_step)}",
            f"恢复出的值是 {_where(restored_weights)} 和 {_where(restored_step)}"))
    expect(_same(restored_weights.numpy(), weights) and _same(restored_step.numpy(), step),
           ("they hold the saved values", "它们的值就是保存的值"), "restored",
           ("restore the saved path into a tf.train.Checkpoint that tracks the new variables under the "
            "same names as when saving",
            "把保存的路径恢复到一个跟踪新变量的 tf.train.Checkpoint 中，名字要与保存时一致"),
           (f"restored step {restored_step.numpy()} (saved {step.numpy()}), restored weights begin "
            f"{_start(restored_weights)} (saved {_start(weights)})",
            f"恢复出的 step 是 {restored_step.numpy()}（保存的是 {step.numpy()}），恢复出的权重开头是 "
            f"{_start(restored_weights)}（保存的是 {_start(weights)}）"))


def _task_of_environment() -> tuple[str, object]:
    """(type, index) of the task that the TF_CONFIG environment variable names."""
    import os

    try:
        task = json.loads(os.environ.get("TF_CONFIG", "")).get("task", {})
        return str(task.get("type", "none")), task.get("index", "none")
    except (ValueError, AttributeError):
        return "none", "none"


def _same(value, variable) -> bool:
    """Whether a saved or restored value equals a variable's current value."""
    expected = variable.numpy()
    return np.shape(value) == np.shape(expected) and bool(np.all(value == expected))


def _where(value) -> str:
    """A restored value's kind and device, for a failure line."""
    return f"a {type(value).__name__} on {getattr(value, 'device', '') or '?'}"


def _start(variable) -> list[float]:
    """The first values of a variable, for a failure line."""
    return [round(float(x), 4) for x in np.ravel(variable.numpy())[:3]]


def _differing_job(cluster: dict) -> str:
    """The first job (by name) whose address list differs from the plan's ("" when none does)."""
    return min((job for job in set(cluster) | set(PLAN) if cluster.get(job) != PLAN.get(job)), default="")


def _names(tasks: list[tuple[str, int]]) -> str:
    return ", ".join(f"{job} {index}" for job, index in tasks)
