"""The `pstutor` command: the main job, the doctor, bad arguments, and what every command shares
(language, help, version, signals, closed pipes)."""

import importlib.metadata
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, clean_env, descendants, export_tree, run_pstutor, wait_gone

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
    assert result.stderr.strip() == f"pstutor demo: {target} is a file, not a folder; give a folder."
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
    prefix = {"en": "pstutor cluster up: ", "zh": "pstutor cluster up："}[lang]
    assert re.fullmatch(prefix + expected, result.stderr.strip()), result.stderr
    assert result.stdout == ""  # nothing was started


def test_cluster_up_refuses_a_wide_digit_count():
    result = run_pstutor("cluster", "up", "--workers", "２", timeout=60)
    assert result.returncode == 2 and "must be a whole number, not '２'" in result.stderr


# What every command shares: language, help, version, signals, closed pipes.
def test_the_language_comes_from_lang_anywhere_or_from_the_locale():
    from pstutor.cli import chosen_language

    assert chosen_language(["demo", "--lang", "zh"], {}) == "zh"
    assert chosen_language(["--lang=zh", "demo"], {"LANG": "en_US.UTF-8"}) == "zh"
    assert chosen_language(["demo"], {"LANG": "zh_CN.UTF-8"}) == "zh"
    assert chosen_language(["demo"], {"LC_ALL": "en_US.UTF-8", "LANG": "zh_CN.UTF-8"}) == "en"
    assert chosen_language(["--lang", "en", "demo"], {"LC_ALL": "zh_CN.UTF-8"}) == "en"
    assert chosen_language(["demo", "--", "--lang", "zh"], {}) == "en"
    assert chosen_language(["demo"], {"LC_ALL": "", "LANG": "C"}) == "en"


@pytest.mark.parametrize("args, env", [(["--lang", "zh", "demo", "--help"], {}),
                                       (["cluster", "launch-files", "--help", "--lang", "zh"], {}),
                                       (["compare", "--help"], {"LANG": "zh_CN.UTF-8"})])
def test_help_speaks_the_chosen_language(args, env):
    result = subprocess.run([sys.executable, "-m", "pstutor", *args], capture_output=True, text=True,
                            env={**clean_env(), "LC_ALL": "", **env}, timeout=120)
    assert result.returncode == 0 and result.stderr == ""
    assert result.stdout.startswith("用法：pstutor ") and "\n选项:\n" in result.stdout
    assert "显示此帮助信息并退出" in result.stdout and "show this help" not in result.stdout
    assert "默认" in result.stdout


def test_version_is_pstutors():
    result = run_pstutor("--version")
    version = importlib.metadata.version("pstutor")
    assert result.returncode == 0 and result.stdout.strip() == f"pstutor {version}"


def test_the_chinese_argparse_words_are_the_running_pythons_own():
    """argparse looks its words up by their English text: a renamed one would silently stay English."""
    import argparse
    import inspect

    from pstutor.cli import ARGPARSE_ZH

    source = inspect.getsource(argparse)
    missing = [text for text in ARGPARSE_ZH if f"_({text!r})" not in source and f'_("{text}")' not in source]
    assert missing == []


def test_demo_reruns_replace_its_pictures_and_refuse_edited_ones(tmp_path):
    out = tmp_path / "out"
    (tmp_path / "out").mkdir()
    (out / "notes.txt").write_text("mine")
    args = ["demo", "--out", str(out), "--epochs", "1", "--steps", "2", "--workers", "1", "--ps", "1"]
    assert run_pstutor(*args).returncode == 0
    first = (out / "loss.png").read_bytes()
    assert run_pstutor(*args).returncode == 0  # its own pictures: replaced
    (out / "loss.png").write_bytes(first + b"edited")
    refused = run_pstutor(*args, timeout=60)
    assert refused.returncode == 2 and refused.stdout == ""
    assert "loss.png in" in refused.stderr and "edited since" in refused.stderr
    assert (out / "loss.png").read_bytes() == first + b"edited"
    forced = run_pstutor(*args, "--force")
    assert forced.returncode == 0, forced.stderr
    assert (out / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "notes.txt").read_text() == "mine"


def test_demo_never_writes_through_a_link(tmp_path):
    target = tmp_path / "precious.png"
    target.write_bytes(b"precious")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "loss.png").symlink_to(target)
    result = run_pstutor("demo", "--out", str(tmp_path / "out"), "--force", timeout=60)
    assert result.returncode == 2 and "not replaced: loss.png" in result.stderr and result.stdout == ""
    assert target.read_bytes() == b"precious"


def _start(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "pstutor", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT, env=clean_env(),
                            start_new_session=True)


def _read_until(process: subprocess.Popen, text: str) -> str:
    seen = ""
    for line in process.stdout:
        seen += line
        if text in line:
            return seen
    raise AssertionError(f"never printed {text!r}: {seen}{process.stderr.read()}")


def _finish(process: subprocess.Popen) -> tuple[str, list[int]]:
    """The rest of stderr; the processes of its group still alive afterwards."""
    try:
        err = process.stderr.read()
        process.wait(timeout=120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    return err, wait_gone(descendants(process.pid))


def test_a_closed_pipe_ends_the_demo_quietly_with_141(tmp_path):
    """`pstutor demo | head -4`: the reader goes away during training."""
    process = _start("demo", "--out", str(tmp_path / "out"), "--epochs", "20", "--steps", "5")
    _read_until(process, "[Model.fit]   epoch 1/")
    children = descendants(process.pid)
    process.stdout.close()
    err, _ = _finish(process)
    assert process.returncode == 141 and err == ""
    assert wait_gone(children) == [] and not (tmp_path / "out").exists()


def test_a_closed_pipe_stops_cluster_up_and_its_tasks():
    process = _start("cluster", "up", "--workers", "1", "--ps", "1")
    _read_until(process, "starting 1 worker and 1 ps")  # one worker: no plural
    process.stdout.close()  # the task lines, printed once the tasks listen, find no reader
    err, left = _finish(process)
    assert process.returncode == 141 and err == "" and left == []


def test_sigterm_stops_cluster_up_as_ctrl_c_does_with_143():
    port = _free_ports(3)
    process = _start("cluster", "up", "--workers", "1", "--ps", "1", "--port", str(port))
    shown = _read_until(process, "Ctrl-C")
    assert f"worker 0  127.0.0.1:{port + 1}" in shown and f"ps 0  127.0.0.1:{port + 2}" in shown
    assert f'"chief": ["127.0.0.1:{port}"]' in shown  # --port: the chief first, then workers, then ps
    children = descendants(process.pid)
    assert len(children) == 2
    process.send_signal(signal.SIGTERM)
    rest = process.stdout.read()
    err, _ = _finish(process)
    assert process.returncode == 143 and rest.strip() == "stopping ..." and err == ""
    assert wait_gone(children) == []


@pytest.mark.parametrize("lang, line", [("en", "interrupted."), ("zh", "已中断。")])
def test_sigterm_stops_the_demo_in_one_line_with_143(tmp_path, lang, line):
    process = _start("--lang", lang, "demo", "--out", str(tmp_path / "out"), "--epochs", "50")
    _read_until(process, "[Model.fit]")
    process.send_signal(signal.SIGTERM)
    process.stdout.read()
    err, left = _finish(process)
    assert process.returncode == 143 and err.strip() == line and left == []
    assert not (tmp_path / "out").exists()


def test_sigterm_stops_compare_and_its_children_with_143():
    process = _start("compare", "--strategies", "mwms,none")
    _read_until(process, "starting")
    time.sleep(3)  # the two mwms workers are importing TensorFlow
    children = descendants(process.pid)
    assert children
    process.send_signal(signal.SIGTERM)
    process.stdout.read()
    err, left = _finish(process)
    assert process.returncode == 143 and err.strip() == "interrupted; every child process was stopped."
    assert wait_gone(children) == [] and left == []


@pytest.mark.parametrize("how, code", [("ctrl-c", 130), ("kill", 143)])
def test_stopping_a_build_prints_one_line_and_leaves_no_kernel(tmp_path, how, code):
    course = export_tree(tmp_path / "course")
    notebook = course / "notebooks" / "en" / "01_cluster.ipynb"
    stored = notebook.read_bytes()
    process = subprocess.Popen([sys.executable, "-m", "pstutor", "build", "01", "--course", str(course)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=course,
                               env=clean_env(), start_new_session=True)
    _read_until(process, "executing")
    deadline = time.monotonic() + 60
    while not any("ipykernel" in _cmdline(pid) for pid in descendants(process.pid)):
        assert time.monotonic() < deadline, "no kernel started"
        time.sleep(0.2)
    time.sleep(2)
    children = descendants(process.pid)
    if how == "ctrl-c":
        os.killpg(process.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole group
    else:
        process.send_signal(signal.SIGTERM)  # `kill PID`: the kernel is not told
    process.stdout.read()
    err, left = _finish(process)
    assert process.returncode == code and err.strip() == "interrupted.", err
    assert wait_gone(children) == [] and left == []
    assert notebook.read_bytes() == stored


def _free_ports(count: int) -> int:
    """The first of `count` consecutive ports that are free now."""
    from pstutor.task_server import port_in_use

    for first in range(23000, 60000, 97):
        if not any(port_in_use(p) for p in range(first, first + count)):
            return first
    raise AssertionError("no free ports")


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""
