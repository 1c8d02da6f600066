"""The child side of `pstutor.compare`: role `compare` of `python -m pstutor.child`.

Two uses, both in a fresh process (logical devices can only be configured before the
TensorFlow runtime starts, and a fresh process makes every strategy start from scratch):

- `bench STRATEGY --examples N ...`: train the comparison model under one strategy and
  print one line `RESULT {json}` with the measurements (for `ps` this process is the
  coordinator of worker and ps processes that the launcher started);
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

NUM_FEATURES = 8
NUM_EXAMPLES = 1024
# Traced and trained before the clock starts (timed as the warm-up). 512 = 64 x 8: whole
# executions of steps_per_execution=8 at a global batch of 32 or 64, so with the defaults every
# strategy warms up on the same number of examples and all losses are measured after as many
# examples. Other settings round to whole executions per strategy, so the record says how many
# examples came before the loss (`loss_after_examples`).
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
    """Two workers and one ps, each its own process (TF_CONFIG, set by the launcher, names them)."""
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    return tf.distribute.ParameterServerStrategy(resolver)


MAKERS = {"none": make_none, "mirrored": make_mirrored, "mwms": make_mwms, "ps": make_ps}

# Every run reads one stream shuffled with a fixed seed (global and op seed, set before any
# dataset is built or traced). The parameter server's workers rebuild their pipeline for each
# `fit`, the other set-ups iterate one dataset again, so the timed pass of the ps reads
# another shuffled order (lesson 9 says so). The replicas
# of MirroredStrategy share each batch of it; two workers (MWMS, or the parameter server's)
# split it: MWMS by auto-sharding, parameter server workers, which each run the whole
# pipeline themselves (lesson 5), by keeping every other batch. (A shared seed without the
# split would give both ps workers the same batches in the same order.)
SHUFFLE_SEED = 0
WORKERS = 2  # the worker processes of mwms and of ps
MAX_EPOCHS = 100_000  # the timed fit stops itself once it has measured `min_seconds`


def bench(name: str, examples: int, batch_size: int, learning_rate: float, steps_per_execution: int,
          min_seconds: float, launched: float) -> dict:
    """Train the small model under one strategy; return the measurements.

    Start-up ends when the strategy and the model are ready; the warm-up (tracing) is timed on
    its own. Then whole epochs of `examples` are trained and timed until at least `min_seconds`
    were measured; the loss is taken after the first timed epoch, so that every strategy's loss
    comes after the same number of examples however fast it runs (under the parameter server,
    which examples each worker read depends on how many closures it ran). Steps are rounded to
    whole executions of the strategy's global batch, so that number is the same for every
    strategy only where the counts divide evenly (the defaults do); `loss_after_examples` says it.
    """
    import pstutor

    pstutor.setup()
    import numpy as np
    import tensorflow as tf

    strategy = MAKERS[name](tf)
    replicas = strategy.num_replicas_in_sync
    global_batch = batch_size * replicas  # best practice: per-replica batch x replicas
    x, y = pstutor.toy_classification(NUM_EXAMPLES, NUM_FEATURES, seed=0)
    # The global seed first: an eager dataset takes its shuffle seed when it is built, the
    # parameter server's dataset function when it is traced (later, in `fit`); both must see it.
    tf.keras.utils.set_random_seed(0)
    dataset = _dataset(tf, x, y, global_batch, by_worker=name == "ps")
    with strategy.scope():
        model = _model(tf)
        model.compile(
            optimizer=tf.keras.optimizers.legacy.SGD(learning_rate * replicas),  # scaled with replicas
            loss=tf.keras.losses.BinaryCrossentropy(from_logits=True),
            steps_per_execution=steps_per_execution,
        )
    plain = _model(tf)  # the loss is measured the same way for all: no strategy, all the data

    def steps(count: int) -> int:
        whole = max(1, round(count / global_batch / steps_per_execution))
        return whole * steps_per_execution

    def loss_now() -> float:
        plain.set_weights(model.get_weights())
        logits = plain(x, training=False)[:, 0]
        return float(tf.reduce_mean(tf.keras.losses.binary_crossentropy(y, logits, from_logits=True)))

    def all_agree(done: bool) -> bool:
        """Whether to stop: under MWMS every worker must stop after the same epoch."""
        if name != "mwms":
            return done
        votes = strategy.run(lambda: tf.constant(float(done)))
        return float(strategy.reduce(tf.distribute.ReduceOp.SUM, votes, axis=None)) > 0

    class Timer(tf.keras.callbacks.Callback):
        """Sums the epochs' times (fit waits for all of an epoch's steps before `on_epoch_end`)."""

        seconds, epochs, loss = 0.0, 0, float("nan")

        def on_epoch_begin(self, epoch, logs=None):
            self.start = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            self.seconds += time.perf_counter() - self.start
            self.epochs += 1
            if epoch == 0:
                self.loss = loss_now()
            self.model.stop_training = all_agree(self.seconds >= min_seconds)

    ready = time.time()
    warm = steps(WARMUP_EXAMPLES)
    model.fit(dataset, epochs=1, steps_per_epoch=warm, verbose=0)
    warmed = time.time()
    timer, timed = Timer(), steps(examples)
    model.fit(dataset, epochs=MAX_EPOCHS, steps_per_epoch=timed, verbose=0, callbacks=[timer])
    trained = timer.epochs * timed
    return {
        "strategy": name,
        "replicas": int(replicas),
        "global_batch": int(global_batch),
        "steps_per_execution": int(steps_per_execution),
        "examples": int(trained * global_batch),
        "seconds": timer.seconds,
        "examples_per_s": trained * global_batch / timer.seconds,
        "steps_per_s": trained / timer.seconds,
        "loss": timer.loss if np.isfinite(timer.loss) else float("nan"),
        "loss_after_examples": int((warm + timed) * global_batch),
        "startup_s": ready - launched,
        "warmup_s": warmed - ready,
    }


def _dataset(tf, x, y, global_batch: int, by_worker: bool):
    """The repeated stream, shuffled with one seed; for the parameter server, each worker's half.

    Under MWMS each worker keeps its DATA shard of the stream (auto-sharding). Parameter
    server workers build the dataset themselves (a `DatasetCreator`) and keep every other
    batch, by the index of the worker that builds it. Each element of that dataset goes to one
    replica of the worker (`distribute_datasets_from_function`), so it is batched per replica:
    with several GPUs per worker, a worker's step is then `global_batch` examples, as counted.
    """
    if by_worker:
        def dataset_fn(input_context):
            worker = tf.distribute.coordinator.experimental_get_current_worker_index()
            per_replica = input_context.get_per_replica_batch_size(global_batch)
            return _stream(tf, x, y, per_replica).shard(WORKERS, worker)

        return tf.keras.utils.experimental.DatasetCreator(dataset_fn)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return _stream(tf, x, y, global_batch).with_options(options)


def _stream(tf, x, y, global_batch: int):
    """The training data, shuffled with `SHUFFLE_SEED`, repeated and batched."""
    return (tf.data.Dataset.from_tensor_slices((x, y)).shuffle(len(x), seed=SHUFFLE_SEED).repeat()
            .batch(global_batch))


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
    run.add_argument("--min-seconds", type=float, default=0.0)
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
                   args.steps_per_execution, args.min_seconds, args.launched)
    if args.strategy != "mwms" or json.loads(os.environ["TF_CONFIG"])["task"]["index"] == 0:
        print("RESULT " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    from pstutor.child import main as child_main

    sys.exit(child_main(["compare", *sys.argv[1:]]))
