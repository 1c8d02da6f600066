"""The one way pstutor starts a child process: real processes, no orphans, nothing left on disk."""

import signal
import subprocess
import sys
import textwrap

import pytest
from conftest import ROOT, alive, clean_env, descendants, wait_gone

from pstutor.processes import Child


def test_a_child_runs_its_role_and_keeps_each_runs_output(tmp_path):
    program = tmp_path / "hello.py"
    program.write_text("import sys, tensorflow as tf\nprint('hello', sys.argv[1:], tf.keras.__name__)\n")
    with Child("program", [program, "a b"], env={"TF_CONFIG": None}) as child:
        assert child.wait(timeout=120) == 0, child.output()
        assert "hello ['a b'] tf_keras" in child.output()  # pstutor.setup() ran first: Keras 2
        child.start().wait(timeout=120)
        assert child.output().count("hello") == 2 and child.output(current=True).count("hello") == 1
    assert child.output() == "" and not child.running


def test_an_unknown_role_is_refused_in_one_line():
    result = subprocess.run([sys.executable, "-m", "pstutor.child", "miner"], capture_output=True,
                            text=True, cwd=ROOT, env=clean_env(), timeout=60)
    assert result.returncode == 2 and result.stderr.startswith("usage: python -m pstutor.child")


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_a_killed_parent_leaves_no_child_and_no_file(tmp_path, sig):
    """Kill the parent outright: its children end, and its temporary folder stays empty."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    sleeper = tmp_path / "sleeper.py"
    sleeper.write_text("import time\nprint('ready', flush=True)\ntime.sleep(600)\n")
    code = textwrap.dedent(f"""\
        import time
        from pstutor.processes import Child
        children = [Child("program", [{str(sleeper)!r}]).start() for _ in range(2)]
        while not all("ready" in c.output() for c in children):
            time.sleep(0.05)
        print(" ".join(str(c.pid) for c in children), flush=True)
        time.sleep(600)
    """)
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                              cwd=ROOT, env=dict(clean_env(), TMPDIR=str(temp)))
    try:
        pids = [int(p) for p in parent.stdout.readline().split()]
        assert len(pids) == 2 and all(alive(p) for p in pids)
        parent.send_signal(sig)
        parent.wait(timeout=30)
        assert wait_gone(pids) == [], "children outlived their parent"
        assert list(temp.iterdir()) == [], "the parent left files behind"
    finally:
        for pid in descendants(parent.pid):
            subprocess.run(["kill", "-9", str(pid)])
        if parent.poll() is None:
            parent.kill()
            parent.wait()
