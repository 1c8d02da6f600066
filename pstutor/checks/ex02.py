"""Checks of exercise 2: a partitioner for a given layout, a sharded lookup, a sharded Keras model."""

from __future__ import annotations

import collections

import numpy as np

from pstutor.checks import expect, task

VOCAB, DIM, NUM_PS = 1000, 16, 2
CHECK_IDS = [999, 0, 500, 499, 7, 999, 250]  # unsorted, across both shards, one repeated


def _is_sharded(variable) -> bool:
    from tensorflow.python.distribute.sharded_variable import ShardedVariable

    return isinstance(variable, ShardedVariable)


def _row_numbers(rows) -> list[int]:
    """Which rows of the check table (row i holds the value i) a lookup returned."""
    return rows[:, 0].astype(int).tolist() if rows.ndim == 2 else []


def _ps_task(device: str) -> int | None:
    """The ps task index of a device string, or None when it is not on a ps."""
    import tensorflow as tf

    spec = tf.DeviceSpec.from_string(device or "")
    return spec.task if spec.job == "ps" else None


@task("02.1")
def layout(embedding, bias) -> None:
    """The table in 4 shards of 250 rows, 2 per ps; the bias whole on a ps."""
    shards = list(getattr(embedding, "variables", [embedding]))
    expect(all(_ps_task(s.device) is not None for s in shards),
           ("`embedding` lives on the parameter servers", "`embedding` 存放在参数服务器上"), "scope",
           ("variables go to the parameter servers, and are split, only when created inside "
            "strategy.scope()",
            "只有在 strategy.scope() 内创建的变量才会被放到参数服务器上，也才会被切分"),
           (f"`embedding` lives on {shards[0].device or 'this process'}",
            f"`embedding` 存放在 {shards[0].device or '当前进程'} 上"))
    expect(embedding.shape.as_list() == [VOCAB, DIM],
           ("its full shape is 1000 × 16", "它的完整形状是 1000 × 16"), "shape",
           ("create the table with tf.zeros([VOCAB, DIM])", "用 tf.zeros([VOCAB, DIM]) 创建这张表"),
           (f"its shape is {embedding.shape.as_list()}", f"它的形状是 {embedding.shape.as_list()}"))
    count = len(shards)
    expect(count == 4,
           ("it has 4 shards", "它有 4 个分片"), "shard-count",
           ("a row is 64 bytes and the table 64,000: which bytes-per-shard limit gives 4 shards? (some "
            "partitioners also cap the count, with a default you must raise)",
            "一行是 64 字节，整张表 64,000 字节："
            "每个分片多少字节的限制能得到 4 个分片？（有的分区器还限制分片数，默认值需要你调高）"),
           (f"it has {count} shard(s), the task asks for 4", f"它有 {count} 个分片，任务要求 4 个"))
    expect(all(s.shape.as_list() == [VOCAB // 4, DIM] for s in shards),
           ("each shard holds 250 rows", "每个分片有 250 行"), "rows",
           ("shards are contiguous blocks of whole rows of nearly equal size",
            "分片是由完整行组成、大小几乎相等的连续块"),
           (f"the shards have the shapes {[s.shape.as_list() for s in shards]}",
            f"各分片的形状是 {[s.shape.as_list() for s in shards]}"))
    per_ps = collections.Counter(_ps_task(s.device) for s in shards)
    expect(per_ps == {0: 2, 1: 2},
           ("2 shards on each ps", "每个参数服务器上有 2 个分片"), "placement",
           ("shards are placed round-robin, like whole variables", "分片和完整变量一样按轮流规则放置"),
           (f"shards per ps task: {dict(per_ps)}", f"各参数服务器上的分片数：{dict(per_ps)}"))
    expect(not _is_sharded(bias),
           ("`bias` is not split", "`bias` 没有被切分"), "bias-whole",
           ("a partitioner that splits every variable splits even a 64-byte one: pick one that decides "
            "by the size of a shard in bytes",
            "连 64 字节的变量也要切的分区器：换一个按单个分片字节数来决定的分区器"),
           (f"`bias` (64 bytes) was split into {len(getattr(bias, 'variables', [bias]))} shards",
            f"`bias`（64 字节）被切成了 {len(getattr(bias, 'variables', [bias]))} 个分片"))
    expect(_ps_task(bias.device) is not None,
           ("`bias` lives on a parameter server", "`bias` 存放在参数服务器上"), "bias-on-ps",
           ("create it inside the same strategy.scope()", "在同一个 strategy.scope() 内创建它"),
           (f"`bias` lives on {bias.device or 'this process'}",
            f"`bias` 存放在 {bias.device or '当前进程'} 上"))


@task("02.2")
def lookup_rows(lookup, table) -> None:
    """A tf.function that returns the rows of the ids, in order, without reading whole shards."""
    import tensorflow as tf

    expect(hasattr(lookup, "get_concrete_function"),
           ("`lookup` is a tf.function", "`lookup` 是一个 tf.function"), "tf-function",
           ("decorate it with @tf.function: step functions on a cluster are traced into graphs",
            "用 @tf.function 装饰它：集群上的步骤函数都会被追踪成计算图"),
           (f"`lookup` is a plain {type(lookup).__name__}", f"`lookup` 只是普通的 {type(lookup).__name__}"))
    ids = tf.constant(CHECK_IDS)
    rows = np.asarray(lookup(ids))
    whole = np.concatenate([shard.numpy() for shard in table.variables])
    expect(rows.shape == (len(CHECK_IDS), DIM),
           ("it returns one row of 16 values per id", "每个 id 返回一行，每行 16 个值"), "shape",
           ("one row per id, whole rows of the table", "每个 id 一行，每行是表中完整的一行"),
           (f"for {len(CHECK_IDS)} ids it returned shape {rows.shape}",
            f"对 {len(CHECK_IDS)} 个 id，它返回的形状是 {rows.shape}"))
    expect(np.array_equal(rows, whole[CHECK_IDS]),
           ("the rows come back in the order of the ids", "返回的行与 id 的顺序一致"), "row-order",
           ("not every op that reads a ShardedVariable stitches the rows back in the order of the ids",
            "并不是每个读取 ShardedVariable 的运算都会按 id 的顺序把行拼回原位"),
           (f"for ids {CHECK_IDS} it returned rows {_row_numbers(rows)}",
            f"对 id {CHECK_IDS}，它返回的是第 {_row_numbers(rows)} 行"))
    graph = lookup.get_concrete_function(ids).graph
    shard_shapes = [s.shape.as_list() for s in table.variables]
    whole_reads = [op.type for op in graph.get_operations()
                   if (op.type == "ReadVariableOp" and op.outputs[0].shape.as_list() in shard_shapes)
                   or (op.type == "ConcatV2" and op.outputs[0].shape.as_list() == [VOCAB, DIM])]
    expect(not whole_reads,
           ("it reads only the requested rows, never a whole shard", "它只读取请求的行，从不读取整个分片"),
           "whole-table",
           ("converting the ShardedVariable to a tensor concatenates the whole table; use the lookup "
            "made for sharded tables",
            "把 ShardedVariable 转换成张量会拼接整张表；请使用专为分片嵌入表设计的查找"),
           (f"its graph reads whole shards ({', '.join(sorted(set(whole_reads)))})",
            f"它的计算图读取了整个分片（{', '.join(sorted(set(whole_reads)))}）"))


@task("02.3")
def keras_model(model) -> None:
    """The Embedding's table in one shard per ps; the Dense variables whole; the rule scales."""
    import tensorflow as tf

    layers = [layer for layer in model.layers if isinstance(layer, tf.keras.layers.Embedding)]
    expect(len(layers) == 1,
           ("the model has an Embedding layer", "模型中有一个 Embedding 层"), "embedding-layer",
           ("build the Sequential model with the four layers of the task",
            "按任务要求的四层构建 Sequential 模型"),
           (f"the model's layers are {[type(layer).__name__ for layer in model.layers]}",
            f"模型的层是 {[type(layer).__name__ for layer in model.layers]}"))
    table = layers[0].embeddings
    expect(_is_sharded(table),
           ("the embedding table is sharded", "嵌入表被分片了"), "one-per-ps",
           ("build the model inside the scope, and check that the partitioner may make more than one "
            "shard",
            "请在作用域内构建模型，并确认分区器允许切出不止一个分片"),
           (f"the table is still one variable, on {getattr(table, 'device', '') or 'this process'}",
            f"嵌入表仍是一个整体变量，位于 {getattr(table, 'device', '') or '当前进程'}"))
    devices = sorted(_ps_task(s.device) for s in table.variables)
    expect(devices == list(range(NUM_PS)),
           ("one shard on each ps", "每个参数服务器上一个分片"), "one-per-ps",
           ("the number of shards should match the number of ps", "分片数应当与参数服务器的个数一致"),
           (f"the shards are on ps tasks {devices}", f"各分片位于参数服务器 {devices} 上"))
    dense = [v for layer in model.layers if isinstance(layer, tf.keras.layers.Dense)
             for v in (layer.kernel, layer.bias)]
    small = [v.name for v in dense if _is_sharded(v)]
    expect(not small,
           ("the Dense layer's variables are whole", "Dense 层的变量保持完整"), "small-split",
           ("choose a partitioner that leaves small variables alone", "请选择一个会放过小变量的分区器"),
           (f"split although tiny: {small}", f"这些变量很小却被切分了：{small}"))
    partitioner = model.distribute_strategy.extended._variable_partitioner
    bigger = partitioner(tf.TensorShape([10 * VOCAB, DIM]), tf.float32)[0]
    expect(bigger == NUM_PS,
           ("a ten times larger table would still get one shard per ps",
            "即使嵌入表大十倍，也仍然每个参数服务器一个分片"), "scales",
           ("cap the number of shards, not the size of one", "要限制的是分片数，而不是单个分片的大小"),
           (f"for a 10,000 × 16 table your partitioner makes {bigger} shards",
            f"对 10,000 × 16 的表，你的分区器会切出 {bigger} 个分片"))
    shape = model(tf.constant([[1, 2, 3, 999]])).shape.as_list()
    expect(shape == [1, 1],
           ("the model runs on a batch of ids", "模型能在一批 id 上运行"), "runs",
           ("the input is 4 integer ids; the output one number", "输入是 4 个整数 id，输出是一个数"),
           (f"for one row of 4 ids the model returns shape {shape}",
            f"对一行 4 个 id，模型返回的形状是 {shape}"))
