"""pstutor: the helper package of the parameter server training course.

Importing pstutor does not import TensorFlow: `pstutor.setup()` must switch `tf.keras` to
Keras 2 first. Everything that needs TensorFlow imports it when called.
"""

import importlib.metadata

from pstutor.checks import check
from pstutor.clusters import in_process_cluster, worker_config
from pstutor.data import toy_classification, toy_words
from pstutor.environment import (
    DependencyError,
    Environment,
    KerasVersionError,
    in_colab,
    setup,
)
from pstutor.language import current_language, say, set_language
from pstutor.measured import measurement
from pstutor.tables import progress, show_table
from pstutor.tf_config import (
    TFConfig,
    TFConfigError,
    all_tf_configs,
    cluster_dict,
    make_tf_config,
    parse_tf_config,
    validate_cluster,
)
from pstutor.timeline import Step, TimelineRecorder

# The pictures need matplotlib, which takes half a second to import: more than the rest of
# pstutor together, and paid by every process that imports pstutor without drawing (a
# grading sandbox, a worker). They are imported when a lesson first asks for one.
_PICTURES = frozenset({
    "draw_cluster",
    "draw_comparison",
    "draw_examples_seen",
    "draw_shards",
    "draw_timeline",
    "plot_curves",
    "plot_train_eval",
    "read_scalars",
    "shard_rows",
})


def __getattr__(name: str):
    if name in _PICTURES:
        from pstutor import pictures

        return getattr(pictures, name)
    raise AttributeError(f"module 'pstutor' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_PICTURES})


try:  # the version is written once, in pyproject.toml
    __version__ = importlib.metadata.version("pstutor")
except importlib.metadata.PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = [
    "DependencyError",
    "Environment",
    "KerasVersionError",
    "Step",
    "TFConfig",
    "TFConfigError",
    "TimelineRecorder",
    "all_tf_configs",
    "check",
    "cluster_dict",
    "current_language",
    "draw_cluster",
    "draw_comparison",
    "draw_examples_seen",
    "draw_shards",
    "draw_timeline",
    "in_colab",
    "in_process_cluster",
    "make_tf_config",
    "measurement",
    "parse_tf_config",
    "plot_curves",
    "plot_train_eval",
    "progress",
    "read_scalars",
    "say",
    "set_language",
    "setup",
    "shard_rows",
    "show_table",
    "toy_classification",
    "toy_words",
    "validate_cluster",
    "worker_config",
]
