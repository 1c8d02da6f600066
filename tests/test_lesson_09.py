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
