"""Walls for code the teacher did not write: a student's kernel, when grading.

`python -m pstutor.sandbox DIR -- CMD...` runs CMD inside bubblewrap (`bwrap`, the sandbox
tool Flatpak uses; any user may run it) so that CMD

- has its own PID namespace: it cannot see or signal the grader, other students' kernels or
  anything else, and everything it starts dies with it (a double fork included);
- has no network: only a loopback of its own (the grader talks to the kernel over Unix
  sockets in DIR, Jupyter's `ipc` transport);
- sees, read-only, only the system's libraries, Python, the installed packages and
  pstutor: no course clone, no solutions, no other submission, no home folder;
- starts from a clean environment and may write only to DIR (also seen as /tmp) and to a
  private /dev; Landlock (Linux 5.13+), where present, fences writes a second time;
- runs under limits on file size and open files; the grader adds memory, process and
  output limits from outside (`Watchdog`).

Where bubblewrap is missing the grader refuses to run unless told to go ahead without it.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import platform
import resource
import shutil
import sys
import threading
from pathlib import Path

# System call numbers (the same on x86_64 and aarch64) and flags from <linux/landlock.h>.
_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38
_WRITE_FILE, _REMOVE_DIR, _REMOVE_FILE = 1 << 1, 1 << 4, 1 << 5
_MAKE_ANYTHING = sum(1 << bit for bit in range(6, 13))  # char, dir, reg, sock, fifo, block, sym
_REFER, _TRUNCATE = 1 << 13, 1 << 14  # Landlock ABI 2 and 3

# What a Python kernel needs from /etc (name resolution of localhost, time zone, users).
_ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "hosts", "nsswitch.conf",
        "passwd", "group", "alternatives", "fonts")
_SYSTEM = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin")
FILE_SIZE_LIMIT = 1 << 30  # bytes per file a submission may write
OPEN_FILES_LIMIT = 4096


class SandboxError(RuntimeError):
    """The walls could not be put in place."""


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def landlock_version() -> int:
    """The Landlock ABI this kernel offers (0 when there is none)."""
    if platform.system() != "Linux":
        return 0
    version = _libc().syscall(_CREATE_RULESET, None, ctypes.c_size_t(0), _CREATE_RULESET_VERSION)
    return max(version, 0)


def bwrap() -> str | None:
    """The bubblewrap program, if it is installed and works here (user namespaces allowed)."""
    program = shutil.which("bwrap")
    if not program:
        return None
    import subprocess

    try:
        done = subprocess.run([program, "--unshare-all", "--unshare-user", "--die-with-parent",
                               "--ro-bind", "/", "/", "--proc", "/proc", "true"],
                              capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return program if done.returncode == 0 else None


def readable() -> list[str]:
    """The folders a kernel needs to read: system libraries, Python, its packages, pstutor."""
    import pstutor

    folders = [path for path in _SYSTEM if os.path.exists(path) and not os.path.islink(path)]
    folders += [sys.base_prefix, sys.prefix, str(Path(pstutor.__file__).parent)]
    folders += [path for path in sys.path if os.path.isdir(path or ".")
                and ("site-packages" in path or "dist-packages" in path)]
    kept: list[str] = []
    for folder in sorted({os.path.realpath(path) for path in folders}):
        if not any(folder.startswith(outer + os.sep) for outer in kept):
            kept.append(folder)
    return kept


def command(work: Path, argv: list[str], *, program: str) -> list[str]:
    """The bwrap command line that runs `argv` walled in, writing only to `work`."""
    work = Path(os.path.realpath(work))
    line = [program, "--unshare-all", "--unshare-user", "--uid", "1000", "--gid", "1000",
            "--hostname", "sandbox", "--die-with-parent", "--new-session", "--clearenv"]
    line += ["--dev", "/dev", "--proc", "/proc", "--bind", str(work / "tmp"), "/tmp"]
    for folder in readable():
        line += ["--ro-bind", folder, folder]
    for link in _SYSTEM:  # merged /usr: /lib, /bin, ... are links into it
        if os.path.islink(link):
            line += ["--symlink", os.readlink(link), link]
    for name in _ETC:
        line += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    line += ["--ro-bind-try", "/sys/devices/system/cpu", "/sys/devices/system/cpu",
             "--bind", str(work), str(work), "--chdir", str(work)]
    environment = {"HOME": str(work), "TMPDIR": str(work / "tmp"), "LANG": "C.UTF-8",
                   "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
                   "PYTHONNOUSERSITE": "1", "IPYTHONDIR": str(work / ".ipython"),
                   "MPLCONFIGDIR": str(work / ".matplotlib"), "MPLBACKEND": "agg"}
    for name, value in environment.items():
        line += ["--setenv", name, value]
    inner = [sys.executable, "-m", "pstutor.sandbox", "--fence", str(work), "--", *argv]
    return [*line, "--", *inner]


def fence_writes(*writable: str) -> None:
    """From now on, this process and its children may write only beneath `writable`."""
    version = landlock_version()
    if version < 1:
        raise SandboxError("Landlock is not available on this system (Linux 5.13+ needed)")
    access = _WRITE_FILE | _REMOVE_DIR | _REMOVE_FILE | _MAKE_ANYTHING
    access |= (_REFER if version >= 2 else 0) | (_TRUNCATE if version >= 3 else 0)
    libc = _libc()
    attr = _RulesetAttr(access)
    ruleset = libc.syscall(_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)), 0)
    if ruleset < 0:
        raise SandboxError(f"landlock_create_ruleset failed: {os.strerror(ctypes.get_errno())}")
    try:
        for path in writable:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                rule = _PathBeneathAttr(access, fd)
                if libc.syscall(_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), 0) < 0:
                    raise SandboxError(f"landlock_add_rule({path}) failed: "
                                       f"{os.strerror(ctypes.get_errno())}")
            finally:
                os.close(fd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise SandboxError("prctl(PR_SET_NO_NEW_PRIVS) failed")
        if libc.syscall(_RESTRICT_SELF, ruleset, 0) < 0:
            raise SandboxError(f"landlock_restrict_self failed: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(ruleset)


def _limit() -> None:
    """Limits that the kernel and its children inherit: file size, open files, no core dumps."""
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT, FILE_SIZE_LIMIT))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    cap = OPEN_FILES_LIMIT if hard == resource.RLIM_INFINITY else min(OPEN_FILES_LIMIT, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, cap), cap))


class Watchdog:
    """Stops a sandbox (and all it started) that uses too much memory or too many processes."""

    def __init__(self, pid: int, *, memory: int, processes: int, on_limit) -> None:
        self.pid, self.memory, self.processes, self.on_limit = pid, memory, processes, on_limit
        self.exceeded = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.wait(0.25):
            pids = descendants(self.pid)
            rss = sum(_rss(pid) for pid in pids)
            if rss > self.memory or len(pids) > self.processes:
                self.exceeded = "memory" if rss > self.memory else "processes"
                self.on_limit()
                return

    def stop(self) -> None:
        """Stop watching."""
        self._stop.set()
        self._thread.join()


def descendants(pid: int) -> list[int]:
    """Every process below `pid`, read from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                stat = Path(f"/proc/{entry}/stat").read_text()
                parent = int(stat.rsplit(")", 1)[1].split()[1])
                children.setdefault(parent, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _rss(pid: int) -> int:
    with contextlib.suppress(OSError, ValueError, IndexError):
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    return 0


def main(argv: list[str]) -> None:
    """`python -m pstutor.sandbox DIR -- CMD...`: run CMD walled in; `--fence DIR` is the inside step."""
    inside = bool(argv) and argv[0] == "--fence"
    argv = argv[1:] if inside else argv
    if len(argv) < 3 or argv[1] != "--":
        sys.exit("usage: python -m pstutor.sandbox DIR -- COMMAND [ARGS...]")
    if inside:
        if landlock_version() >= 1:
            fence_writes(argv[0], "/dev", "/tmp")
        os.execvp(argv[2], argv[2:])
    program = shutil.which("bwrap")
    if program is None:
        sys.exit("pstutor.sandbox: bubblewrap (bwrap) is not installed or cannot run here")
    _limit()
    line = command(Path(argv[0]), argv[2:], program=program)
    os.execv(program, line)


if __name__ == "__main__":
    main(sys.argv[1:])
