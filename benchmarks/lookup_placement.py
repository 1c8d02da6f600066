"""Where a StringLookup's table lives: seconds to read batches with lesson 4's three placements.

    python benchmarks/lookup_placement.py [--batches 240] [--rounds 5] [--dry-run]

Lesson 4 shows one short run of this measurement live and rests its conclusion on these
stored results: a timing the prose relies on needs at least a second of measured work per
variant and several rounds, which would make the lesson slow (the slow variants take about
five times as long as the fast one). The set-up is the lesson's: an in-process cluster of
3 workers and 2 ps, the toy words of lesson 4, lookup layers created under
`strategy.scope()`, outside it, or inside `dataset_fn`, and a function that only pulls
`--batches` preprocessed batches through a worker's pipeline. A round schedules as many
calls as there are workers (each goes to whichever worker's thread is free) and waits for
all of them; every variant first runs one untimed round (tracing, the table's copies on the
workers), then the variants take turns, in the same order in every round, so a change in
the machine's load hits all of them.

The results go to `pstutor/measurements/lookup_placement.json` (with the machine, its load
average before and after, and the date); rebuild lesson 04 afterwards. A benchmark, not a
test: run it on an otherwise idle machine if you can.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import pstutor
from pstutor import measured
from pstutor.language import say

NUM_WORKERS = 3
GLOBAL_BATCH_SIZE = 8


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=240, help="batches per call of the read function")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--dry-run", action="store_true", help="print the results, write nothing")
    args = parser.parse_args(argv)
    if args.rounds < 3 or args.batches < 1:
        print(say("--rounds must be at least 3, --batches at least 1",
                  "--rounds 至少为 3，--batches 至少为 1"), file=sys.stderr)
        return 2
    load_before = os.getloadavg()[0]
    pstutor.setup()
    import tensorflow as tf

    strategy = tf.distribute.ParameterServerStrategy(pstutor.in_process_cluster(NUM_WORKERS, 2))
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    data = pstutor.toy_words(num_examples=240, seed=0)
    vocabulary = sorted({word for words in data["features"] for word in words})

    def lookups():
        return (tf.keras.layers.StringLookup(vocabulary=vocabulary, mask_token=None),
                tf.keras.layers.StringLookup(vocabulary=["no", "yes"], num_oov_indices=0, mask_token=None))

    def make_dataset_fn(words_layer, labels_layer):
        def dataset_fn(input_context):
            global_batch = GLOBAL_BATCH_SIZE * strategy.num_replicas_in_sync
            batch_size = input_context.get_per_replica_batch_size(global_batch)
            dataset = tf.data.Dataset.from_tensor_slices(data).shuffle(len(data["label"])).repeat()
            dataset = dataset.batch(batch_size).map(
                lambda batch: (words_layer(batch["features"]), labels_layer(batch["label"])))
            return dataset.prefetch(2)
        return dataset_fn

    def dataset_fn_with_layers_inside(input_context):
        return make_dataset_fn(*lookups())(input_context)

    with strategy.scope():
        scoped = lookups()
    ways = {"under the scope": make_dataset_fn(*scoped),
            "outside the scope": make_dataset_fn(*lookups()),
            "inside dataset_fn": dataset_fn_with_layers_inside}
    iterators = {name: iter(coordinator.create_per_worker_dataset(
                     lambda fn=fn: strategy.distribute_datasets_from_function(fn)))
                 for name, fn in ways.items()}

    def id_sum(batch):
        words, labels = batch
        return tf.reduce_sum(words) + tf.reduce_sum(labels)

    @tf.function
    def read_batches(iterator):
        total = tf.constant(0, tf.int64)
        for _ in tf.range(args.batches):
            sums = strategy.run(id_sum, args=(next(iterator),))
            total += strategy.reduce(tf.distribute.ReduceOp.SUM, sums, axis=None)
        return total

    def seconds_for_one_round(iterator) -> float:
        started = time.perf_counter()
        for _ in range(NUM_WORKERS):
            coordinator.schedule(read_batches, args=(iterator,))
        coordinator.join()
        return time.perf_counter() - started

    for iterator in iterators.values():
        seconds_for_one_round(iterator)  # warm-up: not timed
    seconds: dict[str, list[float]] = {name: [] for name in iterators}
    for _ in range(args.rounds):
        for name, iterator in iterators.items():
            seconds[name].append(round(seconds_for_one_round(iterator), 4))
    results = {"batches_per_call": args.batches, "calls_per_round": NUM_WORKERS, "rounds": args.rounds,
               "seconds_per_round": seconds,
               "load_average": {"before": round(load_before, 2), "after": round(os.getloadavg()[0], 2)}}
    for name, times in seconds.items():
        print(f"{name:18}: {sum(times):.2f} s in all, median {statistics.median(times):.3f} s per round, "
              f"all {min(times):.3f}-{max(times):.3f}")
    if not args.dry_run:
        print("written:", measured.store("lookup_placement", results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
