"""The in-process cluster helper counts cores the way lesson 01 teaches: the cores this
process may run on (its affinity mask), not the host's count."""

from __future__ import annotations

import os

import pytest

import pstutor
from pstutor import clusters

pstutor.setup()  # before TensorFlow is imported: tf.keras stays Keras 2


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="no affinity mask on this OS")
def test_worker_config_counts_the_cores_this_process_may_use(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 64)  # the host has many cores ...
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})  # ... this process 2
    assert clusters.usable_cores() == 2
    assert clusters.worker_config(3).inter_op_parallelism_threads == 4


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="no affinity mask on this OS")
def test_worker_config_keeps_the_default_pool_with_enough_cores(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)))
    assert clusters.worker_config(3).inter_op_parallelism_threads == 0
