"""The timeline recorder: which worker ran which training step, and when.

Parameter server training is asynchronous: steps are queued on the coordinator and run on
whichever worker is free. To make that visible, a step function stamps the time when it
starts and ends, and the index of the worker running it; the coordinator keeps the
`RemoteValue`s and fetches them after `join()`. Recording adds two `tf.timestamp` ops and
one small tensor per step (see benchmarks/timeline_overhead.py for the cost).
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Step:
    """One executed step: its number, the worker that ran it, start/end in seconds, result."""

    step: int
    worker: int
    start: float
    end: float
    result: object = None


class TimelineRecorder:
    """Stamps steps inside the step function; collects them on the coordinator."""

    def __init__(self) -> None:
        self._scheduled: list[object] = []

    @staticmethod
    def begin():
        """Call first in the step function: the start time (a tensor)."""
        import tensorflow as tf

        return tf.timestamp()

    @staticmethod
    def end(start, result) -> dict:
        """Call last in the step function and return its value: `result` plus the stamps."""
        import tensorflow as tf

        with tf.control_dependencies(tf.nest.flatten(result)):  # end after the work is done
            finished = tf.timestamp()
        worker = tf.distribute.coordinator.experimental_get_current_worker_index()
        return {"result": result, "worker": worker, "start": start, "end": finished}

    def track(self, remote_value):
        """Keep the `RemoteValue` that `schedule` returned; gives it back unchanged."""
        self._scheduled.append(remote_value)
        return remote_value

    def steps(self) -> list[Step]:
        """Fetch every tracked step (call after `join()`); times start at 0 for the first."""
        fetched = [value.fetch() for value in self._scheduled]
        if not fetched:
            return []
        origin = min(float(f["start"]) for f in fetched)
        return [
            Step(i, int(f["worker"]), float(f["start"]) - origin, float(f["end"]) - origin,
                 _plain(f["result"]))
            for i, f in enumerate(fetched)
        ]


def _plain(value):
    """numpy scalars -> Python numbers, so results print cleanly."""
    return value.item() if hasattr(value, "item") and getattr(value, "size", 2) == 1 else value
