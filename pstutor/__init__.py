"""pstutor: the helper package of the parameter server training course.

Importing pstutor does not import TensorFlow: `pstutor.setup()` must switch `tf.keras` to
Keras 2 first. Everything that needs TensorFlow imports it when called.
"""

from pstutor.clusters import in_process_cluster, worker_config
from pstutor.data import toy_classification
from pstutor.environment import (
    DependencyError,
    Environment,
    KerasVersionError,
    in_colab,
    setup,
)
from pstutor.language import current_language, say, set_language
from pstutor.pictures import draw_cluster, plot_curves
from pstutor.tf_config import (
    TFConfig,
    TFConfigError,
    all_tf_configs,
    cluster_dict,
    make_tf_config,
    parse_tf_config,
    validate_cluster,
)

__version__ = "0.1.0"

__all__ = [
    "DependencyError",
    "Environment",
    "KerasVersionError",
    "TFConfig",
    "TFConfigError",
    "all_tf_configs",
    "cluster_dict",
    "current_language",
    "draw_cluster",
    "in_colab",
    "in_process_cluster",
    "make_tf_config",
    "parse_tf_config",
    "plot_curves",
    "say",
    "set_language",
    "setup",
    "toy_classification",
    "validate_cluster",
    "worker_config",
]
