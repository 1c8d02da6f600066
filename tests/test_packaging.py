"""pyproject.toml and environment.yml install the same things, and nothing that conflicts."""

import yaml
from conftest import ROOT

from pstutor.course import read_pyproject


def _pyproject() -> dict:
    return read_pyproject(ROOT)


def _conda_pip() -> list[str]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = [d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert len(pip) == 1, "environment.yml needs exactly one pip section"
    return pip[0]


def test_environment_yml_installs_what_pyproject_declares():
    project = _pyproject()["project"]
    declared = project["dependencies"] + project["optional-dependencies"]["dev"]
    listed = [line for line in _conda_pip() if not line.startswith("--editable")]
    assert sorted(listed) == sorted(declared)
    assert "--editable ." in _conda_pip(), "environment.yml must install pstutor itself"


def test_environment_yml_uses_conda_forge_and_a_supported_python():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert env["channels"] == ["conda-forge"]
    python = next(d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python="))
    assert python.split("=")[1] in {"3.10", "3.11", "3.12", "3.13"}
    assert _pyproject()["project"]["requires-python"] == ">=3.10,<3.14"


def test_tensorflow_and_tf_keras_cover_the_same_versions_and_never_tensorflow_cpu():
    deps = {d.split(">")[0].split("=")[0].split("<")[0]: d for d in _pyproject()["project"]["dependencies"]}
    assert deps["tensorflow"].removeprefix("tensorflow") == deps["tf-keras"].removeprefix("tf-keras")
    assert deps["tensorflow"] == "tensorflow>=2.20,<2.22"
    assert "tensorboard" in deps, "TF 2.21 no longer installs tensorboard; the callback needs it"
    for text in ((ROOT / "pyproject.toml").read_text(), (ROOT / "environment.yml").read_text()):
        assert "tensorflow-cpu" not in text


def test_publication_is_configured_in_one_place():
    pub = _pyproject()["tool"]["pstutor"]
    assert set(pub) == {"repository", "ref", "package_ref"} and pub["repository"].count("/") == 1
    assert pub["package_ref"] == f"v{_pyproject()['project']['version']}", "Colab installs this release"
