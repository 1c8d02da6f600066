"""Checks of exercise 3: input, model and `fit` for the strategy; callbacks and a resumed run."""

from __future__ import annotations

import os

import numpy as np

from pstutor.checks import expect, genuine, task

EPOCHS, STEPS_PER_EPOCH, FAILED_AFTER = 4, 8, 2
BATCH_SIZE, LEARNING_RATE = 32, 0.1


@task("03.1")
def fit_on_the_cluster(dataset, model, history) -> None:
    """A shuffled, repeating dataset; a model on the ps with a legacy optimizer; 2 epochs of 8 steps."""
    import tensorflow as tf

    expect(dataset.cardinality().numpy() == tf.data.INFINITE_CARDINALITY,
           ("`dataset` never ends", "`dataset` 永不结束"), "repeat",
           ("each worker reads its own copy at its own pace: a copy that ends can run dry mid-epoch",
            "每个工作进程按自己的节奏读取自己的副本：会结束的副本可能在周期中途耗尽"),
           (f"`dataset` ends after {dataset.cardinality().numpy()} batches",
            f"`dataset` 读完 {dataset.cardinality().numpy()} 个批次就结束了"))
    first = next(iter(dataset))[0].numpy()
    expect(len(first) == BATCH_SIZE,
           ("it yields batches of 32", "它产出的批次大小为 32"), "batch-size",
           ("batch the examples by the size the task gives", "请按任务给出的大小分批"),
           (f"its first batch holds {len(first)} examples, the task asks for {BATCH_SIZE}",
            f"它的第一个批次有 {len(first)} 个样本，任务要求 {BATCH_SIZE} 个"))
    shapes = [tuple(v.shape) for v in model.trainable_variables]
    layers = [layer for layer in model.layers if not genuine(layer, tf.keras.layers.InputLayer)]
    kinds = [(type(layer).__name__, getattr(layer, "units", None), _activation([layer])) for layer in layers]
    expect(shapes == [(8, 16), (16,), (16, 1), (1,)]
           and kinds == [("Dense", 16, "relu"), ("Dense", 1, "linear")]
           and all(genuine(layer, tf.keras.layers.Dense) for layer in layers),
           ("the model is Input(8) → Dense(16, relu) → Dense(1)",
            "模型是 Input(8) → Dense(16, relu) → Dense(1)"),
           "architecture",
           ("build exactly the layers the task lists: relu in the first, no activation in the last "
            "(its outputs are the logits the loss expects)",
            "严格按任务列出的层来构建：第一层用 relu，"
            "最后一层不用激活函数（它的输出就是损失函数需要的 logits）"),
           (f"its layers are {_layers(kinds)}, with weights of the shapes {shapes}",
            f"它的层是 {_layers(kinds)}，权重形状是 {shapes}"))
    devices = {getattr(v, "device", "") for v in model.variables}
    expect(devices and all("/job:ps/" in d for d in devices),
           ("the model's variables live on the parameter servers", "模型的变量存放在参数服务器上"), "scope",
           ("build and compile the model inside strategy.scope(); outside it fit trains in this "
            "process without the cluster",
            "在 strategy.scope() 内构建并编译模型；在作用域之外，fit 会绕开集群，直接在当前进程中训练"),
           (f"the model's variables live on {', '.join(sorted(devices)) or 'this process'}",
            f"模型的变量存放在 {', '.join(sorted(devices)) or '当前进程'} 上"))
    batches = _first_batch_of_each_worker(dataset, model.distribute_strategy)
    expect(len(batches) > 1 and any(not np.array_equal(batches[0], other) for other in batches[1:]),
           ("the workers' copies read different batches", "各工作进程的副本读到的批次不同"), "shuffle",
           ("without shuffle (or with a fixed seed) every worker reads the same batches",
            "不打乱（或固定了 seed）时，每个工作进程读到的批次都一样"),
           (f"each of the {len(batches)} workers read the same first batch from its copy",
            f"{len(batches)} 个工作进程从各自的副本中读到的第一个批次完全相同"))
    expect(isinstance(model.optimizer, tf.keras.optimizers.legacy.Optimizer),
           ("the optimizer is a legacy optimizer", "优化器是 legacy 优化器"), "legacy",
           ("this strategy trains only with the optimizers of tf.keras.optimizers.legacy",
            "这个策略只能使用 tf.keras.optimizers.legacy 中的优化器训练"),
           (f"{type(model.optimizer).__name__} comes from {type(model.optimizer).__module__}",
            f"{type(model.optimizer).__name__} 来自 {type(model.optimizer).__module__}"))
    rate = float(tf.keras.backend.get_value(model.optimizer.learning_rate))
    expect(isinstance(model.optimizer, tf.keras.optimizers.legacy.SGD) and np.isclose(rate, LEARNING_RATE),
           ("it is SGD with learning rate 0.1", "它是学习率为 0.1 的 SGD"), "optimizer",
           ("use the optimizer and learning rate the task names", "使用任务指定的优化器和学习率"),
           (f"found {type(model.optimizer).__name__} with learning rate {rate:g}, the task asks for "
            "SGD at 0.1",
            f"找到的是学习率为 {rate:g} 的 {type(model.optimizer).__name__}，任务要求学习率为 0.1 的 SGD"))
    loss = model.loss
    logits = isinstance(loss, tf.keras.losses.BinaryCrossentropy) and loss.get_config().get("from_logits")
    expect(logits,
           ("the loss is binary cross-entropy on logits", "损失是基于 logits 的二元交叉熵"), "loss",
           ("the last Dense layer has no activation, so its outputs are logits; use "
            "BinaryCrossentropy(from_logits=True)",
            "最后一个 Dense 层没有激活函数，它的输出是 logits；请使用 BinaryCrossentropy(from_logits=True)"),
           (f"the loss is {loss!r}", f"损失是 {loss!r}"))
    per_call = int(model._steps_per_execution.numpy())
    expect(per_call == 4,
           ("each call to a worker runs 4 steps", "每次发给工作进程的调用执行 4 步"), "steps-per-execution",
           ("which compile argument packs steps into one call?",
            "compile 的哪个参数能把多个步骤打包进一次调用？"),
           (f"each call runs {per_call} step(s), the task asks for 4",
            f"每次调用执行 {per_call} 步，任务要求 4 步"))
    expect(genuine(history, tf.keras.callbacks.History) and history.model is model,
           ("`history` is what fit returned for this model", "`history` 是 fit 为这个模型返回的结果"),
           "history",
           ("keep the value that model.fit(...) returns", "保存 model.fit(...) 的返回值"),
           (f"`history` is a {type(history).__name__}"
            + (" of another model" if genuine(history, tf.keras.callbacks.History) else ""),
            f"`history` 是一个 {type(history).__name__}"
            + ("，属于另一个模型" if genuine(history, tf.keras.callbacks.History) else "")))
    expect(history.epoch == [0, 1],
           ("fit ran 2 epochs", "fit 运行了 2 个周期"), "epochs",
           ("the epochs argument of fit says how many epochs run", "fit 的 epochs 参数决定运行多少个周期"),
           (f"the History lists epochs {history.epoch}", f"History 中记录的周期是 {history.epoch}"))
    steps = int(model.optimizer.iterations.numpy())
    expect(steps == 16,
           ("the optimizer took 2 × 8 = 16 steps", "优化器走了 2 × 8 = 16 步"), "steps",
           ("an epoch is as many steps as steps_per_epoch says", "一个周期有多少步，由 steps_per_epoch 决定"),
           (f"optimizer.iterations is {steps}, not 16", f"optimizer.iterations 是 {steps}，不是 16"))


def _activation(dense: list) -> str:
    """The name of the first Dense layer's activation ("none" without one)."""
    return getattr(getattr(dense[0], "activation", None), "__name__", "none") if dense else "none"


def _layers(kinds: list) -> str:
    """Layers as `Dense(16, relu) → Dropout`, for a failure line."""
    shown = [f"{name}({units}, {activation})" if units else name for name, units, activation in kinds]
    return " → ".join(shown) or "none"


def _first_batch_of_each_worker(dataset, strategy) -> list:
    """The first batch that each worker reads from its own copy of `dataset`, as `fit` gives it one.

    `fit` sends each worker the dataset's graph; a shuffle with a fixed seed then reads the same
    order everywhere, which two iterators in this process would not show.
    """
    import tensorflow as tf

    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    iterator = iter(coordinator.create_per_worker_dataset(dataset))

    @tf.function
    def first_features(iterator):
        return next(iterator)[0]

    # Worker.create_resource runs on that very worker, with its slice of the per-worker iterator.
    return [worker.create_resource(first_features, args=(iterator,)).fetch()
            for worker in coordinator._cluster.workers]


@task("03.2")
def resumed_run(make_callbacks, resumed_model, history, log_dir, checkpoint_dir, backup_dir) -> None:
    """The callbacks make_callbacks() returns; the checkpoints and logs they wrote; the second run
    resumed after epoch 2 and finished."""
    import tensorflow as tf

    from pstutor.pictures import read_scalars

    first, second = make_callbacks(), make_callbacks()
    shared = {id(item) for item in first} & {id(item) for item in second} if isinstance(first, list) \
        and isinstance(second, list) else {0}
    expect(isinstance(first, list) and first is not second and not shared,
           ("make_callbacks() returns a new list of new callbacks each time",
            "make_callbacks() 每次都返回一个由新回调组成的新列表"), "fresh",
           ("a restarted coordinator builds its callbacks anew; callbacks keep state from the run they "
            "served", "重启后的协调器会重新创建回调；回调会保留上一次训练留下的状态"),
           ("two calls gave back " + ("the same callbacks" if isinstance(first, list) else
                                      f"a {type(first).__name__}, not a list"),
            "两次调用返回了"
            + ("同样的回调" if isinstance(first, list) else f"一个 {type(first).__name__}，而不是列表")))
    saver = [item for item in first if genuine(item, tf.keras.callbacks.ModelCheckpoint)]
    wanted_path = os.path.normpath(os.path.join(checkpoint_dir, "weights-{epoch:02d}"))
    expect(len(saver) == 1 and saver[0].save_weights_only and saver[0].save_freq == "epoch"
           and not saver[0].save_best_only and os.path.normpath(saver[0].filepath) == wanted_path,
           ("one ModelCheckpoint saves only the weights, every epoch, to the task's path",
            "一个 ModelCheckpoint 每个周期都只把权重保存到任务指定的路径"), "checkpoints",
           ("save the weights every epoch, with ModelCheckpoint, to the path of the task",
            "用 ModelCheckpoint 每个周期都把权重保存到任务指定的路径"),
           (_saver_found(saver, wanted_path)[0], _saver_found(saver, wanted_path)[1]))
    boards = [item for item in first if genuine(item, tf.keras.callbacks.TensorBoard)]
    expect(len(boards) == 1 and os.path.normpath(boards[0].log_dir) == os.path.normpath(log_dir),
           ("one TensorBoard writes to log_dir", "一个 TensorBoard 写入 log_dir"), "tensorboard",
           ("add the TensorBoard callback with log_dir", "加上使用 log_dir 的 TensorBoard 回调"),
           (f"make_callbacks() returns {len(boards)} TensorBoard callback(s)"
            + (f" writing to {boards[0].log_dir}" if boards else ""),
            f"make_callbacks() 返回了 {len(boards)} 个 TensorBoard 回调"
            + (f"，写入 {boards[0].log_dir}" if boards else "")))
    backups = [item for item in first if genuine(item, tf.keras.callbacks.BackupAndRestore)]
    expect(len(backups) == 1 and os.path.normpath(backups[0].backup_dir) == os.path.normpath(backup_dir),
           ("one BackupAndRestore keeps its backup in backup_dir",
            "一个 BackupAndRestore 把备份保存在 backup_dir"),
           "restore",
           ("a fresh model resumes only through BackupAndRestore, with the backup_dir the first run "
            "wrote to",
            "新模型只有借助 BackupAndRestore，并使用第一次训练写入的 backup_dir，才能接着训练"),
           (f"make_callbacks() returns {len(backups)} BackupAndRestore callback(s)"
            + (f" with the folder {backups[0].backup_dir}" if backups else ""),
            f"make_callbacks() 返回了 {len(backups)} 个 BackupAndRestore 回调"
            + (f"，使用文件夹 {backups[0].backup_dir}" if backups else "")))
    saved = sorted({name.split(".")[0] for name in os.listdir(checkpoint_dir)}
                   if os.path.isdir(checkpoint_dir) else set())
    wanted = [f"weights-{epoch:02d}" for epoch in range(1, EPOCHS + 1)]
    expect(set(wanted) <= set(saved),
           ("ModelCheckpoint saved the weights of every epoch", "ModelCheckpoint 保存了每个周期的权重"),
           "checkpoints",
           ("save the weights every epoch, with ModelCheckpoint, to the path of the task",
            "用 ModelCheckpoint 每个周期都把权重保存到任务指定的路径"),
           (f"checkpoint_dir holds {saved or 'nothing'}, not {wanted}",
            f"checkpoint_dir 中有 {saved or '空'}，而不是 {wanted}"))
    logged = read_scalars(log_dir, "epoch_loss") if os.path.isdir(log_dir) else []
    expect(logged,
           ("TensorBoard wrote the loss to log_dir", "TensorBoard 把损失写到了 log_dir"), "tensorboard",
           ("add the TensorBoard callback with log_dir", "加上使用 log_dir 的 TensorBoard 回调"),
           ("log_dir holds no epoch_loss", "log_dir 中没有 epoch_loss"))
    expect(history.epoch and history.epoch[0] > 0,
           ("the second run resumed instead of starting over", "第二次训练是接着跑，而不是从头开始"),
           "restore",
           ("a fresh model resumes only through BackupAndRestore, with the backup_dir the first run "
            "wrote to",
            "新模型只有借助 BackupAndRestore，并使用第一次训练写入的 backup_dir，才能接着训练"),
           (f"the second fit ran epochs {[e + 1 for e in history.epoch]}, starting over at epoch 1",
            f"第二次 fit 运行的周期是 {[e + 1 for e in history.epoch]}，从第 1 个周期重新开始"))
    expect(history.epoch == list(range(FAILED_AFTER, EPOCHS)),
           ("it ran only the missing epochs 3 and 4", "它只补跑了缺失的第 3、4 个周期"), "order",
           (f"the backup of epoch {FAILED_AFTER} was never written: Keras calls callbacks in list order",
            f"第 {FAILED_AFTER} 个周期的备份没有写出：Keras 按列表顺序调用回调"),
           (f"the second fit ran epochs {[e + 1 for e in history.epoch]}",
            f"第二次 fit 运行的周期是 {[e + 1 for e in history.epoch]}"))
    steps = int(resumed_model.optimizer.iterations.numpy())
    expect(steps == EPOCHS * STEPS_PER_EPOCH,
           (f"the optimizer ends at {EPOCHS} × {STEPS_PER_EPOCH} = {EPOCHS * STEPS_PER_EPOCH} steps",
            f"优化器最终走到 {EPOCHS} × {STEPS_PER_EPOCH} = {EPOCHS * STEPS_PER_EPOCH} 步"), "iterations",
           ("the restored optimizer continues counting", "恢复后的优化器会接着计数"),
           (f"optimizer.iterations is {steps}", f"optimizer.iterations 是 {steps}"))
    epochs_logged = [step for step, _ in logged]
    expect(epochs_logged == list(range(EPOCHS)),
           ("the logs hold one loss per epoch, from both runs", "日志中每个周期恰好一个损失值，来自两次训练"),
           "logs",
           ("both runs must log to the same log_dir", "两次训练必须写入同一个 log_dir"),
           (f"epochs in the logs: {epochs_logged}", f"日志中的周期：{epochs_logged}"))
    expect(not (os.path.isdir(backup_dir) and os.listdir(backup_dir)),
           ("the backup was removed once training finished", "训练完成后，备份已被删除"), "backup-left",
           ("BackupAndRestore deletes its backup when fit completes; did the second run finish?",
            "fit 完成时 BackupAndRestore 会删除备份；第二次训练是否跑完了？"),
           (f"backup_dir still holds {sorted(os.listdir(backup_dir)) if os.path.isdir(backup_dir) else []}",
            f"backup_dir 中还有 {sorted(os.listdir(backup_dir)) if os.path.isdir(backup_dir) else []}"))


def _saver_found(savers: list, wanted: str) -> tuple[str, str]:
    """What the ModelCheckpoint callbacks do that the task does not ask for, in both languages."""
    if len(savers) != 1:
        return (f"make_callbacks() returns {len(savers)} ModelCheckpoint callbacks",
                f"make_callbacks() 返回了 {len(savers)} 个 ModelCheckpoint 回调")
    saver = savers[0]
    if not saver.save_weights_only:
        return "it saves the whole model, not only the weights", "它保存的是整个模型，而不只是权重"
    if saver.save_best_only:
        return ("it saves only when the loss improves (save_best_only)",
                "它只在损失变好时保存（save_best_only）")
    if saver.save_freq != "epoch":
        return f"it saves every {saver.save_freq} batches", f"它每 {saver.save_freq} 个批次保存一次"
    return f"it saves to {saver.filepath}, not {wanted}", f"它保存到 {saver.filepath}，而不是 {wanted}"
