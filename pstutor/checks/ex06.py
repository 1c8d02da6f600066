"""Checks of exercise 6: scheduled evaluation, exact evaluation with `Model.evaluate`, and
exactly-once evaluation in a custom loop, judged by the visit counts they leave behind."""

from __future__ import annotations

import numpy as np

from pstutor.checks import expect, task

NUM_EVAL, NUM_SHARDS = 100, 10


@task("06.1")
def scheduled_evaluation(accuracy) -> None:
    """A metric on the ps, updated by scheduled steps that covered 100 examples."""
    import tensorflow as tf

    expect(isinstance(accuracy, tf.keras.metrics.BinaryAccuracy),
           ("`accuracy` is a BinaryAccuracy metric", "`accuracy` 是一个 BinaryAccuracy 指标"), "metric",
           ("create the metric the task names", "创建任务中指定的那个指标"),
           (f"`accuracy` is a {type(accuracy).__name__}", f"`accuracy` 是 {type(accuracy).__name__}"))
    threshold = float(accuracy.get_config().get("threshold", 0.5))
    expect(threshold == 0.0,
           ("its threshold is 0: the model outputs logits", "它的阈值是 0：模型输出的是 logits"), "threshold",
           ("the model's last layer has no sigmoid, so a logit above 0 means class 1",
            "模型最后一层没有 sigmoid，logit 大于 0 就表示类别 1"),
           (f"its threshold is {threshold:g}", f"它的阈值是 {threshold:g}"))
    devices = {variable.device for variable in accuracy.variables}
    expect(devices and all("/job:ps/" in device for device in devices),
           ("its variables live on the parameter server", "它的变量存放在参数服务器上"), "metric-on-ps",
           ("a metric that all workers update must be created inside strategy.scope()",
            "所有工作进程都要更新的指标，必须在 strategy.scope() 内创建"),
           (f"its variables live on {', '.join(sorted(devices)) or 'this process'}",
            f"它的变量位于 {', '.join(sorted(devices)) or '当前进程'}"))
    seen = int(accuracy.count.numpy())
    expect(seen == NUM_EVAL,
           ("it counted the 100 examples once in total", "它总共计入了 100 个样本"), "example-count",
           ("each step evaluates one batch of 10, so schedule as many steps as there are batches, and "
            "join() before the check",
            "每个步骤评估一批 10 个样本，所以有多少批就调度多少个步骤，并且在检查之前先 join()"),
           (f"it counted {seen} examples, not {NUM_EVAL}", f"它计入了 {seen} 个样本，而不是 {NUM_EVAL} 个"))


@task("06.2")
def exact_evaluate(exact_model) -> None:
    """Model.evaluate with pss_evaluation_shards: every id evaluated exactly once."""
    import tensorflow as tf

    expect(isinstance(exact_model, tf.keras.Model),
           ("`exact_model` is a Keras model", "`exact_model` 是一个 Keras 模型"), "model",
           ("build it with new_classifier()", "用 new_classifier() 构建它"),
           (f"`exact_model` is a {type(exact_model).__name__}",
            f"`exact_model` 是 {type(exact_model).__name__}"))
    expect(all("/job:ps/" in weight.device for weight in exact_model.weights),
           ("its weights live on the parameter server", "它的权重存放在参数服务器上"), "scope",
           ("build and compile the model inside strategy.scope(); outside it, Keras evaluates on this "
            "process and ignores pss_evaluation_shards",
            "在 strategy.scope() 内构建并编译模型；在作用域之外，Keras 会在当前进程中评估，"
            "并忽略 pss_evaluation_shards"),
           (f"its weights live on {_devices(exact_model.weights, 'this process')}",
            f"它的权重位于 {_devices(exact_model.weights, '当前进程')}"))
    shards = getattr(exact_model, "_pss_evaluation_shards", 0)
    expect(shards,
           ("it was compiled for exact evaluation", "编译时开启了恰好一次评估"), "no-shards",
           ("without pss_evaluation_shards, evaluate() schedules ordinary steps, and each worker reads "
            "its own copy of the data; pass it to compile()",
            "不指定 pss_evaluation_shards 时，evaluate() 调度的是普通步骤，"
            "每个工作进程读的都是自己那份数据副本；"
            "把它传给 compile()"),
           ("it was compiled without pss_evaluation_shards", "编译时没有指定 pss_evaluation_shards"))
    compiled = getattr(getattr(exact_model, "compiled_metrics", None), "_user_metrics", None) or []
    expect(any(hasattr(metric, "counts") for metric in tf.nest.flatten(compiled)),
           ("it counts visits with the IdVisits metric", "它用 IdVisits 指标统计访问次数"), "id-visits",
           ("compile with metrics=[IdVisits()]", "编译时传入 metrics=[IdVisits()]"),
           (f"its compiled metrics are {[getattr(m, 'name', m) for m in tf.nest.flatten(compiled)]}",
            f"它的编译指标是 {[getattr(m, 'name', m) for m in tf.nest.flatten(compiled)]}"))
    visits = [metric for metric in exact_model.metrics if hasattr(metric, "counts")]
    expect(visits,
           ("its compiled metrics are built", "它的编译指标已经构建好了"), "not-built",
           ("Keras builds the compiled metrics in the first training step, and exact evaluation needs them "
            "built: run one fit step before evaluate()",
            "Keras 在第一个训练步骤中构建编译指标，而恰好一次评估要求它们已经构建好："
            "在 evaluate() 之前先用 fit 训练一步"),
           ("the IdVisits metric was never built: the model has not trained a step",
            "IdVisits 指标从未被构建：模型还没有训练过一步"))
    counts = visits[0].counts.numpy()
    expect(counts.sum() == NUM_EVAL,
           ("evaluate() counted 100 visits", "evaluate() 一共计入了 100 次访问"), "evaluated",
           ("evaluate the model once, on the finite evaluation data with the ids in y_true (with_ids)",
            "在有限的评估数据上评估一次模型，编号放在 y_true 里（with_ids）"),
           (f"the metric counted {int(counts.sum())} visits, not {NUM_EVAL}",
            f"指标计入了 {int(counts.sum())} 次访问，而不是 {NUM_EVAL} 次"))
    expect(np.all(counts == 1),
           ("every id was evaluated exactly once", "每个编号都恰好被评估了一次"), "exactly-once",
           ("evaluate the finite dataset read from the files, without repeat() or steps",
            "评估从文件读取的有限数据集，不要 repeat()，也不要指定 steps"),
           (f"ids were evaluated between {int(counts.min())} and {int(counts.max())} times",
            f"各编号被评估的次数在 {int(counts.min())} 到 {int(counts.max())} 之间"))


@task("06.3")
def exactly_once_by_hand(shard_results, visit_counts) -> None:
    """One closure per shard, each returning its visit counts; together exactly once."""
    import tensorflow as tf

    remote_value = tf.distribute.experimental.coordinator.RemoteValue
    expect(isinstance(shard_results, list | tuple)
           and all(isinstance(result, remote_value) for result in shard_results),
           ("`shard_results` is a list of RemoteValues", "`shard_results` 是一个 RemoteValue 列表"),
           "remote-values",
           ("keep what coordinator.schedule returns, one per shard",
            "把 coordinator.schedule 的返回值保存下来，每个分片一个"),
           (f"`shard_results` is {_kinds(shard_results)}", f"`shard_results` 是 {_kinds(shard_results)}"))
    expect(len(shard_results) == NUM_SHARDS,
           ("one closure per shard", "每个分片一个闭包"), "one-per-shard",
           ("schedule the function once per shard index", "每个分片编号调度一次函数"),
           (f"{len(shard_results)} closures for {NUM_SHARDS} shards",
            f"{NUM_SHARDS} 个分片却有 {len(shard_results)} 个闭包"))
    returned = [result.fetch() for result in shard_results]
    expect(all(value is not None and np.shape(value) == (NUM_EVAL,) for value in returned),
           ("every closure returned its shard's 100 visit counts",
            "每个闭包都返回了自己分片的 100 个访问计数"),
           "returned",
           ("return the counts from the function instead of writing them into a shared variable: "
            "a retried closure would add to a variable twice, but only one return value counts",
            "让函数把计数作为返回值交回，而不是写进共享变量：被重试的闭包会往变量里加两次，而返回值只有一个会被采用"),
           (f"the closures returned {_shapes(returned)}", f"各闭包返回的是 {_shapes(returned)}"))
    total = np.sum([np.asarray(value) for value in returned], axis=0)
    expect(np.array_equal(np.asarray(visit_counts), total),
           ("`visit_counts` is the sum of the fetched vectors", "`visit_counts` 是取回的各个向量之和"), "sum",
           ("add up what fetch() returns for every RemoteValue", "把每个 RemoteValue 的 fetch() 结果加起来"),
           (f"`visit_counts` adds up to {_total(visit_counts)}, the fetched vectors to {int(total.sum())}",
            f"`visit_counts` 合计为 {_total(visit_counts)}，取回的各向量合计为 {int(total.sum())}"))
    expect(np.all(total == 1),
           ("every id was evaluated exactly once", "每个编号都恰好被评估了一次"), "shard",
           ("the shards must split one fixed order of the data, each closure reading only its own; a "
            "shuffle before the split (or no split at all) makes shards overlap and miss ids",
            "分片必须切分同一个固定顺序的数据，每个闭包只读自己的那一片；在切分之前打乱（或者根本不切分），分片就会重叠并漏掉编号"),
           (f"ids were seen between {int(total.min())} and {int(total.max())} times",
            f"各编号被看到的次数在 {int(total.min())} 到 {int(total.max())} 之间"))


def _devices(variables, here: str) -> str:
    """Where some variables live, for a failure line (`here`: this process, in the reader's language)."""
    return ", ".join(sorted({v.device or here for v in variables})) or "-"


def _kinds(values) -> str:
    """The kinds of things in a list, for a failure line."""
    if not isinstance(values, list | tuple):
        return f"a {type(values).__name__}"
    return f"a list of {sorted({type(v).__name__ for v in values})}"


def _shapes(values: list) -> str:
    """The distinct shapes (or None) of what closures returned, for a failure line."""
    return ", ".join(sorted({"None" if v is None else f"shape {list(np.shape(v))}" for v in values}))


def _total(values) -> str:
    """The sum of an array-like, or what it is when it has none."""
    try:
        return str(int(np.sum(values)))
    except (TypeError, ValueError):
        return type(values).__name__
