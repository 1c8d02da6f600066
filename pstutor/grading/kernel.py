"""`python -m pstutor.grading.kernel KEYFILE -f CONNECTION_FILE`: the kernel a submission runs in.

Before IPython starts (so before any cell), the kernel reads the seal key the grader wrote
for this submission, deletes the file, makes itself non-dumpable (its memory, and with it
the key, cannot then be read through /proc by its children or by itself: the files are
root's, and inside the walls it runs as a user that is not root) and installs the integrity hook
(`pstutor.grading.integrity`). Then it is an ordinary IPython kernel.
"""

from __future__ import annotations

import os
import sys

_PR_SET_DUMPABLE = 4


def _not_dumpable() -> None:
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)


def main(argv: list[str]) -> None:
    """Read and delete the key, wall the kernel in, then run IPython's kernel with the rest of `argv`."""
    keyfile, rest = argv[0], argv[1:]
    key = bytearray(64)
    with open(keyfile, "rb", buffering=0) as handle:
        length = handle.readinto(key)
    os.unlink(keyfile)
    _not_dumpable()
    from pstutor.grading import integrity

    integrity.install(memoryview(key)[:length], os.path.dirname(os.path.abspath(keyfile)))
    key[:] = bytes(len(key))  # the HMAC context holds what sealing needs; no copy of the key stays
    from ipykernel import kernelapp

    sys.argv = ["ipykernel_launcher", *rest]
    kernelapp.launch_new_instance()


if __name__ == "__main__":
    main(sys.argv[1:])
