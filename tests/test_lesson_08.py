"""Lesson 8's train.py is a program a learner can take to a real cluster, in either language, and
the lesson's run leaves no process behind, whatever ends it."""

import ast
import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from conftest import ROOT, clean_env, descendants, wait_gone

from pstutor import build, literals

SOURCE = ROOT / "lessons" / "08_real_cluster.md"


def _programs() -> tuple[str, str]:
    """The English train.py of the lesson and its Chinese twin from the strings table."""
    cells = build.read_lesson(SOURCE)
    [table] = [literals.parse_table(c.source) for c in cells if c.kind == "strings"]
    [english] = [key for key in table if key.lstrip().startswith("# train.py")]
    return textwrap.dedent(english), textwrap.dedent(table[english])


def _imports(program: str) -> set[str]:
    tree = ast.parse(program)
    names = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
             for alias in node.names}
    return names | {node.module.split(".")[0] for node in ast.walk(tree)
                    if isinstance(node, ast.ImportFrom) and node.module}


def test_the_chinese_train_py_is_the_same_program_with_chinese_messages():
    english, chinese = _programs()
    assert literals.program_shape(english) == literals.program_shape(chinese)
    assert english != chinese and "协调器：" in chinese


def test_train_py_needs_only_tensorflow_and_numpy_and_picks_its_role_from_tf_config():
    for program in _programs():
        assert _imports(program) == {"os", "socket", "numpy", "tensorflow"}, "no pstutor on a real machine"
        assert "TFConfigClusterResolver()" in program and "resolver.task_type" in program
        assert "resolver.task_id" in program and '"evaluator"' in program
        # Keras 2 is chosen before TensorFlow is imported
        assert program.index("TF_USE_LEGACY_KERAS") < program.index("import tensorflow")


def test_train_py_restores_on_start_and_reads_and_writes_through_the_coordinator():
    english, _ = _programs()
    assert "manager.latest_checkpoint" in english and "checkpoint.restore(" in english
    assert "options=on_chief" in english.split("checkpoint.restore(", 1)[1].split("\n", 1)[0]
    assert "manager.save(options=on_chief)" in english and "initial_epoch=done" in english


def test_a_multi_line_literal_keeps_its_lines_in_the_chinese_code():
    code = "PROGRAM = '''\\\nprint(\"hi\")\n'''\nprint(len(PROGRAM))\n"
    chinese = literals.translate(code, {'print("hi")\n': 'print("你好")\n'})
    assert chinese == "PROGRAM = '''\\\nprint(\"你好\")\n'''\nprint(len(PROGRAM))\n"
    assert literals.program_shape(code) == literals.program_shape(chinese)
    escaped = literals.translate("x = '''\\\na\n'''\n", {"a\n": "甲 \\ 乙\n"})  # a backslash survives
    assert ast.literal_eval(escaped.split("= ", 1)[1]) == "甲 \\ 乙\n"


def _lesson_cell(marker: str) -> str:
    """The lesson's one code cell that contains `marker`."""
    [cell] = [c.source for c in build.read_lesson(SOURCE) if c.kind == "code" and marker in c.source]
    return cell


# A stand-in for the lesson's kernel: the lesson's own start/stop code (section 6) and its run cell,
# with tasks that print READY and sleep (the coordinator never reports a checkpoint, so the run
# cell waits until it is interrupted or killed).
_KERNEL = textwrap.dedent('''\
    import ctypes, os, signal, subprocess, sys, time
    from pathlib import Path

    work = Path(sys.argv[1])
    launch_dir = work / "launch"
    launch_dir.mkdir()
    machines = {name: work / name for name in ("chief-0", "worker-0", "worker-1", "ps-0", "evaluator-0")}
    SLEEPER = "import time; print('READY', flush=True); time.sleep(600)"
    for name, folder in machines.items():
        folder.mkdir()
        (launch_dir / f"start-{name}.sh").write_text(f'exec python -c "{SLEEPER}"\\n')
    (machines["evaluator-0"] / "train.py").write_text(SLEEPER)
    tf_configs = {"chief-0": "{}", "evaluator-0": "{}"}
    exec(sys.argv[2])
    exec(sys.argv[3])
''')


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_the_run_leaves_no_task_when_interrupted_or_when_the_kernel_dies(tmp_path, sig):
    """SIGINT (an interrupted cell): `finally` stops every task, coordinator and evaluator included.
    SIGKILL (a crashed kernel): PR_SET_PDEATHSIG ends them, though train.py never imports pstutor."""
    setup, run = _lesson_cell("def end_with_this_kernel"), _lesson_cell("tasks = {}  # every process")
    tasks: list[int] = []
    kernel = subprocess.Popen([sys.executable, "-c", _KERNEL, str(tmp_path), setup, run],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=clean_env())
    try:
        deadline = time.monotonic() + 60
        while len(tasks := descendants(kernel.pid)) < 5 and time.monotonic() < deadline:
            assert kernel.poll() is None, kernel.communicate()
            time.sleep(0.1)
        assert len(tasks) == 5, tasks  # three servers, the evaluator and the coordinator
        time.sleep(0.5)
        kernel.send_signal(sig)
        kernel.wait(timeout=30)
        assert wait_gone(tasks) == [], "a task outlived the notebook's kernel"
    finally:
        for pid in {*tasks, *descendants(kernel.pid)}:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if kernel.poll() is None:
            kernel.kill()
            kernel.wait()
