"""The strategy comparison behind lesson 9 and `pstutor compare`.

`compare()` trains one small model under each strategy, each in a fresh process (so that
every strategy starts from a clean TensorFlow runtime, and logical CPU devices can still be
configured), and returns one record per strategy. The set-ups are alike: every worker is a
process of its own (MWMS: two worker processes; the parameter server: two worker processes,
one ps process and the coordinator), every run reads one stream shuffled with a fixed seed
(two workers split it), and start-up (until the strategy and the model are ready) is timed
apart from the warm-up (tracing).
`run_workers()` runs a program as several local worker processes, each with its own
`TF_CONFIG`, which is what `MultiWorkerMirroredStrategy` needs; `run_program()` runs one
program in a fresh process.

No orphans: children are `processes.Child`ren, stopped when the run ends, fails, times out
or is interrupted (Ctrl-C), at interpreter exit, and they end themselves when this process
is killed; their output lives in anonymous files that nothing outlives.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import json
import textwrap
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from pstutor import compare_worker
from pstutor.language import say
from pstutor.measured import FOLDER, measurement
from pstutor.processes import Child, stop
from pstutor.tables import align, text_width, value_word, word
from pstutor.tf_config import cluster_dict, make_tf_config

STRATEGIES = ("none", "mirrored", "ps", "mwms")
NAMES = {
    "none": "no strategy",
    "mirrored": "MirroredStrategy",
    "ps": "ParameterServerStrategy",
    "mwms": "MultiWorkerMirroredStrategy",
}
TRAINING = {"none": "-", "mirrored": "sync", "ps": "async", "mwms": "sync"}
RESULTS = FOLDER / "compare_strategies.json"  # written by benchmarks/compare_strategies.py
COLUMNS = ("strategy", "training", "replicas", "global_batch", "examples_per_s", "steps_per_s",
           "loss", "startup_s", "warmup_s", "changed_lines")
# what a record holds besides the table's columns
DETAILS = ("steps_per_execution", "examples", "seconds", "processes", "loss_after_examples")


class CompareError(RuntimeError):
    """A run failed or took too long; the message names it and quotes its last output."""


@dataclasses.dataclass(frozen=True)
class WorkerRun:
    """What one worker process of `run_workers` did."""

    task_id: int
    returncode: int
    output: str


def compare(
    strategies: Iterable[str] = STRATEGIES, examples: int = 8192, *, batch_size: int = 32,
    learning_rate: float = 0.05, steps_per_execution: int = 1, min_seconds: float = 0.0,
    progress: Callable[[str], None] | None = None, timeout: float = 180.0,
) -> list[dict]:
    """Train the same model under each strategy, one fresh process each; one record per strategy.

    After a warm-up (tracing), `examples` are trained and timed, then more whole epochs of
    `examples` until at least `min_seconds` were measured (a rate measured over a few
    milliseconds is noise). `batch_size` is per replica and the learning rate is scaled by
    the number of replicas. Records hold: strategy, training (sync/async), replicas,
    global_batch, examples_per_s, steps_per_s, loss (on all the data, after the warm-up and
    the first `examples`), startup_s (from launch until the strategy and the model are ready),
    warmup_s, changed_lines (strategy-specific lines, compared with no strategy), and
    steps_per_execution, examples and seconds (what was timed), processes (how many the run
    started) and loss_after_examples. Steps are whole executions of each strategy's global
    batch, so the loss comes after as many examples for every strategy only where 512 and
    `examples` are multiples of every global batch x `steps_per_execution` (the defaults are);
    loss_after_examples says how many, and the progress line prints it.
    """
    names = check_strategies(strategies)
    for label, value in (("examples", examples), ("batch_size", batch_size),
                         ("steps_per_execution", steps_per_execution), ("timeout", timeout),
                         ("learning_rate", learning_rate)):
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            raise ValueError(say(f"{label} must be a positive number, not {value!r}.",
                                 f"{label} 必须是正数，而不是 {value!r}。"))
    if isinstance(min_seconds, bool) or not isinstance(min_seconds, int | float) or not min_seconds >= 0:
        raise ValueError(say(f"min_seconds must be zero or more, not {min_seconds!r}.",
                             f"min_seconds 必须大于或等于零，而不是 {min_seconds!r}。"))
    report = progress or (lambda line: None)
    results = []
    for number, name in enumerate(names, start=1):
        prefix = f"[{number}/{len(names)}] {name:8}"
        report(say(f"{prefix} starting ({NAMES[name]}) ...", f"{prefix} 正在启动（{_zh_name(name)}）……"))
        args = ["bench", name, "--examples", str(examples), "--batch-size", str(batch_size),
                "--learning-rate", str(learning_rate), "--steps-per-execution", str(steps_per_execution),
                "--min-seconds", str(min_seconds)]
        result = _bench(name, args, timeout)
        result.update(training=TRAINING[name], changed_lines=changed_lines(name))
        results.append({key: result[key] for key in (*COLUMNS, *DETAILS)})
        report(say(
            f"{prefix} {result['examples_per_s']:,.0f} examples/s, loss {result['loss']:.4f} after "
            f"{result['loss_after_examples']:,} examples, start-up {result['startup_s']:.1f} s",
            f"{prefix} 每秒 {result['examples_per_s']:,.0f} 个样本，训练 {result['loss_after_examples']:,} "
            f"个样本后损失 {result['loss']:.4f}，启动 {result['startup_s']:.1f} 秒"))
    return results


def stored_results() -> dict:
    """The comparison `benchmarks/compare_strategies.py` measured, shipped with pstutor.

    A comparison worth reading takes minutes (several rounds of every strategy, each timed
    for at least a second), too long for a lesson; the lesson reads this record of one. It
    holds the machine, the date, the settings and every run (`runs`: one record of
    `compare()` per strategy and round, with its `round`).
    """
    return measurement("compare_strategies")


def group_runs(runs: Iterable[dict]) -> list[dict]:
    """One record per strategy and `steps_per_execution` (first-seen order), the rounds' values as lists.

    Fixed fields (strategy, training, replicas, global_batch, steps_per_execution,
    changed_lines, processes) are kept once; measured ones (examples_per_s, steps_per_s, loss,
    startup_s, warmup_s, seconds) become lists with one value per round.
    """
    fixed = ("strategy", "training", "replicas", "global_batch", "steps_per_execution", "changed_lines",
             "processes")
    measured = ("examples_per_s", "steps_per_s", "loss", "startup_s", "warmup_s", "seconds")
    groups: dict[tuple, dict] = {}
    for run in runs:
        group = groups.setdefault((run["strategy"], run["steps_per_execution"]),
                                  {**{key: run[key] for key in fixed}, **{key: [] for key in measured}})
        for key in measured:
            group[key].append(run[key])
    return list(groups.values())


def check_strategies(strategies: Iterable[str]) -> list[str]:
    """The names as a list, or a ValueError naming the unknown ones and the known ones."""
    names = [strategies] if isinstance(strategies, str) else list(strategies)
    unknown = [n for n in names if n not in STRATEGIES]
    if unknown or not names:
        raise ValueError(say(
            f"Unknown strategy name(s): {', '.join(map(repr, unknown)) or '(none given)'}. "
            f"Choose from: {', '.join(STRATEGIES)}.",
            f"未知的策略名称：{', '.join(map(repr, unknown)) or '（未给出）'}。"
            f"可选：{', '.join(STRATEGIES)}。"))
    return names


def strategy_code(name: str) -> list[str]:
    """The lines that create one strategy in the comparison (the body of its maker)."""
    check_strategies([name])
    source = textwrap.dedent(inspect.getsource(compare_worker.MAKERS[name]))
    body = source.split('"""', 2)[2]  # after the docstring
    return [line for line in textwrap.dedent(body).splitlines() if line.strip()]


def changed_lines(name: str) -> int:
    """How many lines of `name`'s strategy code are new compared with no strategy."""
    diff = difflib.ndiff(strategy_code("none"), strategy_code(name))
    return sum(line.startswith("+ ") for line in diff)


def format_table(results: Sequence[dict]) -> str:
    """The records as an aligned text table in the course's language (no pandas needed)."""
    headers = [word(column) for column in COLUMNS]
    rows = [(r["strategy"], value_word(r["training"]), str(r["replicas"]),
             str(r["global_batch"]),
             f"{r['examples_per_s']:,.0f}", f"{r['steps_per_s']:,.0f}", f"{r['loss']:.4f}",
             f"{r['startup_s']:.1f}", f"{r['warmup_s']:.1f}", str(r["changed_lines"])) for r in results]
    table = [headers, *rows]
    rule = ["-" * max(text_width(line[i]) for line in table) for i in range(len(headers))]
    return "\n".join(align([headers, rule, *rows], [i >= 2 for i in range(len(headers))]))  # numbers right


def _zh_name(name: str) -> str:
    """The strategy's name for Chinese progress lines: class names stay, "no strategy" is said."""
    return "不使用策略" if name == "none" else NAMES[name]


def run_workers(program: str | Path, num_workers: int = 2, *, args: Sequence[str] = (),
                cwd: str | Path | None = None, timeout: float = 180.0) -> list[WorkerRun]:
    """Run `program` as `num_workers` local processes, each with its own `TF_CONFIG`; wait for all.

    The workers find each other on free loopback ports. If one fails, the others are
    stopped (they would wait for it forever in a collective); on timeout or Ctrl-C all are
    stopped and the error is raised.
    """
    if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 1:
        raise ValueError(say(f"num_workers must be at least 1, not {num_workers!r}.",
                             f"num_workers 至少为 1，而不是 {num_workers!r}。"))
    command = ["script", str(Path(program).resolve()), *args]
    return _run_group([command] * num_workers, cwd, timeout)


def run_program(program: str | Path, *, args: Sequence[str] = (), cwd: str | Path | None = None,
                timeout: float = 180.0) -> WorkerRun:
    """Run `program` in one fresh, guarded process (no `TF_CONFIG`); wait for it, like `run_workers`."""
    with ProcessGroup() as group:
        group.spawn(["script", str(Path(program).resolve()), *args], {}, cwd)
        group.wait(timeout)
        return group.runs()[0]


def _bench(name: str, args: list[str], timeout: float) -> dict:
    """Run one strategy's benchmark; return its RESULT record.

    mwms: two worker processes. ps: two worker processes and one ps process (servers) and the
    coordinator, the process that measures; the servers are stopped once it has finished.
    """
    if name == "mwms":
        runs = _run_group([args] * compare_worker.WORKERS, None, timeout)
        processes = len(runs)
    else:
        with ProcessGroup() as group:
            if name == "ps":
                cluster = cluster_dict(compare_worker.WORKERS, 1, chief=True)
                for job in ("worker", "ps"):
                    for index in range(len(cluster[job])):
                        config = make_tf_config(cluster, job, index).to_json()
                        group.spawn(["task_server"], {"TF_CONFIG": config})
                env = {"TF_CONFIG": make_tf_config(cluster, "chief", 0).to_json()}
            else:
                env = {}
            measuring = group.spawn(args, env)
            group.wait(timeout, until=[measuring])
            everyone = group.runs()
            processes = len(everyone)
            failed = group.failed if group.failed is not None else next(  # a server that failed first
                (run.task_id for run in everyone if run.returncode not in (None, 0)), measuring)
            runs = [everyone[measuring] if everyone[measuring].returncode == 0 else everyone[failed]]
    for run in runs:
        if run.returncode != 0:
            code, tail = run.returncode, run.output[-2000:]
            raise CompareError(say(f"{name} failed (process {run.task_id}, exit code {code}):\n{tail}",
                                   f"{name} 运行失败（进程 {run.task_id}，退出码 {code}）：\n{tail}"))
    line = next((line for line in runs[0].output.splitlines() if line.startswith("RESULT ")), None)
    if line is None:
        raise CompareError(say(f"{name} printed no result:\n{runs[0].output[-2000:]}",
                               f"{name} 没有输出结果：\n{runs[0].output[-2000:]}"))
    return {**json.loads(line[len("RESULT "):]), "processes": processes}


def _run_group(commands: list[list[str]], cwd: str | Path | None, timeout: float) -> list[WorkerRun]:
    cluster = cluster_dict(len(commands))
    with ProcessGroup() as group:
        for index, command in enumerate(commands):
            group.spawn(command, {"TF_CONFIG": make_tf_config(cluster, "worker", index).to_json()}, cwd)
        group.wait(timeout)
        return group.runs()


class ProcessGroup:
    """`pstutor.compare_worker` children (benchmarks or programs) that never outlive this process."""

    def __init__(self) -> None:
        self._children: list[Child] = []
        self._launched = time.time()
        self.failed: int | None = None  # the child whose failure made `wait` stop the others

    def spawn(self, args: Sequence[str], env: dict[str, str], cwd: str | Path | None = None) -> int:
        """Start one child; its index. Benchmark children learn when the group started (start-up time)."""
        if not self._children:
            self._launched = time.time()
        args = list(args)
        if args and args[0] == "script":  # a program: the child entry point runs it as __main__
            role, args = "program", args[1:]
        elif args == ["task_server"]:  # a worker or ps server of a cluster, until it is stopped
            role, args = "task_server", []
        else:
            role, args = "compare", [*args, "--launched", repr(self._launched)]
        child = Child(role, args, env={"TF_CONFIG": None, **env}, cwd=cwd)
        self._children.append(child.start())
        return len(self._children) - 1

    def wait(self, timeout: float, until: Sequence[int] | None = None) -> None:
        """Wait until the children `until` (default: all) end, or one child fails (the rest are
        then stopped); raise on timeout."""
        deadline = time.monotonic() + timeout
        waited = [self._children[i] for i in until] if until is not None else self._children
        while any(c.running for c in waited):
            failed = [i for i, c in enumerate(self._children) if c.returncode not in (None, 0)]
            if failed:  # the others are stopped now, and a stopped server exits 143: not its failure
                self.failed = failed[0]
                stop(self._children)
                return
            if time.monotonic() > deadline:
                stop(self._children)
                tail = waited[0].output()[-2000:] if waited else ""
                raise CompareError(say(f"no result within {timeout:.0f} s; last output:\n{tail}",
                                       f"{timeout:.0f} 秒内没有结果；最后的输出：\n{tail}"))
            time.sleep(0.05)

    def runs(self) -> list[WorkerRun]:
        """Exit code and output of every child (after `wait`)."""
        return [WorkerRun(i, c.returncode, c.output()) for i, c in enumerate(self._children)]

    def close(self) -> None:
        """Stop every child still running: SIGTERM, then SIGKILL after 5 s. Safe to call twice."""
        for child in self._children:
            child.close()

    def __enter__(self) -> ProcessGroup:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
