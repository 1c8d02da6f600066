"""What recording the per-worker timeline costs: training time with and without it.

    python benchmarks/timeline_overhead.py [--steps 200] [--repeats 5]

Runs the same custom training loop (3 workers, 2 ps, in-process) alternately with and
without `pstutor.TimelineRecorder`, takes the median of each, and prints the ratio (and
the median of the ratios of neighbouring runs, which is less sensitive to load drift). The
course's budget is at most 5 % (ratio <= 1.05). A benchmark, not a test: run it on an idle
machine.
"""

from __future__ import annotations

import argparse
import statistics
import time

import pstutor


def main() -> None:
    """Measure and print the medians and their ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    pstutor.setup()
    import tensorflow as tf

    strategy = tf.distribute.ParameterServerStrategy(pstutor.in_process_cluster(3, 2))
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    x, y = pstutor.toy_classification(4096)

    def dataset_fn(context):
        data = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(4096).repeat()
        return data.batch(context.get_per_replica_batch_size(64))

    iterator = iter(coordinator.create_per_worker_dataset(
        lambda: strategy.distribute_datasets_from_function(dataset_fn)))
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.layers.Dense(64, activation="relu"),
                                     tf.keras.layers.Dense(1, activation="sigmoid")])
        optimizer = tf.keras.optimizers.legacy.SGD(0.05)
    loss_fn = tf.keras.losses.BinaryCrossentropy(reduction=tf.keras.losses.Reduction.NONE)

    def train(features, labels):
        with tf.GradientTape() as tape:
            loss = tf.nn.compute_average_loss(loss_fn(labels[:, None], model(features)))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    @tf.function
    def plain_step(it):
        return strategy.reduce("SUM", strategy.run(train, args=next(it)), axis=None)

    recorder = pstutor.TimelineRecorder(strategy, capacity=args.steps * (args.repeats + 1))

    @tf.function
    def recorded_step(it):
        start = recorder.begin()
        loss = strategy.reduce("SUM", strategy.run(train, args=next(it)), axis=None)
        recorder.end(start, loss)
        return loss

    def run(record: bool) -> float:
        started = time.perf_counter()
        for _ in range(args.steps):
            if record:
                coordinator.schedule(recorded_step, args=(iterator,))
            else:
                coordinator.schedule(plain_step, args=(iterator,))
        coordinator.join()
        if record:
            recorder.steps()  # reading the table back is part of the cost
        return time.perf_counter() - started

    run(False), run(True)  # trace both functions before timing
    plain, recorded = [], []
    for repeat in range(args.repeats):  # alternate which goes first: no order bias
        for record in (False, True) if repeat % 2 == 0 else (True, False):
            (recorded if record else plain).append(run(record))
    without, with_ = statistics.median(plain), statistics.median(recorded)
    paired = statistics.median(r / p for r, p in zip(recorded, plain, strict=True))
    print(f"{args.steps} steps, median of {args.repeats} runs")
    print(f"without recording  {without:.3f} s")
    print(f"with recording     {with_:.3f} s")
    print(f"ratio of medians   {with_ / without:.3f}  (budget: 1.05)")
    print(f"median pair ratio  {paired:.3f}  (each run against its neighbour: less noise)")


if __name__ == "__main__":
    main()
