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
