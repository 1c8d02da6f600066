"""Staleness: how many other updates the parameter servers applied while a step was computing.

An asynchronous worker reads the variables, computes a gradient from them and writes its
update; meanwhile the other workers write theirs, so the update lands on variables newer
than those it was computed from. A version counter on the ps measures this: the step reads
it together with the variables and adds 1 to it after its write, so

    staleness = version written - version read - 1

is the number of other updates applied in between. `make_step` is that step (lesson 10
shows the same code), `train` runs it under a `ClusterCoordinator` and returns one record
per update; benchmarks/staleness.py sweeps the set-ups.

What makes the staleness a matter of design rather than of scheduling: each worker's input
sleeps `delay` seconds before it hands over a batch (`pstutor.slow_input.slowed`), and the
step reads the variables before it asks for the batch, so every update spans one delay
while the step's own CPU time is a few milliseconds; and the workers' steps are spread
evenly over the delay (`per_worker_input`). With W equal workers the other W-1 then each
write once within an update, except where the steps' jitter has moved two workers' phases
together: a write that falls in the few milliseconds between a worker's write and its next
read is counted by none of that worker's updates. A straggler, slowed `slowdown` times,
spans that many delays. The problem is linear regression with full-batch gradients:
without sampling noise, the only thing that differs between set-ups is how stale the
gradients are, and the stability limit of stale gradient descent on it is known
(`stability_limit`).

One thing the counter cannot settle: `assign_add` and the read of its result are two ops
(resource_variable_ops.py, `assign_add` returns `_lazy_read` of the assignment), so two
workers that write within microseconds of each other can both read back the later
version; benchmarks/staleness.py counts such duplicates.
"""

from __future__ import annotations

import dataclasses
import math
import time

import numpy as np

NUM_EXAMPLES = 256
NUM_FEATURES = 4


@dataclasses.dataclass(frozen=True)
class Problem:
    """Linear regression y = x w + noise, its curvature and the lowest loss it can reach."""

    x: np.ndarray
    y: np.ndarray
    curvature: float  # the largest eigenvalue of x^T x / n: SGD with delay 0 is stable below 2 / curvature
    minimum_loss: float

    def loss(self, weights: np.ndarray) -> float:
        """Half the mean squared error of `weights` (the loss the step minimises)."""
        return float(np.mean((self.x @ weights - self.y) ** 2) / 2)


def regression_problem(seed: int = 0) -> Problem:
    """The course's staleness problem: 256 examples, 4 features, noise 0.1. Well conditioned
    (curvatures 0.82 to 1.08), so gradient descent near its stability limit needs few updates."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(NUM_EXAMPLES, NUM_FEATURES)).astype(np.float32)
    y = (x @ rng.normal(size=NUM_FEATURES) + 0.1 * rng.normal(size=NUM_EXAMPLES)).astype(np.float32)
    curvature = float(np.linalg.eigvalsh(x.T.astype(np.float64) @ x / NUM_EXAMPLES).max())
    best = np.linalg.lstsq(x.astype(np.float64), y.astype(np.float64), rcond=None)[0]
    return Problem(x, y, curvature, float(np.mean((x @ best - y) ** 2) / 2))


def stability_limit(delay: int) -> float:
    """The largest learning rate x curvature for which gradient descent on a quadratic stays
    stable when every gradient is `delay` updates old: 2 sin(pi / (4 delay + 2)).

    The update w <- w - a w_(t - delay) along one eigenvector is stable while every root of
    z^(delay+1) - z^delay + a has modulus below 1; the first roots to cross the unit circle
    do so at a = 2 sin(pi / (4 delay + 2)): 2 for delay 0, 1 for delay 1, 0.445 for delay 3.
    """
    return 2 * math.sin(math.pi / (4 * delay + 2))


def make_step(weights, version, learning_rate: float, scale_by_staleness: bool = False):
    """The training step with a version counter; it returns what one update did.

    Order matters, and within one function TensorFlow only orders on its own the ops that
    use the same resource (auto_control_deps.py): reads of `version` run before its
    `assign_add`, reads of `weights` before their `assign_sub`. The input's sleep uses
    another resource (the iterator), so `tf.control_dependencies` puts the reads before it,
    the version's increment after the weights' update, and, with `scale_by_staleness`, the
    second read of the version after the sleep.
    """
    import tensorflow as tf

    @tf.function
    def step(iterator):
        read = version.read_value()
        with tf.control_dependencies([read]):
            current = weights.read_value()
            started = tf.timestamp()
        with tf.control_dependencies([current, started]):
            x, y = next(iterator)  # sleeps: meanwhile the other workers write their updates
        error = tf.linalg.matvec(x, current) - y
        loss = tf.reduce_mean(error**2) / 2
        gradient = tf.linalg.matvec(x, error, transpose_a=True) / tf.cast(tf.shape(x)[0], tf.float32)
        rate = learning_rate
        if scale_by_staleness:  # the staleness as it is just before the write
            with tf.control_dependencies([x]):
                applied_since = version.read_value() - read  # updates written since this step read
            rate = learning_rate / (1.0 + tf.cast(applied_since, tf.float32))
        update = weights.assign_sub(rate * gradient)
        with tf.control_dependencies([update]):
            written = version.assign_add(1)
        with tf.control_dependencies([written]):
            seconds = tf.timestamp() - started
        worker = tf.distribute.coordinator.experimental_get_current_worker_index()
        return {"worker": worker, "read": read, "written": written, "loss": loss,
                "started": started, "seconds": seconds}

    return step


def per_worker_input(problem: Problem, delay: float, num_workers: int, slowdown: float):
    """A `dataset_fn`: every worker reads the whole data set again and again, each batch `delay`
    seconds late, the last worker's `slowdown` times later (a straggler when above 1).

    The workers leave the warm-up together; left so, each would write at about the moment
    the others read and write, and whether a write falls inside another's update would be
    a toss-up. So worker i's first batch comes i / num_workers of a delay later than the
    others': their steps are spread evenly over each delay.
    """
    import tensorflow as tf

    from pstutor.slow_input import slowed

    def dataset_fn():
        worker = tf.distribute.coordinator.experimental_get_current_worker_index()
        own_delay = tf.where(worker == num_workers - 1, slowdown * delay, delay)
        batches = tf.data.Dataset.from_tensors((problem.x, problem.y))
        first = slowed(batches.repeat(), own_delay + delay * tf.cast(worker, tf.float32) / num_workers)
        # take(1), not a one-element input: SleepDataset sleeps before asking its input, also when
        # the input has ended, so a finite input would cost one more sleep at its end
        dataset = first.take(1).concatenate(slowed(batches.repeat(), own_delay))
        options = tf.data.Options()
        options.experimental_optimization.inject_prefetch = False  # no batch ready before the step asks
        return dataset.with_options(options)

    return dataset_fn


def train(strategy, coordinator, num_workers: int, problem: Problem, *, updates: int, delay: float,
          rate: float, slowdown: float = 1.0, scale_by_staleness: bool = False) -> dict:
    """Train from zero weights for `updates` updates; the records, in the order they were written.

    `rate` is learning rate x curvature. One warm-up step on every worker first (tracing,
    the function's first run there), then the weights and the version start again at 0.
    """
    import tensorflow as tf

    with strategy.scope():
        weights = tf.Variable(tf.zeros(NUM_FEATURES))
        version = tf.Variable(0, dtype=tf.int64)
    step = make_step(weights, version, rate / problem.curvature, scale_by_staleness)
    warm = iter(coordinator.create_per_worker_dataset(
        lambda: tf.data.Dataset.from_tensors((problem.x, problem.y)).repeat()))
    warmed: set[int] = set()
    while len(warmed) < num_workers:  # until every worker has run the step once
        warmed.update(int(r.fetch()["worker"]) for r in _run(coordinator, step, warm, num_workers))
    weights.assign(tf.zeros(NUM_FEATURES))
    version.assign(0)
    iterator = iter(coordinator.create_per_worker_dataset(
        per_worker_input(problem, delay, num_workers, slowdown)))
    start = time.perf_counter()
    results = _run(coordinator, step, iterator, updates)
    seconds = time.perf_counter() - start
    records = [{key: value.item() for key, value in result.fetch().items()} for result in results]
    records.sort(key=lambda record: record["written"])
    first = min(record["started"] for record in records)
    for record in records:
        record["started"] -= first  # from the run's first read
    return {"records": records, "seconds": seconds, "final_loss": problem.loss(weights.numpy())}


def _run(coordinator, step, iterator, count: int) -> list:
    """Schedule `count` steps, wait for all of them; their `RemoteValue`s."""
    results = [coordinator.schedule(step, args=(iterator,)) for _ in range(count)]
    coordinator.join()
    return results
