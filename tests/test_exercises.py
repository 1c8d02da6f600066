"""Exercises: every solution passes its checks, every student copy runs and says "not done",
and every wrong answer written in the source is caught by its check with the expected hint
and a failure line that says what was found."""

import ast
import itertools
import json
import re
from pathlib import Path

import pytest
from conftest import ROOT

from pstutor import build, manifest, metadata
from pstutor.checks import MIME

EXERCISES = build.exercise_paths()
CHECK_CALL = metadata.CHECK_CALL
CHECKS = sorted((Path(build.__file__).parent / "checks").glob("ex*.py"))

# The requirements each task's text states, by the hint id its check gives when one is not met.
# Each has a wrong answer in the exercise source (`<!-- cell: wrong task=k expect=ID -->`) that
# fails that requirement and no earlier one. Left out here: type guards (`strategy` is a
# ParameterServerStrategy, ...); requirements that follow from an earlier one (02.1 `rows` and
# `placement`: 4 shards of a 1000-row table on 2 ps are always 250 rows, 2 per ps); and 01.1
# `servers` (a strategy on a task without a server blocks while connecting, so the wrong answer
# would hang the kernel instead of reaching the check).
REQUIREMENTS = {
    "01.1": ["worker-count", "ps-count", "resolver", "same-cluster"],
    "01.2": ["string", "invalid", "chief-missing", "addresses", "task-type", "task-index"],
    "01.3": ["on-ps", "device", "value"],
    "02.1": ["scope", "shape", "shard-count", "bias-whole", "bias-on-ps"],
    "02.2": ["tf-function", "shape", "row-order", "whole-table"],
    "02.3": ["one-per-ps", "small-split", "scales"],
    "03.1": ["repeat", "batch-size", "shuffle", "architecture", "scope", "legacy", "optimizer", "loss",
             "steps-per-execution", "epochs", "steps"],
    "03.2": ["fresh", "checkpoints", "tensorboard", "restore", "order"],
    "04.1": ["vocabulary", "lookup-scope", "batch", "shuffle", "repeat"],
    "04.2": ["tf-function", "returns-loss", "apply", "loss"],
    "04.3": ["remote-values", "join"],
    "05.1": ["contexts", "strategy-calls", "batch", "repeat", "shuffle"],
    "05.2": ["pipelines", "pipeline-id", "replicas", "per-replica"],
    "05.3": ["not-sharded", "same-shard", "overlap", "coverage"],
    "06.1": ["metric", "threshold", "metric-on-ps", "example-count"],
    "06.2": ["scope", "no-shards", "id-visits", "not-built", "evaluated"],
    "06.3": ["remote-values", "one-per-shard", "returned", "sum", "shard"],
    "07.1": ["killed-ps", "killed-early", "killed-late", "restart"],
    "07.2": ["scope", "optimizer"],
    "08.1": ["strings", "invalid", "same-cluster", "chief-missing", "addresses", "task-twice",
             "task-missing"],
    "08.2": ["tf-config-resolver", "task-type", "same-resolver"],
    "08.3": ["io-device", "io-device-chief", "saved", "contents", "new-variables", "on-ps", "restored"],
    "09.1": ["strategy", "devices", "global-batch", "lr-scaled", "dataset-batch", "scope", "optimizer-rate",
             "fit"],
    "09.2": ["chief", "chief-job", "no-chief-job", "one-chief", "chief-path", "everyone-saves",
             "separate-paths"],
    "09.3": ["keys", "names", "preemptible", "too-large", "per-example", "ratio-direction", "measured"],
}


def _tasks(source) -> list[str]:
    return [f"{source.stem[:2]}.{r.task}" for c in build.read_lesson(source) if c.kind == "code"
            for r in build.answer_regions(c.source)]


def _records(notebook: dict) -> dict[str, dict]:
    """The check verdicts a notebook shows, by task."""
    found = {}
    for cell in notebook["cells"]:
        for output in cell.get("outputs", []):
            record = output.get("data", {}).get(MIME)
            if record:
                found[record["task"]] = record
    return found


def test_every_lesson_has_an_exercise_and_points_to_it():
    lessons = {p.stem for p in build.lesson_paths()}
    assert {p.stem for p in EXERCISES} == lessons
    for lesson in build.lesson_paths():
        text = lesson.read_text(encoding="utf-8")
        assert f"exercises/en/{lesson.stem}.ipynb" in text and f"exercises/zh/{lesson.stem}.ipynb" in text


@pytest.mark.parametrize("source", EXERCISES, ids=lambda p: p.stem)
def test_each_task_is_checked_right_after_its_answer(source):
    tasks = _tasks(source)
    assert len(tasks) >= 2, "an exercise has at least two tasks"
    notebook = build.render(source, "en", "solution")
    calls = [CHECK_CALL.findall(c.source) for c in notebook.cells if c.cell_type == "code"]
    assert sorted(t for found in calls for t in found) == sorted(tasks), "one check cell per task"
    code = [c for c in notebook.cells if c.cell_type == "code"]
    for index, cell in enumerate(code):
        for task in cell.metadata.get("pstutor", {}).get("tasks", []):
            assert task in CHECK_CALL.findall(code[index + 1].source), f"{task}: check it in the next cell"


@pytest.mark.parametrize("source", EXERCISES, ids=lambda p: p.stem)
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_solution_passes_and_the_student_copy_is_not_done(source, lang):
    for variant, status in (("solution", "passed"), ("exercise", "not done")):
        path = build.notebook_path(source, lang, variant)
        records = _records(json.loads(path.read_text(encoding="utf-8")))
        assert sorted(records) == sorted(_tasks(source)), f"{path}: a check did not run"
        assert {r["status"] for r in records.values()} == {status}, f"{path}: {records}"


# Tasks whose answers change shared state (folders, a cluster's processes, step counters):
# each of their answers needs a fresh kernel (`fresh_kernel` in lessons/course.toml). The
# answers of every other task run one after another in one kernel, each followed by the check.
FRESH_KERNEL = {f"{lesson.number}.{task}" for lesson in manifest.read(ROOT).lessons
                for task in lesson.fresh_kernel}


def _answer_rounds(source) -> list[dict[str, list[tuple[str, str]]]]:
    """Wrong answers and correct alternatives (expected hint ""), grouped into executions."""
    per_task: dict[str, list[tuple[str, str]]] = {}
    for kind in ("wrong", "right"):  # a correct answer last: later tasks build on what it leaves
        for cell in build.read_lesson(source):
            if cell.kind == kind:
                per_task.setdefault(cell.task, []).append((cell.source, cell.expect))
    rounds: list[dict[str, list[tuple[str, str]]]] = []
    for task, answers in per_task.items():
        groups = [answers[i:i + 1] for i in range(len(answers))] \
            if f"{source.stem[:2]}.{task}" in FRESH_KERNEL else [answers]
        for index, group in enumerate(groups):
            if index == len(rounds):
                rounds.append({})
            rounds[index][task] = group
    return rounds


def _one_after_another(answers: list[str], check: str) -> str:
    """One answer cell that runs several answers, each but the last followed by its check."""
    return "\n".join(f"{code}\ndisplay({check})" for code in answers[:-1]) + "\n" + answers[-1]


def _records_in_order(notebook, task_id: str) -> list[dict]:
    return [output["data"][MIME] for cell in notebook.cells for output in cell.get("outputs", [])
            if output.get("data", {}).get(MIME, {}).get("task") == task_id]


@pytest.mark.parametrize("source", EXERCISES, ids=lambda p: p.stem)
def test_every_task_has_two_correct_alternatives(source):
    right = [f"{source.stem[:2]}.{c.task}" for c in build.read_lesson(source) if c.kind == "right"]
    assert all(right.count(task) >= 2 for task in _tasks(source)), f"{source.name}: {sorted(right)}"


def _expect_calls() -> list[tuple[Path, ast.Call]]:
    return [(path, node) for path in CHECKS for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "expect"]


def _requirement_texts() -> set[str]:
    """Every requirement statement (what passes) the checks write as plain text, in both languages."""
    texts = set()
    for _, call in _expect_calls():
        what = call.args[1]
        if isinstance(what, ast.Tuple):
            texts |= {part.value for part in what.elts if isinstance(part, ast.Constant)}
    return texts


def test_every_requirement_of_every_task_has_a_wrong_answer():
    wrong: dict[str, list[str]] = {}
    for source in EXERCISES:
        for cell in build.read_lesson(source):
            if cell.kind == "wrong":
                wrong.setdefault(f"{source.stem[:2]}.{cell.task}", []).append(cell.expect)
    tasks = sorted(task for source in EXERCISES for task in _tasks(source))
    assert sorted(REQUIREMENTS) == tasks, "a task without its list of requirements"
    for task, requirements in REQUIREMENTS.items():
        missing = [name for name in requirements if name not in wrong.get(task, [])]
        assert not missing, f"{task}: no wrong answer fails {missing}"
        assert len(wrong[task]) >= len(requirements), task
        module = (CHECKS[0].parent / f"ex{task[:2]}.py").read_text(encoding="utf-8")
        assert all(f'"{name}"' in module for name in requirements), f"{task}: a hint its check never gives"


def test_every_requirement_says_what_was_found_in_both_languages():
    calls = _expect_calls()
    assert len(calls) > 80
    for path, call in calls:
        where = f"{path.name}:{call.lineno}"
        assert len(call.args) == 5 and not call.keywords, f"{where}: expect(condition, what, id, hint, found)"
        what, found = call.args[1], call.args[4]
        assert isinstance(found, ast.Tuple) and len(found.elts) == 2, f"{where}: found in en and zh"
        assert ast.dump(found) != ast.dump(what), f"{where}: found repeats the requirement"


def _failure_line(detail: str) -> str:
    """The found part of a record's detail: `✗ FOUND — HINT`."""
    return detail.removeprefix("✗ ").split(" — ", 1)[0]


@pytest.mark.parametrize("source", EXERCISES, ids=lambda p: p.stem)
def test_wrong_answers_are_caught_and_correct_alternatives_pass(source, tmp_path):
    solution = build.render(source, "en", "solution")
    code = [cell for cell in solution.cells if cell.cell_type == "code"]
    checks = {task: code[i + 1].source for i, cell in enumerate(code)
              for task in cell.metadata.get("pstutor", {}).get("tasks", [])}
    requirements = _requirement_texts()
    for round_ in _answer_rounds(source):
        prefix = source.stem[:2]
        answers = {task: _one_after_another([code for code, _ in group], checks[f"{prefix}.{task}"])
                   for task, group in round_.items()}
        notebook = build.render(source, "en", "solution", answers=answers)
        build.execute(notebook, tmp_path)
        for task, group in round_.items():
            records = _records_in_order(notebook, f"{prefix}.{task}")
            assert len(records) == len(group), (task, records)
            for (answer, expected), record in zip(group, records, strict=True):
                if expected:
                    assert (record["status"], record["hint"]) == ("failed", expected), (record, answer)
                    assert record["detail"].startswith("✗ "), record
                    for lang in ("en", "zh"):
                        detail = record["details"][lang]
                        assert detail.startswith("✗ ") and " — " in detail, record
                        assert _failure_line(detail) not in requirements, f"{lang}: nothing found: {record}"
                else:
                    assert record["status"] == "passed", (record, answer)


def test_a_crashed_answer_cell_gives_a_clear_failure_in_the_check_cell(tmp_path):
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell('import pstutor\npstutor.set_language("en")'),
        nbformat.v4.new_code_cell("def is_chief(resolver):\n    return True\nsave_path = undefined_helper"),
        nbformat.v4.new_code_cell('pstutor.check("09.2", is_chief=is_chief, save_path=save_path)'),
    ])
    NotebookClient(notebook, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    answer, check = notebook.cells[1].outputs, notebook.cells[2].outputs
    assert answer[0]["ename"] == "NameError"  # the ✏️ cell shows its own error
    assert [output["output_type"] for output in check] == ["display_data"], check
    text = check[0]["data"]["text/plain"]
    assert "❌ Task 09.2" in text and "✗ `save_path` is not defined" in text
    assert check[0]["data"][MIME]["hint"] == "answer-missing"


@pytest.mark.parametrize("source", EXERCISES, ids=lambda p: p.stem)
def test_both_languages_have_the_same_headings_and_terms(source):
    cells = build.read_lesson(source)
    for en, zh in itertools.pairwise(cells):
        if en.kind == "en":
            levels = [re.findall(r"^(#+) ", cell.source, re.M) for cell in (en, zh)]
            assert levels[0] == levels[1], f"{source.name}: {en.source[:60]!r}"
            prose = re.sub(r"`[^`]*`", "", zh.source)
            assert "epoch" not in prose.lower(), f"{source.name}: 'epoch' is 周期 in Chinese prose"


_ALLOCATED_STRATEGY = """
import socket

import pstutor
pstutor.setup()
import tensorflow as tf

listeners = [socket.create_server(("127.0.0.1", 0)) for _ in range(3)]  # they listen, nothing more
addresses = [f"127.0.0.1:{listener.getsockname()[1]}" for listener in listeners]
spec = tf.train.ClusterSpec({"worker": addresses[:2], "ps": addresses[2:]})
resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(spec, rpc_layer="grpc")
strategy = object.__new__(tf.distribute.ParameterServerStrategy)  # allocated, never created
strategy._cluster_resolver = resolver
result = pstutor.check("01.1", resolver=resolver, strategy=strategy)
print(result.status, result.hint_id)
"""


def test_sockets_that_only_listen_and_a_strategy_never_created_fail_task_01_1():
    """A wrong answer the exercise source cannot hold (task 3 runs after it and needs a working
    strategy): the check runs an operation on each task instead of trusting an open port."""
    from conftest import run_python

    result = run_python(_ALLOCATED_STRATEGY)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines()[-1] == "failed strategy", result.stdout
