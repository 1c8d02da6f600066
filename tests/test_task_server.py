"""A task server whose port is taken says so in one line, naming the port and the task; a
stopped one says so in one line, and SIGTERM (a drain, an eviction) reads as a failure."""

import json
import signal
import socket
import subprocess
import sys

import portpicker
import pytest
from conftest import ROOT, clean_env, run_python

# As `python -m pstutor.task_server` on a machine, but the port probe before the bind says
# "free" once: the bind itself then fails, as when a program takes the port in between.
BIND_FAILS = """
import pstutor.task_server as server
real, calls = server.port_in_use, []
server.port_in_use = lambda port: bool(calls.append(port) or len(calls) > 1 and real(port))
from pstutor.child import main
raise SystemExit(main(["task_server"]))
"""
START = "import runpy; runpy.run_module('pstutor.task_server', run_name='__main__')"


@pytest.mark.parametrize("way, family", [("probe", socket.AF_INET), ("probe", socket.AF_INET6),
                                         ("bind", socket.AF_INET6)])
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_port_in_use_is_named_in_one_line(way, family, lang):
    holder = socket.socket(family, socket.SOCK_STREAM)
    holder.bind(("::" if family == socket.AF_INET6 else "0.0.0.0", 0))
    holder.listen()
    port = holder.getsockname()[1]
    config = {"cluster": {"worker": [f"127.0.0.1:{port}"], "ps": ["127.0.0.1:1"]},
              "task": {"type": "worker", "index": 0}}
    try:
        result = run_python(START if way == "probe" else BIND_FAILS,
                            env={"TF_CONFIG": json.dumps(config), "PSTUTOR_LANG": lang}, timeout=120)
    finally:
        holder.close()
    expected = {"en": f"worker 0 cannot start: port {port} is already in use on this machine; stop the "
                      "program that holds it, or give worker 0 another port in TF_CONFIG.",
                "zh": f"worker 0 无法启动：本机的端口 {port} 已被占用；请停止占用它的程序，"
                      "或在 TF_CONFIG 中给 worker 0 换一个端口。"}[lang]
    assert result.returncode == 1
    assert result.stderr.strip() == expected and result.stdout == ""


def test_a_listening_port_is_in_use_and_a_closed_one_is_not():
    from pstutor.task_server import port_in_use

    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    assert port_in_use(port)  # only on 127.0.0.1: a server on every interface cannot bind it
    holder.close()
    assert not port_in_use(port)


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 0)])
def test_a_server_stopped_on_its_machine_says_so_and_sigterm_is_no_success(sig, code):
    """Started as a launch file's script starts it (no pstutor parent): SIGTERM exits 128 + 15, so a
    Kubernetes Job restarts a server a drain stopped; Ctrl-C, typed by a person, exits 0."""
    ports = [portpicker.pick_unused_port() for _ in range(2)]
    config = {"cluster": {"worker": [f"127.0.0.1:{ports[0]}"], "ps": [f"127.0.0.1:{ports[1]}"]},
              "task": {"type": "ps", "index": 0}}
    process = subprocess.Popen([sys.executable, "-m", "pstutor.task_server"], text=True,
                               env={**clean_env(), "TF_CONFIG": json.dumps(config)}, cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        assert process.stdout.readline().strip() == "READY ps 0"
        process.send_signal(sig)
        out, err = process.communicate(timeout=60)
    finally:
        process.kill()
        process.wait()
    assert process.returncode == code
    assert out.strip() == "ps 0 stopped.", out + err
