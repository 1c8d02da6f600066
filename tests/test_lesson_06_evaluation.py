"""Lessons 05 and 06 hide the GPUs on machines where their per-replica code would break
(06: two or more GPUs; 05: a count that a batch of 8 does not split over). Hiding them in
the eager context alone would not reach the in-process workers: a server builds its devices
from its own config, so `worker_config` carries the hiding over as `device_count`."""

from __future__ import annotations

import pytest
from conftest import ROOT

import pstutor
from pstutor import clusters
from pstutor.build import read_lesson

pstutor.setup()  # before TensorFlow is imported: tf.keras stays Keras 2
import tensorflow as tf  # noqa: E402


def test_worker_config_hides_the_gpus_this_process_hid(monkeypatch):
    monkeypatch.setattr(tf.config, "get_visible_devices", lambda kind=None: [])
    assert clusters.worker_config(2).device_count["GPU"] == 0


def test_worker_config_leaves_visible_gpus_to_the_workers(monkeypatch):
    gpu = tf.config.PhysicalDevice(name="/physical_device:GPU:0", device_type="GPU")
    monkeypatch.setattr(tf.config, "get_visible_devices", lambda kind=None: [gpu])
    assert "GPU" not in clusters.worker_config(2).device_count


@pytest.mark.parametrize("lesson", ["05_distributed_input.md", "06_evaluation.md"])
def test_the_lesson_hides_the_gpus_before_its_cluster_starts(lesson):
    code = next(cell.source for cell in read_lesson(ROOT / "lessons" / lesson)
                if cell.kind == "code" and "in_process_cluster" in cell.source)
    assert 'tf.config.set_visible_devices([], "GPU")' in code
    assert code.index("set_visible_devices") < code.index("in_process_cluster")
