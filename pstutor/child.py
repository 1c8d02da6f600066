"""The one program every child process of pstutor runs: `python -m pstutor.child ROLE ARGS...`.

It ties its life to the parent (`processes.guard_parent`), prepares TensorFlow
(`pstutor.setup()`: Keras 2, quiet logs), then plays its role:

- `task_server`: a worker or ps of a local cluster (`pstutor.task_server`);
- `program PATH ARGS...`: run a Python program as `__main__` (the sidecar evaluator, a
  lesson's multi-worker program);
- `compare ARGS...`: one run of the strategy comparison (`pstutor.compare_worker`).

A `TF_CONFIG` that TensorFlow could not use ends the child with one line and exit code 2.
Children of a pstutor process ignore Ctrl-C (their parent handles it and stops them).
"""

from __future__ import annotations

import os
import runpy
import signal
import sys
from collections.abc import Callable

from pstutor.processes import LANG_ENV, PARENT_ENV, guard_parent

USAGE = "usage: python -m pstutor.child {task_server | program PATH [ARGS...] | compare ARGS...}"


def _task_server(args: list[str]) -> int:
    from pstutor.task_server import serve

    return serve()


def _program(args: list[str]) -> int:
    if not args:
        raise SystemExit(USAGE)
    sys.argv = list(args)
    runpy.run_path(args[0], run_name="__main__")
    return 0


def _compare(args: list[str]) -> int:
    from pstutor.compare_worker import main as compare_main

    return compare_main(args)


ROLES: dict[str, Callable[[list[str]], int]] = {
    "task_server": _task_server, "program": _program, "compare": _compare}


def main(argv: list[str] | None = None) -> int:
    """Guard the parent, set up TensorFlow, play the role named by the first argument."""
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in ROLES:
        print(USAGE, file=sys.stderr)
        return 2
    if PARENT_ENV in os.environ:  # started by pstutor (a start script on a real machine is not)
        guard_parent()
        # Ctrl-C in a terminal reaches the whole process group: the parent handles it and
        # stops its children, which must not die first with a traceback of their own.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    from pstutor.language import LANGUAGES, set_language
    from pstutor.tf_config import TFConfigError, parse_tf_config

    set_language(os.environ.get(LANG_ENV) if os.environ.get(LANG_ENV) in LANGUAGES else "en")
    try:
        if argv[0] == "task_server":
            parse_tf_config()  # a wrong TF_CONFIG is named before TensorFlow takes seconds to load
        import pstutor

        pstutor.setup(verbose=os.environ.get("PSTUTOR_VERBOSE") == "1")
        return ROLES[argv[0]](argv[1:])
    except TFConfigError as err:
        print(f"pstutor: {err}", file=sys.stderr, flush=True)
        return 2


if __name__ == "__main__":
    sys.exit(main())
