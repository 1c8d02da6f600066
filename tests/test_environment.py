"""pstutor.setup(): Keras 2 for real, a clear refusal when too late, and quiet logs."""

import importlib.metadata

import pytest
from conftest import run_python

import pstutor
from pstutor import environment

TRAIN = """
import sys, tempfile, pstutor
env = pstutor.setup(verbose={verbose})
import tensorflow as tf
strategy = tf.distribute.ParameterServerStrategy(pstutor.in_process_cluster(3, 2))
x, y = pstutor.toy_classification(256)
data = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(256).repeat().batch(32)
with strategy.scope():
    model = tf.keras.Sequential([tf.keras.layers.Dense(4, activation="relu"), tf.keras.layers.Dense(1)])
    model.compile(tf.keras.optimizers.legacy.SGD(0.1), loss="mse", steps_per_execution=2)
logs = tempfile.mkdtemp()
model.fit(data, epochs=2, steps_per_epoch=4, verbose=0, callbacks=[
    tf.keras.callbacks.TensorBoard(logs),
    tf.keras.callbacks.ModelCheckpoint(logs + "/ckpt"),
    tf.keras.callbacks.BackupAndRestore(logs + "/backup"),
])
print("trained", int(model.optimizer.iterations.numpy()))
"""


def test_setup_switches_to_keras_2_and_sets_the_environment():
    result = run_python(
        "import os, sys, pstutor\n"
        "assert 'tensorflow' not in sys.modules, 'importing pstutor must not import TensorFlow'\n"
        "env = pstutor.setup()\n"
        "import tensorflow as tf\n"
        "print(tf.keras.__name__)\n"
        "print(tf.keras.optimizers.legacy.SGD.__module__)\n"
        "print(tf.keras.utils.experimental.DatasetCreator.__module__)\n"
        "print(os.environ['GRPC_FAIL_FAST'], os.environ['TF_FORCE_GPU_ALLOW_GROWTH'])\n"
        "print(env.tensorflow == tf.__version__, env.colab, env.gpus, env.devices[0])\n"
        "pstutor.setup()  # a second call is harmless\n"
        "print('<table>' in env._repr_html_(), 'TensorFlow' in str(env))\n"
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("tf_keras")
    assert lines[1].startswith("tf_keras")
    assert lines[2].startswith("tf_keras")
    assert lines[3] == "use_caller true"
    assert lines[4].startswith("True False") and lines[4].endswith("CPU:0")
    assert lines[5] == "True True"


def test_tensorflow_imported_first_is_refused_in_both_languages():
    result = run_python(
        "import tensorflow as tf, pstutor\n"
        "try:\n"
        "    pstutor.setup()\n"
        "except pstutor.KerasVersionError as err:\n"
        "    print(err)\n"
    )
    assert result.returncode == 0, result.stderr
    assert "restart the kernel" in result.stdout
    assert "before `import tensorflow`" in result.stdout
    assert "重启内核" in result.stdout


def test_tensorflow_imported_first_with_legacy_keras_already_chosen_is_accepted():
    result = run_python(
        "import tensorflow as tf, pstutor\npstutor.setup()\nprint(tf.keras.__name__)",
        env={"TF_USE_LEGACY_KERAS": "1"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("tf_keras")


def test_quiet_by_default_a_cluster_and_fit_print_nothing_else():
    result = run_python(TRAIN.format(verbose=False))
    assert result.returncode == 0, result.stderr
    assert result.stdout == "trained 8\n"
    assert result.stderr == ""


def test_verbose_brings_tensorflow_logs_back():
    result = run_python(TRAIN.format(verbose=True))
    assert result.returncode == 0, result.stderr
    assert "Started server with target" in result.stderr


def test_missing_or_mismatched_tf_keras_says_what_to_install(monkeypatch):
    real = importlib.metadata.version

    def fake(versions):
        def version(name):
            if name in versions:
                if versions[name] is None:
                    raise importlib.metadata.PackageNotFoundError(name)
                return versions[name]
            return real(name)
        return version

    monkeypatch.setattr(importlib.metadata, "version", fake({"tf-keras": None, "tensorflow": "2.21.0"}))
    with pytest.raises(pstutor.DependencyError, match=r"pip install 'tf-keras==2\.21\.\*'"):
        environment._require_tf_keras()
    monkeypatch.setattr(importlib.metadata, "version", fake({"tf-keras": "2.20.1", "tensorflow": "2.21.0"}))
    with pytest.raises(pstutor.DependencyError, match="does not match"):
        environment._require_tf_keras()


def test_colab_is_detected(monkeypatch):
    import sys
    import types

    assert not pstutor.in_colab()
    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    assert pstutor.in_colab()


def test_child_programs_write_plain_tracebacks_in_a_kernel_like_environment():
    """ipykernel sets FORCE_COLOR; Python 3.13 would then colour a child's traceback."""
    result = run_python(
        "import os, subprocess, sys\n"
        "import pstutor\n"
        "pstutor.setup()\n"
        "program = 'import os; print(os.environ.get(\"PYTHON_COLORS\")); 1/0'\n"
        "child = subprocess.run([sys.executable, '-c', program], capture_output=True, text=True)\n"
        "print(child.stdout.strip())\n"
        "print(repr(child.stderr.splitlines()[-1]))\n",
        env={"FORCE_COLOR": "1"},
    )
    assert result.returncode == 0, result.stderr
    colours, last_line = result.stdout.splitlines()
    assert colours == "0"
    assert last_line == repr("ZeroDivisionError: division by zero")
