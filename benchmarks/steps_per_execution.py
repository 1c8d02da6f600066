"""What `steps_per_execution` saves: time per training step of lesson 3's model with 1 and 10.

    python benchmarks/steps_per_execution.py [--steps 200] [--rounds 9] [--dry-run]

Lesson 3 shows these results instead of timing them itself: a timing the prose relies on
needs rounds of a second or more, and several of them, which would make the lesson slow.
The set-up is the lesson's: an in-process cluster of 3 workers and 2 ps, the same model,
data and `fit` call. Each configuration first runs one warm-up epoch (tracing, first
calls on each worker), then the two are timed in alternating rounds, so a change in the
machine's load hits both. An epoch is timed from `on_epoch_begin` to `on_epoch_end`,
which `fit` calls after `join()`: every step of the epoch has finished.

The results go to `pstutor/measurements/steps_per_execution.json` (with the machine, its
load average before and after, and the date); rebuild lesson 03 afterwards. A benchmark,
not a test: run it on an otherwise idle machine.
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

CONFIGURATIONS = (1, 10)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200, help="steps per timed round (a multiple of 10)")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--dry-run", action="store_true", help="print the results, write nothing")
    args = parser.parse_args(argv)
    if args.rounds < 4 or args.steps < 10 or args.steps % max(CONFIGURATIONS):
        print(say(f"--rounds must be at least 4 (for quartiles), --steps a multiple of {max(CONFIGURATIONS)}",
                  f"--rounds 至少为 4（才能算四分位数），--steps 必须是 {max(CONFIGURATIONS)} 的倍数"),
              file=sys.stderr)
        return 2
    load_before = os.getloadavg()[0]
    pstutor.setup()
    import tensorflow as tf

    strategy = tf.distribute.ParameterServerStrategy(pstutor.in_process_cluster(3, 2))
    x, y = pstutor.toy_classification(num_examples=1024, num_features=8, seed=0)
    dataset = (tf.data.Dataset.from_tensor_slices((x, y)).shuffle(len(x)).repeat()
               .batch(32).prefetch(tf.data.AUTOTUNE))

    def build_model(steps_per_execution: int):
        with strategy.scope():
            model = tf.keras.Sequential([
                tf.keras.Input(shape=(x.shape[1],)),
                tf.keras.layers.Dense(16, activation="relu"),
                tf.keras.layers.Dense(1),
            ])
            model.compile(optimizer=tf.keras.optimizers.legacy.SGD(learning_rate=0.3),
                          loss=tf.keras.losses.BinaryCrossentropy(from_logits=True),
                          steps_per_execution=steps_per_execution)
        return model

    class EpochTimer(tf.keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.start, self.cpu_start = time.perf_counter(), time.process_time()

        def on_epoch_end(self, epoch, logs=None):
            self.seconds = time.perf_counter() - self.start
            self.cpu_seconds = time.process_time() - self.cpu_start

    def seconds_per_epoch(model) -> tuple[float, float]:
        """Wall-clock and CPU seconds (all threads of this process: coordinator, workers, ps)."""
        timer = EpochTimer()
        model.fit(dataset, epochs=1, steps_per_epoch=args.steps, verbose=0, callbacks=[timer])
        return timer.seconds, timer.cpu_seconds

    models = {spe: build_model(spe) for spe in CONFIGURATIONS}
    for model in models.values():
        seconds_per_epoch(model)  # warm-up: not timed
    ms_per_step: dict[str, list[float]] = {str(spe): [] for spe in CONFIGURATIONS}
    cpu_ms_per_step: dict[str, list[float]] = {str(spe): [] for spe in CONFIGURATIONS}
    for round_ in range(args.rounds):
        order = CONFIGURATIONS if round_ % 2 == 0 else CONFIGURATIONS[::-1]
        for spe in order:
            wall, cpu = seconds_per_epoch(models[spe])
            ms_per_step[str(spe)].append(round(1000 * wall / args.steps, 3))
            cpu_ms_per_step[str(spe)].append(round(1000 * cpu / args.steps, 3))
    results = {"steps_per_round": args.steps, "rounds": args.rounds, "ms_per_step": ms_per_step,
               "cpu_ms_per_step": cpu_ms_per_step,
               "load_average": {"before": round(load_before, 2), "after": round(os.getloadavg()[0], 2)}}
    for clock, table in (("wall", ms_per_step), ("cpu", cpu_ms_per_step)):
        for spe, times in table.items():
            low, _, high = statistics.quantiles(times, n=4)
            print(f"{clock} steps_per_execution {spe:>2}: median {statistics.median(times):.2f} ms per step, "
                  f"middle half {low:.2f}-{high:.2f}, all {min(times):.2f}-{max(times):.2f}")
    if not args.dry_run:
        print("written:", measured.store("steps_per_execution", results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
