"""The GitHub workflows parse and run the suite on CPU (both TensorFlow versions) and on a GPU runner."""

import re
import subprocess
import sys

import yaml
from conftest import ROOT

from pstutor.course import read_pyproject

WORKFLOWS = ROOT / ".github" / "workflows"


def _load(name: str) -> dict:
    workflow = yaml.safe_load((WORKFLOWS / name).read_text())
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as True
    assert triggers, f"{name} has no triggers"
    workflow["triggers"] = triggers
    return workflow


def _steps(job: dict) -> list[dict]:
    steps = job["steps"]
    for step in steps:
        assert ("uses" in step) != ("run" in step), f"a step needs exactly one of uses/run: {step}"
    return steps


def test_cpu_workflow_runs_the_whole_suite_on_every_push_and_pull_request():
    workflow = _load("ci.yml")
    assert {"push", "pull_request"} <= set(workflow["triggers"])
    job = workflow["jobs"]["test"]
    jobs = {entry["job"] for entry in job["strategy"]["matrix"]["include"]}
    assert jobs == {"test", "test-tf220"}
    steps = _steps(job)
    setup = next(s for s in steps if s.get("uses", "").startswith("actions/setup-python"))
    assert setup["with"]["cache"] == "pip"
    assert any(s.get("run", "").startswith("./dev.sh ${{ matrix.job }}") for s in steps)
    rehearsal = next(s for s in steps if s.get("run", "").startswith("./dev.sh test-colab"))
    assert "test-tf220" in rehearsal["if"], "the Colab rehearsal runs with Colab's TensorFlow"


def test_cpu_workflow_tests_the_lowest_and_the_highest_python_that_pyproject_claims():
    claimed = read_pyproject(ROOT)["project"]["requires-python"]  # ">=3.10,<3.14"
    lowest, below = re.fullmatch(r">=3\.(\d+),<3\.(\d+)", claimed).groups()
    matrix = _load("ci.yml")["jobs"]["test"]["strategy"]["matrix"]["include"]
    pythons = {entry["python"] for entry in matrix}
    assert {f"3.{lowest}", f"3.{int(below) - 1}"} <= pythons, (claimed, pythons)
    assert len({entry.get("name") for entry in matrix}) == len(matrix), "each job needs its own name"


def test_gpu_workflow_uses_a_labelled_runner_and_the_cuda_build():
    workflow = _load("gpu.yml")
    job = workflow["jobs"]["test-gpu"]
    assert job["runs-on"] == ["self-hosted", "linux", "x64", "gpu"]
    assert "tensorflow[and-cuda]" in job["env"]["PSTUTOR_PINS"]
    steps = _steps(job)
    assert any(s.get("uses", "").startswith("actions/cache") for s in steps)
    assert any(s.get("run") == "./dev.sh test -v" for s in steps)


def test_dev_sh_knows_every_job_the_workflows_run():
    script = (ROOT / "dev.sh").read_text()
    for job in ("test", "test-tf220", "test-colab"):
        assert f"{job})" in script or f'= {job} ]' in script


def test_workflows_follow_githubs_schema():
    """Checked offline against the workflow schema that check-jsonschema ships."""
    files = sorted(str(path) for path in WORKFLOWS.glob("*.yml"))
    result = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows", *files],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
