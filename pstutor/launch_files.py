"""Launch files for a cluster on several machines: one start script per task, and a
Kubernetes manifest (one Service and one Job per task, each with its own `TF_CONFIG`).

Every worker and ps runs the same program, `python -m pstutor.task_server`, which reads its
role from `TF_CONFIG`; the chief runs your training program.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from pathlib import Path

from pstutor.language import say
from pstutor.tf_config import TFConfigError, all_tf_configs, cluster_dict

SERVER_COMMAND = ["python", "-m", "pstutor.task_server"]


def task_command(task_type: str, program: str) -> list[str]:
    """What a task runs: the chief runs the training program, every other task the server."""
    return ["python", program] if task_type == "chief" else SERVER_COMMAND


def write_launch_files(
    out: Path, hosts: Sequence[str], num_workers: int, num_ps: int, *, port: int = 2222,
    program: str = "train.py", image: str = "tensorflow/tensorflow:2.21.0", name: str = "pstutor",
) -> list[Path]:
    """Write `start-<task>.sh` for each task on `hosts` and `kubernetes.yaml`; return the paths."""
    cluster = cluster_dict(num_workers, num_ps, chief=True, hosts=list(hosts), port=port)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for config in all_tf_configs(cluster):
        host = cluster[config.task_type][config.task_index].rsplit(":", 1)[0]
        path = out / f"start-{config.task_type}-{config.task_index}.sh"
        path.write_text(start_script(config.to_json(), config.task_type, config.task_index, host,
                                     program))
        path.chmod(0o755)
        written.append(path)
    manifest = out / "kubernetes.yaml"
    manifest.write_text(kubernetes_manifest(num_workers, num_ps, port=port, program=program,
                                            image=image, name=name))
    written.append(manifest)
    return written


def start_script(tf_config: str, task_type: str, task_index: int, host: str, program: str) -> str:
    """The shell script that starts one task on its machine."""
    command = task_command(task_type, program)
    return (
        "#!/usr/bin/env bash\n"
        f"# {task_type} {task_index}: run this on {host}.\n"
        "# The servers have no authentication: keep the cluster on a private network.\n"
        "set -euo pipefail\n"
        f"export TF_CONFIG={shlex.quote(tf_config)}\n"
        "export GRPC_FAIL_FAST=use_caller\n"
        f"exec {shlex.join(command)}\n"
    )


def kubernetes_manifest(
    num_workers: int, num_ps: int, *, port: int = 2222, program: str = "train.py",
    image: str = "tensorflow/tensorflow:2.21.0", name: str = "pstutor",
) -> str:
    """One Service and one Job per task; tasks find each other by their Service names."""
    if not name.replace("-", "").isalnum() or name != name.lower():
        raise TFConfigError(say(f"{name!r} is not a valid Kubernetes name (lowercase, digits, '-').",
                                f"{name!r} 不是合法的 Kubernetes 名称（小写字母、数字和“-”）。"))
    counts = {"chief": 1, "worker": num_workers, "ps": num_ps}
    cluster = {job: [f"{name}-{job}-{i}:{port}" for i in range(n)] for job, n in counts.items() if n}
    documents = []
    for config in all_tf_configs(cluster):
        task = f"{name}-{config.task_type}-{config.task_index}"
        labels = {"app": name, "task": task}
        command = task_command(config.task_type, program)
        documents.append(_yaml({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": task, "labels": {"app": name}},
            "spec": {"selector": labels, "clusterIP": "None",
                     "ports": [{"name": "grpc", "port": port, "targetPort": port}]},
        }))
        documents.append(_yaml({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": task, "labels": {"app": name}},
            "spec": {"backoffLimit": 0, "template": {
                "metadata": {"labels": labels},
                "spec": {"restartPolicy": "Never", "containers": [{
                    "name": "tensorflow", "image": image, "command": command,
                    "ports": [{"containerPort": port}],
                    "env": [{"name": "TF_CONFIG", "value": config.to_json()},
                            {"name": "GRPC_FAIL_FAST", "value": "use_caller"}],
                }]},
            }},
        }))
    header = (
        "# One Service + one Job per task; apply with: kubectl apply -f kubernetes.yaml\n"
        f"# The image must contain TensorFlow, tf-keras, pstutor and {program}.\n"
        "# The servers have no authentication: keep them inside the cluster network.\n"
    )
    return header + "---\n".join(documents)


def _yaml(value, indent: int = 0) -> str:
    """A small YAML writer for the manifest (mappings, lists, strings, numbers)."""
    pad = "  " * indent
    if isinstance(value, dict):
        lines = []
        for key, item in value.items():
            if isinstance(item, dict | list) and item:
                lines.append(f"{pad}{key}:\n{_yaml(item, indent + 1)}")
            else:
                lines.append(f"{pad}{key}: {_scalar(item)}")
        return "\n".join(lines) + ("\n" if indent == 0 else "")
    lines = []
    for item in value:
        text = _yaml(item, indent + 1) if isinstance(item, dict | list) else pad + "  " + _scalar(item)
        lines.append(f"{pad}- {text.lstrip()}")
    return "\n".join(lines)


def _scalar(value) -> str:
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, dict | list):
        return json.dumps(value)
    return json.dumps(str(value), ensure_ascii=False)  # a JSON string is a valid YAML string
