"""The child side of `pstutor.compare`: role `compare` of `python -m pstutor.child`.

Two uses, both in a fresh process (logical devices can only be configured before the
TensorFlow runtime starts, and a fresh process makes every strategy start from scratch):

- `bench STRATEGY --examples N ...`: train the comparison model under one strategy and
  print one line `RESULT {json}` with the measurements;
- `script PATH ARGS...`: run a Python program (e.g. a lesson's multi-worker program).

`pstutor.child` has already tied the process to its parent and called `pstutor.setup()`.
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import sys
import time

from pstutor.clusters import in_process_cluster

NUM_FEATURES = 8
NUM_EXAMPLES = 1024
# Traced and trained before the clock starts. 512 = 64 x 8: whole executions of
# steps_per_execution=8 at a global batch of 32 or 64, so every strategy warms up on the
# same number of examples and all losses are measured after the same training.
WARMUP_EXAMPLES = 512


# The strategy-specific code: the only lines that differ between the four runs.
# `pstutor.compare.strategy_code` shows these bodies, and the diff between them.
def make_none(tf):
    """No distribution: the default strategy, one replica on one device."""
    return tf.distribute.get_strategy()


def make_mirrored(tf):
    """One replica per GPU; without GPUs, two logical CPU devices (set before the runtime starts)."""
    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    devices = tf.config.list_logical_devices("GPU" if gpus else "CPU")
    return tf.distribute.MirroredStrategy([d.name for d in devices])


def make_mwms(tf):
    """One replica per worker process; TF_CONFIG (set by the launcher) names the workers."""
    return tf.distribute.MultiWorkerMirroredStrategy()


def make_ps(tf):
    """Two workers and one ps as servers in this process; this process is the coordinator."""
    resolver = in_process_cluster(2, 1)
    return tf.distribute.ParameterServerStrategy(resolver)


MAKERS = {"none": make_none, "mirrored": make_mirrored, "mwms": make_mwms, "ps": make_ps}

# Synchronous replicas and MWMS workers split one shuffled stream, so they must agree on its
# order: one fixed seed. Parameter server workers each read their own copy of the whole
# pipeline (lesson 5): a shared seed would make every worker read the same batches in the
# same order, so they shuffle without one.
SHUFFLE_SEEDS = {"none": 0, "mirrored": 0, "mwms": 0, "ps": None}


def bench(name: str, examples: int, batch_size: int, learning_rate: float, steps_per_execution: int,
          launched: float) -> dict:
    """Train the small model on `examples` examples under one strategy; return the measurements."""
    import pstutor

    pstutor.setup()
    import numpy as np
    import tensorflow as tf

    strategy = MAKERS[name](tf)
    replicas = strategy.num_replicas_in_sync
    global_batch = batch_size * replicas  # best practice: per-replica batch x replicas
    x, y = pstutor.toy_classification(NUM_EXAMPLES, NUM_FEATURES, seed=0)
    dataset = _dataset(tf, x, y, global_batch, shuffle_seed=SHUFFLE_SEEDS[name])
    tf.keras.utils.set_random_seed(0)
    with strategy.scope():
        model = _model(tf)
        model.compile(
            optimizer=tf.keras.optimizers.legacy.SGD(learning_rate * replicas),  # scaled with replicas
            loss=tf.keras.losses.BinaryCrossentropy(from_logits=True),
            steps_per_execution=steps_per_execution,
        )

    def steps(count: int) -> int:
        whole = max(1, round(count / global_batch / steps_per_execution))
        return whole * steps_per_execution

    class Timer(tf.keras.callbacks.Callback):
        """Times one epoch: fit waits for all of the epoch's steps before `on_epoch_end`."""

        def on_epoch_begin(self, epoch, logs=None):
            self.start = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            self.seconds = time.perf_counter() - self.start

    timer = Timer()
    warmup, timed = steps(WARMUP_EXAMPLES), steps(examples)
    model.fit(dataset, epochs=1, steps_per_epoch=warmup, verbose=0)
    ready = time.time()
    model.fit(dataset, epochs=1, steps_per_epoch=timed, verbose=0, callbacks=[timer])
    plain = _model(tf)  # the loss is measured the same way for all: no strategy, all the data
    plain.set_weights(model.get_weights())
    logits = plain(x, training=False)[:, 0]
    loss = float(tf.reduce_mean(tf.keras.losses.binary_crossentropy(y, logits, from_logits=True)))
    return {
        "strategy": name,
        "replicas": int(replicas),
        "global_batch": int(global_batch),
        "examples": int(timed * global_batch),
        "examples_per_s": timed * global_batch / timer.seconds,
        "steps_per_s": timed / timer.seconds,
        "loss": loss if np.isfinite(loss) else float("nan"),
        "startup_s": ready - launched,
    }


def _dataset(tf, x, y, global_batch: int, shuffle_seed: int | None):
    """The repeated, shuffled training data; under MWMS each worker keeps its DATA shard."""
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return (tf.data.Dataset.from_tensor_slices((x, y)).shuffle(len(x), seed=shuffle_seed).repeat()
            .batch(global_batch).with_options(options))


def _model(tf):
    """The comparison model: 8 features, one hidden layer of 16, one logit."""
    return tf.keras.Sequential([
        tf.keras.Input(shape=(NUM_FEATURES,)),
        tf.keras.layers.Dense(16, activation="relu"),
        tf.keras.layers.Dense(1),
    ])


def main(argv: list[str] | None = None) -> int:
    """Entry point (from `pstutor.child`): `bench` or `script`."""
    parser = argparse.ArgumentParser(prog="python -m pstutor.child compare")
    modes = parser.add_subparsers(dest="mode", required=True)
    run = modes.add_parser("bench")
    run.add_argument("strategy", choices=sorted(MAKERS))
    run.add_argument("--examples", type=int, required=True)
    run.add_argument("--batch-size", type=int, required=True)
    run.add_argument("--learning-rate", type=float, required=True)
    run.add_argument("--steps-per-execution", type=int, default=1)
    run.add_argument("--launched", type=float, required=True)
    script = modes.add_parser("script")
    script.add_argument("path")
    script.add_argument("args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.mode == "script":
        sys.argv = [args.path, *args.args]
        runpy.run_path(args.path, run_name="__main__")
        return 0
    result = bench(args.strategy, args.examples, args.batch_size, args.learning_rate,
                   args.steps_per_execution, args.launched)
    if args.strategy != "mwms" or json.loads(os.environ["TF_CONFIG"])["task"]["index"] == 0:
        print("RESULT " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    from pstutor.child import main as child_main

    sys.exit(child_main(["compare", *sys.argv[1:]]))
