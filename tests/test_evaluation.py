"""The sidecar evaluator helper with real child processes, and the evaluation picture."""

import json
import signal
import subprocess
import sys

import pytest
from conftest import ROOT, alive, run_python, wait_gone

from pstutor import plot_train_eval
from pstutor.language import set_language
from pstutor.sidecar import Sidecar, SidecarError


def _program(tmp_path, body: str):
    path = tmp_path / "program.py"
    path.write_text(body)
    return path


SLEEPER = "import time\nprint('ready', flush=True)\ntime.sleep(600)\n"

# Trains under ParameterServerStrategy, writing checkpoints while a SidecarEvaluator child
# evaluates them; prints what came back as JSON.
EVALUATE_CHECKPOINTS = r'''
import json, os, sys, tempfile, textwrap
import pstutor
pstutor.setup()
import numpy as np
import tensorflow as tf
from pstutor.sidecar import Sidecar

work = tempfile.mkdtemp()
x, y = pstutor.toy_classification(num_examples=128, num_features=4, seed=0)
np.savez(os.path.join(work, "data.npz"), x=x, y=y)
program = os.path.join(work, "evaluator.py")
with open(program, "w") as f:
    f.write(textwrap.dedent("""
        import sys
        import numpy as np
        import tensorflow as tf
        checkpoint_dir, log_dir, data_path = sys.argv[1:]
        data = np.load(data_path)
        model = tf.keras.Sequential([tf.keras.Input(shape=(4,)), tf.keras.layers.Dense(1)])
        model.compile(optimizer=tf.keras.optimizers.legacy.SGD(), loss="mse")
        print("ready", flush=True)
        tf.keras.utils.SidecarEvaluator(
            model, tf.data.Dataset.from_tensor_slices((data["x"], data["y"])).batch(64),
            checkpoint_dir, max_evaluations=2,
            callbacks=[tf.keras.callbacks.TensorBoard(log_dir=log_dir)]).start()
    """))
strategy = tf.distribute.ParameterServerStrategy(
    pstutor.in_process_cluster(1, 2),
    variable_partitioner=tf.distribute.experimental.partitioners.FixedShardsPartitioner(2))
with strategy.scope():
    model = tf.keras.Sequential([tf.keras.Input(shape=(4,)), tf.keras.layers.Dense(1)])
    model.compile(optimizer=tf.keras.optimizers.legacy.SGD(0.1), loss="mse")
sharded = type(model.layers[0].kernel).__name__ == "ShardedVariable"
data = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(16)
checkpoint_dir, log_dir = os.path.join(work, "ckpt"), os.path.join(work, "logs")
with Sidecar(program, checkpoint_dir, log_dir, os.path.join(work, "data.npz")) as sidecar:
    sidecar.wait_for("ready", timeout=120)
    model.fit(data, epochs=2, steps_per_epoch=3, verbose=0, callbacks=[
        tf.keras.callbacks.ModelCheckpoint(os.path.join(checkpoint_dir, "ckpt-{epoch}"),
                                           save_weights_only=True),
        tf.keras.callbacks.LambdaCallback(on_epoch_end=lambda *_: __import__("time").sleep(1.5))])
    sidecar.wait(timeout=120)
    pid = sidecar.pid
print(json.dumps({"sharded": sharded, "pid": pid, "running": sidecar.running,
                  "loss": pstutor.read_scalars(log_dir, "evaluation_loss_vs_iterations")}))
'''


def test_the_sidecar_evaluates_real_checkpoints_and_its_metrics_come_back():
    result = run_python(EVALUATE_CHECKPOINTS, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.splitlines()[-1])
    assert report["sharded"] is True  # written under the strategy with sharded variables
    assert report["running"] is False
    steps = [step for step, _ in report["loss"]]
    assert steps[-1] == 6  # the last checkpoint, 2 epochs x 3 steps, was evaluated
    assert set(steps) <= {3, 6} and all(value > 0 for _, value in report["loss"])
    assert not wait_gone([report["pid"]])


def test_close_stops_the_program_and_is_safe_twice(tmp_path):
    sidecar = Sidecar(_program(tmp_path, SLEEPER)).start()
    sidecar.wait_for("ready", timeout=120)
    pid = sidecar.pid
    assert sidecar.running and alive(pid)
    sidecar.close()
    sidecar.close()
    assert not sidecar.running and not wait_gone([pid])


def test_an_exception_in_the_with_block_stops_the_program(tmp_path):
    pid = None
    with pytest.raises(ZeroDivisionError), Sidecar(_program(tmp_path, SLEEPER)) as sidecar:
        sidecar.wait_for("ready", timeout=120)
        pid = sidecar.pid
        _ = 1 / 0
    assert pid is not None and not wait_gone([pid])


def test_a_failing_program_raises_with_its_log(tmp_path):
    failing = _program(tmp_path, "print('looking for checkpoints')\nraise SystemExit('no data here')\n")
    with Sidecar(failing) as sidecar, pytest.raises(SidecarError) as caught:
        sidecar.wait(timeout=120)
    assert "exited with code 1" in str(caught.value)
    assert "looking for checkpoints" in str(caught.value) and "no data here" in str(caught.value)


def test_a_program_that_does_not_finish_in_time_is_stopped(tmp_path):
    with Sidecar(_program(tmp_path, SLEEPER)) as sidecar:
        sidecar.wait_for("ready", timeout=120)
        with pytest.raises(SidecarError, match="did not finish within"):
            sidecar.wait(timeout=0.5)
        assert not sidecar.running


def test_the_program_gets_the_environment_it_is_given_and_no_other_tf_config(tmp_path, monkeypatch):
    monkeypatch.setenv("TF_CONFIG", '{"task": {"type": "chief", "index": 0}}')
    program = _program(tmp_path, "import os\n"
                                 "print('TF_CONFIG=' + os.environ.get('TF_CONFIG', 'none'), flush=True)\n")
    with Sidecar(program) as plain:
        plain.wait(timeout=60)
    assert "TF_CONFIG=none" in plain.log()
    evaluator = '{"task": {"type": "evaluator", "index": 0}}'
    with Sidecar(program, env={"TF_CONFIG": evaluator}) as given:
        given.wait(timeout=60)
    assert f"TF_CONFIG={evaluator}" in given.log()


def test_a_missing_program_is_reported_before_anything_starts(tmp_path):
    with pytest.raises(SidecarError, match="No program at"):
        Sidecar(tmp_path / "absent.py").start()


def test_killing_the_parent_outright_ends_the_sidecar(tmp_path):
    program = _program(tmp_path, SLEEPER)
    parent_code = (
        "import sys, time\nfrom pstutor.sidecar import Sidecar\n"
        "sidecar = Sidecar(sys.argv[1]).start()\nsidecar.wait_for('ready', timeout=120)\n"
        "print(sidecar.pid, flush=True)\ntime.sleep(600)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", parent_code, str(program)],
                              stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        pid = int(parent.stdout.readline())
        assert alive(pid)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=30)
        assert not wait_gone([pid]), "the sidecar outlived its parent"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


def test_plot_train_eval_draws_both_sources_on_one_axis():
    figure = plot_train_eval(
        {"training loss": [(10, 0.7), (20, 0.6), (30, 0.5)]},
        {"evaluation loss": [(20, 0.65), (30, 0.55)]},
        xlabel="training step", ylabel="loss", title="Both",
    )
    ax = figure.axes[0]
    lines = ax.get_lines()
    assert [line.get_label() for line in lines] == ["training loss", "evaluation loss"]
    assert list(lines[1].get_xdata()) == [20, 30]
    assert lines[0].get_linestyle() == "-" and lines[1].get_linestyle() == "--"
    assert ax.get_title() == "Both" and ax.get_xlabel() == "training step"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["training loss", "evaluation loss"]


def test_plot_train_eval_accepts_a_curve_without_points():
    figure = plot_train_eval({"training loss": [(1, 0.5)]}, {"evaluation loss": []})
    assert len(figure.axes[0].get_lines()) == 2


def test_plot_train_eval_gives_each_evaluation_source_its_own_marker_and_ticks_at_the_points():
    figure = plot_train_eval(
        {"training loss": [(10, 0.7), (20, 0.6), (30, 0.5)],
         "training accuracy": [(10, 0.6), (20, 0.7), (30, 0.8)]},
        {"validation loss": [(10, 0.65), (20, 0.55), (30, 0.5)],
         "validation accuracy": [(10, 0.6), (30, 0.8)],
         "sidecar evaluation loss": [(30, 0.5)], "sidecar evaluation accuracy": [(30, 0.8)]},
        panels=("loss", "accuracy"))
    loss, accuracy = figure.axes
    markers = {line.get_label(): line.get_marker() for ax in (loss, accuracy) for line in ax.get_lines()}
    assert markers["validation loss"] == markers["validation accuracy"] != markers["sidecar evaluation loss"]
    sidecar = markers["sidecar evaluation loss"]
    assert sidecar == markers["sidecar evaluation accuracy"] != markers["training loss"]
    figure.draw_without_rendering()
    assert list(loss.get_xticks()) == list(accuracy.get_xticks()) == [10, 20, 30]


@pytest.fixture
def zh_language():
    set_language("zh")
    yield
    set_language("en")


def test_plot_train_eval_puts_chinese_curve_names_in_the_panel_of_their_word(zh_language):
    figure = plot_train_eval({"训练损失": [(10, 0.7)], "训练准确率": [(10, 0.6)]},
                             {"验证损失": [(10, 0.65)], "边车评估损失": [(10, 0.65)]},
                             panels=("loss", "accuracy"))
    loss, accuracy = figure.axes
    assert [line.get_label() for line in loss.get_lines()] == ["训练损失", "验证损失", "边车评估损失"]
    assert [line.get_label() for line in accuracy.get_lines()] == ["训练准确率"]
    assert loss.get_lines()[1].get_marker() != loss.get_lines()[2].get_marker()
    assert [ax.get_ylabel() for ax in figure.axes] == ["损失", "准确率"]
