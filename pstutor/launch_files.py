"""Launch files for a cluster on several machines or on Kubernetes.

`write_launch_files` writes, into one folder:

- `start-<task>.sh` per task: the task's own `TF_CONFIG`, `GRPC_FAIL_FAST`, then the program
  (run each on its machine, unchanged: every host uses the same port);
- a Kubernetes manifest, in one of two formats:
  `jobs` (`kubernetes.yaml`: a headless Service and a Job per task, plain Kubernetes, plus
  an evaluator Job) or
  `tfjob` (`tfjob.yaml`: one `TFJob` of Kubeflow's training operator, which starts the pods
  and writes each one's `TF_CONFIG` itself, with an `Evaluator` replica);
- a `Dockerfile` for the image every pod runs: the course's Python, TensorFlow, tf-keras,
  pstutor and the training program.

Every worker and ps runs `python -m pstutor.task_server`, which reads its role from
`TF_CONFIG`; the chief and the evaluator run your training program. The evaluator stays out of
the training cluster (a task listed there that runs no server blocks the chief's strategy): it
mounts the checkpoint claim read-only, on the chief's node, since the claim is ReadWriteOnce.
It has no start script: it runs beside the cluster, not in it. The manifests are built as data and
written with PyYAML. The files are written as one set (`pstutor.written`): a rerun replaces
the set it wrote before and removes its stale files (the manifest of the other format, the
script of a task that is gone), refuses files edited since unless `force`, and never touches
a file it did not write. Every argument is checked (`pstutor.user_input`) before a byte is
written.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

import yaml

from pstutor import user_input, written
from pstutor.language import say
from pstutor.tf_config import all_tf_configs, cluster_dict

FORMATS = ("jobs", "tfjob")
OWNER = "cluster launch-files"  # whose set the files are, in the folder's record
SERVER_COMMAND = ["python", "-m", "pstutor.task_server"]
PACKAGE = "https://github.com/pstutor/pstutor/archive/refs/tags/v{version}.tar.gz"
APP_DIR = "/app"  # where the image keeps the program; checkpoints go to APP_DIR/output
CHECKPOINTS = f"{APP_DIR}/output"
# What one task asks the scheduler for: enough for the course's toy model (an idle server takes
# ~0.7 GB, local_cluster.TASK_MEMORY_GB); a real model's chief and ps need more.
RESOURCES = {"requests": {"cpu": "1", "memory": "1Gi"}}
# Restart policy per job (plain Jobs: restartPolicy and backoffLimit; TFJob: restartPolicy).
# A worker restarted in place keeps its name and rejoins (lesson 7). A ps restarts empty: the
# chief's training then fails, and the chief, restarted too, resumes from its checkpoint.
RESTARTS = {"chief": 3, "worker": 10, "ps": 3, "evaluator": 3}
# The evaluator's TF_CONFIG: its role and no cluster (train.py's evaluator branch needs no more).
EVALUATOR_TF_CONFIG = '{"task": {"type": "evaluator", "index": 0}}'
_NAME = re.compile(r"[a-z]([-a-z0-9]{0,30}[a-z0-9])?")  # leaves room for "-worker-NN" in 63
_CLAIM = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")


class LaunchFilesError(ValueError):
    """Arguments the launch files cannot be written from, or a folder they must not touch."""


def default_image() -> str:
    """The image name the generated Dockerfile builds, tagged with pstutor's version."""
    from pstutor import __version__

    return f"pstutor-training:{__version__}"


def marker(what_en: str, what_zh: str) -> str:
    """The first comment line of every file, in the course's language (`written` records ownership)."""
    return say(f"# Written by `pstutor cluster launch-files`: {what_en}",
               f"# 由 `pstutor cluster launch-files` 生成：{what_zh}")


def task_command(task_type: str, program: str) -> list[str]:
    """What a task runs: the chief and the evaluator run the training program, the others the server."""
    return ["python", program] if task_type in ("chief", "evaluator") else SERVER_COMMAND


def write_launch_files(
    out: Path, hosts: Sequence[str], num_workers: int, num_ps: int, *, port: int = 2222,
    program: str = "train.py", image: str | None = None, name: str = "pstutor",
    format: str = "jobs", volume_claim: str = "pstutor-checkpoints", force: bool = False,
) -> list[Path]:
    """Write the start scripts, the manifest of `format` and the Dockerfile; return their paths.

    `force` replaces files of an earlier run that were edited since; files this function did
    not write are refused whatever `force` says.
    """
    image = default_image() if image is None else image
    _check_arguments(program, image, name, format, volume_claim)
    if isinstance(hosts, str) or not all(isinstance(h, str) for h in hosts):
        raise LaunchFilesError(say("The hosts must be a list of strings such as '10.0.0.5'.",
                                   "主机必须是字符串列表，例如 '10.0.0.5'。"))
    try:
        hosts = [user_input.host(h) for h in hosts]
    except user_input.BadInput as err:
        raise LaunchFilesError(say(f"Not usable in a launch file: --hosts {err}.",
                                   f"无法用于启动文件：--hosts {err}。")) from None
    cluster = cluster_dict(num_workers, num_ps, chief=True, hosts=hosts, port=port)
    files: dict[str, str] = {}
    for config in all_tf_configs(cluster):
        host = cluster[config.task_type][config.task_index].rsplit(":", 1)[0]
        files[f"start-{config.task_type}-{config.task_index}.sh"] = start_script(
            config.to_json(), config.task_type, config.task_index, host, program)
    kwargs = {"port": port, "program": program, "image": image, "name": name,
              "volume_claim": volume_claim}
    if format == "tfjob":
        files["tfjob.yaml"] = tfjob_manifest(num_workers, num_ps, **kwargs)
    else:
        files["kubernetes.yaml"] = kubernetes_manifest(num_workers, num_ps, **kwargs)
    files["Dockerfile"] = dockerfile(program, image)
    try:
        return written.write(Path(out), files, OWNER, force=force,
                             executable=[f for f in files if f.endswith(".sh")])
    except written.OutputRefused as err:
        raise LaunchFilesError(str(err)) from None


def start_script(tf_config: str, task_type: str, task_index: int, host: str, program: str) -> str:
    """The shell script that starts one task on its machine (its comments in the course's language)."""
    command = task_command(task_type, program)
    warning = say("# The server listens on every IPv4 and IPv6 interface without authentication:\n"
                  "# keep the cluster on a private network behind a firewall.\n",
                  "# 服务器在所有 IPv4 和 IPv6 网络接口上监听，而且没有身份验证：\n"
                  "# 请把集群放在防火墙后面的私有网络中。\n")
    first = marker(f"{task_type} {task_index}, run it on {host}.",
                   f"{task_type} {task_index}，请在 {host} 上运行。")
    return (
        "#!/usr/bin/env bash\n"
        f"{first}\n"
        f"{warning}"
        "set -euo pipefail\n"
        f"export TF_CONFIG={shlex.quote(tf_config)}\n"
        "export GRPC_FAIL_FAST=use_caller\n"
        f"exec {shlex.join(command)}\n"
    )


def kubernetes_manifest(
    num_workers: int, num_ps: int, *, port: int = 2222, program: str = "train.py",
    image: str | None = None, name: str = "pstutor", volume_claim: str = "pstutor-checkpoints",
) -> str:
    """Plain Kubernetes: the checkpoint claim, a headless Service and a Job per task, the evaluator's Job."""
    image = default_image() if image is None else image
    _check_arguments(program, image, name, "jobs", volume_claim)
    counts = {"chief": 1, "worker": num_workers, "ps": num_ps}
    cluster = {job: [f"{name}-{job}-{i}:{port}" for i in range(n)] for job, n in counts.items() if n}
    documents = [_volume_claim(volume_claim, name)]
    for config in all_tf_configs(cluster):
        task = f"{name}-{config.task_type}-{config.task_index}"
        labels = {"app": name, "task": task}
        documents.append({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": task, "labels": {"app": name}},
            "spec": {"selector": labels, "clusterIP": "None",
                     "ports": [{"name": "grpc", "port": port, "targetPort": port}]},
        })
        pod = _pod(config.task_type, program, image, port, "grpc", volume_claim,
                   [{"name": "TF_CONFIG", "value": config.to_json()}])
        documents.append({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": task, "labels": {"app": name}},
            "spec": {"backoffLimit": RESTARTS[config.task_type],
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"restartPolicy": "OnFailure", **pod}}},
        })
    documents.append(_evaluator_job(name, program, image, volume_claim))
    header = [
        marker("plain Kubernetes, a Service and a Job per task.",
               "普通 Kubernetes，每个任务一个 Service 和一个 Job。"),
        *say(
            ["# Build the image first (see Dockerfile), then: kubectl apply -f kubernetes.yaml",
             "# Every task restarts on failure (restartPolicy: OnFailure); the servers keep their",
             "# Service name: a restarted worker rejoins; after a ps restart the chief fails, restarts",
             f"# and must resume from its last checkpoint in {CHECKPOINTS} (volume claim {volume_claim}).",
             "# Only a failure is restarted: a server stopped by SIGTERM (a drain, an eviction) exits 143;",
             "# exit code 0 would complete its Job, and no pod would replace it.",
             "# The evaluator (no Service, outside the training cluster) reads the checkpoints; the",
             "# claim is ReadWriteOnce, so its pod affinity puts it on the node of the chief's pod",
             f"# (task: {name}-chief-0).",
             "# The servers never end: when the chief's and the evaluator's Jobs have completed,",
             "# delete the Jobs and Services by kind; the claim, labelled app too, keeps the checkpoints",
             "# (kubectl delete -f would delete it, and with a Delete reclaim policy its volume):",
             f"#   {cleanup_command('jobs', name)}",
             *_copy_lines(_COPY_WORDS_EN, image, volume_claim, name),
             "# The servers have no authentication: keep them inside the cluster network (NetworkPolicy)."],
            ["# 先构建镜像（见 Dockerfile），然后运行：kubectl apply -f kubernetes.yaml",
             "# 每个任务失败后都会重启（restartPolicy: OnFailure），服务器的 Service 名称不变：",
             "# 重启的工作进程会重新加入；参数服务器重启后协调器会失败并重启，",
             f"# 必须从 {CHECKPOINTS} 中最近的检查点接着训练（持久卷申领 {volume_claim}）。",
             "# 只有失败才会重启：服务器被 SIGTERM 停止（节点排空、驱逐）时以退出码 143 退出；",
             "# 如果以 0 退出，它的 Job 就算完成了，不会再有 pod 替代它。",
             "# 评估器（没有 Service，不在训练集群中）读取检查点；持久卷申领是 ReadWriteOnce，",
             f"# 所以它的 pod 亲和性把它放到协调器 pod（task: {name}-chief-0）所在的节点上。",
             "# 服务器永远不会自己结束：协调器和评估器的 Job 都完成后，按类型删除 Job 和 Service；",
             "# 持久卷申领也带有 app 标签，但要留下它，因为检查点就在里面",
             "# （kubectl delete -f 会把它删掉，回收策略为 Delete 时它的卷也会随之删除）：",
             f"#   {cleanup_command('jobs', name)}",
             *_copy_lines(_COPY_WORDS_ZH, image, volume_claim, name),
             "# 服务器没有身份验证：请把它们限制在集群网络内（NetworkPolicy）。"]),
    ]
    return _dump(header, documents)


def tfjob_manifest(
    num_workers: int, num_ps: int, *, port: int = 2222, program: str = "train.py",
    image: str | None = None, name: str = "pstutor", volume_claim: str = "pstutor-checkpoints",
) -> str:
    """Kubeflow's training operator: the volume claim and one `TFJob` (Chief, Worker, PS, Evaluator).

    The operator leaves the Evaluator out of the cluster it writes into every replica's
    `TF_CONFIG` and gives it the task type `evaluator` (training-operator `genClusterSpec`).
    `cleanPodPolicy: None`: the job succeeds when the chief does, and the default `Running`
    would then delete the evaluator while it evaluates the last checkpoint.
    """
    image = default_image() if image is None else image
    _check_arguments(program, image, name, "tfjob", volume_claim)
    counts = {"Chief": ("chief", 1), "Worker": ("worker", num_workers), "PS": ("ps", num_ps),
              "Evaluator": ("evaluator", 1)}
    # the operator's labels on the chief's pod (replica type in lower case)
    chief = {"training.kubeflow.org/job-name": name, "training.kubeflow.org/replica-type": "chief"}
    replicas = {}
    for kind, (job, count) in counts.items():
        if count:
            replicas[kind] = {
                "replicas": count, "restartPolicy": "OnFailure",
                "template": {"metadata": {"labels": {"app": name}},
                             "spec": _pod(job, program, image, port, "tfjob-port", volume_claim, [],
                                          beside=chief)},
            }
    tfjob = {
        "apiVersion": "kubeflow.org/v1", "kind": "TFJob",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {"runPolicy": {"cleanPodPolicy": "None"}, "tfReplicaSpecs": replicas},
    }
    header = [
        marker("one TFJob for Kubeflow's training operator (v1).",
               "一个 TFJob，供 Kubeflow 的 Training Operator（v1）使用。"),
        *say(
            ["# Build the image first (see Dockerfile), then: kubectl apply -f tfjob.yaml",
             "# The operator creates a pod and a Service per replica and writes each pod's TF_CONFIG;",
             "# the Evaluator is left out of the training cluster. Replicas restart on failure; a server",
             "# stopped by SIGTERM (a drain, an eviction) exits 143, a failure: exit code 0 is success.",
             "# When the chief succeeds the job succeeds; cleanPodPolicy: None deletes nothing then, so",
             "# the evaluator finishes its last evaluation (Running would delete it, and the servers).",
             "# The evaluator mounts the claim read-only on the chief's node (ReadWriteOnce: pod affinity).",
             "# The servers never end: when the evaluator has completed, delete the TFJob only (its",
             "# pods and Services go with it); the claim keeps the checkpoints (delete -f would delete it):",
             f"#   {cleanup_command('tfjob', name)}",
             *_copy_lines(_COPY_WORDS_EN, image, volume_claim, name),
             "# The servers have no authentication: keep them inside the cluster network (NetworkPolicy)."],
            ["# 先构建镜像（见 Dockerfile），然后运行：kubectl apply -f tfjob.yaml",
             "# Training Operator 为每个副本创建一个 pod 和一个 Service，并为每个 pod 写好 TF_CONFIG；",
             "# 评估器不在训练集群中。副本失败后会重启；服务器被 SIGTERM 停止（节点排空、驱逐）时",
             "# 以退出码 143 退出，算作失败：退出码 0 表示成功。",
             "# 协调器成功结束时整个作业成功；cleanPodPolicy: None 这时什么也不删，",
             "# 评估器因此能做完最后一次评估（Running 会把它和服务器一起删掉）。",
             "# 评估器在协调器所在的节点上以只读方式挂载持久卷申领（ReadWriteOnce：pod 亲和性）。",
             "# 服务器永远不会自己结束：评估器完成后，只删除这个 TFJob（它的 pod 和 Service 随之删除）；",
             "# 持久卷申领保留下来，检查点就在里面（kubectl delete -f 会把它删掉）：",
             f"#   {cleanup_command('tfjob', name)}",
             *_copy_lines(_COPY_WORDS_ZH, image, volume_claim, name),
             "# 服务器没有身份验证：请把它们限制在集群网络内（NetworkPolicy）。"]),
    ]
    return _dump(header, [_volume_claim(volume_claim, name), tfjob])


def cleanup_command(format: str, name: str) -> str:
    """What stops the servers once training and evaluation are done, and keeps the claim.

    The claim carries the label `app` too, so the plain Jobs' command selects by kind; a TFJob's
    pods and Services are owned by it and go with it. `kubectl delete -f` would delete the claim.
    """
    return f"kubectl delete job,service -l app={name}" if format == "jobs" else f"kubectl delete tfjob {name}"


def copy_pod_spec(pod: str, image: str, volume_claim: str) -> dict:
    """A pod that mounts the claim read-only where the chief wrote, and waits to be copied from.

    Its container has the pod's name, the one `kubectl run` gives its own, so that the override
    replaces that container whether kubectl merges lists wholesale (`merge`) or by name (`strategic`).
    """
    return {"containers": [{
        "name": pod, "image": image, "command": ["sleep", "3600"],
        "volumeMounts": [{"name": "checkpoints", "mountPath": CHECKPOINTS, "readOnly": True}]}],
        "volumes": [{"name": "checkpoints", "persistentVolumeClaim": {"claimName": volume_claim}}],
        "restartPolicy": "Never"}


def copy_commands(image: str, volume_claim: str, name: str) -> list[str]:
    """The commands that copy the checkpoints out of the claim (`kubectl cp` runs the image's tar)."""
    pod = f"{name}-copy"
    overrides = json.dumps({"apiVersion": "v1", "spec": copy_pod_spec(pod, image, volume_claim)},
                           separators=(",", ":"))
    return [f"kubectl run {pod} --image={image} --restart=Never --overrides={shlex.quote(overrides)}",
            f"kubectl wait --for=condition=Ready --timeout=10m pod/{pod}",  # an image pull takes minutes
            f"kubectl cp {pod}:{CHECKPOINTS} ./output && kubectl delete pod {pod}",
            f"kubectl delete pvc {volume_claim}"]


# The header's words around the copy-out commands: before them, and before deleting the claim.
_COPY_WORDS_EN = ("# Then copy the checkpoints out through a pod that mounts the claim:",
                  "# and delete the claim (with a Delete reclaim policy, its volume too) once you have them:")
_COPY_WORDS_ZH = ("# 然后通过一个挂载该持久卷申领的 pod 把检查点复制出来：",
                  "# 拿到检查点之后再删除持久卷申领（回收策略为 Delete 时，它的卷也会被删除）：")


def _copy_lines(words: tuple[str, str], image: str, volume_claim: str, name: str) -> list[str]:
    """The header's copy-out step in one language: the commands, with `words` around them."""
    run, wait, copy, delete = (f"#   {c}" for c in copy_commands(image, volume_claim, name))
    return [words[0], run, wait, copy, words[1], delete]


def dockerfile(program: str, image: str) -> str:
    """The image every task runs: the course's Python, TensorFlow, tf-keras, pstutor and the program."""
    from pstutor import __version__

    versions = {package: _installed(package) for package in ("tensorflow", "tf-keras")}
    pins = " ".join(f'"{package}=={version}"' for package, version in versions.items())
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    name = PurePosixPath(program).name
    build = say(f"# Build it in the folder that holds {name}:\n", f"# 在存放 {name} 的文件夹中构建它：\n")
    push = say("# and push it where your cluster pulls images from (then use that name in the manifest).\n",
               "# 然后推送到集群拉取镜像的仓库（并在清单中使用这个名字）。\n")
    return (
        f"{marker('the image every task runs.', '每个任务运行的镜像。')}\n"
        f"{build}"
        f"#   docker build -t {image} .\n"
        f"{push}"
        f"FROM python:{python}-slim\n"
        f"RUN pip install --no-cache-dir {pins} \\\n"
        f'    "pstutor @ {PACKAGE.format(version=__version__)}"\n'
        f"WORKDIR {APP_DIR}\n"
        f"COPY {name} {_app_path(program)}\n"
    )


def _evaluator_job(name: str, program: str, image: str, volume_claim: str) -> dict:
    """The evaluator as a plain Job: its role only in TF_CONFIG, no Service, on the chief's node."""
    labels = {"app": name, "task": f"{name}-evaluator-0"}
    pod = _pod("evaluator", program, image, None, None, volume_claim,
               [{"name": "TF_CONFIG", "value": EVALUATOR_TF_CONFIG}],
               beside={"task": f"{name}-chief-0"})
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": f"{name}-evaluator-0", "labels": {"app": name}},
        "spec": {"backoffLimit": RESTARTS["evaluator"],
                 "template": {"metadata": {"labels": labels},
                              "spec": {"restartPolicy": "OnFailure", **pod}}},
    }


def _pod(job: str, program: str, image: str, port: int | None, port_name: str | None,
         volume_claim: str, env: list[dict], beside: dict | None = None) -> dict:
    """A pod spec for one task; the chief mounts the checkpoint volume, the evaluator reads it.

    Only the chief writes (the program saves with experimental_io_device on it). The claim is
    ReadWriteOnce (one node), so the evaluator gets a pod affinity to the pod labelled `beside`.
    """
    container: dict = {
        "name": "tensorflow", "image": image,
        "command": task_command(job, _app_path(program)), "workingDir": APP_DIR,
        # the plain evaluator Job serves nothing; the operator wants its port on every replica
        **({} if port is None else {"ports": [{"name": port_name, "containerPort": port}]}),
        "env": [*env, {"name": "GRPC_FAIL_FAST", "value": "use_caller"}],
        "resources": RESOURCES,
    }
    pod: dict = {"containers": [container]}
    if job in ("chief", "evaluator"):
        mount = {"name": "checkpoints", "mountPath": CHECKPOINTS}
        container["volumeMounts"] = [mount if job == "chief" else {**mount, "readOnly": True}]
        pod["volumes"] = [{"name": "checkpoints", "persistentVolumeClaim": {"claimName": volume_claim}}]
    if job == "evaluator" and beside:
        pod["affinity"] = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": beside}, "topologyKey": "kubernetes.io/hostname"}]}}
    return pod


def _volume_claim(volume_claim: str, name: str) -> dict:
    """The checkpoints' claim: one writer, so ReadWriteOnce, which every storage class offers.

    ReadWriteOnce is one node, not one pod: the evaluator, on the chief's node, reads it too.
    """
    return {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": volume_claim, "labels": {"app": name}},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }


def _app_path(program: str) -> str:
    return f"{APP_DIR}/{PurePosixPath(program).name}"


class _PlainDumper(yaml.SafeDumper):
    """Writes every value in full, never as an anchor (`&id001`) and its aliases (`*id001`).

    The pods share one `RESOURCES` dict and the servers one `SERVER_COMMAND` list: with aliases,
    the Worker's `resources` would be `*id001`, and editing the Chief's block would change all four.
    """

    def ignore_aliases(self, data: object) -> bool:
        return True


def _dump(header: list[str], documents: list[dict]) -> str:
    body = yaml.dump_all(documents, Dumper=_PlainDumper, sort_keys=False, allow_unicode=True, width=1000)
    return "\n".join(header) + "\n" + body


def _installed(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "2.21.*"


def _check_arguments(program: str, image: str, name: str, format: str, volume_claim: str) -> None:
    """Refuse, with one line, any argument that would make a broken or unsafe file."""
    for option, value, check in (("--program", program, user_input.program_path),
                                 ("--image", image, user_input.image_reference)):
        try:
            check(value)
        except (user_input.BadInput, TypeError) as err:
            raise LaunchFilesError(say(f"Not usable in a launch file: {option} {err}.",
                                       f"无法用于启动文件：{option} {err}。")) from None
    checks = [
        (isinstance(name, str) and _NAME.fullmatch(name),
         f"--name {name!r}: lowercase letters, digits and '-', starting with a letter, at most 32",
         f"--name {name!r}：只能用小写字母、数字和“-”，以字母开头，最多 32 个字符"),
        (format in FORMATS, f"--format {format!r}: one of {', '.join(FORMATS)}",
         f"--format {format!r}：只能是 {', '.join(FORMATS)} 之一"),
        (isinstance(volume_claim, str) and _CLAIM.fullmatch(volume_claim),
         f"--volume-claim {volume_claim!r}: lowercase letters, digits, '-' and '.'",
         f"--volume-claim {volume_claim!r}：只能用小写字母、数字、“-”和“.”"),
    ]
    for ok, en, zh in checks:
        if not ok:
            raise LaunchFilesError(say(f"Not usable in a launch file: {en}.", f"无法用于启动文件：{zh}。"))
