"""A write-fence for code the teacher did not write: `python -m pstutor.sandbox DIR -- CMD...`
runs CMD (a student's kernel, when grading) so that it can read everything but create,
change or delete files only inside DIR (and in /dev, for /dev/null and friends).

It uses Linux Landlock (kernel 5.13+), which any unprivileged process may apply to itself
and its children, so nothing needs root or a container. Where Landlock is missing the
grader refuses to run unless told to go ahead without protection.
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys

# System call numbers (the same on x86_64 and aarch64) and flags from <linux/landlock.h>.
_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38
_WRITE_FILE, _REMOVE_DIR, _REMOVE_FILE = 1 << 1, 1 << 4, 1 << 5
_MAKE_ANYTHING = sum(1 << bit for bit in range(6, 13))  # char, dir, reg, sock, fifo, block, sym
_REFER, _TRUNCATE = 1 << 13, 1 << 14  # Landlock ABI 2 and 3


class SandboxError(RuntimeError):
    """The write-fence could not be put in place."""


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


def main(argv: list[str]) -> None:
    """`python -m pstutor.sandbox DIR -- CMD...`: fence writes to DIR, then become CMD."""
    if len(argv) < 3 or argv[1] != "--":
        sys.exit("usage: python -m pstutor.sandbox DIR -- COMMAND [ARGS...]")
    fence_writes(os.path.abspath(argv[0]), "/dev")
    os.execvp(argv[2], argv[2:])


if __name__ == "__main__":
    main(sys.argv[1:])
