"""The Colab rehearsal: the notebooks' first cell, unchanged, in an environment shaped like Colab's.

Run by `./dev.sh test-colab`, which makes that environment (Python 3.13 where available,
TensorFlow 2.20, Keras 3 as the default `tf.keras`, tf_keras 2.20, ipykernel — and no
pstutor) and points PSTUTOR_COLAB_PYTHON at it. Here:
- the kernel can import `google.colab` (a stand-in module), so the notebooks take their
  Colab branch and run `%pip install "pstutor @ git+https://github.com/<repository>@<tag>"`;
- git serves that address from a local copy of the tree under test, tagged with
  `package_ref` (`url.<copy>.insteadOf` in the rehearsal's own git config), so the exact
  line a Colab user runs installs pstutor, the normal, non-editable way;
- nine lessons of one language and one exercise with its checks run top to bottom and are
  compared with their stored outputs by nbval, as everywhere else.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import nbformat
import pytest
from conftest import ROOT, clean_env, export_tree, write_kernelspec

from pstutor.course import read_pyproject

COLAB_PYTHON = os.environ.get("PSTUTOR_COLAB_PYTHON", "")
LANG = os.environ.get("PSTUTOR_COLAB_LANG", "en")
KERNEL = "pstutor-colab"

pytestmark = pytest.mark.skipif(
    not COLAB_PYTHON, reason="the Colab rehearsal needs its own environment: run ./dev.sh test-colab")


def _publication() -> dict[str, str]:
    return read_pyproject(ROOT)["tool"]["pstutor"]


@pytest.fixture(scope="module")
def colab(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A kernel shaped like Colab's, whose `git` serves the repository from the tree under test."""
    top = tmp_path_factory.mktemp("colab")
    pub = _publication()
    repository = export_tree(top / "repository")
    git = ["git", "-C", str(repository), "-c", "user.name=rehearsal", "-c", "user.email=rehearsal@localhost"]
    for command in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "tree under test"],
                    ["tag", pub["package_ref"]]):
        subprocess.run(git + command, check=True, capture_output=True)
    gitconfig = top / "gitconfig"
    gitconfig.write_text(f'[url "file://{repository}"]\n\tinsteadOf = https://github.com/{pub["repository"]}\n')
    stub = top / "stub" / "google" / "colab"  # `google` stays a namespace package (protobuf lives there)
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text('"""Stand-in for google.colab: notebooks take the Colab branch."""\n')
    jupyter = top / "jupyter"
    write_kernelspec(jupyter, KERNEL, COLAB_PYTHON, exec_lines=("import google.colab",),
                     env={"PYTHONPATH": str(stub.parent.parent), "GIT_CONFIG_GLOBAL": str(gitconfig)})
    removed = subprocess.run([COLAB_PYTHON, "-m", "pip", "uninstall", "-y", "-q", "pstutor"],
                             capture_output=True, text=True)  # pstutor is not preinstalled in Colab
    assert "pstutor" not in subprocess.run([COLAB_PYTHON, "-m", "pip", "list"], capture_output=True,
                                           text=True).stdout.lower(), removed.stderr
    return {"top": top, "jupyter": jupyter}


def _env(jupyter: Path) -> dict[str, str]:
    env = {k: v for k, v in clean_env().items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["JUPYTER_PATH"] = str(jupyter)
    return env


def test_the_stack_is_shaped_like_colab():
    probe = ("import importlib.metadata as m, sys; import tensorflow as tf\n"
             "print(sys.version_info[:2] >= (3, 12), tf.__version__[:4], tf.keras.__name__.split('.')[0],"
             " m.version('tf-keras')[:4])")
    found = subprocess.run([COLAB_PYTHON, "-c", probe], capture_output=True, text=True,
                           env=clean_env(), timeout=300).stdout.split()
    assert found[1:] == ["2.20", "keras", "2.20"], found  # Keras 3 is tf.keras until setup() runs


def test_lessons_and_an_exercise_run_unchanged_as_in_colab(colab: dict[str, Path]):
    course = colab["top"] / "course"
    paths = []
    lessons = sorted((ROOT / "notebooks" / LANG).glob("*.ipynb"))
    for relative in [f"notebooks/{LANG}/{p.name}" for p in lessons] + [f"solutions/{LANG}/01_cluster.ipynb"]:
        (course / relative).parent.mkdir(parents=True, exist_ok=True)
        (course / relative).write_bytes((ROOT / relative).read_bytes())
        paths.append(str(course / relative))
    report = colab["top"] / "report.xml"
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-c", "/dev/null",
         "--rootdir", str(course), "--nbval", "--nbval-kernel-name", KERNEL,
         "--nbval-sanitize-with", str(ROOT / "tests" / "nbval_sanitize.cfg"), "--nbval-cell-timeout=600",
         f"--junitxml={report}", *paths],
        capture_output=True, text=True, cwd=course, env=_env(colab["jupyter"]), timeout=3600)
    seconds: dict[str, float] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        name = case.get("classname", "")
        seconds[name] = seconds.get(name, 0.0) + float(case.get("time", 0))
    print("\nColab rehearsal, seconds per notebook (its cells, the first cell's pip install included):")
    print(json.dumps(seconds, indent=1, ensure_ascii=False))
    assert result.returncode == 0, result.stdout[-6000:]
    assert "failed" not in result.stdout.splitlines()[-1], result.stdout[-2000:]


def test_what_a_colab_user_sees_in_the_first_cell(colab: dict[str, Path]):
    """pip is quiet, one line names pstutor's version, then the summary; and when TensorFlow
    was imported first, the restart message in both languages instead."""
    from nbclient import NotebookClient

    setup = next(c for c in nbformat.read(ROOT / "notebooks" / LANG / "01_cluster.ipynb", as_version=4).cells
                 if c.cell_type == "code")
    fresh = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(setup.source)])
    too_early = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("import tensorflow as tf\nprint(tf.keras.__name__)"),
        nbformat.v4.new_code_cell(setup.source)])
    os.environ["JUPYTER_PATH"] = str(colab["jupyter"])
    try:
        for notebook in (fresh, too_early):
            NotebookClient(notebook, timeout=600, kernel_name=KERNEL, allow_errors=True,
                           resources={"metadata": {"path": str(colab["top"])}}).execute(
                               stderr=subprocess.DEVNULL)  # the kernel's own log, not a cell's output
    finally:
        del os.environ["JUPYTER_PATH"]
    version = read_pyproject(ROOT)["project"]["version"]
    shown = _text(fresh.cells[0].outputs)
    assert not [o for o in fresh.cells[0].outputs if o.output_type in ("error", "stream")], shown
    rows = dict(line.split(None, 1) for line in shown.strip().splitlines())  # nothing but the summary
    assert rows["pstutor"] == version and rows["Colab"] == "yes", shown
    assert rows["tf.keras"].startswith("tf_keras 2.20") and rows["TensorFlow"].startswith("2.20"), shown
    assert _text(too_early.cells[0].outputs).startswith("keras.")  # Colab's default: Keras 3
    error = next(o for o in too_early.cells[1].outputs if o.output_type == "error")
    assert error.ename == "KerasVersionError"
    assert "restart the kernel" in error.evalue and "重启内核" in error.evalue


def _text(outputs: list) -> str:
    return "".join(o.get("text", "") or o.get("data", {}).get("text/plain", "") for o in outputs)
