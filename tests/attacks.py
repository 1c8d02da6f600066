"""Answers written to fool or hurt `pstutor grade`: each would have scored, or stopped the grading of
others, with a grader that trusted the kernel. Every class of issue 26 has at least one; they
are ours (the issue's own set stays held out). Each is an answer cell of exercise 01 (the
fastest exercise to run); where an attack needs the other tasks, they take the solution."""

# --- Verdicts forged without touching the answer: 7 root ways --------------------------------

# 1. A name the check cell looks up: `pstutor` rebound to an object whose check() says "passed".
REBIND_PSTUTOR = """import types

class Passed:
    def __init__(self, task):
        self.task = task

    def _repr_mimebundle_(self, include=None, exclude=None):
        record = {"task": self.task, "status": "passed", "hint": "", "detail": ""}
        return {"text/plain": f"✅ Task {self.task} passed", "application/vnd.pstutor.check+json": record}

pstutor = types.SimpleNamespace(check=lambda task, **answers: Passed(task), setup=lambda **k: None)
resolver = strategy = 1"""

# 2. The checker's own registry: the genuine check() then runs a function that never fails.
REGISTRY = """import pstutor.checks
import pstutor.checks.ex01
pstutor.checks._CHECKS["01.1"] = lambda **answers: None
resolver = strategy = 1"""

# 3. IPython's display path: the genuine record, with its status flipped on the way out.
DISPLAY_PATH = """import types
shell = get_ipython()
original = shell.displayhook.compute_format_data

def flipped(self, result):
    data, meta = original(result)
    record = data.get("application/vnd.pstutor.check+json")
    if isinstance(record, dict):
        data["application/vnd.pstutor.check+json"] = {**record, "status": "passed", "detail": ""}
    return data, meta

shell.displayhook.compute_format_data = types.MethodType(flipped, shell.displayhook)
resolver = strategy = 1"""

# 4. IPython's input transformers: every check cell is rewritten to show a "passed" record.
TRANSFORMER = """def rewrite(lines):
    source = "".join(lines)
    if "pstutor.check(" not in source:
        return lines
    task = source.split('"')[1]
    record = {"task": task, "status": "passed", "hint": "", "detail": ""}
    bundle = {"application/vnd.pstutor.check+json": record, "text/plain": "passed"}
    return [f"type('Passed', (), {{'_repr_mimebundle_': lambda self, **kw: {bundle!r}}})()\\n"]

get_ipython().input_transformers_post.append(rewrite)
resolver = strategy = 1"""

# 5. The kernel's own messages: a forged execute_result sent after every check cell, the real one muted.
SESSION = """shell = get_ipython()
kernel = shell.kernel
shell.displayhook.write_format_data = lambda *args, **kwargs: None

def forge(result):
    source = result.info.raw_cell
    if "pstutor.check(" in source:
        task = source.split('"')[1]
        record = {"task": task, "status": "passed", "hint": "", "detail": ""}
        kernel.session.send(kernel.iopub_socket, "execute_result",
                            {"execution_count": 1, "data": {"application/vnd.pstutor.check+json": record,
                                                            "text/plain": "passed"}, "metadata": {}},
                            parent=kernel.get_parent())

shell.events.register("post_run_cell", forge)
resolver = strategy = 1"""

# 6. Objects that imitate the types a check expects (task 3 without a cluster).
IMITATION = """class Variable:
    device = "/job:ps/replica:0/task:0/device:CPU:0"

    def numpy(self):
        return 1


class Tensor:
    device = "/job:worker/replica:0/task:1/device:CPU:0"

    def __int__(self):
        return 2


counter, doubled = Variable(), Tensor()"""

# 7. A library function a check calls: json.loads completes the wrong TF_CONFIG of task 2.
LIBRARY = """import json
tf_config_json = json.dumps({"cluster": {"worker": ["10.0.0.2:2222", "10.0.0.3:2222"],
                                         "ps": ["10.0.0.4:2222"]},
                             "task": {"type": "worker", "index": 1}})
real_loads = json.loads
full = {"chief": ["10.0.0.1:2222"], "worker": ["10.0.0.2:2222", "10.0.0.3:2222"], "ps": ["10.0.0.4:2222"]}


def loads(text, *args, **kwargs):
    found = real_loads(text, *args, **kwargs)
    if isinstance(found, dict) and "cluster" in found:
        found["cluster"] = dict(full)
    return found


json.loads = loads"""

# --- The same, through the interpreter's back doors: refused before they act -------------------
FRAMES = """import sys
checker = sys._getframe(0).f_globals["pstutor"].checks
checker._CHECKS["01.1"] = lambda **answers: None
resolver = strategy = 1"""

OBJECT_GRAPH = """import gc
registry = next(o for o in gc.get_objects() if isinstance(o, dict) and "01.2" in o and callable(o["01.2"]))
registry["01.1"] = lambda **answers: None
resolver = strategy = 1"""

FOREIGN = """import ctypes
import pstutor.checks
ctypes.pythonapi.PyDict_SetItem(ctypes.py_object(pstutor.checks._CHECKS), ctypes.py_object("01.1"),
                                ctypes.py_object(lambda **answers: None))
resolver = strategy = 1"""

MEMORY = """with open("/proc/self/mem", "rb") as memory:
    memory.seek(id(1))
resolver = strategy = 1"""

MEMORY_MAP = """with open("/proc/self/maps") as layout:  # where to point a raw-address array
    layout.read()
resolver = strategy = 1"""

THREAD = """import threading, time
import pstutor.checks.ex01 as ex01

def keep_patching():
    while True:
        ex01.expect = lambda *args, **kwargs: None
        time.sleep(0.001)

threading.Thread(target=keep_patching, daemon=True).start()
resolver = strategy = 1"""

RESEAL = """import pstutor.checks.ex01 as ex01
ex01.expect = lambda *args, **kwargs: None
__import__("pstutor.grading.integrity", fromlist=["seal"]).seal({"imports": [], "answers": {}, "checks": {},
                                                                    "course": []})
resolver = strategy = 1"""

FORGED_AUDIT = """import sys
record = {"task": "01.1", "status": "passed", "hint": "", "detail": ""}
sys.audit("pstutor.verdict", record, {})
resolver = strategy = 1"""

FORGERS = {
    "rebind": REBIND_PSTUTOR,
    "registry": REGISTRY,
    "displaypath": DISPLAY_PATH,
    "transformer": TRANSFORMER,
    "session": SESSION,
    "frames": FRAMES,
    "graph": OBJECT_GRAPH,
    "foreign": FOREIGN,
    "memory": MEMORY,
    "memory-map": MEMORY_MAP,
    "thread": THREAD,
    "reseal": RESEAL,
    "audit": FORGED_AUDIT,
}
# A patch in place when the check starts that puts the original back before the verdict.
UNDONE_PARSER = """import json
import pstutor.tf_config as tf_config

real = tf_config.parse_tf_config
right = json.dumps({"cluster": {"chief": ["10.0.0.1:2222"], "worker": ["10.0.0.2:2222", "10.0.0.3:2222"],
                                "ps": ["10.0.0.4:2222"]}, "task": {"type": "worker", "index": 1}})

def once(text):
    vars(tf_config)["parse_tf_config"] = real  # gone again before the verdict
    return real(right)

vars(tf_config)["parse_tf_config"] = once
tf_config_json = "{}"
"""
UNDONE_EXPECT = """import pstutor.checks.ex01 as ex01

real, calls = ex01.expect, [0]

def always(condition, *rest):
    calls[0] += 1
    if calls[0] == 5:
        vars(ex01)["expect"] = real  # gone again before the verdict
    return real(True, *rest)

vars(ex01)["expect"] = always
counter = tf.Variable(5)
doubled = counter + 1
"""
FORGERS_OF_TASK = {"library": ("01.2", LIBRARY), "imitation": ("01.3", IMITATION),
                   "undone-parser": ("01.2", UNDONE_PARSER), "undone-expect": ("01.3", UNDONE_EXPECT)}

# --- One submission stops the class ------------------------------------------------------------
ODD_ERROR = 'raise RuntimeError("\\udcff \\x1b[2J\\x1b[1;1H all rows above are gone \\u202e")'
ODD_TREE = """import os
path = "deep"
for _ in range(900):  # deep, but within the recursion limit of os.makedirs
    path = os.path.join(path, "d")
os.makedirs(path)
os.makedirs("locked/inner")
open("locked/inner/new\\nline\\x1b[31m.txt", "w").write("x")
os.chmod("locked/inner", 0)
os.chmod("locked", 0)
resolver = strategy = None"""
EXIT = "import os\nos._exit(0)"

# Sockets in the sandbox folder, which lives on the grader's disk: each one costs an inode there.
SOCKET_FLOOD = """import os, socket
from ipykernel.connect import get_connection_file

folder, made = os.path.dirname(get_connection_file()), 0
for index in range(2000):
    try:
        socket.socket(socket.AF_UNIX).bind(os.path.join(folder, f"flood-{index}"))
    except OSError:
        break
    made += 1
try:
    os.remove(get_connection_file())
    removed = "removed"
except OSError:
    removed = "kept"
raise RuntimeError(f"sockets made: {made}; connection file {removed}")"""

# --- Resources: a classmate beside these must keep its verdict ---------------------------------
CPU_HOG = """import subprocess, sys, threading
burn = "while True: pass"
for _ in range(6):
    subprocess.Popen([sys.executable, "-c", burn], start_new_session=True)
for _ in range(8):
    threading.Thread(target=lambda: any(iter(int, 1)), daemon=True).start()  # endless zeros, nothing kept
import time
time.sleep(600)"""
SHARED_MEMORY = """block = b"x" * (64 << 20)
for index in range(8):  # 4 GiB in all, in files under the file-size limit: no process maps them
    with open(f"/dev/shm/hog-{index}", "wb") as hog:
        for _ in range(8):
            hog.write(block)
resolver = strategy = None"""
THREAD_FLOOD = """import threading, time
threads = []
try:
    for _ in range(20000):
        thread = threading.Thread(target=time.sleep, args=(60,), daemon=True)
        thread.start()
        threads.append(thread)
except RuntimeError as full:
    raise RuntimeError(f"stopped after {len(threads)} threads") from full"""
DISK_FILL = """import os, sys
targets = ["/tmp", os.path.expanduser("~"), os.getcwd()]
targets += [os.path.dirname(arg) for arg in sys.argv if arg.endswith(".json")]  # the sandbox folder
for folder in targets:
    for index in range(32):  # 16 GiB a folder, where it can
        try:
            with open(os.path.join(folder, f"fill-{index}"), "wb") as hog:
                os.posix_fallocate(hog.fileno(), 0, 512 << 20)
        except OSError:
            break
resolver = strategy = None"""
FRAME_FLOOD = """kernel = get_ipython().kernel
frame = b"x" * ((8 << 20) - 4096)  # under the grader's cap on one frame: 400 of them, 3.2 GB
kernel.session.send(kernel.iopub_socket, "stream", {"name": "stdout", "text": "x"},
                    buffers=[frame] * 400, parent=kernel.get_parent("shell"))
resolver = strategy = None"""
OUTPUT_FLOOD = """from IPython.display import display, update_display
handle = display("start", display_id=True)
for index in range(20000):
    handle.update("x" * 10000)
    print("y" * 1000)
resolver = strategy = None"""

# --- Code the hook took for the course's (red team, issue 26: #1, #2, #23, #6) -----------------
# Found with gc by code the hook counts as the course's, the hook's closure is rewritten: the
# checker of 01.1 accepts anything, the snapshot is retaken after the change, the notes erased.
BLINDER = '''import gc

def cells(name):
    for item in gc.get_objects():
        code = getattr(item, "__code__", None)
        if code is not None and item.__name__ == name and code.co_filename.endswith("integrity.py"):
            return dict(zip(code.co_freevars, (cell.cell_contents for cell in item.__closure__)))
    raise LookupError(name)

def blind():
    import pstutor.checks
    import pstutor.checks.ex01
    pstutor.checks._CHECKS["01.1"] = dict  # a builtin: takes the answers, never raises
    state = cells("handle")["state"]
    state["snapshot"] = cells("take_seal")["snapshot"]()
    state["reasons"].clear()

def forge():
    import pstutor.checks
    sealer = cells("verdict")
    def record(self):
        forged = {"task": self.task, "status": "passed", "hint": "", "detail": "", "integrity": []}
        mac = sealer["mac_copy"]()
        mac.update(sealer["canonical_text"](forged).encode())
        return {**forged, "seal": mac.hexdigest()}
    pstutor.checks.Result.record = record
'''

# 1. A module of the answer's, loaded under a file name that starts with pstutor's folder.
_LOAD_DOTTED = f"""import importlib.util, os, pstutor
with open("/tmp/blinder.py", "w") as out:
    out.write({BLINDER!r})
dotted = os.path.dirname(pstutor.__file__) + "/.." * 12 + "/tmp/blinder.py"
spec = importlib.util.spec_from_file_location("blinder", dotted)
blinder = importlib.util.module_from_spec(spec)
spec.loader.exec_module(blinder)
"""
DOTTED_PATH = _LOAD_DOTTED + "blinder.blind()\nresolver = strategy = 1"

# 2. IPython compiles any source under any file name, and runs it from its own frame.
IPYTHON_COMPILE = f"""import pstutor.checks.ex01 as ex01
shell = get_ipython()
shell.ex(shell.compile({BLINDER + "blind()"!r}, ex01.__file__, "exec"))
resolver = strategy = 1"""

# 3. compile() called by the answer itself, under the checker's file name: noted, then the note erased.
DIRECT_COMPILE = f"""import pstutor.checks.ex01 as ex01
exec(compile({BLINDER + "blind()"!r}, ex01.__file__, "exec"))
resolver = strategy = 1"""

# 4. The genuine file loader of the checker's file, its instance told to read the answer's source.
LOADER_SOURCE = f"""import importlib.util, pstutor.checks.ex01 as ex01
spec = importlib.util.spec_from_file_location("ex01_again", ex01.__file__)
spec.loader.get_data = lambda path: {(BLINDER + "blind()").encode()!r}
spec.loader.exec_module(importlib.util.module_from_spec(spec))
resolver = strategy = 1"""

# 5. The hook's HMAC context, taken from its closure, seals a "passed" that every check cell shows.
SEAL_FORGE = _LOAD_DOTTED + "blinder.forge()\nresolver = strategy = 1"

# 6. A stand-in with no function of its own and a library's module name (task 3 computed locally).
LIBRARY_NAMED_CLASS = """with strategy.scope():
    counter = tf.Variable(5)
local = counter * 2


class Doubled(tf.Tensor):
    __module__ = "tensorflow.python.framework.tensor"
    device = "/job:worker/replica:0/task:1/device:CPU:0"
    __int__ = int(local).__index__


doubled = object.__new__(Doubled)"""

HOLES = {
    "dotted-path": ("01.1", DOTTED_PATH),
    "ipython-compile": ("01.1", IPYTHON_COMPILE),
    "direct-compile": ("01.1", DIRECT_COMPILE),
    "loader-source": ("01.1", LOADER_SOURCE),
    "seal-forge": ("01.1", SEAL_FORGE),
    "library-named-class": ("01.3", LIBRARY_NAMED_CLASS),
}
