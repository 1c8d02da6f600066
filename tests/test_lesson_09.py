"""Lesson 09's statements about TensorFlow that no stored output shows, checked in a fresh process."""

from conftest import run_python

_WHAT_INITIALISES = """
import pstutor
pstutor.setup()
import tensorflow as tf

cpu = tf.config.list_physical_devices("CPU")[0]
resolver = pstutor.in_process_cluster(1, 1)
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
print("after the servers: configured")
strategy = tf.distribute.ParameterServerStrategy(resolver)
try:
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 3)
    print("after the strategy: configured")
except RuntimeError as err:
    print("after the strategy: refused:", err)
"""


def test_servers_alone_leave_the_devices_configurable_the_strategy_does_not():
    """Section 1: creating ParameterServerStrategy initialises the runtime; starting servers does not."""
    result = run_python(_WHAT_INITIALISES)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [line for line in result.stdout.splitlines() if line.startswith("after the")]
    assert lines[0] == "after the servers: configured", result.stdout
    assert lines[1].startswith("after the strategy: refused:") and "initialized" in lines[1], result.stdout


_VARIABLE_KINDS = """
import pstutor
pstutor.setup()
import tensorflow as tf

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
with strategy.scope():
    dense, norm = tf.keras.layers.Dense(2), tf.keras.layers.BatchNormalization()
    model = tf.keras.Sequential([tf.keras.Input(shape=(3,)), dense, norm])
    model.compile(optimizer=tf.keras.optimizers.legacy.SGD(0.1), loss="mse", metrics=["mae"])
    model.fit(tf.zeros((4, 3)), tf.zeros((4, 2)), epochs=1, verbose=0)
kinds = lambda variables: sorted({type(v).__name__ for v in variables})
print("dense:", kinds(dense.variables))
print("batch norm, moving:", kinds(norm.non_trainable_variables))
print("optimizer:", kinds(model.optimizer.variables()))  # legacy: a method
print("metric:", kinds(model.metrics[-1].variables))
"""


def test_on_read_variables_are_the_exception_to_mirrored_copies():
    """Section 2: every variable of the lesson's model and optimizer is mirrored; a metric's and
    BatchNormalization's moving statistics are synchronised on read instead."""
    result = run_python(_VARIABLE_KINDS)
    assert result.returncode == 0, result.stderr[-3000:]
    shown = dict(line.split(": ", 1) for line in result.stdout.splitlines() if ": " in line)
    assert shown["dense"] == "['MirroredVariable']" and shown["optimizer"] == "['MirroredVariable']", shown
    assert shown["batch norm, moving"] == "['SyncOnReadVariable']", shown
    assert shown["metric"] == "['SyncOnReadVariable']", shown


_SHARDED_SLOTS = """
import sys

import numpy as np
import pstutor
pstutor.setup()
import tensorflow as tf

shards, folder, saving = int(sys.argv[1]), sys.argv[2], sys.argv[3] == "save"
partitioner = tf.distribute.experimental.partitioners.FixedShardsPartitioner(shards)
strategy = tf.distribute.ParameterServerStrategy(pstutor.in_process_cluster(1, shards),
                                                 variable_partitioner=partitioner)
with strategy.scope():
    table = tf.Variable(np.arange(6, dtype=np.float32) * (1 if saving else -7), name="table")
    optimizer = tf.keras.optimizers.legacy.Adam(0.1)


@tf.function
def step():
    def one_replica():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.square(tf.concat(table.variables, 0)))
        optimizer.minimize(loss, table.variables, tape=tape)
    strategy.run(one_replica)


coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
coordinator.schedule(step)
coordinator.join()  # the slots exist, with values of this process's own
checkpoint = tf.train.Checkpoint(table=table, optimizer=optimizer)
if not saving:
    checkpoint.restore(tf.train.latest_checkpoint(folder))
whole = lambda sharded: np.concatenate([v.numpy() for v in sharded.variables]).round(6).tolist()
print("shards:", len(table.variables))
print("values:", [whole(table)] + [whole(optimizer.get_slot(table, name)) for name in ("m", "v")])
if saving:
    checkpoint.save(folder + "/ckpt")
"""


def test_sharded_optimizer_slots_restore_into_another_number_of_shards(tmp_path):
    """Section 7 and the checklist: with tf_keras's legacy optimizers, a checkpoint of a variable
    in 2 shards, with Adam's slots, restores into 3 shards: the variable and both slots as saved."""
    shown = []
    for shards, mode in ((2, "save"), (3, "restore")):
        result = run_python(_SHARDED_SLOTS, str(shards), str(tmp_path), mode)
        assert result.returncode == 0, result.stderr[-3000:]
        shown.append(dict(line.split(": ", 1) for line in result.stdout.splitlines() if ": " in line))
    assert [s["shards"] for s in shown] == ["2", "3"], shown
    assert shown[1]["values"] == shown[0]["values"], shown  # as saved, though set up otherwise
