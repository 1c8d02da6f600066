"""The `pstutor` command: the main job, the doctor, and bad arguments."""

import importlib.metadata
import re

import pytest
from conftest import run_pstutor

from pstutor import doctor


def test_demo_trains_both_ways_and_writes_pictures(tmp_path):
    result = run_pstutor("demo", "--out", str(tmp_path / "out"), "--epochs", "2", "--steps", "6")
    assert result.returncode == 0, result.stderr
    assert result.stderr == "", "the demo must not print TensorFlow's logs"
    out = result.stdout
    assert "[Model.fit]   epoch 2/2" in out and "[custom loop] epoch 2/2" in out
    assert "custom loop   loss" in out and "12 steps" in out
    for name in ("topology.png", "loss.png"):
        picture = tmp_path / "out" / name
        assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert picture.stat().st_size > 10_000


def test_demo_speaks_chinese(tmp_path):
    result = run_pstutor("--lang", "zh", "demo", "--out", str(tmp_path), "--epochs", "1", "--steps", "2")
    assert result.returncode == 0, result.stderr
    assert "集群已启动" in result.stdout and "小结" in result.stdout


def test_demo_refuses_bad_arguments():
    result = run_pstutor("demo", "--workers", "0")
    assert result.returncode == 2
    assert "must be at least 1" in result.stderr


def test_doctor_finds_a_working_environment():
    result = run_pstutor("doctor")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "✓ in-process cluster" in result.stdout
    assert "Ready for the course." in result.stdout
    assert "✗" not in result.stdout


def test_doctor_names_each_broken_package_and_its_fix(monkeypatch):
    versions = {"tensorflow": "2.21.0", "tf-keras": "2.20.1", "tensorflow-cpu": "2.21.0",
                "tensorboard": None, "portpicker": "1.6.0", "matplotlib": "3.9.0"}

    def version(name):
        if versions.get(name) is None:
            raise importlib.metadata.PackageNotFoundError(name)
        return versions[name]

    monkeypatch.setattr(importlib.metadata, "version", version)
    findings = {f.name: f for f in doctor.check_packages()}
    assert findings["tf-keras"].ok is False and "tf-keras==2.21.*" in findings["tf-keras"].fix
    assert findings["tensorflow-cpu"].ok is False and "uninstall" in findings["tensorflow-cpu"].fix
    assert findings["tensorboard"].ok is False and findings["tensorboard"].fix == "pip install tensorboard"
    assert findings["tensorflow"].ok is True
    versions["tensorflow"] = "2.19.0"
    assert {f.name: f for f in doctor.check_packages()}["tensorflow"].ok is None  # untested: a warning
    text = doctor.report(list(findings.values()))
    assert "✗ tf-keras" in text and "→ pip install 'tf-keras==2.21.*'" in text


def test_doctor_verbose_shows_tensorflow_logs():
    result = run_pstutor("doctor", "--verbose")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Started server with target" in result.stderr


def test_demo_refuses_an_out_that_is_a_file_before_training(tmp_path):
    target = tmp_path / "pictures"
    target.write_text("mine")
    result = run_pstutor("demo", "--out", str(target), timeout=60)
    assert result.returncode == 2
    assert result.stderr.strip() == f"pstutor: --out {target} is a file; give a folder for the pictures."
    assert result.stdout == "" and target.read_text() == "mine"


@pytest.mark.parametrize("lang, expected", [
    ("en", r"100001 task processes need about 70,000\.7 GB of memory \(0\.7 GB each\); this machine has "
           r"[0-9,.]+ GB available, enough for [0-9]+\. Use fewer workers or ps\."),
    ("zh", r"100001 个任务进程约需 70,000\.7 GB 内存（每个 0\.7 GB）；"
           r"本机可用 [0-9,.]+ GB，最多容纳 [0-9]+ 个。请减少工作进程或参数服务器的数量。"),
])
def test_cluster_up_refuses_a_size_the_machine_cannot_hold_before_starting(lang, expected):
    result = run_pstutor("--lang", lang, "cluster", "up", "--workers", "100000", timeout=60)
    assert result.returncode == 2
    assert re.fullmatch("pstutor: " + expected, result.stderr.strip()), result.stderr
    assert result.stdout == ""  # nothing was started


def test_cluster_up_refuses_a_wide_digit_count():
    result = run_pstutor("cluster", "up", "--workers", "２", timeout=60)
    assert result.returncode == 2 and "must be a whole number, not '２'" in result.stderr
