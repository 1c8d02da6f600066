"""Checks of exercise 9: global batch and learning-rate scaling, saving on the chief, choosing a strategy."""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

from pstutor.checks import expect, task

NUM_EXAMPLES = 256  # the exercise's data: toy_classification(num_examples=256, ...)
PER_REPLICA_BATCH = 16
BASE_LEARNING_RATE = 0.05
NAMES = ("none", "mirrored", "mwms", "tpu", "ps")
# situation -> (right strategy, hint id, hint): the decision guide of lesson 9, section 9.
SITUATIONS = {
    "laptop_experiment": ("none", "one-device", (
        "with one device there is nothing to spread the work over: a strategy only adds cost per step",
        "只有一个设备时，没有什么可以分摊的：策略只会给每一步增加开销")),
    "one_machine_4_gpus": ("mirrored", "one-machine", (
        "all the GPUs sit in one machine: one process can keep a replica on each, in sync",
        "所有 GPU 都在同一台机器上：一个进程就能在每块 GPU 上各放一个副本，并保持同步")),
    "gpu_machines_alike": ("mwms", "many-machines", (
        "several reliable, identical machines: synchronous all-reduce scales well across machines",
        "多台可靠且配置相同的机器：跨机器的同步 all-reduce 扩展得很好")),
    "colab_tpu": ("tpu", "tpu", (
        "TPUs are reached through a strategy of their own", "TPU 只能通过它专属的策略来使用")),
    "preemptible_workers": ("ps", "preemptible", (
        "in synchronous training every step waits for the slowest worker, and a lost worker stalls "
        "everyone; which strategy lets workers run at their own pace?",
        "同步训练中，每一步都要等最慢的工作进程，丢掉一个工作进程还会让所有进程停下来；"
        "哪种策略让工作进程各按自己的节奏前进？")),
    "huge_embeddings": ("ps", "too-large", (
        "variables that fit on no single machine must be split over several machines that hold them",
        "任何一台机器都放不下的变量，必须切分到若干台专门存放变量的机器上")),
}
HERE = "this_computer"


@task("09.1")
def global_batch_and_rate(strategy, global_batch_size, learning_rate, dataset, model, devices) -> None:
    """A MirroredStrategy, the global batch and scaled rate, a dataset batched by it, one epoch trained."""
    import tensorflow as tf

    expect(isinstance(strategy, tf.distribute.MirroredStrategy),
           ("`strategy` is a MirroredStrategy", "`strategy` 是 MirroredStrategy"), "strategy",
           ("create a tf.distribute.MirroredStrategy", "创建一个 tf.distribute.MirroredStrategy"),
           (f"`strategy` is a {type(strategy).__name__}", f"`strategy` 是 {type(strategy).__name__}"))
    replicas = strategy.num_replicas_in_sync
    expect(replicas == len(devices),
           ("it has one replica per device", "每个设备上各有一个副本"), "devices",
           ("give it the devices of the first cell", "把第一个单元格得到的设备交给它"),
           (f"it has {replicas} replica(s) for {len(devices)} devices",
            f"它有 {replicas} 个副本，而设备有 {len(devices)} 个"))
    expect(global_batch_size == PER_REPLICA_BATCH * replicas,
           ("the global batch holds one batch per replica", "全局批次包含每个副本各一个批次"), "global-batch",
           ("the strategy splits the batch you give it between the replicas: how many examples must it "
            "hold so that each replica still gets PER_REPLICA_BATCH?",
            "策略会把你给的批次分给各个副本：批次里要有多少样本，每个副本才能分到 PER_REPLICA_BATCH 个？"),
           (f"`global_batch_size` is {global_batch_size}: each of the {replicas} replicas would get "
            f"{global_batch_size / replicas:g} examples, not {PER_REPLICA_BATCH}",
            f"`global_batch_size` 是 {global_batch_size}：{replicas} 个副本每个会分到 "
            f"{global_batch_size / replicas:g} 个样本，而不是 {PER_REPLICA_BATCH} 个"))
    expect(math.isclose(float(learning_rate), BASE_LEARNING_RATE * replicas, rel_tol=1e-6),
           ("the learning rate is scaled with the replicas", "学习率随副本数放大"), "lr-scaled",
           ("with N replicas a pass over the data takes N times fewer steps; with the same rate, plain "
            "SGD moves the weights N times less per pass",
            "有 N 个副本时，遍历一遍数据的步数只有原来的 1/N；学习率不变的话，每遍历一遍数据，"
            "SGD 让权重移动的距离也只有原来的 1/N"),
           (f"`learning_rate` is {float(learning_rate):g} for {replicas} replica(s), base rate "
            f"{BASE_LEARNING_RATE:g}",
            f"{replicas} 个副本时 `learning_rate` 是 {float(learning_rate):g}，"
            f"基础学习率是 {BASE_LEARNING_RATE:g}"))
    expect(isinstance(dataset, tf.data.Dataset),
           ("`dataset` is a tf.data.Dataset", "`dataset` 是 tf.data.Dataset"), "dataset",
           ("build it with tf.data.Dataset.from_tensor_slices((x, y)); fit distributes it for you",
            "用 tf.data.Dataset.from_tensor_slices((x, y)) 构建它；fit 会替你把它分发给各副本"),
           (f"`dataset` is a {type(dataset).__name__}", f"`dataset` 是 {type(dataset).__name__}"))
    features, _ = next(iter(dataset))
    expect(features.shape[0] == global_batch_size,
           ("each element of the dataset is one global batch", "数据集的每个元素都是一个全局批次"),
           "dataset-batch",
           ("batch the dataset by the global batch size", "应当按全局批次大小分批"),
           (f"its first batch has {features.shape[0]} examples, the global batch {global_batch_size}",
            f"它的第一个批次有 {features.shape[0]} 个样本，全局批次是 {global_batch_size} 个"))
    mirrored = isinstance(model, tf.keras.Model) and model.trainable_variables and all(
        strategy.extended.variable_created_in_scope(v) for v in model.trainable_variables)
    expect(mirrored,
           ("the model's variables are mirrored by the strategy", "模型的变量由该策略镜像到各副本上"),
           "scope",
           ("variables belong to a strategy only when they are created inside its scope()",
            "只有在策略的 scope() 内创建的变量才归这个策略管理"),
           ("the model's variables were created outside the strategy's scope()",
            "模型的变量是在策略的 scope() 之外创建的"))
    rate = float(tf.keras.backend.get_value(model.optimizer.learning_rate))
    expect(math.isclose(rate, float(learning_rate), rel_tol=1e-6),
           ("the model trains with your learning rate", "模型使用你算出的学习率训练"), "optimizer-rate",
           ("pass `learning_rate` to build_model", "把 `learning_rate` 传给 build_model"),
           (f"its optimizer uses {rate:g}, `learning_rate` is {float(learning_rate):g}",
            f"它的优化器用的是 {rate:g}，`learning_rate` 是 {float(learning_rate):g}"))
    steps = int(model.optimizer.iterations.numpy())
    expect(steps == math.ceil(NUM_EXAMPLES / global_batch_size),
           ("it trained one epoch: one step per global batch", "它训练了一个周期：每个全局批次一步"), "fit",
           ("train once with fit(dataset, epochs=1)", "用 fit(dataset, epochs=1) 训练一次"),
           (f"the optimizer made {steps} step(s), one epoch is {math.ceil(NUM_EXAMPLES / global_batch_size)}",
            f"优化器走了 {steps} 步，一个周期是 {math.ceil(NUM_EXAMPLES / global_batch_size)} 步"))


@task("09.2")
def chief_saves(is_chief, save_path) -> None:
    """The chief rule on clusters with and without a chief job, and a separate save folder per task."""
    with_chief = {"chief": ["10.0.0.1:2222"], "worker": ["10.0.0.2:2222", "10.0.0.3:2222"]}
    without_chief = {"worker": ["10.0.0.1:2222", "10.0.0.2:2222", "10.0.0.3:2222"]}
    expect(callable(is_chief) and callable(save_path),
           ("`is_chief` and `save_path` are functions", "`is_chief` 和 `save_path` 都是函数"), "functions",
           ("define both with def", "用 def 定义这两个函数"),
           (f"`is_chief` is a {type(is_chief).__name__}, `save_path` a {type(save_path).__name__}",
            f"`is_chief` 是 {type(is_chief).__name__}，`save_path` 是 {type(save_path).__name__}"))
    expect(bool(is_chief(_resolver(with_chief, "chief", 0))),
           ("the task of the chief job is the chief", "chief 作业的任务就是 chief"), "chief",
           ("read the task type from resolver.task_type", "从 resolver.task_type 读取任务类型"),
           ("`is_chief` says chief 0 of a cluster with a chief job is not the chief",
            "`is_chief` 说有 chief 作业的集群中的 chief 0 不是 chief"))
    expect(not any(is_chief(_resolver(with_chief, "worker", i)) for i in range(2)),
           ("no worker is the chief when there is a chief job", "有 chief 作业时，没有哪个工作进程是 chief"),
           "chief-job",
           ("when the cluster has a chief job, worker 0 is an ordinary worker: two chiefs would both "
            "write the model; look at resolver.cluster_spec().jobs",
            "集群中有 chief 作业时，0 号工作进程只是普通的工作进程：两个 chief 会同时写同一个模型；"
            "看看 resolver.cluster_spec().jobs"),
           ("`is_chief` says worker 0 is the chief although the cluster has a chief job",
            "集群中有 chief 作业，`is_chief` 却说 0 号工作进程是 chief"))
    expect(bool(is_chief(_resolver(without_chief, "worker", 0))),
           ("worker 0 is the chief when there is no chief job", "没有 chief 作业时，0 号工作进程就是 chief"),
           "no-chief-job",
           ("a MultiWorkerMirroredStrategy cluster often has only workers (lesson 9 did): then somebody "
            "must still save — which worker?",
            "MultiWorkerMirroredStrategy 的集群常常只有工作进程（第 9 课就是这样）："
            "这时仍然得有人保存——该由哪个工作进程来做？"),
           ("in a cluster of only workers, `is_chief` says no worker is the chief",
            "在只有工作进程的集群中，`is_chief` 说没有哪个工作进程是 chief"))
    expect(not any(is_chief(_resolver(without_chief, "worker", i)) for i in (1, 2)),
           ("the other workers are not", "其他工作进程都不是 chief"), "one-chief",
           ("exactly one task is the chief", "chief 有且只有一个"),
           (f"in a cluster of only workers, `is_chief` says workers "
            f"{[i for i in range(3) if is_chief(_resolver(without_chief, 'worker', i))]} are the chief",
            f"在只有工作进程的集群中，`is_chief` 说工作进程 "
            f"{[i for i in range(3) if is_chief(_resolver(without_chief, 'worker', i))]} 都是 chief"))
    with tempfile.TemporaryDirectory(prefix="pstutor-09-") as out_dir:  # gone after the check
        _check_save_paths(save_path, Path(out_dir))


def _check_save_paths(save_path, out: Path) -> None:
    """The chief's path is out/model; every other worker's is its own folder inside out."""
    without_chief = {"worker": ["10.0.0.1:2222", "10.0.0.2:2222", "10.0.0.3:2222"]}
    paths = [save_path(_resolver(without_chief, "worker", i), str(out)) for i in range(3)]
    expect(paths[0] is not None and Path(paths[0]) == out / "model",
           ("the chief saves to out_dir/model", "chief 保存到 out_dir/model"), "chief-path",
           ("the chief's folder is Path(out_dir) / 'model'", "chief 的文件夹应当是 Path(out_dir) / 'model'"),
           (f"the chief's folder is {_shown(paths[0], out)}", f"chief 的文件夹是 {_shown(paths[0], out)}"))
    expect(all(path is not None for path in paths[1:]),
           ("every other worker saves too", "其他每个工作进程也都保存"), "everyone-saves",
           ("saving may need every worker for a collective step: a worker that skips it can leave the "
            "chief waiting forever; give the others a folder to write to",
            "保存时可能需要所有工作进程一起完成一次集合通信：跳过保存的工作进程可能让 chief 永远等下去；"
            "给其他工作进程也安排一个可以写入的文件夹"),
           (f"`save_path` gives workers 1 and 2 {[_shown(path, out) for path in paths[1:]]}",
            f"`save_path` 给 1、2 号工作进程的是 {[_shown(path, out) for path in paths[1:]]}"))
    folders = [Path(path) for path in paths]
    model = out / "model"
    separate = len(set(folders)) == 3 and all(
        folder.is_relative_to(out) and folder != out and not folder.is_relative_to(model)
        and not model.is_relative_to(folder) for folder in folders[1:])
    shown = ", ".join(_shown(folder, out) for folder in folders[1:])
    expect(separate,
           ("each worker writes to a folder of its own in out_dir",
            "每个工作进程都写到 out_dir 里自己的文件夹"), "separate-paths",
           ("workers that share a folder, or write into the chief's, overwrite each other; make each folder "
            "unique inside out_dir, e.g. with the task's type and id",
            "共用一个文件夹、或者写进 chief 文件夹的工作进程会互相覆盖；"
            "让每个文件夹在 out_dir 里各不相同，例如用任务的类型和编号"),
           (f"the other workers write to {shown}", f"其他工作进程写到 {shown}"))


def _shown(path, out: Path) -> str:
    """A path as the student wrote it relative to out_dir (the check's temporary folder is no news)."""
    if path is None:
        return "None"
    path = Path(path)
    return f"out_dir/{path.relative_to(out)}" if path.is_relative_to(out) else str(path)


@task("09.3")
def choices_and_measurement(choices, speedup, measurements) -> None:
    """The decision guide's answers, and a speedup (and choice) consistent with the measurements."""
    expect(isinstance(choices, dict) and set(choices) == set(SITUATIONS) | {HERE},
           ("`choices` has one entry per situation", "`choices` 中每种情况各有一项"), "keys",
           ("use exactly the keys of the table, each once", "键要与表格中的完全一致，每个出现一次"),
           (f"keys missing: {_keys(choices, 'missing')}; keys not in the table: {_keys(choices, 'extra')}",
            f"缺少的键：{_keys(choices, 'missing')}；表格中没有的键：{_keys(choices, 'extra')}"))
    unknown = sorted({str(name) for name in choices.values()} - set(NAMES))
    expect(not unknown,
           ("every choice is one of the five names", "每个选择都是五个名称之一"), "names",
           (f"choose from {list(NAMES)}", f"请从 {list(NAMES)} 中选择"),
           (f"unknown name(s) {unknown}", f"未知的名称 {unknown}"))
    for situation, (right, hint_id, hint) in SITUATIONS.items():
        expect(choices[situation] == right,
               (f"{situation}: the right strategy", f"{situation}：策略选对了"), hint_id, hint,
               (f"{situation}: you chose {choices[situation]!r}",
                f"{situation}：你选的是 {choices[situation]!r}"))
    by_name = {record["strategy"]: record for record in measurements}
    mirrored, none = by_name["mirrored"], by_name["none"]
    expected = mirrored["examples_per_s"] / none["examples_per_s"]
    value = float(speedup)
    if math.isclose(value, 1 / expected, rel_tol=1e-6):
        hint_id, hint = "ratio-direction", (
            "turned around: 'how many times faster is mirrored' puts mirrored's speed on top",
            "方向反了：“mirrored 快了多少倍”应当把 mirrored 的速度放在分子上")
    elif math.isclose(value, mirrored["steps_per_s"] / none["steps_per_s"], rel_tol=1e-6):
        hint_id, hint = "per-example", (
            "a mirrored step trains a global batch, larger than a step without strategy: compare examples "
            "per second, not steps",
            "mirrored 的一步训练的是一个全局批次，比不用策略时的一步大：要比较每秒样本数，而不是每秒步数")
    else:
        hint_id, hint = "speedup", (
            "divide the two records' examples_per_s, read from `measurements`",
            "用 `measurements` 中两条记录的 examples_per_s 相除")
    expect(math.isclose(value, expected, rel_tol=1e-6),
           ("`speedup` is computed from the measurements", "`speedup` 是根据测量记录算出来的"), hint_id, hint,
           (f"`speedup` is {value:.3g}, the measurements give {expected:.3g}",
            f"`speedup` 是 {value:.3g}，测量记录得出的是 {expected:.3g}"))
    expect(choices[HERE] == ("mirrored" if value > 1 else "none"),
           ("the choice for this computer follows the measurement", "对这台电脑的选择与测量结果一致"),
           "measured",
           ("a strategy is worth it here only if it trained more examples per second than none did",
            "只有当某个策略每秒训练的样本比不用策略时多，它在这里才值得使用"),
           (f"you chose {choices[HERE]!r} for this computer, where mirrored measured {value:.3g} × none",
            f"你为这台电脑选了 {choices[HERE]!r}，而这里测得 mirrored 是 none 的 {value:.3g} 倍"))


def _keys(choices: dict, which: str) -> list[str]:
    """The keys of `choices` that the table lacks ("extra"), or the table's that it lacks ("missing")."""
    given, table = {str(key) for key in choices}, set(SITUATIONS) | {HERE}
    return sorted(given - table if which == "extra" else table - given)


def _resolver(cluster: dict, task_type: str, task_id: int):
    """A cluster resolver like the one a worker's strategy holds."""
    import tensorflow as tf

    return tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(cluster), task_type=task_type, task_id=task_id)
