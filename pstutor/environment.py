"""Preparing a Python process for the course: legacy Keras, quiet logs, GPUs, Colab.

`setup()` must run before TensorFlow is imported. Parameter server training needs the
Keras 2 API (the `tf-keras` package): Keras 3, the default `tf.keras` since TF 2.16, has no
`ParameterServerStrategy` support in `Model.fit` and no `tf.keras.optimizers.legacy`
(keras-team/keras#18624). TensorFlow decides which Keras `tf.keras` means when it is
imported, so the switch has to be made before that.
"""

from __future__ import annotations

import contextlib
import dataclasses
import html
import importlib.metadata
import os
import platform
import sys
import warnings
from collections.abc import Iterator
from types import ModuleType

from pstutor.fonts import use_language_font
from pstutor.language import both, say, set_language
from pstutor.tables import align

TESTED_TENSORFLOW = ("2.20", "2.21")

# Environment variables that TensorFlow reads at import time (or when servers start).
_ALWAYS = {
    "TF_USE_LEGACY_KERAS": "1",  # tf.keras -> tf_keras (Keras 2)
    # A dead worker or ps fails the call at once instead of waiting for it to come back. The gRPC
    # code of TF 2.20/2.21 already defaults to this (grpc_state.h); older versions could hang.
    "GRPC_FAIL_FAST": "use_caller",
    "TF_FORCE_GPU_ALLOW_GROWTH": "true",  # in-process servers share a GPU without starving
    # ipykernel sets FORCE_COLOR, and Python 3.13 (Colab's) then writes colour codes into the
    # tracebacks of child programs, even into captured output: keep their errors plain text.
    "PYTHON_COLORS": "0",
}
_QUIET = {
    "TF_CPP_MIN_LOG_LEVEL": "2",  # C++ logs: errors only (no server config dumps, no INFO)
    "GRPC_VERBOSITY": "ERROR",
}
# Warnings raised inside TensorFlow that a learner cannot act on.
_NOISY_MODULES = r"(tensorflow|tf_keras|keras|absl)(\.|$)"


class KerasVersionError(RuntimeError):
    """TensorFlow was imported with Keras 3 before `pstutor.setup()` could switch to Keras 2."""


class DependencyError(RuntimeError):
    """A package the course needs is missing or has the wrong version."""


@dataclasses.dataclass(frozen=True)
class Environment:
    """What `setup()` found: versions, devices and where the notebook runs."""

    pstutor: str
    python: str
    tensorflow: str
    keras: str
    devices: tuple[str, ...]
    colab: bool
    verbose: bool

    @property
    def gpus(self) -> int:
        """How many GPUs TensorFlow sees."""
        return sum(d.startswith("GPU") for d in self.devices)

    def rows(self) -> list[tuple[str, str]]:
        """The summary as (name, value) pairs."""
        return [
            ("pstutor", self.pstutor),
            ("Python", self.python),
            ("TensorFlow", self.tensorflow),
            ("tf.keras", self.keras),
            (say("devices", "设备"), ", ".join(self.devices)),
            ("Colab", say("yes", "是") if self.colab else say("no", "否")),
            (say("logs", "日志"), say("verbose", "详细") if self.verbose else say("quiet", "静默")),
        ]

    def __str__(self) -> str:
        return "\n".join(line.rstrip() for line in align(self.rows(), (False, False)))

    def _repr_html_(self) -> str:
        cells = "".join(
            f"<tr><th style='text-align:left'>{html.escape(n)}</th>"
            f"<td style='text-align:left'>{html.escape(v)}</td></tr>"
            for n, v in self.rows()
        )
        return f"<table>{cells}</table>"

    def _repr_pretty_(self, printer, cycle: bool) -> None:
        printer.text(str(self))


def in_colab() -> bool:
    """True inside Google Colab."""
    return "google.colab" in sys.modules


def setup(verbose: bool = False, lang: str | None = None) -> Environment:
    """Make this process ready for parameter server training; call it before `import tensorflow`.

    Switches `tf.keras` to Keras 2 (`tf-keras`), silences TensorFlow's logs unless
    `verbose`, lets the coordinator see failed tasks (`GRPC_FAIL_FAST`), turns on GPU memory
    growth, and chooses the language of pstutor's messages ('en' or 'zh'; None keeps the
    current one). Calling it again is harmless.
    """
    if lang is not None:
        set_language(lang)
    _refuse_keras_3_already_imported()
    _require_tf_keras()
    os.environ.update(_ALWAYS)
    if verbose:
        for name in _QUIET:
            os.environ.pop(name, None)
    else:
        os.environ.update(_QUIET)
    tf = _import_tensorflow(quiet=not verbose)
    _configure_python_logging(tf, verbose)
    _check_tf_keras_is_active(tf)
    devices = _prepare_devices(tf, quiet=not verbose)
    _show_figures_inline()
    use_language_font()  # in Chinese, a CJK font for every figure (pstutor.fonts)
    from pstutor import __version__

    return Environment(
        pstutor=__version__,
        python=platform.python_version(),
        tensorflow=tf.__version__,
        keras=f"tf_keras {importlib.metadata.version('tf-keras')} (Keras 2)",
        devices=devices,
        colab=in_colab(),
        verbose=verbose,
    )


def _show_figures_inline() -> None:
    """In a notebook, display a returned matplotlib `Figure` as a PNG image.

    pstutor's pictures are built without pyplot (so each shows exactly once); without
    pyplot, IPython has no image formatter for figures until it is registered here.
    """
    try:
        from IPython import get_ipython
        from IPython.core.pylabtools import select_figure_formats
    except ImportError:
        return
    shell = get_ipython()
    if shell is not None:
        select_figure_formats(shell, {"png"})


def _refuse_keras_3_already_imported() -> None:
    """Raise if TensorFlow is already imported without the switch to Keras 2."""
    tf = sys.modules.get("tensorflow")
    if tf is None or getattr(tf, "_tf_uses_legacy_keras", True):
        return
    raise KerasVersionError(
        both(
            "TensorFlow was imported before pstutor.setup(), so tf.keras is Keras 3, which "
            "cannot train with ParameterServerStrategy. TensorFlow chooses its Keras once, "
            "at import, so this cannot be fixed in the running process.\n"
            "What to do: restart the kernel (JupyterLab: Kernel > Restart Kernel; Colab: "
            "Runtime > Restart session), then run the setup cell first. In your own code, "
            "call pstutor.setup() before `import tensorflow`.",
            "TensorFlow 在 pstutor.setup() 之前就被导入了，此时 tf.keras 是 Keras 3，"
            "无法配合 ParameterServerStrategy 训练。TensorFlow 只在导入时选择一次 Keras 版本，"
            "所以在当前进程里已经无法补救。\n"
            "解决办法：重启内核（JupyterLab：Kernel > Restart Kernel；Colab：代码执行程序 > "
            "重启会话），然后先运行“环境设置”单元格。在自己的代码里，请在 `import tensorflow` "
            "之前调用 pstutor.setup()。",
        )
    )


def _require_tf_keras() -> None:
    """Raise a fix-it message if tf-keras is missing or does not match TensorFlow."""
    try:
        tf_version = importlib.metadata.version("tensorflow")
    except importlib.metadata.PackageNotFoundError:
        tf_version = None
    try:
        keras_version = importlib.metadata.version("tf-keras")
    except importlib.metadata.PackageNotFoundError:
        pin = f"=={minor(tf_version)}.*" if tf_version else ""
        raise DependencyError(
            both(
                f"The tf-keras package is missing. Install it with: pip install 'tf-keras{pin}'",
                f"缺少 tf-keras 包。请用以下命令安装：pip install 'tf-keras{pin}'",
            )
        ) from None
    if tf_version and minor(tf_version) != minor(keras_version):
        raise DependencyError(
            both(
                f"tf-keras {keras_version} does not match TensorFlow {tf_version}. "
                f"Install the matching one: pip install 'tf-keras=={minor(tf_version)}.*'",
                f"tf-keras {keras_version} 与 TensorFlow {tf_version} 版本不匹配。"
                f"请安装对应版本：pip install 'tf-keras=={minor(tf_version)}.*'",
            )
        )


def minor(version: str) -> str:
    """'2.21.0' -> '2.21'."""
    return ".".join(version.split(".")[:2])


@contextlib.contextmanager
def _silenced_stderr(enabled: bool) -> Iterator[None]:
    """Send file descriptor 2 to /dev/null: C++ libraries print there while loading."""
    if not enabled:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _import_tensorflow(quiet: bool) -> ModuleType:
    """Import TensorFlow, hiding the lines its native libraries print while they load."""
    with _silenced_stderr(quiet):
        import tensorflow as tf
    return tf


def _configure_python_logging(tf: ModuleType, verbose: bool) -> None:
    """Quiet (or restore) TensorFlow's Python-side logs and warnings."""
    import absl.logging

    level = "INFO" if verbose else "ERROR"
    tf.get_logger().setLevel(level)
    absl.logging.set_verbosity(level.lower())
    tf.autograph.set_verbosity(0)
    action = "default" if verbose else "ignore"
    warnings.filterwarnings(action, module=_NOISY_MODULES)


def _check_tf_keras_is_active(tf: ModuleType) -> None:
    """Make sure `tf.keras` really resolved to tf_keras (and not to Keras 3)."""
    name = tf.keras.__name__
    if not name.startswith("tf_keras"):
        raise KerasVersionError(
            both(
                f"tf.keras resolved to {name}, not tf_keras. Restart the kernel and run the "
                "setup cell first.",
                f"tf.keras 指向了 {name}，而不是 tf_keras。请重启内核并先运行环境设置单元格。",
            )
        )


def _prepare_devices(tf: ModuleType, quiet: bool) -> tuple[str, ...]:
    """Turn on GPU memory growth and list the devices (CUDA probing prints; hide it)."""
    with _silenced_stderr(quiet):
        gpus = tf.config.list_physical_devices("GPU")
        for gpu in gpus:
            with contextlib.suppress(RuntimeError):  # already initialised: growth env var holds
                tf.config.experimental.set_memory_growth(gpu, True)
        devices = tf.config.list_physical_devices()
    return tuple(d.name.replace("/physical_device:", "") for d in devices)
