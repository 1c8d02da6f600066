"""The timeline recorder: which worker ran which training step, and when.

Parameter server training is asynchronous: steps are queued on the coordinator and run on
whichever worker is free. To make that visible, a step function stamps its start and end
time and the index of the worker running it into one row of a small table. Each worker
keeps its own table, in its own memory (`tf.Variable(..., per_worker_variable=True)`), so
the stamp costs no network round trip; the coordinator reads the tables once, after
`join()`. No extra outputs and no per-step fetches: this keeps the cost within a few
percent (benchmarks/timeline_overhead.py measures it). A step that ran twice (retried on
another worker after a failure) appears in two workers' tables, once each.

A worker's table dies with the worker. The recorder keeps every row it has read, so steps
read before a worker was killed stay on the timeline; steps it ran after the last read
are lost with it. The tables may also be read while steps run (rows not yet written are
skipped), for example to wait until a worker has run steps.
"""

from __future__ import annotations

import dataclasses

from pstutor.language import say


@dataclasses.dataclass(frozen=True, order=True)
class Step:
    """One executed step: its number in order of starting, its worker, start and end (s)."""

    step: int
    worker: int
    start: float
    end: float


class TimelineRecorder:
    """Per-worker tables of (start, end) per step, read by the coordinator after `join()`.

    Create it after the strategy and its `ClusterCoordinator`. In the step function call
    `start = recorder.begin()` first and `recorder.end(start, loss)` last; nothing changes
    on the coordinator side. After `join()`, `recorder.steps()` gives the records. Each
    worker records up to `capacity` steps; `recorder.dropped` counts any beyond that (the
    last row then holds the latest step).
    """

    def __init__(self, strategy, capacity: int = 10_000) -> None:
        import tensorflow as tf

        if getattr(strategy, "_cluster_coordinator", None) is None:
            raise RuntimeError(say(
                "Create the ClusterCoordinator before the TimelineRecorder: "
                "coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)",
                "请先创建 ClusterCoordinator，再创建 TimelineRecorder："
                "coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)"))
        self.capacity = capacity
        with strategy.scope():  # one table and one row counter in each worker's own memory
            self._table = tf.Variable(tf.zeros([capacity, 2], tf.float64), trainable=False,
                                      name="timeline", per_worker_variable=True)
            self._rows = tf.Variable(tf.zeros([], tf.int64), trainable=False,
                                     name="timeline_rows", per_worker_variable=True)
        self.dropped = 0
        self._read: set[tuple[float, float, int]] = set()  # every row read so far: (start, end, worker)
        self.origin = 0.0  # absolute time (epoch seconds) that the steps' times count from
        self._traced = False  # set when a step function using end() is traced

    @staticmethod
    def begin():
        """Call first in the step function: the start time (a tensor)."""
        import tensorflow as tf

        return tf.timestamp()

    def end(self, start, *after) -> None:
        """Call last in the step function: stamp the end, after `after` has been computed."""
        import tensorflow as tf

        self._traced = True
        with tf.control_dependencies(tf.nest.flatten(after)):  # end after the work is done
            finished = tf.timestamp()
        # Past `capacity` the last row is overwritten (and counted as dropped by steps()).
        row = tf.minimum(self._rows.assign_add(1) - 1, self.capacity - 1)
        self._table.scatter_nd_update(tf.reshape(row, [1, 1]), tf.stack([start, finished])[None, :])

    def steps(self) -> list[Step]:
        """Every recorded step (call after `join()`), numbered in order of starting; times from 0."""
        if not self._traced:  # no step function has used the recorder yet
            return []
        counts = [int(c.numpy()) for c in self._rows.read_all()]
        tables = [t.numpy() for t in self._table.read_all()]
        self.dropped = sum(max(0, n - self.capacity) for n in counts)
        self._read.update(
            (float(table[i, 0]), float(table[i, 1]), worker)
            for worker, (table, count) in enumerate(zip(tables, counts, strict=True))
            for i in range(min(count, self.capacity))
            if table[i, 1] > 0  # a row is written when its step ends
        )
        rows = sorted(self._read)
        if not rows:
            return []
        origin = self.origin = rows[0][0]
        return [Step(n, worker, start - origin, end - origin)
                for n, (start, end, worker) in enumerate(rows)]
