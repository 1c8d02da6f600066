"""Checks of exercise 5: the InputContext this strategy passes, a synchronous job's, sharding by worker."""

from __future__ import annotations

import itertools

from pstutor.checks import expect, genuine, task

NUM_IDS = 32  # as in the exercise: ids 0..31
BATCH_SIZE = 8
READ_BATCHES = NUM_IDS // BATCH_SIZE  # the whole data once, or a half-size shard twice


@task("05.1")
def context_of_this_strategy(contexts, dataset_fn, per_worker_dataset, coordinator) -> None:
    """The contexts the strategy passed to dataset_fn, and the pipeline it returns: shuffled, endless,
    in per-replica batches."""
    import tensorflow as tf

    _expect_per_worker(per_worker_dataset, "per_worker_dataset")
    expect(isinstance(contexts, list) and contexts
           and all(isinstance(c, tf.distribute.InputContext) for c in contexts),
           ("`contexts` holds the InputContexts your dataset_fn received",
            "`contexts` 中保存着你的 dataset_fn 收到的 InputContext"), "contexts",
           ("append every input_context your dataset_fn receives to `contexts`",
            "把 dataset_fn 收到的每个 input_context 都追加到 `contexts` 中"),
           (f"`contexts` is {contexts!r}"[:160], f"`contexts` 是 {contexts!r}"[:160]))
    expect(all((c.num_input_pipelines, c.input_pipeline_id) == (1, 0) for c in contexts),
           ("every context came from the strategy: 1 input pipeline, id 0",
            "每个输入上下文都来自策略：1 条输入流水线，编号 0"), "strategy-calls",
           ("do not build the InputContext yourself: hand dataset_fn to the strategy's "
            "distribute_datasets_from_function, which calls it with the context it chose",
            "不要自己构造 InputContext：把 dataset_fn 交给策略的 distribute_datasets_from_function，"
            "由它用自己选定的输入上下文来调用"),
           (f"(pipelines, pipeline id) of the contexts: {_pipelines(contexts)}",
            f"各输入上下文的（流水线数, 流水线编号）：{_pipelines(contexts)}"))
    count, rows = coordinator.schedule(_read(), args=(iter(per_worker_dataset),)).fetch()[1:3]
    # The pipeline dataset_fn returns for a job with 2 replicas per worker (here each worker has one,
    # so a batch of all of BATCH_SIZE would look right); the contexts it appends are not the strategy's.
    before = len(contexts)
    two = tf.distribute.InputContext(num_input_pipelines=1, input_pipeline_id=0, num_replicas_in_sync=2)
    made = dataset_fn(two)
    del contexts[before:]
    made = made if genuine(made, tf.data.Dataset) else None
    first = [int(i) for i in next(iter(made))] if made is not None else []
    expect(rows == BATCH_SIZE and len(first) == BATCH_SIZE // 2,
           ("a batch holds the per-replica share of BATCH_SIZE",
            "每个批次是 BATCH_SIZE 中每个副本分得的份额"),
           "batch",
           ("ask the input context for the per-replica batch size", "向输入上下文询问每个副本的批次大小"),
           (f"with 2 replicas in sync a batch has {len(first)} ids, one replica's share of BATCH_SIZE is "
            f"{BATCH_SIZE // 2}",
            f"有 2 个同步副本时，一个批次有 {len(first)} 个编号，"
            f"一个副本在 BATCH_SIZE 中的份额是 {BATCH_SIZE // 2} 个"))
    endless = made.cardinality().numpy() == tf.data.INFINITE_CARDINALITY
    expect(endless and count == 2 * READ_BATCHES,
           ("a worker can read past the end of the data", "工作进程可以读过数据的末尾"), "repeat",
           ("the scheduled steps, not the data, decide how much is read: repeat() with no count",
            "读多少应由调度的训练步骤决定，而不是由数据决定：调用不带次数的 repeat()"),
           (f"the pipeline ends after {made.cardinality().numpy()} batches",
            f"流水线读了 {made.cardinality().numpy()} 个批次就结束了"))
    expect(first != list(range(len(first))),
           ("the ids come shuffled", "编号是打乱后给出的"), "shuffle",
           ("shuffle the ids in dataset_fn", "在 dataset_fn 中打乱编号"),
           (f"the first batch is {first}, in the order of the data",
            f"第一个批次是 {first}，与数据的顺序相同"))


@task("05.2")
def context_of_a_synchronous_job(sync_context, per_replica_batch) -> None:
    """Worker 2 of 4, with 2 replicas each, and a global batch of 64."""
    import tensorflow as tf

    expect(isinstance(sync_context, tf.distribute.InputContext),
           ("`sync_context` is a tf.distribute.InputContext", "`sync_context` 是 tf.distribute.InputContext"),
           "context",
           ("create the context with tf.distribute.InputContext(...)",
            "用 tf.distribute.InputContext(...) 创建输入上下文"),
           (f"`sync_context` is a {type(sync_context).__name__}",
            f"`sync_context` 是 {type(sync_context).__name__}"))
    expect(sync_context.num_input_pipelines == 4,
           ("it has one input pipeline per worker", "每个工作进程一条输入流水线"), "pipelines",
           ("a synchronous multi-worker job runs one input pipeline on each worker",
            "同步的多工作进程训练作业在每个工作进程上各运行一条输入流水线"),
           (f"it has {sync_context.num_input_pipelines} input pipeline(s) for 4 workers",
            f"4 个工作进程，它却有 {sync_context.num_input_pipelines} 条输入流水线"))
    expect(sync_context.input_pipeline_id == 2,
           ("it is the pipeline of the worker with index 2", "它是编号为 2 的工作进程的输入流水线"),
           "pipeline-id",
           ("the pipeline id is the worker's task index, counted from 0",
            "流水线编号就是工作进程的任务编号，从 0 开始"),
           (f"its pipeline id is {sync_context.input_pipeline_id}",
            f"它的流水线编号是 {sync_context.input_pipeline_id}"))
    expect(sync_context.num_replicas_in_sync == 8,
           ("it counts the replicas of the whole job", "它统计的是整个作业的副本"), "replicas",
           ("count the replicas of the whole job, on every worker, not those of one worker",
            "要数的是整个作业在所有工作进程上的副本，而不是一个工作进程上的"),
           (f"it counts {sync_context.num_replicas_in_sync} replicas in sync",
            f"它统计的同步副本数是 {sync_context.num_replicas_in_sync}"))
    expect(per_replica_batch == 8,
           ("`per_replica_batch` is one replica's share of the global batch",
            "`per_replica_batch` 是一个副本在全局批次中分得的份额"), "per-replica",
           ("let the context divide the global batch", "让输入上下文来划分全局批次"),
           (f"`per_replica_batch` is {per_replica_batch}, not one replica's share of 64",
            f"`per_replica_batch` 是 {per_replica_batch}，不是一个副本在 64 中分得的份额"))


@task("05.3")
def sharded_by_worker(sharded_dataset, coordinator) -> None:
    """What each worker reads: disjoint shards that together cover every id."""
    _expect_per_worker(sharded_dataset, "sharded_dataset")
    iterator = iter(sharded_dataset)
    reader = _read(4 * READ_BATCHES)  # several passes: a shuffle after repeat() mixes them
    # Worker.create_resource runs the reader on that very worker, with its slice of the iterator
    # (schedule would pick whichever worker is free).
    results = [worker.create_resource(reader, args=(iterator,)).fetch()
               for worker in coordinator._cluster.workers]
    seen = [{i for i, n in enumerate(result[0]) if n} for result in results]
    # The first 32 ids a worker reads: all of the data when it is not sharded, a different half
    # on each worker when it is (a shuffle before the shard also gives a half, another each pass).
    first = [{i for i, n in enumerate(result[3]) if n} for result in results]
    every = set(range(NUM_IDS))
    expect(not all(ids == every for ids in first),
           ("each worker reads only part of the ids", "每个工作进程只读取一部分编号"), "not-sharded",
           ("with this strategy the input context is the same on every worker, so it cannot tell them "
            "apart; the worker's index can",
            "在这个策略下，每个工作进程收到的输入上下文都一样，无法用它区分工作进程；工作进程编号却可以"),
           ("the first 32 ids every worker read were all 32 ids of the data",
            "每个工作进程最先读到的 32 个编号，正好是数据中的全部 32 个编号"))
    expect(any(ids != first[0] for ids in first),
           ("the workers read different ids", "各工作进程读到的编号不同"), "same-shard",
           ("pick the shard with the index of the worker the pipeline is built on, not a constant",
            "要用构建流水线的那个工作进程的编号来选分片，而不是用常数"),
           (f"every worker read the same ids {_few(first[0])}",
            f"每个工作进程读到的都是同样的编号 {_few(first[0])}"))
    shared = sorted({i for one, other in itertools.combinations(seen, 2) for i in one & other})
    expect(not shared,
           ("no id is read by two workers", "没有哪个编号被两个工作进程同时读到"), "overlap",
           ("cut the shards before anything that differs between workers, such as a shuffle without a seed",
            "要在任何因工作进程而异的操作（例如不设种子的打乱）之前切分分片"),
           (f"ids {_few(shared)} were read by two workers", f"编号 {_few(shared)} 被两个工作进程读到了"))
    missing = sorted(every - set().union(*seen))
    expect(not missing,
           ("together the workers read every id", "各工作进程合起来读到了全部编号"), "coverage",
           ("the shards must make up the whole data together, one shard per worker",
            "各分片合起来必须是全部数据，每个工作进程一个分片"),
           (f"no worker read ids {_few(missing)}", f"没有工作进程读到编号 {_few(missing)}"))


def _expect_per_worker(dataset, name: str) -> None:
    """The dataset was built on every worker by the coordinator."""
    from tensorflow.python.distribute.coordinator import values

    expect(isinstance(dataset, values.PerWorkerDatasetFromDatasetFunction),
           (f"`{name}` has one dataset per worker", f"`{name}` 为每个工作进程各有一份数据集"),
           "per-worker-dataset",
           ("the coordinator must build the dataset on every worker from a function that calls "
            "the strategy's distribute_datasets_from_function",
            "数据集要由协调器根据一个调用策略 distribute_datasets_from_function 的函数，"
            "在每个工作进程上分别构建"),
           (f"`{name}` is a {type(dataset).__name__}", f"`{name}` 是 {type(dataset).__name__}"))


def _pipelines(contexts) -> list:
    """(num_input_pipelines, input_pipeline_id) of each context, for a failure line."""
    return [(c.num_input_pipelines, c.input_pipeline_id) for c in contexts[:4]]


def _few(ids) -> str:
    """At most six ids of a set, sorted, with … when there are more."""
    ids = sorted(ids)
    return str(ids[:6])[:-1] + (", …]" if len(ids) > 6 else "]")


def _read(counted: int = READ_BATCHES):
    """A reader run on a worker: id counts of the first `counted` batches, how many batches it got
    (of up to 2 * READ_BATCHES, or `counted`), the batch size, and the id counts of the first
    READ_BATCHES batches."""
    import tensorflow as tf

    @tf.function
    def read(iterator):
        counts, count, rows = tf.zeros([NUM_IDS], tf.int32), tf.constant(0), tf.constant(0)
        first = tf.zeros([NUM_IDS], tf.int32)
        for index in tf.range(max(2 * READ_BATCHES, counted)):
            optional = iterator.get_next_as_optional()
            if optional.has_value():
                ids = tf.cast(optional.get_value(), tf.int32)
                found = tf.math.bincount(ids, minlength=NUM_IDS, maxlength=NUM_IDS)
                if index < counted:
                    counts += found
                if index < READ_BATCHES:
                    first += found
                count += 1
                rows = tf.shape(ids)[0]
        return counts, count, rows, first

    return read
