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
            "任务要求杀掉的是工作进程"))
    expect(_pid(cluster, "worker", 1) not in pids_before,
           ("worker 1 was killed", "1 号工作进程被杀掉过"), "no-kill",
           ("worker 1 is still the process it was before the task: kill it with cluster.kill while the "
            "steps run",
            "1 号工作进程还是任务开始前的那个进程：在步骤执行期间用 cluster.kill 杀掉它"))
    after = _started_after(recorder, 0, cluster.killed_at.get(("worker", 1), 0.0))
    expect(after < scheduled,
           ("worker 1 was killed after training had begun", "1 号工作进程是在训练开始之后被杀掉的"),
           "killed-early",
           (f"worker 0 ran {after} steps after the kill, all of them: the kill came before the scheduled "
            "steps started; schedule first, then kill once about a third are applied",
            f"杀掉之后，0 号工作进程执行了 {after} 个步骤，也就是全部：杀掉发生在调度的步骤开始之前；"
            "先调度，等大约三分之一已经应用之后再杀"))
    expect(after >= 1,
           ("worker 1 was killed while steps were still running", "1 号工作进程是在步骤仍在执行时被杀掉的"),
           "killed-late",
           ("no step ran after the kill: the training had already finished, so nothing had to be retried; "
            "kill the worker while the steps run (watch optimizer.iterations), before join()",
            "杀掉之后没有任何步骤再执行：训练已经结束，没有什么需要重试；"
            "要在步骤执行期间（观察 optimizer.iterations）、在 join() 之前杀掉工作进程"))
    remote_value = tf.distribute.experimental.coordinator.RemoteValue
    expect(isinstance(remote_values, list) and len(remote_values) == scheduled
           and all(isinstance(value, remote_value) for value in remote_values),
           (f"`remote_values` holds the {scheduled} RemoteValues of the scheduled steps",
            f"`remote_values` 保存着所调度的 {scheduled} 个步骤的 RemoteValue"), "remote-values",
           ("keep what coordinator.schedule returns, once per step",
            "把 coordinator.schedule 的返回值保存下来，每个步骤一个"))
    expect(isinstance(losses, list) and len(losses) == scheduled
           and all(loss is not None for loss in losses),
           (f"`losses` holds the {scheduled} fetched losses", f"`losses` 保存着取回的 {scheduled} 个损失"),
           "fetch",
           ("after join(), read every RemoteValue with fetch()",
            "在 join() 之后，用 fetch() 读取每个 RemoteValue"))
    fetched = [float(value.fetch()) for value in remote_values]
    expect(np.allclose(fetched, [float(loss) for loss in losses]),
           ("the losses are what the RemoteValues delivered", "这些损失正是 RemoteValue 交回的值"), "fetch",
           ("fill `losses` from remote_values, in order", "按顺序用 remote_values 的结果填充 `losses`"))
    applied = int(optimizer.iterations.numpy()) - steps_before
    expect(applied >= scheduled,
           ("every scheduled step was applied", "每个调度的步骤都已应用"), "iterations",
           (f"only {applied} of {scheduled} steps were applied: join() waits for all of them",
            f"{scheduled} 个步骤中只应用了 {applied} 个：join() 会等待它们全部完成"))
    expect(cluster.alive("worker", 1),
           ("worker 1 runs again", "1 号工作进程重新运行起来了"), "restart",
           ("a lost worker does not come back by itself: start it again on its address, as a cluster "
            "manager would",
            "丢失的工作进程不会自己回来：像集群管理器那样，在原来的地址上重新启动它"))


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
            "变量需要一个参数服务器来存放：先重新启动它的进程"))
    expect(isinstance(new_strategy, tf.distribute.ParameterServerStrategy)
           and new_strategy is not old_strategy,
           ("`new_strategy` is a new ParameterServerStrategy",
            "`new_strategy` 是一个新的 ParameterServerStrategy"),
           "rebuild",
           ("the old strategy is tied to the dead process: create a new one on the cluster's resolver",
            "旧策略绑定在已经死掉的进程上：用集群的解析器新建一个策略"))
    expect(isinstance(new_model, tf.keras.Model) and new_model.distribute_strategy is new_strategy
           and all("/job:ps/" in weight.device for weight in new_model.weights)
           and getattr(new_optimizer, "_distribution_strategy", None) is new_strategy,
           ("the new model and optimizer live on the new parameter server",
            "新的模型和优化器存放在新的参数服务器上"), "scope",
           ("create the model and the optimizer inside the new strategy's scope()",
            "在新策略的 scope() 内创建模型和优化器"))
    weights = [weight.numpy() for weight in new_model.weights]
    expect(len(weights) == len(saved_weights)
           and all(np.array_equal(new, old) for new, old in zip(weights, saved_weights, strict=True)),
           ("the model holds the saved weights", "模型中是保存时的权重"), "restore",
           ("restore the latest checkpoint of checkpoint_dir into a tf.train.Checkpoint of the new objects",
            "把 checkpoint_dir 中最新的检查点还原到一个跟踪新对象的 tf.train.Checkpoint 中"))
    step = int(new_optimizer.iterations.numpy())
    expect(step == saved_step,
           ("the optimizer's step counter is back at the saved step", "优化器的步数计数器回到了保存时的步数"),
           "optimizer",
           (f"the counter says {step}, the checkpoint {saved_step}: optimizer.iterations lives in the "
            "optimizer, so the Checkpoint must track the optimizer too, under the name it was saved with",
            f"计数器是 {step}，检查点里是 {saved_step}：optimizer.iterations 属于优化器，"
            "所以 Checkpoint 也要用保存时的名字跟踪优化器"))
