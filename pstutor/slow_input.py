"""A worker slowed on purpose: its input waits a given time before every batch.

A straggler made with a busy loop would compete for the cores with every other process on
the machine (a laptop has two), so how slow it is would depend on the machine's load. A
wait costs no CPU: `tf.raw_ops.SleepDataset` waits before it hands on each element of its
input, so a worker that reads such a dataset can take no more than one batch per wait,
whatever else runs. The wait is an argument of the op (a tensor), so it can depend on which
worker builds the pipeline: the index of `experimental_get_current_worker_index()` inside a
parameter server `dataset_fn` (a value known only when the worker runs the function), or
`InputContext.input_pipeline_id` under `distribute_datasets_from_function`.
"""

from __future__ import annotations

from pstutor.language import say


def slowed(dataset, seconds):
    """`dataset` (of dense tensors) with a wait of `seconds` before each of its elements (and,
    for a finite one, once more before it ends).

    `seconds` is a number or a scalar tensor (float); a wait is whole microseconds.
    Works eagerly and inside a traced `dataset_fn`. The op is public only as a raw op, so
    the dataset goes through its variant tensor (`tf.data.experimental.to_variant` /
    `from_variant`), the public way in and out of a raw dataset op.
    """
    import tensorflow as tf

    specs = tf.nest.flatten(dataset.element_spec)
    if not all(isinstance(spec, tf.TensorSpec) for spec in specs):
        raise TypeError(say(f"slowed() takes a dataset of dense tensors, not {dataset.element_spec}",
                            f"slowed() 只接受元素为稠密张量的数据集，而不是 {dataset.element_spec}"))
    microseconds = tf.cast(tf.round(tf.cast(seconds, tf.float64) * 1e6), tf.int64)
    variant = tf.raw_ops.SleepDataset(
        input_dataset=tf.data.experimental.to_variant(dataset), sleep_microseconds=microseconds,
        output_types=[spec.dtype for spec in specs], output_shapes=[spec.shape for spec in specs])
    return tf.data.experimental.from_variant(variant, dataset.element_spec)
