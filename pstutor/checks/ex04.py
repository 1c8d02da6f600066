"""Checks of exercise 4: the per-worker input pipeline, the step function, schedule and join."""

from __future__ import annotations

import math

from pstutor.checks import expect, genuine, task
from pstutor.data import WORDS

GLOBAL_BATCH_SIZE = 8  # as in the exercise
BATCHES_PER_PASS = 240 // GLOBAL_BATCH_SIZE  # 240 examples
VOCABULARY_SIZE = 8  # 7 words + the out-of-vocabulary id 0


@task("04.1")
def per_worker_pipeline(word_lookup, label_lookup, dataset_fn, per_worker_dataset, per_worker_iterator,
                        coordinator) -> None:
    """Lookup tables copied to the workers, and a repeating, shuffled per-worker pipeline of id batches
    of the per-replica size."""
    import tensorflow as tf
    from tensorflow.python.distribute.coordinator import values

    vocabularies = [_vocabulary(layer) for layer in (word_lookup, label_lookup)]
    wanted = [["[UNK]", *sorted(WORDS)], ["no", "yes"]]
    expect(vocabularies == wanted,
           ("the layers map the words and the labels to the task's ids",
            "两个层把词和标签映射为任务要求的编号"),
           "vocabulary",
           ("word_lookup: the `vocabulary` above, no mask token; label_lookup: exactly [\"no\", \"yes\"], "
            "no out-of-vocabulary slot, no mask token — so that \"no\" is 0 and \"yes\" is 1",
            "word_lookup：使用上面的 `vocabulary`，不要掩码；label_lookup：恰好是 [\"no\", \"yes\"]，"
            "不留词表外位置，也不要掩码——这样 \"no\" 是 0，\"yes\" 是 1"),
           (f"their vocabularies are {vocabularies[0]} and {vocabularies[1]}",
            f"它们的词表分别是 {vocabularies[0]} 和 {vocabularies[1]}"))

    tables = [type(getattr(layer, "lookup_table", None)).__name__ for layer in (word_lookup, label_lookup)]
    expect(tables == ["DistributedTable", "DistributedTable"],
           ("both lookup tables are copied to every worker", "两张查找表都会复制到每个工作进程上"),
           "lookup-scope",
           ("a lookup layer created outside strategy.scope() keeps its table on the coordinator, "
            "so every lookup on a worker becomes a remote call",
            "在 strategy.scope() 之外创建的查找层会把查找表留在协调器上，"
            "工作进程上的每次查找都变成一次远程调用"),
           (f"the lookup tables are a {tables[0]} and a {tables[1]}, not DistributedTables",
            f"两张查找表分别是 {tables[0]} 和 {tables[1]}，不是 DistributedTable"))
    expect(isinstance(per_worker_dataset, values.PerWorkerDatasetFromDatasetFunction),
           ("`per_worker_dataset` has one dataset per worker",
            "`per_worker_dataset` 为每个工作进程各有一份数据集"),
           "per-worker-dataset",
           ("the coordinator must build the dataset on every worker from your function",
            "数据集要由协调器根据你的函数在每个工作进程上分别构建"),
           (f"`per_worker_dataset` is a {type(per_worker_dataset).__name__}",
            f"`per_worker_dataset` 是 {type(per_worker_dataset).__name__}"))
    expect(isinstance(per_worker_iterator, tf.distribute.experimental.coordinator.PerWorkerValues),
           ("`per_worker_iterator` has one iterator per worker",
            "`per_worker_iterator` 为每个工作进程各有一个迭代器"),
           "iterator",
           ("iterate the per-worker dataset itself", "对每个工作进程的数据集本身调用 iter()"),
           (f"`per_worker_iterator` is a {type(per_worker_iterator).__name__}",
            f"`per_worker_iterator` 是 {type(per_worker_iterator).__name__}"))
    spec = per_worker_dataset.element_spec
    shapes_ok = (isinstance(spec, tuple) and len(spec) == 2
                 and all(isinstance(s, tf.TensorSpec) and s.dtype == tf.int64 for s in spec)
                 and spec[0].shape.as_list()[-1:] == [3])
    expect(shapes_ok,
           ("each element is the pair (word ids, label ids)", "每个元素都是（词编号, 标签编号）这一对张量"),
           "elements",
           ("map every batch through both lookup layers and return the two results as a tuple",
            "用两个查找层映射每个批次，并把两个结果组成一个元组返回"),
           (f"an element is {spec}", f"一个元素是 {spec}"))
    count, rows, top_word, top_label = coordinator.schedule(
        _count_batches(), args=(iter(per_worker_dataset),)).fetch()
    # Here each worker has one replica, so a batch of the whole global batch would look right: the
    # pipeline of a job with 2 replicas per worker must give each replica half of it.
    two = tf.distribute.InputContext(num_input_pipelines=1, input_pipeline_id=0, num_replicas_in_sync=2)
    made = dataset_fn(two)
    share = int(tf.shape(next(iter(made))[0])[0]) if genuine(made, tf.data.Dataset) else None
    expect(rows == GLOBAL_BATCH_SIZE and share == GLOBAL_BATCH_SIZE // 2,
           ("a batch holds the per-replica share of the global batch",
            "每个批次是全局批次中每个副本分得的那一份"),
           "batch",
           ("ask the input context for the per-replica batch size", "向输入上下文询问每个副本的批次大小"),
           (f"with 2 replicas in sync your dataset_fn gives batches of {share}, one replica's share is "
            f"{GLOBAL_BATCH_SIZE // 2}",
            f"有 2 个同步副本时，你的 dataset_fn 给出的批次大小是 {share}，"
            f"一个副本的份额是 {GLOBAL_BATCH_SIZE // 2}"))
    firsts = _first_batch_of_each_worker(per_worker_dataset, coordinator)
    expect(any(not (first == firsts[0]).all() for first in firsts[1:]),
           ("every worker reads the examples in an order of its own", "每个工作进程按各自的顺序读取样本"),
           "shuffle",
           ("shuffle the examples in dataset_fn (without a fixed seed, or every worker rebuilds the same "
            "order)",
            "在 dataset_fn 中打乱样本（不要固定 seed，否则每个工作进程都会重建出同样的顺序）"),
           (f"all {len(firsts)} workers read the same first batch",
            f"{len(firsts)} 个工作进程读到的第一个批次完全相同"))
    expect(0 <= top_word < VOCABULARY_SIZE and 0 <= top_label <= 1,
           ("the batches hold ids from the two vocabularies", "批次中是两个词表里的编号"), "elements",
           ("look up the words with word_lookup and the labels with label_lookup",
            "用 word_lookup 查词，用 label_lookup 查标签"),
           (f"the largest word id is {top_word}, the largest label id {top_label}",
            f"最大的词编号是 {top_word}，最大的标签编号是 {top_label}"))
    expect(count == BATCHES_PER_PASS + 4,
           ("a worker can read more batches than one pass holds", "工作进程能读到的批次多于一遍数据的批次数"),
           "repeat",
           ("the loop, not the data, decides how many steps run",
            "执行多少步应由训练循环决定，而不是由数据决定"),
           (f"the pipeline ran dry after {count} batches", f"流水线读了 {count} 个批次就耗尽了"))


@task("04.2")
def step_function(step_fn, model, optimizer, coordinator) -> None:
    """One step on a known batch: the returned loss, the update and the step counter."""
    import numpy as np
    import tensorflow as tf

    expect(isinstance(step_fn, tf.types.experimental.PolymorphicFunction),
           ("`step_fn` is a tf.function", "`step_fn` 是 tf.function"), "tf-function",
           ("the coordinator only schedules functions it can trace into a graph and send to a worker",
            "协调器只调度那些能被追踪成计算图、再发送到工作进程上的函数"),
           (f"`step_fn` is a plain {type(step_fn).__name__}",
            f"`step_fn` 只是普通的 {type(step_fn).__name__}"))
    strategy = coordinator.strategy
    rng = np.random.default_rng(4)
    words = tf.constant(rng.integers(0, VOCABULARY_SIZE, size=(GLOBAL_BATCH_SIZE, 3)), tf.int64)
    labels = tf.constant(rng.integers(0, 2, size=(GLOBAL_BATCH_SIZE, 1)), tf.int64)
    known = coordinator.create_per_worker_dataset(lambda: strategy.distribute_datasets_from_function(
        lambda _: tf.data.Dataset.from_tensors((words, labels)).repeat()))
    coordinator.join()  # nothing else runs: the step sees the weights read here
    expected = float(tf.reduce_mean(tf.keras.losses.binary_crossentropy(
        tf.cast(labels, tf.float32), model(words), from_logits=True)))
    weights = [variable.numpy() for variable in model.trainable_variables]
    steps = int(optimizer.iterations.numpy())
    loss = coordinator.schedule(step_fn, args=(iter(known),)).fetch()
    expect(loss is not None and np.ndim(loss) == 0,
           ("`step_fn` returns one loss value", "`step_fn` 返回一个损失值"), "returns-loss",
           ("return the loss after combining the replicas' losses into one value",
            "把各副本的损失合并成一个值之后，把它返回"),
           (f"`step_fn` returned {_shown(loss)}", f"`step_fn` 返回的是 {_shown(loss)}"))
    changed = any(not np.array_equal(old, new.numpy())
                  for old, new in zip(weights, model.trainable_variables, strict=True))
    updates = int(optimizer.iterations.numpy()) - steps
    expect(changed and updates == 1,
           ("the step updates the weights once", "这一步把权重更新了一次"), "apply",
           ("computing gradients changes nothing until the optimizer applies them",
            "只计算梯度不会改变任何东西，要由优化器应用梯度才行"),
           (f"one step changed the weights {'' if changed else 'not at all '}and advanced "
            f"optimizer.iterations by {updates}",
            f"一步之后权重{'变了' if changed else '没有变'}，optimizer.iterations 增加了 {updates}"))
    expect(math.isclose(float(loss), expected, rel_tol=1e-4, abs_tol=1e-5),
           ("it returns the cross-entropy averaged over the global batch",
            "它返回按全局批次求平均的交叉熵"), "loss",
           ("the model outputs logits, and the loss is averaged over the global batch",
            "模型输出的是 logits，损失要按全局批次求平均"),
           (f"on a known batch it returned {float(loss):.4f}, the right loss is {expected:.4f}",
            f"在一个已知的批次上，它返回 {float(loss):.4f}，正确的损失是 {expected:.4f}"))


@task("04.3")
def schedule_and_join(losses, num_steps, steps_before, steps_after_loop, optimizer, coordinator) -> None:
    """Every step scheduled, kept as a RemoteValue, and finished before the counter was read."""
    import tensorflow as tf

    RemoteValue = tf.distribute.experimental.coordinator.RemoteValue
    expect(isinstance(losses, (list, tuple)) and len(losses) == num_steps,
           (f"`losses` holds {num_steps} results", f"`losses` 中有 {num_steps} 个结果"), "count",
           ("schedule the step once per step and keep what each call returns",
            "每一步调度一次，并保存每次调用的返回值"),
           (f"`losses` is a {type(losses).__name__} of {_length(losses)} item(s)",
            f"`losses` 是一个有 {_length(losses)} 项的 {type(losses).__name__}"))
    expect(all(isinstance(value, RemoteValue) for value in losses),
           ("they are RemoteValues, kept while the steps run",
            "它们都是 RemoteValue，在步骤执行期间被保存下来"),
           "remote-values",
           ("fetching inside the loop waits for each step before scheduling the next, so only one "
            "worker is ever busy",
            "在循环里取回结果，会在调度下一步之前等待上一步完成，于是始终只有一个工作进程在忙"),
           (f"`losses` holds {sorted({type(value).__name__ for value in losses})}",
            f"`losses` 中是 {sorted({type(value).__name__ for value in losses})}"))
    coordinator.join()
    ran = int(optimizer.iterations.numpy()) - steps_before
    expect(ran == num_steps,
           ("every scheduled step updated the model once", "每个被调度的步骤都更新了一次模型"), "step-count",
           ("each step must apply its gradients once (task 2)", "每一步都必须应用一次梯度（任务 2）"),
           (f"{ran} updates for {num_steps} steps", f"{num_steps} 步却有 {ran} 次更新"))
    expect(steps_after_loop - steps_before == num_steps,
           ("all steps had finished when your code ended", "你的代码结束时，所有步骤都已执行完毕"), "join",
           ("schedule returns at once, so wait for the queue to empty",
            "schedule 会立即返回，所以要等待队列清空"),
           (f"only {steps_after_loop - steps_before} of {num_steps} steps had finished when your code ended",
            f"你的代码结束时，{num_steps} 步中只完成了 {steps_after_loop - steps_before} 步"))
    values = coordinator.fetch(losses)
    bad = [_shown(value) for value in values if value is None or not math.isfinite(float(value))]
    expect(not bad,
           ("every step returned a finite loss", "每一步都返回了有限的损失值"), "losses",
           ("the step function must return its loss (task 2)", "步骤函数必须返回它的损失值（任务 2）"),
           (f"{len(bad)} step(s) returned {bad[0] if bad else ''}",
            f"有 {len(bad)} 步返回的是 {bad[0] if bad else ''}"))


def _shown(value: object) -> str:
    """A returned value in a failure line: None, the number, or the shape of an array."""
    import numpy as np

    if value is None:
        return "None"
    try:
        array = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        return f"a {type(value).__name__}"
    return f"{array.item():.4f}" if array.ndim == 0 else f"an array of shape {list(array.shape)}"


def _length(value: object) -> int | str:
    return len(value) if isinstance(value, (list, tuple)) else "?"


def _vocabulary(layer) -> list[str] | str:
    """A lookup layer's vocabulary (ids in order), or what the layer is when it has none."""
    try:
        return [str(word) for word in layer.get_vocabulary()]
    except Exception:  # not a lookup layer: the failure line says what it is
        return type(layer).__name__


def _first_batch_of_each_worker(per_worker_dataset, coordinator) -> list:
    """The word ids of the first batch each worker reads from its own copy of the pipeline."""
    import tensorflow as tf

    iterator = iter(per_worker_dataset)

    @tf.function
    def first_words(iterator):
        return next(iterator)[0]

    # Worker.create_resource runs on that very worker, with its slice of the per-worker iterator.
    workers = coordinator._cluster.workers
    return [worker.create_resource(first_words, args=(iterator,)).fetch() for worker in workers]


def _count_batches():
    """A scheduled reader: how many of BATCHES_PER_PASS + 4 batches exist, and what they hold."""
    import tensorflow as tf

    @tf.function
    def count_batches(iterator):
        count, rows = tf.constant(0), tf.constant(0)
        top_word, top_label = tf.constant(-1, tf.int64), tf.constant(-1, tf.int64)
        for _ in tf.range(BATCHES_PER_PASS + 4):
            optional = iterator.get_next_as_optional()
            if optional.has_value():
                words, labels = optional.get_value()
                count += 1
                rows = tf.shape(words)[0]
                top_word = tf.maximum(top_word, tf.reduce_max(words))
                top_label = tf.maximum(top_label, tf.reduce_max(labels))
        return count, rows, top_word, top_label

    return count_batches
