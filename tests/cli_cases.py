"""The tour of bad input: every command given what a new or careless user types.

Each case must end in one line on stderr, in the user's language, with exit code 2, nothing
on stdout, no traceback, no file of the sandbox changed and no process started (TensorFlow
not even imported). `tests/test_cli_tour.py` runs the cases in-process (fast);
`benchmarks/cli_tour.py` runs them as real `pstutor` processes and prints the table.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import re
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parent.parent
HOSTS = "10.0.0.1,10.0.0.2,10.0.0.3,10.0.0.4"
COURSE = str(ROOT)
LF = ["cluster", "launch-files"]
CJK = re.compile(r"[\u4e00-\u9fff]")


@dataclasses.dataclass
class Case:
    """One bad input: the words typed (`{tmp}` is the sandbox folder), what the message must say."""

    name: str
    argv: list[str]
    expect: str  # a part of the one line on stderr
    env: dict[str, str] = dataclasses.field(default_factory=dict)
    setup: Callable[[Path], Callable[[], None] | None] | None = None  # may return a clean-up

    @property
    def chinese(self) -> bool:
        """Whether the user asked for Chinese: `--lang zh` (before or after the command) or the locale."""
        pairs = zip(self.argv, self.argv[1:], strict=False)
        asked = any(pair == ("--lang", "zh") for pair in pairs) or "--lang=zh" in self.argv
        locale = self.env.get("LC_ALL") or self.env.get("LANG", "")
        return asked or locale.startswith("zh")

    def words(self, tmp: Path) -> list[str]:
        return [word.replace("{tmp}", str(tmp)) for word in self.argv]


@dataclasses.dataclass
class Outcome:
    """What one run did, and the verdicts of the tour."""

    code: int
    stdout: str
    stderr: str
    traceback: bool
    files_changed: bool
    processes_left: int
    tensorflow_loaded: bool = False

    def problems(self, case: Case) -> list[str]:
        """Why this run is not a clean refusal (empty: it is)."""
        found = []
        lines = self.stderr.strip().splitlines()
        if self.traceback:
            found.append("traceback")
        if self.code == 0:
            found.append("wrongly accepted")
        elif self.code != 2:
            found.append(f"exit code {self.code}")
        if len(lines) != 1:
            found.append(f"{len(lines)} lines on stderr")
        if self.stdout:
            found.append("printed to stdout")
        if case.expect not in self.stderr:
            found.append(f"message lacks {case.expect!r}")
        chinese = case.chinese
        if chinese and not CJK.search(self.stderr):
            found.append("not in Chinese")
        if self.files_changed:
            found.append("files changed")
        if self.processes_left:
            found.append(f"{self.processes_left} processes left")
        if self.tensorflow_loaded:
            found.append("TensorFlow started")
        return found


def snapshot(folder: Path) -> dict[str, object]:
    """Every entry below `folder`: content, mode, link target."""
    tree: dict[str, object] = {}
    for path in sorted(folder.rglob("*")):
        name = str(path.relative_to(folder))
        if path.is_symlink():
            tree[name] = ("link", os.readlink(path))
        elif path.is_file():
            tree[name] = ("file", path.read_bytes(), path.stat().st_mode)
        else:
            tree[name] = ("folder", path.stat().st_mode)
    return tree


def children_of(pid: int) -> list[int]:
    """Live processes whose parent is `pid` (the command's own would be its children)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if fields[0] != "Z" and int(fields[1]) == pid:
                    found.append(int(entry.name))
    return found


def run_in_process(case: Case, tmp: Path) -> Outcome:
    """Run `pstutor.cli.main` in this process (working directory: the sandbox)."""
    from pstutor import cli

    clean_up = case.setup(tmp) if case.setup else None
    before, children = snapshot(tmp), set(children_of(os.getpid()))
    out, err, traceback = io.StringIO(), io.StringIO(), False
    env = {"LC_ALL": "", "LC_MESSAGES": "", "LANG": "C.UTF-8", **case.env}
    cwd, loaded = os.getcwd(), "tensorflow" in sys.modules
    try:
        os.chdir(tmp)
        with mock.patch.dict(os.environ, env), contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(err):
            try:
                code = cli.main(case.words(tmp))
            except BaseException as exc:  # anything main lets out would be a traceback
                code, traceback = 1, True
                err.write(f"Traceback: {type(exc).__name__}: {exc}\n")
    finally:
        os.chdir(cwd)
        if clean_up:
            clean_up()
    after = snapshot(tmp)
    left = [pid for pid in children_of(os.getpid()) if pid not in children]
    return Outcome(code, out.getvalue(), err.getvalue(), traceback, before != after, len(left),
                   not loaded and "tensorflow" in sys.modules)


def run_in_subprocess(case: Case, tmp: Path, timeout: float = 120) -> Outcome:
    """Run `python -m pstutor` in a fresh process, as a user's shell does."""
    clean_up = case.setup(tmp) if case.setup else None
    before = snapshot(tmp)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TF_", "GRPC_", "LC_", "LANG"))}
    env.update({"LANG": "C.UTF-8", **case.env})
    try:
        process = subprocess.Popen([sys.executable, "-m", "pstutor", *case.words(tmp)], cwd=tmp, env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   start_new_session=True)
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
            stdout, stderr = process.communicate()
        left = _group_members(process.pid)
    finally:
        if clean_up:
            clean_up()
    return Outcome(process.returncode, stdout, stderr, "Traceback" in stderr or process.returncode < 0,
                   snapshot(tmp) != before, len(left))


def _group_members(group: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if fields[0] != "Z" and int(fields[3]) == group:
                    found.append(int(entry.name))
    return found


# --- what the sandbox holds before a case ---------------------------------------------------

def _file(name: str, text: str = "mine") -> Callable[[Path], None]:
    def make(tmp: Path) -> None:
        (tmp / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp / name).write_text(text)
    return make


def _link(name: str) -> Callable[[Path], None]:
    def make(tmp: Path) -> None:
        (tmp / "precious.txt").write_text("precious")
        (tmp / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp / name).symlink_to(tmp / "precious.txt")
    return make


def _folder(name: str) -> Callable[[Path], None]:
    def make(tmp: Path) -> None:
        (tmp / name).mkdir(parents=True)
        (tmp / name / "inside.txt").write_text("mine")
    return make


def _edited_launch_files(tmp: Path) -> None:
    from pstutor.launch_files import write_launch_files

    write_launch_files(tmp / "launch", HOSTS.split(","), 2, 1)
    with open(tmp / "launch" / "start-ps-0.sh", "a") as handle:
        handle.write("# my edit\n")


def _busy_port(tmp: Path) -> Callable[[], None]:
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    holder.bind(("0.0.0.0", 0))
    holder.listen()
    (tmp / "port").write_text(str(holder.getsockname()[1]))
    return holder.close


def _with_port(case: Case) -> Case:
    """The case's `{port}` becomes the port `_busy_port` holds (read when the case runs)."""
    words = case.words

    def with_port(tmp: Path) -> list[str]:
        port = (tmp / "port").read_text()
        return [w.replace("{port}", port) for w in words(tmp)]

    case.words = with_port  # type: ignore[method-assign]
    return case


# --- the cases ------------------------------------------------------------------------------

def _numbers(command: list[str], option: str, low: int, high: int | None) -> list[Case]:
    values = [(str(low - 1), f"must be at least {low}"), ("x", "must be a whole number"),
              ("1.5", "must be a whole number"), ("２", "must be a whole number"),
              ("", "must be a whole number"), ("1_0", "must be a whole number"),
              ("1" + "0" * 400, "must be a whole number"), ("-7", f"must be at least {low}")]
    if high is not None:
        values += [(str(high + 1), f"must be at most {high:,}"),
                   ("99999999999999999999999", f"must be at most {high:,}")]
    name = " ".join(command)
    return [Case(f"{name} {option} {value[:12]!r}", [*command, option, value], expect)
            for value, expect in values]


def _launch(name: str, extra: list[str], expect: str, **kwargs) -> Case:
    args = {"--hosts": HOSTS, "--out": "{tmp}/launch"}
    words = [w for pair in args.items() for w in pair]
    return Case(f"launch-files {name}", [*LF, *words, *extra], expect, **kwargs)


BAD_HOSTS = ["300.1.1.1", "10.0.0", "1.2.3.4.5", "010.0.0.1", "a" * 300, "x" * 64 + ".com", "a-.com",
             "a_b.com", "a..b", "grpc://a", "a:port", "a:", "[fd00::zz]", "ä.com", "a b",
             "1.2.3.999", "host/path", "*", "a;rm -rf x", "[::1"]
BAD_IMAGES = ["", "Registry/Team/Train:1", "a::::@@", "Train", "team/Train", "train:", "train:-x",
              "train:" + "t" * 129, "train@sha256:abc", "/train", "train/", "a//b", "train tag", "a" * 300,
              "http://registry/train", "ü/train", "train:1;id"]
BAD_PROGRAMS = ["", "my train.py", "train$(id).py", "tr'ain.py", "src/", "..",
                "train.py\n  - injected: true", "ü.py", "a;b.py", "a|b.py", "`id`.py"]
BAD_NAMES = ["", "My_Cluster", "1abc", "a" * 40, "abc-", "ab.c", "名字", "a b"]
BAD_CLAIMS = ["", "Claim", "-claim", "claim-", "a" * 300, "claim/x"]


def cases() -> list[Case]:
    """Every bad input of the tour, in order."""
    found = [
        Case("no command", [], "the following arguments are required"),
        Case("unknown command", ["frob"], "invalid choice: 'frob'"),
        Case("empty command", [""], "invalid choice: ''"),
        Case("unknown option", ["--frob"], "the following arguments are required"),
        Case("--lang fr", ["--lang", "fr", "demo"], "invalid choice: 'fr'"),
        Case("--lang without a value", ["demo", "--lang"], "expected one argument"),
        Case("--lang=xx", ["--lang=xx", "doctor"], "invalid choice: 'xx'"),
        Case("abbreviated --lan", ["--lan", "zh", "doctor"], "invalid choice: 'zh'"),
        Case("--version with a value", ["--version=1"], "ignored explicit argument"),
        Case("demo abbreviated --work", ["demo", "--work", "3"], "unrecognized arguments: --work"),
        Case("demo stray word", ["demo", "now"], "unrecognized arguments: now"),
        Case("demo --force=yes", ["demo", "--force=yes"], "ignored explicit argument 'yes'"),
        Case("demo --out missing value", ["demo", "--out"], "expected one argument"),
        Case("demo --out ''", ["demo", "--out", ""], "an empty path"),
        Case("demo --out '   '", ["demo", "--out", "   "], "an empty path"),
        Case("demo --out a file", ["demo", "--out", "{tmp}/notes.txt"], "is a file, not a folder",
             setup=_file("notes.txt")),
        Case("demo --out below a file", ["demo", "--out", "{tmp}/notes.txt/sub"], "cannot write into",
             setup=_file("notes.txt")),
        Case("demo --out with the user's loss.png", ["demo", "--out", "{tmp}/out"],
             "not replaced: loss.png", setup=_file("out/loss.png")),
        Case("demo --out with the user's loss.png, --force", ["demo", "--out", "{tmp}/out", "--force"],
             "not replaced: loss.png", setup=_file("out/loss.png")),
        Case("demo --out with a link loss.png", ["demo", "--out", "{tmp}/out", "--force"],
             "not replaced: loss.png", setup=_link("out/loss.png")),
        Case("demo --out with a folder topology.png", ["demo", "--out", "{tmp}/out"],
             "not replaced: topology.png", setup=_folder("out/topology.png")),
        Case("demo --out with a foreign record", ["demo", "--out", "{tmp}/out"],
             "is not a record pstutor wrote", setup=_file("out/.pstutor-written", "{}")),
        Case("demo --out in /proc", ["demo", "--out", "/proc/pstutor-demo"], "cannot write into /proc"),
        Case("demo in Chinese (LANG)", ["demo", "--workers", "0"], "必须至少为 1",
             env={"LANG": "zh_CN.UTF-8"}),
        Case("demo in Chinese (LC_ALL)", ["demo", "--ps", "x"], "必须是整数",
             env={"LC_ALL": "zh_TW.UTF-8", "LANG": "en_US.UTF-8"}),
        Case("demo --lang zh after the command", ["demo", "--lang", "zh", "--epochs", "0"], "必须至少为 1"),
        Case("demo --lang zh, user file", ["demo", "--lang", "zh", "--out", "{tmp}/out"], "不会覆盖",
             setup=_file("out/loss.png")),
        Case("doctor stray word", ["doctor", "now"], "unrecognized arguments: now"),
        Case("doctor --verbose=1", ["doctor", "--verbose=1"], "ignored explicit argument '1'"),
        Case("doctor --frob", ["doctor", "--frob"], "unrecognized arguments: --frob"),
        Case("build unknown lesson", ["build", "99", "--course", COURSE],
             "no lesson or exercise matches '99'"),
        Case("build unknown name", ["build", "zz_nothing", "--course", COURSE], "matches 'zz_nothing'"),
        Case("build one good, one unknown", ["build", "01", "42", "--course", COURSE], "matches '42'"),
        Case("build unknown lesson, zh", ["--lang", "zh", "build", "99", "--course", COURSE], "没有与 '99'"),
        Case("build --keep-outputs --no-execute", ["build", "--keep-outputs", "--no-execute"],
             "not allowed with"),
        Case("build --no-execute=1", ["build", "--no-execute=1"], "ignored explicit argument"),
        Case("build --course ''", ["build", "--course", ""], "an empty path"),
        Case("build --course missing", ["build", "--course", "{tmp}/nowhere"], "is not a folder"),
        Case("build --course a file", ["build", "--course", "{tmp}/notes.txt"], "is not a folder",
             setup=_file("notes.txt")),
        Case("build --course not a clone", ["build", "--course", "{tmp}"], "not inside a clone"),
        Case("build outside a clone", ["build", "01"], "not inside a clone of the course"),
        Case("cluster without action", ["cluster"], "the following arguments are required"),
        Case("cluster unknown action", ["cluster", "down"], "invalid choice: 'down'"),
        Case("cluster up too big", ["cluster", "up", "--workers", "100000"], "task processes need about"),
        Case("cluster up far too big", ["cluster", "up", "--workers", "99999999999999999999999"],
             "task processes need about"),
        Case("cluster up too many ps", ["cluster", "up", "--ps", "50000"], "Use fewer workers or ps"),
        Case("cluster up too big, zh", ["--lang", "zh", "cluster", "up", "--workers", "100000"],
             "个任务进程约需"),
        Case("cluster up --port beyond 65535", ["cluster", "up", "--port", "65534"], "beyond 65535"),
        _with_port(Case("cluster up --port in use", ["cluster", "up", "--port", "{port}"], "already in use",
                        setup=_busy_port)),
        Case("cluster up stray word", ["cluster", "up", "now"], "unrecognized arguments: now"),
        Case("launch-files without --hosts", [*LF, "--out", "{tmp}/launch"],
             "the following arguments are required: --hosts"),
        Case("launch-files too few hosts", [*LF, "--hosts", "a,b", "--out", "{tmp}/l"],
             "2 hosts given for 4 tasks"),
        Case("launch-files too many hosts", [*LF, "--hosts", "a,b,c,d,e",
                                             "--out", "{tmp}/l"], "5 hosts given for 4 tasks"),
        Case("launch-files hosts ''", [*LF, "--hosts", "", "--out", "{tmp}/l"],
             "host 1 of 1 is empty"),
        Case("launch-files an empty host", [*LF, "--hosts", "a,,b,c", "--out", "{tmp}/l"],
             "host 2 of 4 is empty"),
        Case("launch-files a trailing comma", [*LF, "--hosts", "a,b,c,d,",
                                               "--out", "{tmp}/l"], "host 5 of 5 is empty"),
        Case("launch-files one host twice", [*LF, "--hosts", "a,a,b,c", "--out", "{tmp}/l"],
             "is used twice"),
        _launch("--format yaml", ["--format", "yaml"], "invalid choice: 'yaml'"),
        _launch("--format ''", ["--format", ""], "invalid choice: ''"),
        _launch("--out ''", ["--out", ""], "an empty path"),
        _launch("--out a file", ["--out", "{tmp}/notes.txt"], "is a file, not a folder",
                setup=_file("notes.txt")),
        _launch("--out below a file", ["--out", "{tmp}/notes.txt/x"], "cannot write into",
                setup=_file("notes.txt")),
        _launch("--out in /sys", ["--out", "/sys/pstutor-launch"], "cannot write into /sys"),
        _launch("user's kubernetes.yaml", [], "not replaced: kubernetes.yaml",
                setup=_file("launch/kubernetes.yaml", "apiVersion: v1\n")),
        _launch("user's kubernetes.yaml, --force", ["--force"], "not replaced: kubernetes.yaml",
                setup=_file("launch/kubernetes.yaml", "apiVersion: v1\n")),
        _launch("user's start script", [], "not replaced: start-chief-0.sh",
                setup=_file("launch/start-chief-0.sh", "#!/bin/sh\n")),
        _launch("a link as Dockerfile", ["--force"], "not replaced: Dockerfile",
                setup=_link("launch/Dockerfile")),
        _launch("a folder as tfjob.yaml", ["--format", "tfjob"], "not replaced: tfjob.yaml",
                setup=_folder("launch/tfjob.yaml")),
        _launch("an edited own script", [], "start-ps-0.sh in", setup=_edited_launch_files),
        _launch("an edited own script, zh", ["--lang", "zh"], "被修改过", setup=_edited_launch_files),
        _launch("a foreign record", [], "is not a record pstutor wrote",
                setup=_file("launch/.pstutor-written", "not json")),
        _launch("stray word", ["now"], "unrecognized arguments: now"),
        _launch("--hosts in Chinese", ["--hosts", "300.1.1.1,b,c,d"], "不是主机",
                env={"LANG": "zh_CN.UTF-8"}),
        _launch("--image in Chinese", ["--image", "A"], "不是容器镜像引用", env={"LANG": "zh_CN.UTF-8"}),
        *(Case(f"compare --strategies {value!r}", ["compare", "--strategies", value], "Unknown strategy")
          for value in ("none,horovod", "NONE", "", ",", "none;ps")),
        Case("compare none,none", ["compare", "--strategies", "none,none"], "names none twice"),
        Case("compare ps,mwms,ps", ["compare", "--strategies", "ps,mwms,ps"], "names ps twice"),
        Case("compare --batch-size 100000000", ["compare", "--batch-size", "100000000"], "at most 1024"),
        Case("compare --batch-size 1025", ["compare", "--batch-size", "1025"], "at most 1024"),
        Case("compare --steps-per-execution 1000000", ["compare", "--steps-per-execution", "1000000"],
             "at most 256"),
        Case("compare --steps-per-execution beyond the steps", ["compare", "--examples", "64",
                                                               "--steps-per-execution", "3"], "at most 2"),
        Case("compare in Chinese", ["compare", "--lang", "zh", "--strategies", "x"], "未知的策略名称"),
        Case("compare stray word", ["compare", "now"], "unrecognized arguments: now"),
        Case("compare abbreviated --strat", ["compare", "--strat", "ps"], "unrecognized arguments: --strat"),
    ]
    found += _numbers(["demo"], "--workers", 1, 16) + _numbers(["demo"], "--ps", 1, 16)
    found += _numbers(["demo"], "--epochs", 1, 100) + _numbers(["demo"], "--steps", 1, 1000)
    found += _numbers(["cluster", "up"], "--workers", 1, None) + _numbers(["cluster", "up"], "--ps", 1, None)
    found += [*_numbers(["cluster", "up"], "--port", 1, None)[:7],
              Case("cluster up --port 65536", ["cluster", "up", "--port", "65536"], "a port is at most")]
    found += [_launch(f"--hosts {h[:20]!r}", ["--hosts", f"{h},b,c,d"], "is not a host") for h in BAD_HOSTS]
    found += [_launch("--hosts 'a:0'", ["--hosts", "a:0,b,c,d"], "'a:0': must be at least 1"),
              _launch("--hosts 'a:65536'", ["--hosts", "a:65536,b,c,d"], "a port is at most 65535"),
              _launch("--hosts '-a.com'", ["--hosts", "-a.com,b,c,d"], "expected one argument"),
              _launch("--program '-rf.py'", ["--program", "-rf.py"], "expected one argument"),
              _launch("--program '--x.py'", ["--program=--x.py"], "give the program as a path")]
    found += [_launch(f"--image {i[:20]!r}", ["--image", i], "is not a container image reference")
              for i in BAD_IMAGES]
    found += [_launch(f"--program {p[:20]!r}", ["--program", p], "give the program as a path")
              for p in BAD_PROGRAMS]
    found += [_launch(f"--name {n[:20]!r}", ["--name", n], "--name") for n in BAD_NAMES]
    found += [_launch(f"--volume-claim {c[:20]!r}", ["--volume-claim", c], "--volume-claim")
              for c in BAD_CLAIMS]
    for option in ("--port", "--workers", "--ps"):
        found += [_launch(f"{option} {v!r}", [option, v], expect)
                  for v, expect in (("0", "must be at least 1"), ("x", "must be a whole number"),
                                    ("２２", "must be a whole number"))]
    found += [_launch("--port 65536", ["--port", "65536"], "a port is at most 65535"),
              _launch("--workers 1001", ["--workers", "1001"], "must be at most 1,000")]
    found += _numbers(["compare"], "--examples", 1, 1_000_000) + _numbers(["compare"], "--timeout", 1, 86400)
    found += _numbers(["compare"], "--batch-size", 1, None)[:7]
    found += _numbers(["compare"], "--steps-per-execution", 1, None)[:7]
    return found


# --- stopping a running command: closed pipes and signals -----------------------------------

@dataclasses.dataclass
class Stop:
    """A running command stopped once its output shows `after`: by closing its standard output
    (`| head`), by SIGTERM (`kill`), or by SIGINT to its process group (a terminal's Ctrl-C)."""

    name: str
    argv: list[str]
    after: str
    how: str  # "close", "kill" or "ctrl-c"
    code: int
    line: str  # all it may say on stderr


def stops() -> list[Stop]:
    """The stops of the tour: every long-running command, each way of stopping it."""
    demo = ["demo", "--out", "{tmp}/out", "--epochs", "50"]
    up = ["cluster", "up", "--workers", "1", "--ps", "1"]
    compare = ["compare", "--strategies", "mwms,none"]
    compare_line = "interrupted; every child process was stopped."
    return [
        Stop("demo | head", demo, "[Model.fit]", "close", 141, ""),
        Stop("demo, kill", demo, "[Model.fit]", "kill", 143, "interrupted."),
        Stop("demo, Ctrl-C", demo, "[Model.fit]", "ctrl-c", 130, "interrupted."),
        Stop("demo, kill, zh", ["--lang", "zh", *demo], "[Model.fit]", "kill", 143, "已中断。"),
        Stop("cluster up | head", up, "starting", "close", 141, ""),
        Stop("cluster up, kill", up, "Ctrl-C", "kill", 143, ""),
        Stop("cluster up, Ctrl-C", up, "Ctrl-C", "ctrl-c", 0, ""),
        Stop("compare | head", compare, "starting", "close", 141, ""),
        Stop("compare, kill", compare, "starting", "kill", 143, compare_line),
        Stop("compare, Ctrl-C", compare, "starting", "ctrl-c", 130, compare_line),
        Stop("compare, kill, zh", ["--lang", "zh", *compare], "正在启动", "kill", 143,
             "已中断；所有子进程均已停止。"),
        Stop("doctor | head", ["doctor"], "", "close", 141, ""),
    ]


def run_stop(stop: Stop, tmp: Path, timeout: float = 300) -> Outcome:
    """Start the command, wait for `stop.after`, stop it; what it did (files: the sandbox's)."""
    import signal
    import time

    env = {k: v for k, v in os.environ.items() if not k.startswith(("TF_", "GRPC_", "LC_", "LANG"))}
    before = snapshot(tmp)
    words = [word.replace("{tmp}", str(tmp)) for word in stop.argv]
    process = subprocess.Popen([sys.executable, "-m", "pstutor", *words], cwd=tmp,
                               env={**env, "LANG": "C.UTF-8"}, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        while stop.after:
            line = process.stdout.readline()
            if not line or stop.after in line:
                break
        time.sleep(2)  # in the middle of the work, not at its first line
        members = _group_members(process.pid)
        if stop.how == "close":
            process.stdout.close()
        elif stop.how == "kill":
            process.send_signal(signal.SIGTERM)
        else:
            os.killpg(process.pid, signal.SIGINT)
        if stop.how != "close":
            process.stdout.read()
        stderr = process.stderr.read()
        process.wait(timeout=timeout)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    deadline = time.monotonic() + 15
    while (left := set(members) & set(_group_members(process.pid))) and time.monotonic() < deadline:
        time.sleep(0.2)
    return Outcome(process.returncode, "", stderr, "Traceback" in stderr, snapshot(tmp) != before, len(left))


def stop_problems(stop: Stop, outcome: Outcome) -> list[str]:
    """Why a stop was not clean (empty: it was)."""
    found = []
    if outcome.traceback:
        found.append("traceback")
    if outcome.code != stop.code:
        found.append(f"exit code {outcome.code}, not {stop.code}")
    if outcome.stderr.strip() != stop.line:
        found.append(f"said {outcome.stderr.strip()[:60]!r}")
    if outcome.files_changed:
        found.append("files changed")
    if outcome.processes_left:
        found.append(f"{outcome.processes_left} processes left")
    return found
