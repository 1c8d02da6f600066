"""Checks of exercise 7: training that survives a killed worker, and recovery from a lost
parameter server by rebuilding and restoring a checkpoint. They look at the cluster's real
processes, the RemoteValues, the optimizer's step counter and the restored variables."""

from __future__ import annotations

import numpy as np

from pstutor.checks import expect, task


def _pid(cluster, task_type: str, task_index: int) -> int | None:
    """The process id of a task while it runs (None when it is down)."""
    return cluster.pid(task_type, task_index)


@task("07.1")
def survived_a_killed_worker(cluster, pids_before, remote_values, losses, optimizer, steps_before,
                             scheduled, recorder) -> None:
    """Worker 1 killed mid-training, every step completed and fetched, the worker restarted."""
    import tensorflow as tf

    expect(_pid(cluster, "ps", 0) in pids_before,
           ("the parameter server kept running", "参数服务器一直在运行"), "killed-ps",
           ("the parameter server holds the variables: when it dies the coordinator cannot retry "
            "anything and join() fails. The task is to kill a worker",
            "参数服务器保存着变量：它一死，协调器就无法重试任何步骤，join() 也会失败。"
            "任务要求杀掉的是工作进程"),
           ("parameter server 0 is not the process it was before the task: it was killed",
            "0 号参数服务器已不是任务开始前的那个进程：它被杀掉过"))
    expect(_pid(cluster, "worker", 1) not in pids_before,
           ("worker 1 was killed", "1 号工作进程被杀掉过"), "no-kill",
           ("kill it with cluster.kill while the steps run", "在步骤执行期间用 cluster.kill 杀掉它"),
           ("worker 1 is still the process it was before the task", "1 号工作进程还是任务开始前的那个进程"))
    after = _started_after(recorder, 0, cluster.killed_at.get(("worker", 1), 0.0))
    expect(after < scheduled,
           ("worker 1 was killed after training had begun", "1 号工作进程是在训练开始之后被杀掉的"),
           "killed-early",
           ("schedule first, then kill once about a third are applied",
            "先调度，等大约三分之一已经应用之后再杀"),
           (f"worker 0 started {after} steps after the kill, all of them: the kill came before "
            "training began",
            f"杀掉之后，0 号工作进程开始了 {after} 个步骤，也就是全部：杀掉发生在训练开始之前"))
    expect(after >= 1,
           ("worker 1 was killed while steps were still running", "1 号工作进程是在步骤仍在执行时被杀掉的"),
           "killed-late",
           ("kill the worker while the steps run (watch optimizer.iterations), before join()",
            "要在步骤执行期间（观察 optimizer.iterations）、在 join() 之前杀掉工作进程"),
           ("no step started after the kill: training had already finished, so nothing had to be retried",
            "杀掉之后没有任何步骤再开始：训练已经结束，没有什么需要重试"))
    remote_value = tf.distribute.experimental.coordinator.RemoteValue
    expect(isinstance(remote_values, list) and len(remote_values) == scheduled
           and all(isinstance(value, remote_value) for value in remote_values),
           (f"`remote_values` holds the {scheduled} RemoteValues of the scheduled steps",
            f"`remote_values` 保存着所调度的 {scheduled} 个步骤的 RemoteValue"), "remote-values",
           ("keep what coordinator.schedule returns, once per step",
            "把 coordinator.schedule 的返回值保存下来，每个步骤一个"),
           (f"`remote_values` is {_kinds(remote_values)}", f"`remote_values` 是 {_kinds(remote_values)}"))
    expect(isinstance(losses, list) and len(losses) == scheduled
           and all(loss is not None for loss in losses),
           (f"`losses` holds the {scheduled} fetched losses", f"`losses` 保存着取回的 {scheduled} 个损失"),
           "fetch",
           ("after join(), read every RemoteValue with fetch()",
            "在 join() 之后，用 fetch() 读取每个 RemoteValue"),
           (f"`losses` is {_kinds(losses)}", f"`losses` 是 {_kinds(losses)}"))
    fetched = [float(value.fetch()) for value in remote_values]
    expect(np.allclose(fetched, [float(loss) for loss in losses]),
           ("the losses are what the RemoteValues delivered", "这些损失正是 RemoteValue 交回的值"), "fetch",
           ("fill `losses` from remote_values, in order", "按顺序用 remote_values 的结果填充 `losses`"),
           (f"`losses` begins {[round(float(loss), 4) for loss in losses[:3]]}, the RemoteValues "
            f"{[round(value, 4) for value in fetched[:3]]}",
            f"`losses` 开头是 {[round(float(loss), 4) for loss in losses[:3]]}，RemoteValue 开头是 "
            f"{[round(value, 4) for value in fetched[:3]]}"))
    applied = int(optimizer.iterations.numpy()) - steps_before
    expect(applied >= scheduled,
           ("every scheduled step was applied", "每个调度的步骤都已应用"), "iterations",
           ("join() waits for all of them", "join() 会等待它们全部完成"),
           (f"only {applied} of {scheduled} steps were applied",
            f"{scheduled} 个步骤中只应用了 {applied} 个"))
    expect(cluster.alive("worker", 1),
           ("worker 1 runs again", "1 号工作进程重新运行起来了"), "restart",
           ("a lost worker does not come back by itself: start it again on its address, as a cluster "
            "manager would",
            "丢失的工作进程不会自己回来：像集群管理器那样，在原来的地址上重新启动它"),
           ("worker 1 is down", "1 号工作进程没有在运行"))


def _kinds(values) -> str:
    """What a list holds, for a failure line."""
    if not isinstance(values, list):
        return type(values).__name__
    return f"{len(values)} × {sorted({type(v).__name__ for v in values})}"


def _owner(strategy, new_strategy, lang: str = "en") -> str:
    """Which strategy an object belongs to, for a failure line."""
    if strategy is new_strategy:
        return "the new strategy" if lang == "en" else "新策略"
    name = type(strategy).__name__
    return f"a {name}, not the new strategy" if lang == "en" else f" {name}，不是新策略"


def _differing(weights: list, saved: list) -> int:
    """How many weights differ from the saved ones (all of them when the counts differ)."""
    if len(weights) != len(saved):
        return max(len(weights), len(saved))
    return sum(not np.array_equal(new, old) for new, old in zip(weights, saved, strict=True))


def _started_after(recorder, worker: int, moment: float) -> int:
    """How many steps `worker` started after `moment` (time.time()), from its own timeline table."""
    tables = recorder._table._per_worker_vars._values  # worker 1's table went with its process
    rows = int(recorder._rows._per_worker_vars._values[worker].get().numpy())
    table = tables[worker].get().numpy()[: min(rows, recorder.capacity)]
    return int(np.sum(table[:, 0] > moment))


@task("07.2")
def recovered_from_a_lost_ps(cluster, old_strategy, new_strategy, new_model, new_optimizer, saved_step,
                             saved_weights) -> None:
    """Ps restarted, strategy and variables rebuilt, model and optimizer restored."""
    import tensorflow as tf

    expect(cluster.alive("ps", 0),
           ("the parameter server runs again", "参数服务器重新运行起来了"), "restart-ps",
           ("the variables need a parameter server to live on: restart its process first",
            "变量需要一个参数服务器来存放：先重新启动它的进程"),
           ("parameter server 0 is down", "0 号参数服务器没有在运行"))
    expect(isinstance(new_strategy, tf.distribute.ParameterServerStrategy)
           and new_strategy is not old_strategy,
           ("`new_strategy` is a new ParameterServerStrategy",
            "`new_strategy` 是一个新的 ParameterServerStrategy"),
           "rebuild",
           ("the old strategy is tied to the dead process: create a new one on the cluster's resolver",
            "旧策略绑定在已经死掉的进程上：用集群的解析器新建一个策略"),
           ("`new_strategy` is the old strategy" if new_strategy is old_strategy
            else f"`new_strategy` is a {type(new_strategy).__name__}",
            "`new_strategy` 就是旧策略" if new_strategy is old_strategy
            else f"`new_strategy` 是 {type(new_strategy).__name__}"))
    model_owner = getattr(new_model, "distribute_strategy", None)
    optimizer_owner = getattr(new_optimizer, "_distribution_strategy", None)
    expect(isinstance(new_model, tf.keras.Model) and new_model.distribute_strategy is new_strategy
           and all("/job:ps/" in weight.device for weight in new_model.weights)
           and getattr(new_optimizer, "_distribution_strategy", None) is new_strategy,
           ("the new model and optimizer live on the new parameter server",
            "新的模型和优化器存放在新的参数服务器上"), "scope",
           ("create the model and the optimizer inside the new strategy's scope()",
            "在新策略的 scope() 内创建模型和优化器"),
           (f"the model belongs to {_owner(model_owner, new_strategy)}, "
            f"the optimizer to {_owner(optimizer_owner, new_strategy)}",
            f"模型属于{_owner(model_owner, new_strategy, 'zh')}，"
            f"优化器属于{_owner(optimizer_owner, new_strategy, 'zh')}"))
    weights = [weight.numpy() for weight in new_model.weights]
    expect(len(weights) == len(saved_weights)
           and all(np.array_equal(new, old) for new, old in zip(weights, saved_weights, strict=True)),
           ("the model holds the saved weights", "模型中是保存时的权重"), "restore",
           ("restore the latest checkpoint of checkpoint_dir into a tf.train.Checkpoint of the new objects",
            "把 checkpoint_dir 中最新的检查点还原到一个跟踪新对象的 tf.train.Checkpoint 中"),
           (f"{_differing(weights, saved_weights)} of the model's {len(weights)} weights differ from the "
            "saved ones",
            f"模型的 {len(weights)} 个权重中有 {_differing(weights, saved_weights)} 个与保存时不同"))
    step = int(new_optimizer.iterations.numpy())
    expect(step == saved_step,
           ("the optimizer's step counter is back at the saved step", "优化器的步数计数器回到了保存时的步数"),
           "optimizer",
           ("optimizer.iterations lives in the optimizer, so the Checkpoint must track the optimizer too, "
            "under the name it was saved with",
            "optimizer.iterations 属于优化器，所以 Checkpoint 也要用保存时的名字跟踪优化器"),
           (f"the counter says {step}, the checkpoint {saved_step}",
            f"计数器是 {step}，检查点里是 {saved_step}"))
