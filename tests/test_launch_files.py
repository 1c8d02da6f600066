"""Launch files: scripts and manifests that agree, validate against Kubernetes' and the TFJob
CRD's schemas offline, and a command that never touches a file of the user's."""

import json
import os
import shlex
import subprocess
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml
from conftest import run_pstutor

from pstutor.launch_files import LaunchFilesError, kubernetes_manifest, tfjob_manifest, write_launch_files

HOSTS = ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"]
KUBERNETES = kubernetes_validate.latest_version()  # the newest schemas the package ships
TFJOB_SCHEMA = json.loads((Path(__file__).parent / "schemas" / "tfjob-v1.json").read_text())


def test_start_scripts_and_manifest_agree(tmp_path):
    paths = write_launch_files(tmp_path, HOSTS, num_workers=2, num_ps=1, port=2222)
    assert sorted(p.name for p in paths) == ["Dockerfile", "kubernetes.yaml", "start-chief-0.sh",
                                             "start-ps-0.sh", "start-worker-0.sh", "start-worker-1.sh"]
    for path in paths:
        if path.suffix == ".sh":
            assert subprocess.run(["bash", "-n", str(path)]).returncode == 0
            assert os.access(path, os.X_OK)
            assert "export GRPC_FAIL_FAST=use_caller" in path.read_text()
    worker = (tmp_path / "start-worker-1.sh").read_text()
    config = json.loads(worker.split("export TF_CONFIG=")[1].splitlines()[0].strip("'"))
    assert config["task"] == {"type": "worker", "index": 1}
    assert config["cluster"]["worker"] == ["10.0.0.2:2222", "10.0.0.3:2222"]
    assert "exec python -m pstutor.task_server" in worker
    assert "exec python train.py" in (tmp_path / "start-chief-0.sh").read_text()

    documents = list(yaml.safe_load_all((tmp_path / "kubernetes.yaml").read_text()))
    services = {d["metadata"]["name"]: d for d in documents if d["kind"] == "Service"}
    jobs = [d for d in documents if d["kind"] == "Job"]
    assert len(services) == 4 and len(jobs) == 5  # the evaluator's Job has no Service
    for job in jobs:
        pod = job["spec"]["template"]["spec"]
        [container] = pod["containers"]
        env = {e["name"]: e["value"] for e in container["env"]}
        assert env["GRPC_FAIL_FAST"] == "use_caller"
        config = json.loads(env["TF_CONFIG"])
        me = f"pstutor-{config['task']['type']}-{config['task']['index']}"
        assert job["metadata"]["name"] == me
        if config["task"]["type"] == "evaluator":  # beside the cluster: its role and nothing else
            assert config == {"task": {"type": "evaluator", "index": 0}} and me not in services
            assert container["command"] == ["python", "/app/train.py"] and "ports" not in container
            continue
        assert services[me]["spec"]["selector"] == job["spec"]["template"]["metadata"]["labels"]
        for addresses in config["cluster"].values():
            for address in addresses:
                name, port = address.rsplit(":", 1)
                assert name in services, f"{address} has no Service"
                assert services[name]["spec"]["ports"][0]["port"] == int(port)


def test_plain_manifest_restarts_tasks_and_mounts_the_checkpoints():
    documents = list(yaml.safe_load_all(kubernetes_manifest(2, 1, image="registry.example.com/t:1",
                                                            volume_claim="team-ckpt")))
    [claim] = [d for d in documents if d["kind"] == "PersistentVolumeClaim"]
    assert claim["metadata"]["name"] == "team-ckpt" and claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    for job in (d for d in documents if d["kind"] == "Job"):
        pod = job["spec"]["template"]["spec"]
        role = job["metadata"]["name"].split("-")[1]
        assert pod["restartPolicy"] == "OnFailure", role  # a failed worker comes back (lesson 7)
        assert job["spec"]["backoffLimit"] >= 3
        [container] = pod["containers"]
        assert container["image"] == "registry.example.com/t:1"
        assert container["resources"]["requests"]["memory"] == "1Gi"
        mounts = {m["mountPath"]: m.get("readOnly", False) for m in container.get("volumeMounts", [])}
        expected = {"chief": {"/app/output": False}, "evaluator": {"/app/output": True}}  # one writer
        assert mounts == expected.get(role, {}), role
        if mounts:
            assert pod["volumes"][0]["persistentVolumeClaim"]["claimName"] == "team-ckpt"


@pytest.mark.parametrize("make", [kubernetes_manifest, tfjob_manifest])
def test_the_evaluator_reads_the_claim_on_the_chiefs_node_and_stays_out_of_the_cluster(make):
    """ReadWriteOnce is one node: the evaluator's required pod affinity selects the chief's pod."""
    documents = list(yaml.safe_load_all(make(2, 1, name="team")))
    if make is kubernetes_manifest:
        pods = {d["metadata"]["name"]: d["spec"]["template"] for d in documents if d["kind"] == "Job"}
        evaluator, chief_labels = pods.pop("team-evaluator-0"), pods["team-chief-0"]["metadata"]["labels"]
        for template in pods.values():  # no training task lists the evaluator
            env = {e["name"]: e["value"] for e in template["spec"]["containers"][0]["env"]}
            assert "evaluator" not in json.loads(env["TF_CONFIG"])["cluster"]
    else:
        [tfjob] = [d for d in documents if d["kind"] == "TFJob"]
        evaluator = tfjob["spec"]["tfReplicaSpecs"]["Evaluator"]["template"]
        assert tfjob["spec"]["tfReplicaSpecs"]["Evaluator"]["replicas"] == 1
        # the labels training-operator v1 puts on the chief's pod (the replica type in lower case)
        chief_labels = {"training.kubeflow.org/job-name": "team",
                        "training.kubeflow.org/replica-type": "chief"}
    [term] = evaluator["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"].items() <= chief_labels.items()
    [claim] = [d for d in documents if d["kind"] == "PersistentVolumeClaim"]
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert evaluator["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    assert evaluator["spec"]["containers"][0]["volumeMounts"] == [
        {"name": "checkpoints", "mountPath": "/app/output", "readOnly": True}]


@pytest.mark.parametrize("make", [kubernetes_manifest, tfjob_manifest])
def test_every_kubernetes_object_validates_against_the_api_schemas(make):
    for document in yaml.safe_load_all(make(3, 2)):
        if document["kind"] != "TFJob":
            kubernetes_validate.validate(document, KUBERNETES, strict=True)


def test_the_schemas_catch_a_broken_object():
    job = next(d for d in yaml.safe_load_all(kubernetes_manifest(1, 1)) if d["kind"] == "Job")
    job["spec"]["backoffLimit"] = "three"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(job, KUBERNETES, strict=True)
    tfjob = next(d for d in yaml.safe_load_all(tfjob_manifest(1, 1)) if d["kind"] == "TFJob")
    tfjob["spec"]["tfReplicaSpec"] = tfjob["spec"].pop("tfReplicaSpecs")  # a typo
    with pytest.raises(jsonschema.ValidationError):
        _validate_tfjob(tfjob)


def test_tfjob_validates_against_the_crd_schema_and_lets_the_operator_write_tf_config():
    [tfjob] = [d for d in yaml.safe_load_all(tfjob_manifest(2, 1, port=2300)) if d["kind"] == "TFJob"]
    _validate_tfjob(tfjob)
    assert tfjob["apiVersion"] == "kubeflow.org/v1"
    replicas = tfjob["spec"]["tfReplicaSpecs"]
    counts = {k: v["replicas"] for k, v in replicas.items()}
    assert counts == {"Chief": 1, "Worker": 2, "PS": 1, "Evaluator": 1}
    # the job succeeds with the chief; "Running" would then delete the evaluator still evaluating
    assert tfjob["spec"]["runPolicy"]["cleanPodPolicy"] == "None"
    for kind, spec in replicas.items():
        assert spec["restartPolicy"] in ("OnFailure", "ExitCode", "Always", "Never")
        [container] = spec["template"]["spec"]["containers"]
        assert container["name"] == "tensorflow"  # the container the operator configures
        assert container["ports"] == [{"name": "tfjob-port", "containerPort": 2300}]
        assert "TF_CONFIG" not in {e["name"] for e in container["env"]}, kind
    for kind in ("Chief", "Evaluator"):
        assert replicas[kind]["template"]["spec"]["containers"][0]["command"] == ["python", "/app/train.py"]


def test_the_dockerfile_builds_the_course_environment_and_the_program(tmp_path):
    write_launch_files(tmp_path, HOSTS, 2, 1, program="src/my_train.py", format="tfjob")
    text = (tmp_path / "Dockerfile").read_text()
    assert "FROM python:3." in text and '"tensorflow==' in text and '"tf-keras==' in text
    assert "pstutor @ https://github.com/pstutor/pstutor/archive/refs/tags/v" in text
    assert "COPY my_train.py /app/my_train.py" in text
    assert (tmp_path / "tfjob.yaml").exists() and not (tmp_path / "kubernetes.yaml").exists()


@pytest.mark.parametrize("program", ["train: 'x' #1.py", "train:'x'#1\"ü.py", "tr$HOME.py", "a b.py",
                                     "-rf.py", "src/", "..", "train.py\n  - injected: true", ""])
def test_a_program_that_a_shell_yaml_or_copy_line_would_read_specially_is_refused(program):
    with pytest.raises(LaunchFilesError, match="give the program as a path"):
        kubernetes_manifest(1, 1, program=program)


def test_a_program_in_a_folder_keeps_its_path_for_the_script_and_its_name_for_the_image(tmp_path):
    write_launch_files(tmp_path, HOSTS, 2, 1, program="/opt/team-a/my_train.v2.py")
    assert "exec python /opt/team-a/my_train.v2.py" in (tmp_path / "start-chief-0.sh").read_text()
    assert "COPY my_train.v2.py /app/my_train.v2.py" in (tmp_path / "Dockerfile").read_text()


def test_rewriting_its_own_files_is_allowed(tmp_path):
    write_launch_files(tmp_path, HOSTS, 2, 1)
    write_launch_files(tmp_path, HOSTS, 2, 1, port=3000)
    assert "3000" in (tmp_path / "start-ps-0.sh").read_text()


def _validate_tfjob(document: dict) -> None:
    """The CRD's schema, with unknown fields refused (what `kubectl apply --validate=strict` does)."""
    jsonschema.Draft7Validator(_strict(TFJOB_SCHEMA)).validate(document)


def _strict(schema):
    if isinstance(schema, dict):
        schema = {k: _strict(v) for k, v in schema.items()}
        if "properties" in schema and "additionalProperties" not in schema \
                and not schema.get("x-kubernetes-preserve-unknown-fields"):
            schema["additionalProperties"] = False
    elif isinstance(schema, list):
        schema = [_strict(v) for v in schema]
    return schema


# Bad input to the command: one line in the user's language, exit code 2, nothing changed.
def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.mark.parametrize("case", ["user-manifest", "user-script", "out-is-a-file", "newline-program",
                                  "not-writable", "bad-name", "hosts", "port-zero", "wide-port"])
def test_the_command_refuses_bad_input_and_changes_nothing(tmp_path, case):
    folder = tmp_path / "launch"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    args = ["--hosts", ",".join(HOSTS), "--out", str(folder)]
    expected = "not written by pstutor"
    if case == "user-manifest":
        (folder / "kubernetes.yaml").write_text("apiVersion: v1\n# my own\n")
    elif case == "user-script":
        (folder / "start-chief-0.sh").write_text("#!/bin/sh\necho mine\n")
    elif case == "out-is-a-file":
        args[-1], expected = str(folder / "notes.txt"), "is a file"
    elif case == "newline-program":
        args += ["--program", "train.py\n  - injected: true"]
        expected = "give the program as a path"
    elif case == "not-writable":
        args[-1], expected = str(folder / "notes.txt" / "sub"), "cannot write into"
    elif case == "bad-name":
        args += ["--name", "My_Cluster"]
        expected = "--name 'My_Cluster'"
    elif case == "hosts":
        args[1], expected = "a,b", "2 hosts given for 4 tasks"
    elif case == "port-zero":
        args += ["--port", "0"]
        expected = "must be at least 1"
    elif case == "wide-port":
        args += ["--port", "２２２２"]
        expected = "must be a whole number"
    before = _snapshot(tmp_path)
    result = run_pstutor("cluster", "launch-files", *args)
    assert result.returncode == 2, result.stderr
    assert expected in result.stderr
    assert "Traceback" not in result.stderr
    assert _snapshot(tmp_path) == before


def test_refusals_speak_chinese(tmp_path):
    (tmp_path / "kubernetes.yaml").write_text("mine\n")
    result = run_pstutor("--lang", "zh", "cluster", "launch-files", "--hosts", ",".join(HOSTS),
                         "--out", str(tmp_path))
    assert result.returncode == 2
    assert result.stderr.strip().endswith("不是 pstutor cluster launch-files 写的；"
                                          "请先移走，或换一个文件夹。")
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_rerun_leaves_only_the_new_set(tmp_path):
    """3 workers as plain Jobs, then 2 workers as a TFJob: no old script, no second manifest."""
    first = run_pstutor("cluster", "launch-files", "--hosts", ",".join([*HOSTS, "10.0.0.5"]),
                        "--workers", "3", "--out", str(tmp_path))
    assert first.returncode == 0, first.stderr
    (tmp_path / "train.py").write_text("# the user's program, beside the files")
    again = run_pstutor("cluster", "launch-files", "--hosts", ",".join(HOSTS), "--format", "tfjob",
                        "--out", str(tmp_path))
    assert again.returncode == 0, again.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".pstutor-written", "Dockerfile", "start-chief-0.sh", "start-ps-0.sh", "start-worker-0.sh",
        "start-worker-1.sh", "tfjob.yaml", "train.py"]
    assert (tmp_path / "train.py").read_text() == "# the user's program, beside the files"


def test_a_rerun_refuses_hand_edited_files_with_their_list_unless_forced(tmp_path):
    args = ["cluster", "launch-files", "--hosts", ",".join(HOSTS), "--out", str(tmp_path)]
    assert run_pstutor(*args).returncode == 0
    for name in ("start-worker-1.sh", "kubernetes.yaml"):
        with open(tmp_path / name, "a") as handle:
            handle.write("# my change\n")
    before = _snapshot(tmp_path)
    refused = run_pstutor(*args, "--port", "3000")
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.strip() == (
        f"pstutor cluster launch-files: kubernetes.yaml, start-worker-1.sh in {tmp_path} were edited "
        "since pstutor cluster launch-files wrote them; rerun with --force to replace your edits, "
        "or choose another folder.")
    assert _snapshot(tmp_path) == before
    forced = run_pstutor(*args, "--port", "3000", "--force")
    assert forced.returncode == 0, forced.stderr
    assert "# my change" not in (tmp_path / "start-worker-1.sh").read_text()
    assert "3000" in (tmp_path / "start-worker-1.sh").read_text()


def test_a_link_in_the_folder_is_not_followed(tmp_path):
    target = tmp_path / "precious.txt"
    target.write_text("precious")
    folder = tmp_path / "launch"
    folder.mkdir()
    (folder / "Dockerfile").symlink_to(target)
    result = run_pstutor("cluster", "launch-files", "--hosts", ",".join(HOSTS), "--out", str(folder),
                         "--force")
    assert result.returncode == 2 and "not replaced: Dockerfile" in result.stderr
    assert target.read_text() == "precious" and sorted(p.name for p in folder.iterdir()) == ["Dockerfile"]


@pytest.mark.parametrize("option, value, message", [
    ("--image", "", "'' is not a container image reference"),
    ("--image", "Registry/Team/Train:1", "is not a container image reference"),
    ("--image", "a::::@@", "is not a container image reference"),
    ("--hosts", "300.1.1.1,b,c,d", "'300.1.1.1' is not a host"),
    ("--hosts", "a" * 300 + ",b,c,d", "is not a host"),
    ("--hosts", "a,,c,d", "host 2 of 4 is empty"),
    ("--program", "my train.py", "give the program as a path"),
    ("--program", "train$(id).py", "give the program as a path"),
    ("--out", "", "an empty path"),
])
def test_values_registries_shells_or_tensorflow_would_reject_are_refused(tmp_path, option, value, message):
    args = {"--hosts": ",".join(HOSTS), "--out": str(tmp_path / "launch"), option: value}
    result = run_pstutor("cluster", "launch-files", *[w for pair in args.items() for w in pair])
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and result.stdout == ""
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("format", ["jobs", "tfjob"])
def test_every_comment_a_file_opens_with_follows_the_course_language(tmp_path, format):
    """In Chinese every leading comment line is Chinese (commands and names aside), in English none is."""
    from pstutor.language import set_language

    for lang in ("zh", "en"):
        set_language(lang)
        try:
            paths = write_launch_files(tmp_path / lang, HOSTS, num_workers=2, num_ps=1, format=format)
        finally:
            set_language("en")
        for path in paths:
            lines = path.read_text().splitlines()
            comments = [line for line in lines[1 if path.suffix == ".sh" else 0:] if line.startswith("#")]
            prose = [line for line in comments if not line.startswith("#   ")]  # "#   docker build ..."
            assert len(prose) >= 2, (path.name, comments)
            chinese = [any("\u4e00" <= ch <= "\u9fff" for ch in line) for line in prose]
            assert all(chinese) if lang == "zh" else not any(chinese), (lang, path.name, prose)


@pytest.mark.parametrize("format", ["jobs", "tfjob"])
def test_the_headers_cleanup_stops_the_servers_and_keeps_the_claim_with_the_checkpoints(tmp_path, format):
    """The advised delete selects every Job and Service (or the TFJob), never the claim; the copy pod
    it advises next mounts that claim where the chief wrote and is a valid Pod."""
    paths = write_launch_files(tmp_path, HOSTS, num_workers=2, num_ps=1, format=format, name="team",
                               volume_claim="team-ckpt", image="registry.example.com/t:1")
    [manifest] = [p for p in paths if p.suffix == ".yaml"]
    text = manifest.read_text()
    documents = list(yaml.safe_load_all(text))
    commands = [line[4:] for line in text.splitlines() if line.startswith("#   kubectl")]
    assert not any(" -f " in c and "delete" in c for c in commands), commands
    [delete] = [shlex.split(c) for c in commands if c.startswith("kubectl delete ") and "pod" not in c
                and "pvc" not in c]
    [claim] = [d for d in documents if d["kind"] == "PersistentVolumeClaim"]
    if format == "jobs":
        assert delete[:2] == ["kubectl", "delete"] and delete[3] == "-l", delete
        kinds, (key, value) = delete[2].split(","), delete[4].split("=")
        chosen = [d for d in documents
                  if d["kind"].lower() in kinds and d["metadata"]["labels"].get(key) == value]
        assert claim["metadata"]["labels"].get(key) == value  # a label alone would take the claim too
        assert claim not in chosen
        assert {d["metadata"]["name"] for d in chosen} == {
            d["metadata"]["name"] for d in documents if d["kind"] in ("Job", "Service")}
        chief = next(d for d in documents if d["metadata"]["name"] == "team-chief-0" and d["kind"] == "Job")
        chief_pod = chief["spec"]["template"]["spec"]
    else:
        [tfjob] = [d for d in documents if d["kind"] == "TFJob"]
        assert delete == ["kubectl", "delete", "tfjob", tfjob["metadata"]["name"]]
        chief_pod = tfjob["spec"]["tfReplicaSpecs"]["Chief"]["template"]["spec"]
    [run] = [shlex.split(c) for c in commands if c.startswith("kubectl run ")]
    [overrides] = [json.loads(a.split("=", 1)[1]) for a in run if a.startswith("--overrides=")]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": run[2]}, "spec": overrides["spec"]}
    kubernetes_validate.validate(pod, KUBERNETES, strict=True)
    [mount] = pod["spec"]["containers"][0]["volumeMounts"]
    [chief_mount] = chief_pod["containers"][0]["volumeMounts"]
    assert mount["mountPath"] == chief_mount["mountPath"] and mount["readOnly"] is True
    assert pod["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    [container] = pod["spec"]["containers"]  # named as kubectl run names its own: it replaces it
    assert container["name"] == run[2] and container["image"] == chief_pod["containers"][0]["image"]
    assert f"kubectl cp {run[2]}:{chief_mount['mountPath']} ./output" in text
    assert commands[-1] == f"kubectl delete pvc {claim['metadata']['name']}"  # last, after the copy


@pytest.mark.parametrize("make", [kubernetes_manifest, tfjob_manifest])
def test_the_manifests_are_plain_yaml_every_pod_with_its_own_blocks(make):
    """No anchor or alias: each replica's `resources` and `command` can be edited alone."""
    text = make(2, 1)
    events = list(yaml.parse(text, Loader=yaml.SafeLoader))
    assert not [e for e in events if isinstance(e, yaml.AliasEvent) or getattr(e, "anchor", None)]
    assert "&id" not in text and "*id" not in text
    documents = list(yaml.safe_load_all(text))
    if make is kubernetes_manifest:
        pods = [d["spec"]["template"]["spec"] for d in documents if d["kind"] == "Job"]
    else:
        pods = [r["template"]["spec"] for d in documents if d["kind"] == "TFJob"
                for r in d["spec"]["tfReplicaSpecs"].values()]
    assert len(pods) == (5 if make is kubernetes_manifest else 4)
    for pod in pods:
        assert pod["containers"][0]["resources"] == {"requests": {"cpu": "1", "memory": "1Gi"}}
    pods[0]["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": 1}  # one edit, one pod
    assert [p["containers"][0]["resources"].get("limits") for p in pods[1:]] == [None] * (len(pods) - 1)
