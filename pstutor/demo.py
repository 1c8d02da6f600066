"""The main job: one in-process cluster, trained with `Model.fit` and with a custom loop.

It is what the course teaches in lessons 01-04, run end to end from the command line so
that a learner (or CI) can see the whole pipeline work in under a minute.

Its sizes are checked before anything starts: every task of the in-process cluster is a
server inside this one process (about 0.05 GB and 100 threads each, measured with 3 to 16
tasks), so the counts are bounded and the memory is checked as `cluster up` checks it. Its
pictures are written as one set (`pstutor.written`): a rerun replaces its own pictures and
never a file of the user's.
"""

from __future__ import annotations

import dataclasses
import io
import time
from collections.abc import Callable
from pathlib import Path

from pstutor import written
from pstutor.clusters import in_process_cluster
from pstutor.data import toy_classification
from pstutor.environment import setup
from pstutor.language import say
from pstutor.local_cluster import TASK_MEMORY_GB, memory_shortfall
from pstutor.pictures import draw_cluster, plot_curves

BATCH = 64
PICTURES = ("topology.png", "loss.png")
OWNER = "demo"  # whose set the pictures are, in the folder's record
# The ranges of the command's numbers: a demo, not a benchmark. 16 servers of a job are
# ~1,600 threads in one process; 400 ps aborted in C++ after 37 s (issue 21).
MAX_TASKS = 16
MAX_EPOCHS = 100
MAX_STEPS = 1000
IN_PROCESS_TASK_GB = 0.05  # one in-process server (measured: +0.22 GB for 5, +0.64 GB for 16)


class DemoError(ValueError):
    """Arguments the demo cannot run with (said before any training starts)."""


def check_out_folder(out: Path, force: bool = False) -> None:
    """Refuse a folder the pictures cannot go to, or where they would replace a file not ours."""
    try:
        written.check(out, PICTURES, OWNER, force)
    except written.OutputRefused as err:
        raise DemoError(str(err)) from None


def check_size(workers: int, ps: int, epochs: int, steps_per_epoch: int) -> None:
    """Refuse counts out of the demo's ranges, or a cluster this machine's memory cannot hold."""
    limits = (("workers", workers, MAX_TASKS), ("ps", ps, MAX_TASKS), ("epochs", epochs, MAX_EPOCHS),
              ("steps_per_epoch", steps_per_epoch, MAX_STEPS))
    for label, value, high in limits:
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
            raise DemoError(say(f"{label} must be a whole number from 1 to {high}, not {value!r}.",
                                f"{label} 必须是 1 到 {high} 之间的整数，而不是 {value!r}。"))
    short = memory_shortfall(workers + ps, IN_PROCESS_TASK_GB, base_gb=TASK_MEMORY_GB)
    if short is not None:
        need, have, most = short
        raise DemoError(say(
            f"an in-process cluster of {workers + ps} tasks needs about {need:,.1f} GB of memory; "
            f"this machine has {have:,.1f} GB available, enough for {most}. Use fewer workers or ps.",
            f"{workers + ps} 个任务的进程内集群约需 {need:,.1f} GB 内存；本机可用 {have:,.1f} GB，"
            f"最多容纳 {most} 个。请减少工作进程或参数服务器的数量。"))


@dataclasses.dataclass
class DemoResult:
    """What the demo trained and where it wrote its pictures."""

    fit_losses: list[float]
    loop_losses: list[float]
    loop_steps: int
    seconds: dict[str, float]
    pictures: list[Path]


def run_demo(
    out: Path, workers: int = 3, ps: int = 2, epochs: int = 4, steps_per_epoch: int = 20,
    log: Callable[[str], None] = print, force: bool = False,
) -> DemoResult:
    """Train the toy model both ways on an in-process cluster and save the pictures to `out`.

    `force` replaces pictures of an earlier run that were edited since.
    """
    check_size(workers, ps, epochs, steps_per_epoch)
    check_out_folder(out, force)
    started = time.perf_counter()
    env = setup()
    import tensorflow as tf

    log(say(f"TensorFlow {env.tensorflow}, devices: {', '.join(env.devices)}",
            f"TensorFlow {env.tensorflow}，设备：{', '.join(env.devices)}"))
    resolver = in_process_cluster(workers, ps)
    strategy = tf.distribute.ParameterServerStrategy(resolver)
    seconds = {"cluster": time.perf_counter() - started}
    log(say(f"cluster up: {workers} workers, {ps} ps",
            f"集群已启动：{workers} 个工作进程，{ps} 个参数服务器"))

    x, y = toy_classification(num_examples=2048)
    started = time.perf_counter()
    fit_losses = _train_with_fit(tf, strategy, x, y, epochs, steps_per_epoch, log)
    seconds["Model.fit"] = time.perf_counter() - started
    started = time.perf_counter()
    loop_losses, loop_steps = _train_with_loop(tf, strategy, x, y, epochs, steps_per_epoch, log)
    seconds["custom loop"] = time.perf_counter() - started

    curves = {"Model.fit": fit_losses, "custom loop": loop_losses}
    figures = [draw_cluster(resolver), plot_curves(curves, title="Training loss per epoch")]
    try:
        pictures = written.write(out, dict(zip(PICTURES, map(_png, figures), strict=True)), OWNER, force)
    except written.OutputRefused as err:
        raise DemoError(str(err)) from None
    return DemoResult(fit_losses, loop_losses, loop_steps, seconds, pictures)


def _png(figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=120)
    return buffer.getvalue()


def _model(tf):
    return tf.keras.Sequential([
        tf.keras.layers.Dense(16, activation="relu"),
        tf.keras.layers.Dense(1, activation="sigmoid"),
    ])


def _train_with_fit(tf, strategy, x, y, epochs, steps_per_epoch, log) -> list[float]:
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(len(x)).repeat().batch(BATCH)
    with strategy.scope():
        model = _model(tf)
        model.compile(optimizer=tf.keras.optimizers.legacy.Adam(0.01),
                      loss="binary_crossentropy", steps_per_execution=5)
    progress = tf.keras.callbacks.LambdaCallback(
        on_epoch_end=lambda epoch, logs: log(
            f"[Model.fit]   epoch {epoch + 1}/{epochs}  loss {logs['loss']:.4f}"))
    history = model.fit(dataset, epochs=epochs, steps_per_epoch=steps_per_epoch, verbose=0,
                        callbacks=[progress])
    return [float(v) for v in history.history["loss"]]


def _train_with_loop(tf, strategy, x, y, epochs, steps_per_epoch, log) -> tuple[list[float], int]:
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)

    def dataset_fn(input_context):
        batch = input_context.get_per_replica_batch_size(BATCH)
        data = tf.data.Dataset.from_tensor_slices((x, y))
        return data.shuffle(len(x)).repeat().batch(batch)

    def per_worker_dataset_fn():
        return strategy.distribute_datasets_from_function(dataset_fn)

    with strategy.scope():
        model = _model(tf)
        optimizer = tf.keras.optimizers.legacy.Adam(0.01)
        mean_loss = tf.keras.metrics.Mean()
    loss_fn = tf.keras.losses.BinaryCrossentropy(reduction=tf.keras.losses.Reduction.NONE)

    @tf.function
    def step(iterator):
        def replica_step(features, labels):
            with tf.GradientTape() as tape:
                per_example = loss_fn(labels[:, None], model(features, training=True))
                loss = tf.nn.compute_average_loss(per_example)
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
            mean_loss.update_state(loss)
            return loss

        features, labels = next(iterator)
        return strategy.run(replica_step, args=(features, labels))

    iterator = iter(coordinator.create_per_worker_dataset(per_worker_dataset_fn))
    losses = []
    for epoch in range(epochs):
        mean_loss.reset_state()
        for _ in range(steps_per_epoch):
            coordinator.schedule(step, args=(iterator,))
        coordinator.join()
        losses.append(float(mean_loss.result()))
        log(f"[custom loop] epoch {epoch + 1}/{epochs}  loss {losses[-1]:.4f}")
    return losses, int(optimizer.iterations.numpy())
