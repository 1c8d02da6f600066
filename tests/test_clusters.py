"""The in-process cluster helper: real servers on loopback, reused for the same shape."""

import pytest
from conftest import run_python

import pstutor

SCRIPT = """
import socket, pstutor
pstutor.setup()
import tensorflow as tf
first = pstutor.in_process_cluster(2, 1)
print("same", pstutor.in_process_cluster(2, 1) is first)
spec = first.cluster_spec().as_dict()
print("shape", len(spec["worker"]), len(spec["ps"]))
for address in spec["worker"] + spec["ps"]:
    host, port = address.rsplit(":", 1)
    assert host == "127.0.0.1", address
    socket.create_connection((host, int(port)), timeout=5).close()  # really listening
print("listening")
strategy = tf.distribute.ParameterServerStrategy(first)
coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
with strategy.scope():
    total = tf.Variable(0.0)
@tf.function
def step():
    return strategy.run(lambda: total.assign_add(1.0))
for _ in range(6):
    coordinator.schedule(step)
coordinator.join()
print("total", float(total.numpy()), total.device)
second = pstutor.in_process_cluster(1, 1)
print("new", second is not first, second.cluster_spec().num_tasks("worker"))
"""


def test_in_process_cluster_is_real_reused_and_rebuilt_for_a_new_shape():
    result = run_python(SCRIPT)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:3] == ["same True", "shape 2 1", "listening"]
    assert lines[3] == "total 6.0 /job:ps/replica:0/task:0/device:CPU:0"
    assert lines[4].startswith("Starting a new in-process cluster (1 workers, 1 ps)")
    assert lines[5] == "new True 1"
    assert result.stderr == ""


@pytest.mark.parametrize("workers, ps", [(0, 1), (1, 0), (-2, 1), ("3", 2)])
def test_bad_shapes_are_refused_before_any_server_starts(workers, ps):
    with pytest.raises(pstutor.TFConfigError, match="at least 1"):
        pstutor.in_process_cluster(workers, ps)
