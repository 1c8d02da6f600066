"""An embedding table sharded over parameter servers: each task's memory, each ps's bytes per step.

    python benchmarks/embedding_table.py [--rows 2000000] [--width 32] [--steps 200] [--rounds 3]
                                         [--ps 1,2,4] [--dry-run] [--folder PATH]

Lesson 10 shows where a recommender's table lives and what a step moves. The model: FIELDS
hashed ids per example looked up in one `Embedding` table (rows x width float32), flattened
into a logistic layer, trained with Adagrad (legacy Keras), whose accumulator slot is as large
as the table. Under `ParameterServerStrategy` the table is split into one shard per ps
(`FixedShardsPartitioner(num_ps)`); workers and ps are real processes (`LocalCluster`), this
process is the coordinator. Under `MultiWorkerMirroredStrategy` two worker processes
(`pstutor.compare.run_workers`, running this file with `--mwms-worker`) each hold all of it.

Memory: each task's resident memory (VmRSS) when it is still empty (server up, nothing
created: the runtime's baseline), after the model is built, and after training (the slots
exist from the first step). TensorFlow's default CPU allocator on x86 is oneDNN's, which
keeps freed memory for reuse (a BFC allocator), so a task's RSS would show the most it ever
used, not what it holds: the table's initializer alone has three table-sized tensors alive at
once (uniform numbers, scaled, shifted). So the tasks run with `TF_ENABLE_ONEDNN_OPTS=0`,
where large blocks go back to the system when freed, and one run with 2 ps keeps the default
to show the difference. An MWMS worker's malloc still keeps hundreds of MB that the start of
training freed; each worker also reports its RSS after `malloc_trim(0)` has returned them.

Bytes: the kernel's counters of every TCP socket each process holds (`pstutor.task_usage`),
read before and after `--steps` steps, in `--rounds` rounds, divided by the steps. Next to
them, what a step must move: the rows it looks up (batch x FIELDS ids, x width x 4 bytes; the
ids are spread evenly over the shards) and the whole table. Both quantities are fixed by the
design, not by timing, so a busy machine changes when they are reached, not what they are.

The results go to `pstutor/measurements/embedding_table.json` (every round's numbers, the
settings, the machine, the load average before and after, and the date).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from unittest import mock

import pstutor
from pstutor import measured, task_usage
from pstutor.language import say

NUM_WORKERS = 2
FIELDS = 8  # hashed categorical ids per example (user, ad, ...), all looked up in the one table
BATCH_SIZE = 256  # examples per worker step
WARMUP_STEPS = 10  # tracing, and the first step creates the optimizer's slots
ID_BYTES = 8  # an int64 id: what a step sends to a ps to say which rows (and which gradient rows)
MWMS_FLAG = "--mwms-worker"
MWMS_STAGES = ("empty", "created", "trained", "trimmed")


def build_model(rows: int, width: int):
    """The click-through model and its optimizer: ids -> one embedding table -> a logistic layer."""
    import tensorflow as tf

    model = tf.keras.Sequential([
        tf.keras.Input(shape=(FIELDS,), dtype=tf.int64),
        tf.keras.layers.Embedding(rows, width),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(1),
    ])
    return model, tf.keras.optimizers.legacy.Adagrad(learning_rate=0.05)


def make_dataset(rows: int):
    """Endless batches of FIELDS ids hashed into the table's rows, and a label to train on.

    The raw ids are random 64-bit numbers (an open vocabulary), so a batch's ids are all but
    never repeated: the rows a step touches are its batch x FIELDS lookups. Every worker reads
    the same stream; what is measured does not depend on which ids they are.
    """
    import tensorflow as tf

    hashing = tf.keras.layers.Hashing(num_bins=rows)
    examples = tf.data.Dataset.random(seed=0).batch(FIELDS)
    examples = examples.map(lambda raw: (hashing(raw), tf.cast(raw[0] % 2, tf.float32)))
    return examples.batch(BATCH_SIZE).prefetch(2)


def make_train_step(strategy, model, optimizer) -> Callable:
    """One step on one replica per worker: forward, gradients (IndexedSlices for the table), Adagrad."""
    import tensorflow as tf

    loss_fn = tf.keras.losses.BinaryCrossentropy(from_logits=True, reduction=tf.keras.losses.Reduction.NONE)
    global_batch = BATCH_SIZE * strategy.num_replicas_in_sync

    def replica_step(batch):
        ids, clicks = batch
        with tf.GradientTape() as tape:
            losses = loss_fn(clicks[:, None], model(ids))
            loss = tf.nn.compute_average_loss(losses, global_batch_size=global_batch)
        gradients = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables, strict=True))
        return loss

    @tf.function
    def train_step(iterator: Iterator):
        return strategy.run(replica_step, args=(next(iterator),))

    return train_step


def memory(pids: dict[str, int]) -> dict[str, int]:
    """Each task's resident bytes now."""
    return {name: task_usage.resident_bytes(pid) for name, pid in pids.items()}


def traffic_rounds(run_steps: Callable[[int], None], pids: dict[str, int], steps: int,
                   rounds: int) -> dict[str, dict[str, list[float]]]:
    """Per task, bytes sent, received and sent again (retransmitted) per step, in each round."""
    kinds = ("sent", "received", "retransmitted")
    per_step: dict[str, dict[str, list[float]]] = {name: {kind: [] for kind in kinds} for name in pids}
    for _ in range(rounds):
        before = task_usage.snapshot(pids.values())
        run_steps(steps)
        moved = task_usage.traffic_between(before, task_usage.snapshot(pids.values()))
        for name, pid in pids.items():
            traffic = moved.get(pid, task_usage.Traffic())
            for kind in kinds:
                per_step[name][kind].append(round(getattr(traffic, kind) / steps, 1))
    return per_step


def onednn(enabled: bool):
    """While inside, processes started use oneDNN (TensorFlow's default on x86) or not."""
    return mock.patch.dict(os.environ, {"TF_ENABLE_ONEDNN_OPTS": "1" if enabled else "0"})


def measure_ps(num_ps: int, rows: int, width: int, steps: int, rounds: int, *,
               with_onednn: bool = False) -> dict:
    """One ParameterServerStrategy run: 2 worker processes, `num_ps` ps processes, the table sharded."""
    import tensorflow as tf

    from pstutor.local_cluster import LocalCluster

    with onednn(with_onednn), LocalCluster(NUM_WORKERS, num_ps) as cluster:
        pids = {f"{job} {index}": cluster.pid(job, index) for job, index in cluster.tasks}
        pids["coordinator"] = os.getpid()
        rss = {"empty": memory(pids)}
        strategy = tf.distribute.ParameterServerStrategy(
            cluster.resolver(),
            variable_partitioner=tf.distribute.experimental.partitioners.FixedShardsPartitioner(num_ps))
        coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
        with strategy.scope():
            model, optimizer = build_model(rows, width)
        rss["created"] = memory(pids)
        train_step = make_train_step(strategy, model, optimizer)
        iterator = iter(coordinator.create_per_worker_dataset(
            lambda: strategy.distribute_datasets_from_function(lambda _: make_dataset(rows))))

        def run_steps(count: int) -> None:
            for _ in range(count):
                coordinator.schedule(train_step, args=(iterator,))
            coordinator.join()

        run_steps(WARMUP_STEPS)
        traffic = traffic_rounds(run_steps, pids, steps, rounds)
        rss["trained"] = memory(pids)
    return {"strategy": "ps", "num_ps": num_ps, "onednn": with_onednn, "rss_bytes": rss,
            "bytes_per_step": traffic}


def mwms_worker(rows: int, width: int, steps: int, rounds: int) -> dict:
    """This process as one worker of MultiWorkerMirroredStrategy (TF_CONFIG names the others)."""
    import tensorflow as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    pids = {"worker": os.getpid()}
    rss = {"empty": memory(pids)}
    with strategy.scope():
        model, optimizer = build_model(rows, width)
    rss["created"] = memory(pids)
    train_step = make_train_step(strategy, model, optimizer)
    iterator = iter(strategy.distribute_datasets_from_function(lambda _: make_dataset(rows)))

    def run_steps(count: int) -> None:
        for _ in range(count):
            loss = train_step(iterator)
        float(loss)  # the last step has finished on this worker

    run_steps(WARMUP_STEPS)
    traffic = traffic_rounds(run_steps, pids, steps, rounds)
    rss["trained"] = memory(pids)
    ctypes.CDLL(None).malloc_trim(0)  # glibc: give the free memory it keeps back to the system
    rss["trimmed"] = memory(pids)
    return {"rss_bytes": {when: values["worker"] for when, values in rss.items()},
            "bytes_per_step": traffic["worker"]}


def measure_mwms(rows: int, width: int, steps: int, rounds: int) -> dict:
    """One MultiWorkerMirroredStrategy run: 2 worker processes, each holding the whole table."""
    from pstutor.compare import run_workers

    args = [MWMS_FLAG, "--rows", str(rows), "--width", str(width), "--steps", str(steps),
            "--rounds", str(rounds)]
    with onednn(False):
        runs = run_workers(Path(__file__), NUM_WORKERS, args=args, timeout=300)
    workers = {}
    for run in runs:
        line = next((line for line in run.output.splitlines() if line.startswith("RESULT ")), None)
        if run.returncode != 0 or line is None:
            raise RuntimeError(say(f"MWMS worker {run.task_id} failed:\n{run.output[-2000:]}",
                                   f"MWMS 工作进程 {run.task_id} 运行失败：\n{run.output[-2000:]}"))
        workers[f"worker {run.task_id}"] = json.loads(line[len("RESULT "):])
    return {"strategy": "mwms", "num_ps": 0, "onednn": False,
            "rss_bytes": {when: {name: w["rss_bytes"][when] for name, w in workers.items()}
                          for when in MWMS_STAGES},
            "bytes_per_step": {name: w["bytes_per_step"] for name, w in workers.items()}}


def expected(rows: int, width: int) -> dict:
    """What the design says: the table, its Adagrad slot, the rows one step looks up and their ids.

    TensorFlow gathers a row for every id looked up, repeated ids too (embedding_lookup
    does not deduplicate), and the gradient has a row for each (IndexedSlices).
    """
    lookups = BATCH_SIZE * FIELDS
    return {"table_bytes": rows * width * 4, "slot_bytes": rows * width * 4,
            "lookups_per_step": lookups, "unique_rows_per_step": unique_rows_per_step(rows),
            "lookup_bytes_per_step": lookups * width * 4, "id_bytes_per_step": lookups * ID_BYTES}


def unique_rows_per_step(rows: int, batches: int = 20) -> float:
    """The distinct rows a batch touches, on average over `batches` of the same stream."""
    import tensorflow as tf

    batches_of_ids = (tf.reshape(ids, [-1]) for ids, _ in make_dataset(rows).take(batches))
    return statistics.mean(int(tf.size(tf.unique(ids)[0])) for ids in batches_of_ids)


def report(run: dict, facts: dict) -> None:
    """Print one run's memory and bytes, in the course's language."""
    mib = 2**20
    table = facts["table_bytes"] / mib
    if run["strategy"] == "ps":
        allocator = say(", oneDNN's allocator", "，oneDNN 分配器") if run["onednn"] else ""
        print(say(f"\nParameterServerStrategy, {run['num_ps']} ps{allocator}: each ps's shard "
                  f"{table / run['num_ps']:.0f} MiB, its Adagrad slot as much again",
                  f"\nParameterServerStrategy，{run['num_ps']} 个参数服务器{allocator}：每个参数服务器的分片 "
                  f"{table / run['num_ps']:.0f} MiB，Adagrad 槽变量同样大小"))
    else:
        print(say(f"\nMultiWorkerMirroredStrategy: each worker a whole copy ({table:.0f} MiB, and its slot)",
                  f"\nMultiWorkerMirroredStrategy：每个工作进程一份完整副本（{table:.0f} MiB，另加槽变量）"))
    rss = run["rss_bytes"]
    for name in rss["empty"]:
        empty, created, trained = (rss[when][name] / mib for when in ("empty", "created", "trained"))
        trimmed = (f", malloc_trim +{rss['trimmed'][name] / mib - empty:6.1f} MiB" if "trimmed" in rss
                   else "")
        print(say(f"  {name:12} empty {empty:5.0f} MiB, built +{created - empty:6.1f} MiB, "
                  f"trained +{trained - empty:6.1f} MiB{trimmed}",
                  f"  {name:12} 空任务 {empty:5.0f} MiB，建模后 +{created - empty:6.1f} MiB，"
                  f"训练后 +{trained - empty:6.1f} MiB{trimmed.replace(', ', '，')}"))
    for name, traffic in run["bytes_per_step"].items():
        sent, received = (statistics.median(traffic[k]) / 1024 for k in ("sent", "received"))
        print(say(f"  {name:12} per step: sent {sent:6.1f} KiB, received {received:6.1f} KiB",
                  f"  {name:12} 每步：发送 {sent:6.1f} KiB，接收 {received:6.1f} KiB"))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000, help="rows of the embedding table")
    parser.add_argument("--width", type=int, default=32, help="floats per row")
    parser.add_argument("--steps", type=int, default=200, help="steps per measured round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ps", default="1,2,4", help="the numbers of ps to shard the table over")
    parser.add_argument("--no-mwms", action="store_true", help="skip MultiWorkerMirroredStrategy")
    parser.add_argument("--no-onednn-run", action="store_true", help="skip the run with oneDNN's allocator")
    parser.add_argument("--dry-run", action="store_true", help="print the results, write nothing")
    parser.add_argument("--folder", type=Path, default=measured.FOLDER,
                        help="write embedding_table.json into this folder (default: pstutor/measurements/)")
    parser.add_argument(MWMS_FLAG, action="store_true", help=argparse.SUPPRESS)  # one MWMS worker's side
    args = parser.parse_args(argv)
    try:
        args.ps = [int(n) for n in args.ps.split(",")]
    except ValueError:
        args.ps = []
    if min(args.width, args.steps) < 1 or args.rows < 1000 or args.rounds < 3 or min(args.ps, default=0) < 1:
        parser.exit(2, say("--rows must be at least 1000, --width and --steps at least 1, --rounds at least "
                           "3, --ps a list of positive numbers such as 1,2,4\n",
                           "--rows 至少为 1000，--width 和 --steps 至少为 1，--rounds 至少为 3，"
                           "--ps 须为正整数列表，例如 1,2,4\n"))
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.mwms_worker:
        print("RESULT", json.dumps(mwms_worker(args.rows, args.width, args.steps, args.rounds)), flush=True)
        return 0
    load_before = os.getloadavg()
    pstutor.setup()
    facts = expected(args.rows, args.width)
    runs = [measure_ps(n, args.rows, args.width, args.steps, args.rounds) for n in args.ps]
    if not args.no_onednn_run:
        runs.append(measure_ps(2, args.rows, args.width, args.steps, args.rounds, with_onednn=True))
    if not args.no_mwms:
        runs.append(measure_mwms(args.rows, args.width, args.steps, args.rounds))
    rows, kib = facts["lookups_per_step"], facts["lookup_bytes_per_step"] / 1024
    mib = facts["table_bytes"] / 2**20
    print(say(f"One step looks up {rows} rows: {kib:.0f} KiB of a {mib:.0f} MiB table.",
              f"每步查找 {rows} 行：共 {kib:.0f} KiB，而整张表有 {mib:.0f} MiB。"))
    for run in runs:
        report(run, facts)
    settings = {"rows": args.rows, "width": args.width, "fields": FIELDS, "batch_size": BATCH_SIZE,
                "workers": NUM_WORKERS, "warmup_steps": WARMUP_STEPS, "steps_per_round": args.steps,
                "rounds": args.rounds, "optimizer": "legacy Adagrad",
                "partitioner": "FixedShardsPartitioner(num_ps)"}
    results = {"settings": settings, "expected": facts, "runs": runs,
               "load_average": {"before": [round(x, 2) for x in load_before],
                                "after": [round(x, 2) for x in os.getloadavg()]}}
    if not args.dry_run:
        print(say("written:", "已写入："), measured.store("embedding_table", results, args.folder))
    return 0


if __name__ == "__main__":
    sys.exit(main())
