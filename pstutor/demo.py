"""The main job: one in-process cluster, trained with `Model.fit` and with a custom loop.

It is what the course teaches in lessons 01-04, run end to end from the command line so
that a learner (or CI) can see the whole pipeline work in under a minute.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable
from pathlib import Path

from pstutor.clusters import in_process_cluster
from pstutor.data import toy_classification
from pstutor.environment import setup
from pstutor.language import say
from pstutor.pictures import draw_cluster, plot_curves

BATCH = 64


class DemoError(ValueError):
    """Arguments the demo cannot run with (said before any training starts)."""


def check_out_folder(out: Path) -> None:
    """Refuse an output folder that is a file or cannot be created / written."""
    if out.exists() and not out.is_dir():
        raise DemoError(say(f"--out {out} is a file; give a folder for the pictures.",
                            f"--out {out} 是一个文件；请给出存放图片的文件夹。"))
    existing = next(p for p in (out.absolute(), *out.absolute().parents) if p.exists())
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise DemoError(say(f"--out {out}: cannot write into {existing}.",
                            f"--out {out}：无法写入 {existing}。"))


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
    log: Callable[[str], None] = print,
) -> DemoResult:
    """Train the toy model both ways on an in-process cluster and save the pictures to `out`."""
    check_out_folder(out)
    if epochs < 1 or steps_per_epoch < 1:
        raise DemoError(say("epochs and steps_per_epoch must be at least 1.",
                             "epochs 和 steps_per_epoch 必须至少为 1。"))
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

    out.mkdir(parents=True, exist_ok=True)
    pictures = [out / "topology.png", out / "loss.png"]
    draw_cluster(resolver).savefig(pictures[0], dpi=120)
    plot_curves({"Model.fit": fit_losses, "custom loop": loop_losses},
                title="Training loss per epoch").savefig(pictures[1], dpi=120)
    return DemoResult(fit_losses, loop_losses, loop_steps, seconds, pictures)


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
