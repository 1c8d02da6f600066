"""The walls around a submission's kernel (`pstutor.sandbox`), tried from inside: what a student's
code could use to read the seal key out of its own kernel's memory, and who it runs as."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from pstutor.sandbox import OUTER_UID_BASE, SANDBOX_UID, bwrap, work_base

pytestmark = pytest.mark.skipif(bwrap() is None, reason="needs bubblewrap (apt-get install bubblewrap)")

# Made non-dumpable first, as `pstutor.grading.kernel` makes itself before it takes the key.
READ_OWN_MEMORY = """import ctypes, json, os, subprocess, sys
ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
secret = bytearray(b"the seal key" * 4)
where = id(secret)
found = {}

def attempt(name, read):
    try:
        read()
        found[name] = "read"
    except OSError as error:
        found[name] = error.__class__.__name__

def relative_to_a_folder_handle():  # Python's audit event for open does not say which folder
    folder = os.open("/proc/self", os.O_RDONLY)
    os.pread(os.open("mem", os.O_RDONLY, dir_fd=folder), 8, where)

def through_tensorflow():  # TensorFlow's own file reader raises no audit event at all
    import tensorflow as tf
    try:
        with tf.io.gfile.GFile("/proc/self/mem", "rb") as memory:
            memory.seek(where)
            memory.read(8)
    except tf.errors.PermissionDeniedError as error:
        raise PermissionError(str(error)) from None

attempt("path", lambda: os.pread(os.open("/proc/self/mem", os.O_RDONLY), 8, where))
attempt("folder handle", relative_to_a_folder_handle)
attempt("thread", lambda: os.pread(os.open("/proc/thread-self/mem", os.O_RDONLY), 8, where))
attempt("tensorflow", through_tensorflow)
child = subprocess.run([sys.executable, "-c", f"open('/proc/{os.getpid()}/mem', 'rb').read(0)"])
found["child"] = "read" if child.returncode == 0 else "refused"
attempt("own command line", lambda: open("/proc/self/cmdline", "rb").read())  # TensorFlow needs it
print(json.dumps(found))
"""

WHO = """import json, os
status = dict(line.split(":", 1) for line in open("/proc/self/status"))
print(json.dumps({"uid": os.getuid(), "gid": os.getgid(), "groups": os.getgroups(),
                  "capabilities": int(status["CapEff"], 16), "tmp": os.stat("/tmp").st_uid,
                  "shm": os.stat("/dev/shm").st_uid}))
"""


def _inside(code: str, work: Path, **run) -> subprocess.CompletedProcess:
    (work / "probe.py").write_text(code)
    return subprocess.run([sys.executable, "-m", "pstutor.sandbox", str(work), "--", sys.executable,
                           str(work / "probe.py")], capture_output=True, text=True, timeout=300, **run)


@pytest.fixture
def work():
    folder = Path(tempfile.mkdtemp(prefix="pstutor-walls-", dir=work_base()))
    yield folder
    subprocess.run(["rm", "-rf", str(folder)], check=False)


def test_a_kernel_cannot_read_its_own_memory(work):
    """Not by path, not relative to a folder handle, not through TensorFlow's reader, not from a
    child; it still reads the /proc files TensorFlow needs."""
    done = _inside(READ_OWN_MEMORY, work)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    refused = dict.fromkeys(("path", "folder handle", "thread", "tensorflow"), "PermissionError")
    assert found == {**refused, "child": "refused", "own command line": "read"}, found


def test_the_kernel_runs_as_a_user_of_its_own_without_privileges(work):
    """Inside: SANDBOX_UID, no groups, no capabilities, its scratch folders its own. Outside, where
    the grader is root, that uid is one no other sandbox has, and the sandbox folder is its."""
    done = _inside(WHO, work)
    assert done.returncode == 0, done.stderr[-3000:]
    who = json.loads(done.stdout.strip().splitlines()[-1])
    assert who == {"uid": SANDBOX_UID, "gid": SANDBOX_UID, "groups": [], "capabilities": 0,
                   "tmp": SANDBOX_UID, "shm": SANDBOX_UID}, who
    if os.geteuid() == 0:
        owner = work.stat().st_uid
        assert OUTER_UID_BASE < owner < OUTER_UID_BASE + (1 << 23), owner  # + the sandbox's pid


def test_the_walls_stand_for_a_course_clone_in_tmp(work):
    """A clone in /tmp (as CI makes one) is bound read-only into the sandbox's own /tmp: the step
    that hands /tmp to SANDBOX_UID leaves the bound folders alone, and the kernel starts."""
    import pstutor

    clone = Path(tempfile.mkdtemp(prefix="pstutor-clone-", dir="/tmp"))
    try:
        shutil.copytree(Path(pstutor.__file__).parent, clone / "pstutor")
        done = _inside(WHO, work, cwd=clone, env={**os.environ, "PYTHONPATH": str(clone)})
        assert done.returncode == 0, done.stderr[-3000:]
        assert json.loads(done.stdout.strip().splitlines()[-1])["uid"] == SANDBOX_UID, done.stdout
    finally:
        shutil.rmtree(clone, ignore_errors=True)
