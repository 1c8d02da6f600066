"""What a normal (non-editable) install ships, tested as Colab's `%pip install` uses it.

The editable install of a clone serves every module from the clone, so a subpackage missing
from the wheel goes unseen there. Here the wheel is built from the sdist, installed without
the clone anywhere on the path, every module is imported, and lesson 01's setup cell and
exercise 01's checks run from it in a real kernel.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import nbformat
import pytest
from conftest import ROOT, clean_env, export_tree, write_kernelspec

from pstutor.course import read_pyproject


def _source_modules() -> set[str]:
    """Every module of the package in the clone, as import names."""
    return {".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            for p in (ROOT / "pstutor").rglob("*.py")}


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The sdist and a wheel built from it (`python -m build`), and the wheel pip builds from a
    checkout, as `pip install "pstutor @ git+..."` does in Colab."""
    source = export_tree(tmp_path_factory.mktemp("checkout"))
    out, direct = tmp_path_factory.mktemp("dist"), tmp_path_factory.mktemp("pip-wheel")
    for command in ([sys.executable, "-m", "build", "--outdir", str(out), str(source)],
                    [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(direct),
                     str(source)]):
        built = subprocess.run(command, capture_output=True, text=True, timeout=600, env=clean_env())
        assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    return {"wheel": next(out.glob("*.whl")), "sdist": next(out.glob("*.tar.gz")),
            "pip wheel": next(direct.glob("*.whl"))}


@pytest.fixture(scope="module")
def installed(dists: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh environment, outside the clone, with the wheel installed (not editable)."""
    venv = tmp_path_factory.mktemp("installed") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    # TensorFlow and the other dependencies come from the test's own environment (a 600 MB
    # download saved); pstutor itself comes only from the wheel.
    site = Path(subprocess.check_output(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True).strip())
    (site / "course-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    done = subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                           str(dists["pip wheel"])], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return python


def _run(python: Path, code: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in clean_env().items() if k != "PYTHONPATH"}
    return subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=300,
                          cwd=cwd, env=env)


def test_wheel_and_sdist_hold_every_module(dists: dict[str, Path]):
    import tarfile

    for kind in ("wheel", "pip wheel"):
        in_wheel = {n for n in zipfile.ZipFile(dists[kind]).namelist() if n.endswith(".py")}
        modules = {n.removesuffix(".py").replace("/", ".").removesuffix(".__init__") for n in in_wheel}
        assert _source_modules() <= modules, f"missing from the {kind}: {_source_modules() - modules}"
        stored = {p.relative_to(ROOT).as_posix() for p in (ROOT / "pstutor" / "measurements").glob("*.json")}
        assert stored and stored <= set(zipfile.ZipFile(dists[kind]).namelist()), f"benchmark results, {kind}"
    with tarfile.open(dists["sdist"]) as sdist:
        names = sdist.getnames()
    sdist_modules = {".".join(Path(n).with_suffix("").parts[1:]).removesuffix(".__init__")
                     for n in names if n.endswith(".py") and "/pstutor/" in n}
    assert _source_modules() <= sdist_modules, f"missing from the sdist: {_source_modules() - sdist_modules}"


def test_every_module_imports_from_the_installed_package(installed: Path, tmp_path: Path):
    code = (
        "import importlib, json, pathlib, pkgutil, sys, pstutor\n"
        "names = sorted(m.name for m in pkgutil.walk_packages(pstutor.__path__, 'pstutor.'))\n"
        "for name in names:\n"
        "    if not name.endswith('__main__'):  # the command line itself: it would run\n"
        "        importlib.import_module(name)\n"
        "print(json.dumps({'file': pstutor.__file__, 'version': pstutor.__version__,\n"
        "                  'path': sys.path, 'modules': names}))"
    )
    result = _run(installed, code, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout)
    assert Path(found["file"]).is_relative_to(installed.parent.parent), found["file"]
    # The clone's pstutor/ is on no path entry (the dependencies' site-packages may lie in it).
    sources = [p for p in found["path"] if (Path(p or tmp_path) / "pstutor" / "__init__.py").exists()]
    assert [Path(p) for p in sources] == [Path(found["file"]).parent.parent], sources
    assert set(found["modules"]) | {"pstutor"} >= _source_modules()
    assert found["version"] == read_pyproject(ROOT)["project"]["version"]


def test_course_tools_say_they_need_a_clone(installed: Path, tmp_path: Path):
    result = subprocess.run([str(installed), "-m", "pstutor", "build", "01"], capture_output=True,
                            text=True, timeout=120, cwd=tmp_path, env=clean_env())
    assert result.returncode == 2
    assert "not inside a clone of the course" in result.stderr and "Traceback" not in result.stderr


def test_lesson_setup_cell_and_an_exercise_check_run_from_the_wheel(installed: Path, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch):
    from nbclient import NotebookClient

    lesson = nbformat.read(ROOT / "notebooks" / "en" / "01_cluster.ipynb", as_version=4)
    solution = nbformat.read(ROOT / "solutions" / "en" / "01_cluster.ipynb", as_version=4)
    setup_cell = next(c for c in lesson.cells if c.cell_type == "code")
    setup_cell.id = "lesson-01-setup"
    notebook = nbformat.v4.new_notebook(cells=[setup_cell, *solution.cells[1:]])
    jupyter = tmp_path / "jupyter"
    write_kernelspec(jupyter, "pstutor-wheel", installed)
    monkeypatch.setenv("JUPYTER_PATH", str(jupyter))
    for name in ("PYTHONPATH", *[k for k in os.environ if k.startswith(("TF_", "GRPC_"))]):
        monkeypatch.delenv(name, raising=False)
    work = tmp_path / "work"
    work.mkdir()
    NotebookClient(notebook, timeout=300, kernel_name="pstutor-wheel",
                   resources={"metadata": {"path": str(work)}}).execute()
    outputs = [o for c in notebook.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    summary = "".join(o.get("data", {}).get("text/plain", "") for o in setup_cell.outputs)
    assert "pstutor" in summary and "tf_keras" in summary, summary
    verdicts = [o.data["application/vnd.pstutor.check+json"] for o in outputs
                if "application/vnd.pstutor.check+json" in o.get("data", {})]
    assert verdicts and all(v["status"] == "passed" for v in verdicts), verdicts
