"""Walls for code the teacher did not write: a student's kernel, when grading.

`python -m pstutor.sandbox [--cgroup=DIR ...] [--cpus=0,1] DIR -- CMD...` first moves itself into
the submission's cgroups and onto its CPUs, sets its rlimits, then runs CMD inside bubblewrap
(`bwrap`, the sandbox tool Flatpak uses; any user may run it) so that CMD

- has its own PID namespace: it cannot see or signal the grader, other students' kernels or
  anything else, and everything it starts dies with it (a double fork included);
- has no network: only a loopback of its own (the grader talks to the kernel over Unix
  sockets in DIR, Jupyter's `ipc` transport);
- sees, read-only, only the system's libraries, Python, the installed packages and
  pstutor: no course clone, no solutions, no other submission, no home folder;
- starts from a clean environment, in a /tmp of its own: a tmpfs of at most `SCRATCH_LIMIT`
  bytes, held in memory and so charged to the submission's memory limit, never the disk's;
  it may write only there and to a private /dev. DIR, which holds the kernel's sockets and
  connection file, it may read, and there Landlock (Linux 5.13+), where present, lets it
  make and remove Unix sockets only: no file it writes can fill the grader's disk;
- runs as a user of its own, without privileges: where the grader is root, bwrap's own
  namespace would map the kernel to root, who may read the memory of any process it owns
  (the seal key's); so root gives each sandbox a uid nobody else has (`own_user_namespace`);
- runs under limits on file size, open files and tasks; the kernel enforces memory,
  task and CPU limits through the cgroups, and the grader watches from outside
  (`pstutor.grading.limits`).

Where bubblewrap is missing the grader refuses to run unless told to go ahead without it;
then `--no-walls` applies the cgroups, CPUs and rlimits and runs CMD directly.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import platform
import resource
import shutil
import signal
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

# System call numbers (the same on x86_64 and aarch64) and flags from <linux/landlock.h>.
_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38
_CLONE_NEWUSER = 0x10000000
_WRITE_FILE, _REMOVE_DIR, _REMOVE_FILE = 1 << 1, 1 << 4, 1 << 5
_MAKE_SOCK = 1 << 9
_MAKE_ANYTHING = sum(1 << bit for bit in range(6, 13))  # char, dir, reg, sock, fifo, block, sym
_REFER, _TRUNCATE = 1 << 13, 1 << 14  # Landlock ABI 2 and 3

# What a Python kernel needs from /etc (name resolution of localhost, time zone, users).
_ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "hosts", "nsswitch.conf",
        "passwd", "group", "alternatives", "fonts")
_SYSTEM = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin")
FILE_SIZE_LIMIT = 1 << 30  # bytes per file a submission may write
SCRATCH_LIMIT = 1 << 30  # bytes a submission may keep in its /tmp
OPEN_FILES_LIMIT = 4096
SANDBOX_UID = 1000  # the submission's uid inside the walls
WALLS = "PSTUTOR_WALLS"  # set inside the walls, so the grader's seal cell knows where it runs
OUTER_UID_BASE = 2_000_000_000  # a grader running as root gives each sandbox the uid this + its pid
TASKS_OVER_CURRENT = 4096  # RLIMIT_NPROC: tasks this user may add (not enforced for root)


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


def work_base() -> str:
    """Where the grader makes its sandbox folders: outside /tmp where it can.

    Inside the walls /tmp is the submission's own tmpfs, and a Landlock rule holds for a
    folder and everything beneath it: a sandbox folder under that /tmp would be as writable
    as /tmp itself, and could fill the disk it really lives on.
    """
    base = "/var/tmp"
    if os.path.isdir(base) and os.access(base, os.W_OK | os.X_OK) and not _beneath(base, "/tmp"):
        return base
    return tempfile.gettempdir()


def _beneath(path: str, folder: str) -> bool:
    path, folder = os.path.realpath(path), os.path.realpath(folder)
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def command(work: Path, argv: list[str], *, program: str, userns: int | None = None) -> list[str]:
    """The bwrap command line that runs `argv` walled in: scratch space in a /tmp of its own,
    `work` (its sockets and connection file) readable, with new sockets only.

    With `userns` (a descriptor from `own_user_namespace`, where the grader is root) bwrap sets
    the walls up as root inside that namespace, and the step inside them drops to SANDBOX_UID.
    """
    work = Path(os.path.realpath(work))
    if userns is None:
        uid = str(SANDBOX_UID)
        line = [program, "--unshare-all", "--unshare-user", "--uid", uid, "--gid", uid]
    else:
        line = [program, "--userns", str(userns), "--unshare-ipc", "--unshare-pid", "--unshare-net",
                "--unshare-uts", "--unshare-cgroup-try"]
        line += [part for cap in ("CAP_SETUID", "CAP_SETGID", "CAP_CHOWN") for part in ("--cap-add", cap)]
    line += ["--hostname", "sandbox", "--die-with-parent", "--new-session", "--clearenv"]
    # /tmp first: what is bound later, beneath it (a course clone in /tmp), lands on top of it
    line += ["--dev", "/dev", "--proc", "/proc"]
    line += ["--perms", "1777", "--size", str(SCRATCH_LIMIT), "--tmpfs", "/tmp"]
    folders, optional = readable(), [f"/etc/{name}" for name in _ETC] + ["/sys/devices/system/cpu"]
    for parent in _parents([*folders, *optional, str(work)]):  # bwrap would make them 0700
        line += ["--perms", "0755", "--dir", parent]
    for folder in folders:
        line += ["--ro-bind", folder, folder]
    for link in _SYSTEM:  # merged /usr: /lib, /bin, ... are links into it
        if os.path.islink(link):
            line += ["--symlink", os.readlink(link), link]
    for path in optional:
        line += ["--ro-bind-try", path, path]
    line += ["--bind", str(work), str(work), "--chdir", "/tmp"]
    import pstutor

    environment = {"HOME": "/tmp", "TMPDIR": "/tmp", "LANG": "C.UTF-8", WALLS: "1",
                   "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
                   "PYTHONPATH": str(Path(pstutor.__file__).resolve().parent.parent),
                   "PYTHONNOUSERSITE": "1", "IPYTHONDIR": "/tmp/.ipython",
                   "MPLCONFIGDIR": "/tmp/.matplotlib", "MPLBACKEND": "agg"}
    for name, value in environment.items():
        line += ["--setenv", name, value]
    inner = [sys.executable, "-m", "pstutor.sandbox", "--fence", str(work), "--", *argv]
    return [*line, "--", *inner]


def _parents(folders: Sequence[str]) -> list[str]:
    """The folders above `folders` that bwrap has to make (not / and not /tmp, its own), outermost first."""
    found = {str(parent) for folder in folders for parent in Path(folder).parents}
    return sorted(found - {"/", "/tmp"}, key=lambda path: (path.count(os.sep), path))


def own_user_namespace(outer: int) -> int:
    """A descriptor on a new user namespace in which SANDBOX_UID is the unused uid `outer` and
    root is root (so bwrap can set the walls up).

    Why: where the grader runs as root, bwrap's own namespace maps the kernel to root, and root
    owns even a non-dumpable process's /proc files, so the kernel could read the seal key out
    of its own memory. As `outer` it cannot. Only root may map ids other than its own, so only
    root needs this.
    """
    child = os.fork()
    if child == 0:  # make the namespace, then wait stopped while the parent maps ids into it
        if _libc().unshare(_CLONE_NEWUSER) == 0:
            os.kill(os.getpid(), signal.SIGSTOP)
        os._exit(1)
    try:
        _, status = os.waitpid(child, os.WUNTRACED)
        if not os.WIFSTOPPED(status):
            raise SandboxError("could not make a user namespace for the submission (unshare failed)")
        for kind in ("uid", "gid"):
            Path(f"/proc/{child}/{kind}_map").write_text(f"0 0 1\n{SANDBOX_UID} {outer} 1\n")
        namespace = os.open(f"/proc/{child}/ns/user", os.O_RDONLY)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(child, 0)
    os.set_inheritable(namespace, True)
    return namespace


def _give(top: str, owner: int) -> None:
    """Make `top` and everything beneath it on the same file system `owner`'s (links themselves,
    not what they name; not what is bound beneath it, such as a course clone in /tmp)."""
    device = os.lstat(top).st_dev
    for folder, subfolders, files in os.walk(top):
        subfolders[:] = [name for name in subfolders if os.lstat(os.path.join(folder, name)).st_dev == device]
        os.lchown(folder, owner, owner)
        for name in [*subfolders, *files]:
            os.lchown(os.path.join(folder, name), owner, owner)


def _drop_root() -> None:
    """Inside the walls, once they stand: from root of the namespace to SANDBOX_UID, no groups.
    The scratch folders, which bwrap made as root, become SANDBOX_UID's, with anything this
    step's own start left in them."""
    for scratch in ("/tmp", "/dev/shm"):
        _give(scratch, SANDBOX_UID)
    os.setgroups([])
    os.setgid(SANDBOX_UID)
    os.setuid(SANDBOX_UID)


def fence_writes(writable: Sequence[str], sockets: Sequence[str] = ()) -> None:
    """From now on, this process and its children may write only beneath `writable`, and
    beneath `sockets` only make and remove Unix sockets (no file there can grow)."""
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
        rules = [(path, access) for path in writable]
        rules += [(path, _MAKE_SOCK | _REMOVE_FILE) for path in sockets]
        for path, allowed in rules:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                rule = _PathBeneathAttr(allowed, fd)
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
    """Limits that the kernel and its children inherit: file size, open files, tasks, no core dumps,
    and not the address-space cap of the notebook client that started it."""
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT, FILE_SIZE_LIMIT))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    address_space = resource.getrlimit(resource.RLIMIT_AS)[1]  # the notebook client caps its own
    resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    cap = OPEN_FILES_LIMIT if hard == resource.RLIM_INFINITY else min(OPEN_FILES_LIMIT, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, cap), cap))
    tasks = _user_tasks() + TASKS_OVER_CURRENT
    soft, hard = resource.getrlimit(resource.RLIMIT_NPROC)
    if hard == resource.RLIM_INFINITY or hard > tasks:
        resource.setrlimit(resource.RLIMIT_NPROC, (tasks, tasks))


def _user_tasks() -> int:
    """Threads of this user running now (RLIMIT_NPROC counts them all, per real user)."""
    uid, count = os.getuid(), 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    count += len(os.listdir(f"/proc/{entry}/task"))
            except OSError:
                continue
    return count


def main(argv: list[str]) -> None:
    """`python -m pstutor.sandbox [--no-walls] [--cgroup=DIR ...] [--cpus=LIST] DIR -- CMD...`: run CMD
    walled in (`--fence DIR` is the step inside the walls)."""
    if argv[:1] == ["--fence"]:
        if os.getuid() == 0:
            _drop_root()
        if landlock_version() >= 1:
            fence_writes(["/dev", "/tmp"], sockets=[argv[1]])
        os.execvp(argv[3], argv[3:])
    options = [arg for arg in argv[: argv.index("--") if "--" in argv else 0] if arg.startswith("--")]
    rest = argv[len(options):]
    if len(rest) < 3 or rest[1] != "--":
        sys.exit("usage: python -m pstutor.sandbox [--no-walls] [--cgroup=DIR ...] [--cpus=LIST] DIR "
                 "-- CMD...")
    from pstutor.grading.limits import join

    join([option.split("=", 1)[1] for option in options if option.startswith("--cgroup=")])
    cpus = [option.split("=", 1)[1] for option in options if option.startswith("--cpus=")]
    if cpus and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {int(cpu) for cpu in cpus[0].split(",")})
    _limit()
    if "--no-walls" in options:
        os.execvp(rest[2], rest[2:])
    program = shutil.which("bwrap")
    if program is None:
        sys.exit("pstutor.sandbox: bubblewrap (bwrap) is not installed or cannot run here")
    userns = None
    if os.geteuid() == 0:
        outer = OUTER_UID_BASE + os.getpid()  # unique while this sandbox runs
        _give(rest[0], outer)  # the key and the connection file in it
        userns = own_user_namespace(outer)
    os.execv(program, command(Path(rest[0]), rest[2:], program=program, userns=userns))


if __name__ == "__main__":
    main(sys.argv[1:])
