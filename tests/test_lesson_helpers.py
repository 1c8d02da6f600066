"""Helpers for lessons 02-04 on real TensorFlow objects: shards, timeline, TensorBoard scalars."""

import json

import pytest
from conftest import run_python
from matplotlib.figure import Figure

import pstutor

SCRIPT = """
import json, tempfile, pstutor
pstutor.setup()
import tensorflow as tf
resolver = pstutor.in_process_cluster(3, 2)
out = {}

fixed = tf.distribute.ParameterServerStrategy(
    resolver, variable_partitioner=tf.distribute.experimental.partitioners.FixedShardsPartitioner(2))
with fixed.scope():
    table = tf.Variable(tf.zeros([10, 64]), name="table")
    bias = tf.Variable(tf.zeros([3]), name="bias")
out["rows"] = pstutor.shard_rows([table, bias])
fig = pstutor.draw_shards([table, bias])
out["shard_bars"] = [(ax.get_title(), p.get_width()) for ax in fig.axes for p in ax.patches]
out["shard_labels"] = [t.get_text() for t in fig.axes[0].get_yticklabels()]

strategy = tf.distribute.ParameterServerStrategy(resolver)
try:
    pstutor.TimelineRecorder(strategy)
except RuntimeError as err:
    out["no_coordinator"] = str(err)
coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
recorder = pstutor.TimelineRecorder(strategy, capacity=10)
out["empty"] = recorder.steps()
with strategy.scope():
    counter = tf.Variable(0.0)

@tf.function
def step():
    start = recorder.begin()
    result = strategy.run(lambda: counter.assign_add(1.0))
    recorder.end(start, result)
    return result

for _ in range(12):
    coordinator.schedule(step)
coordinator.join()
steps = recorder.steps()
out["steps"] = [[s.step, s.worker, s.start, s.end] for s in steps]
out["dropped"] = recorder.dropped
out["counter"] = float(counter.numpy())
fig = pstutor.draw_timeline(steps)
out["timeline_bars"] = len(fig.axes[0].patches)
small = pstutor.TimelineRecorder(strategy, capacity=1)

@tf.function
def tiny():
    start = small.begin()
    small.end(start)

for _ in range(9):
    coordinator.schedule(tiny)
coordinator.join()
out["small"] = [len(small.steps()), small.dropped]

x, y = pstutor.toy_classification(256)
data = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(256).repeat().batch(32)
with strategy.scope():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1, activation="sigmoid")])
    model.compile(tf.keras.optimizers.legacy.SGD(0.1), loss="binary_crossentropy")
logs = tempfile.mkdtemp()
history = model.fit(data, epochs=3, steps_per_epoch=4, verbose=0,
                    callbacks=[tf.keras.callbacks.TensorBoard(logs)])
out["scalars"] = pstutor.read_scalars(logs, "epoch_loss")
out["history"] = history.history["loss"]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def measured() -> dict:
    result = run_python(SCRIPT)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    return json.loads(result.stdout)


def test_shard_rows_list_every_shard_with_shape_device_and_bytes(measured):
    rows = measured["rows"]
    assert [(r["variable"], r["shard"], tuple(r["shape"]), r["bytes"]) for r in rows] == [
        ("table", 0, (5, 64), 1280), ("table", 1, (5, 64), 1280),
        ("bias", 0, (2,), 8), ("bias", 1, (1,), 4)]
    assert [r["device"].split("/")[1:4] for r in rows[:2]] == [
        ["job:ps", "replica:0", "task:0"], ["job:ps", "replica:0", "task:1"]]


def test_draw_shards_has_one_bar_per_variable_and_ps(measured):
    assert measured["shard_labels"] == ["ps 0", "ps 1"]
    assert measured["shard_bars"] == [  # one panel per variable, each in its own unit
        ["table (2.5 KiB)", 1.25], ["table (2.5 KiB)", 1.25], ["bias (12 B)", 8], ["bias (12 B)", 4]]


def test_timeline_records_every_step_in_order_of_starting(measured):
    steps = measured["steps"]
    assert [s[0] for s in steps] == list(range(12))
    assert {s[1] for s in steps} <= {0, 1, 2}
    starts = [s[2] for s in steps]
    assert starts == sorted(starts) and starts[0] == 0.0
    assert all(start <= end for _, _, start, end in steps)
    assert measured["counter"] == 12.0 and measured["dropped"] == 0
    assert measured["timeline_bars"] == 12
    assert measured["empty"] == []


def test_timeline_needs_the_coordinator_and_counts_what_did_not_fit(measured):
    assert "Create the ClusterCoordinator before the TimelineRecorder" in measured["no_coordinator"]
    recorded, dropped = measured["small"]
    assert recorded <= 3 and recorded + dropped == 9  # one row per worker, the rest counted


def test_read_scalars_reads_the_epoch_loss_keras_wrote(measured):
    scalars = measured["scalars"]
    assert [step for step, _ in scalars] == [0, 1, 2]
    assert [value for _, value in scalars] == pytest.approx(measured["history"], rel=1e-6)


def test_timeline_of_nothing_is_an_empty_chart():
    assert isinstance(pstutor.draw_timeline([]), Figure)


def test_toy_words_follow_their_rule():
    data = pstutor.toy_words(50, seed=1)
    assert data == pstutor.toy_words(50, seed=1)
    for words, label in zip(data["features"], data["label"], strict=True):
        assert len(set(words)) == 3 and all(isinstance(w, str) for w in words)
        assert label == (["yes"] if "ocean" in words else ["no"])
