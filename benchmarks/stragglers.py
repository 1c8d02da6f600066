"""Stragglers: synchronous training goes at the slowest worker's pace, asynchronous at the sum of all.

    python benchmarks/stragglers.py [--factors 1,2,4,8] [--workers 2] [--delay 0.1] [--rounds 5]
                                    [--round-seconds 1.5] [--dry-run]

Lesson 10 shows these results. Every worker's input waits `--delay` seconds (d) before each
batch, and the last worker's waits k times as long (`pstutor.slow_input.slowed`: a wait, no
CPU used). d is far longer than a training step's CPU time, so the waits set the rates and
not the load of the machine:

- synchronous (MultiWorkerMirroredStrategy, one process per worker): every step all-reduces
  the gradients of all the workers, so every step waits for the slowest one:
  W x B examples per k x d;
- asynchronous (ParameterServerStrategy: W worker processes, one ps, the coordinator in a
  process of its own): a worker that is free takes the next closure, so the fast workers
  do not wait: B/d x (W - 1) + B/(k x d).

Both run one training step per batch of B = 32 examples on every worker, the same small
model and the same custom loop; every step records when it ended (`tf.timestamp()` on the
worker), a parameter server step also when it began and on which worker it ran. After a
warm-up of `WARMUP_STEPS` steps of the slow worker, each round is a run of whole steps of
the slow worker lasting at least `--round-seconds` (its waits alone guarantee it), timed from
the end of one of its steps to the end of another, and every step that ended in between
counts. A parameter server round must end before the last closure began: until then no
worker was idle for want of work. The per-worker step times are measured under the parameter
server, where the workers do not wait for each other, and the two formulas are applied to
them: sync = W x B / the slowest worker's time, async = B x the sum of 1 / each time.

The script starts itself for each run (`--role sync` as every MWMS worker, `--role async` as
the parameter server's coordinator) through `pstutor.compare.run_workers` / `run_program`, and
the coordinator starts its cluster with `LocalCluster`: every process the benchmark starts
ends with it, also when it fails or is interrupted.

The results go to `pstutor/measurements/stragglers.json` with the settings, every round,
the machine, the date and the load average before and after; rebuild lesson 10 afterwards.
Takes about 3 minutes.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import math
import os
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path

from pstutor.language import say

FACTORS = (1.0, 2.0, 4.0, 8.0)
BATCH = 32  # examples per step on each worker
# Steps of the slow worker before the clock starts: the first traces and registers the step
# function, and meanwhile the input's buffers fill; with them full the next steps would not
# wait. MWMS buffers 3 batches (the prefetch(1) of `_worker_input`, and the distributed
# iterator's host and device buffers of one each: input_lib.py `_create_owned_multi_device_iterator`,
# multi_device_iterator_ops.py `OwnedMultiDeviceIterator` max_buffer_size=1, prefetch_buffer_size=1),
# the parameter server 1; a fourth may be waiting in the sleep.
WARMUP_STEPS = 5
NUM_EXAMPLES, NUM_FEATURES = 1024, 8
SAFETY = 1.5  # closures scheduled for this many times the parameter server run's expected length


@dataclasses.dataclass(frozen=True)
class Settings:
    """What the benchmark measures; the same in the launcher and in every process it starts."""

    factors: tuple[float, ...] = FACTORS
    workers: int = 2
    delay: float = 0.1  # d: the wait before each batch of every worker but the slow one
    rounds: int = 5
    round_seconds: float = 1.5

    @property
    def slow_worker(self) -> int:
        """The index of the worker slowed by k: the last one."""
        return self.workers - 1

    def steps_per_round(self, factor: float) -> int:
        """Whole steps of the slow worker that take at least `round_seconds` by their waits alone."""
        return math.ceil(self.round_seconds / (factor * self.delay) - 1e-9)  # 1.5 / 0.1 = 15.000000000000002

    def slow_steps(self, factor: float) -> int:
        """Steps of the slow worker that the warm-up and the rounds need."""
        return WARMUP_STEPS + self.rounds * self.steps_per_round(factor)

    def closures(self, factor: float) -> int:
        """Closures to schedule so that the queue outlasts the rounds.

        No worker can run faster than its waits allow, so the workers take at most
        (W - 1)/d + 1/(k d) closures a second; `SAFETY` times the slow worker's waits, plus
        3 s for the start, keeps the queue full until its last measured step (checked after).
        """
        seconds = SAFETY * self.slow_steps(factor) * factor * self.delay + 3.0
        per_second = (self.workers - 1) / self.delay + 1 / (factor * self.delay)
        return math.ceil(seconds * per_second) + self.workers

    def args(self) -> list[str]:
        """These settings as the command-line options that parse back to them."""
        return ["--factors", ",".join(map(str, self.factors)), "--workers", str(self.workers),
                "--delay", str(self.delay), "--rounds", str(self.rounds),
                "--round-seconds", str(self.round_seconds)]


# ---- the two runs, each in processes of their own ------------------------------------------

def _model_and_step(tf, learning_rate: float = 0.05):
    """Build the small model (8 features, 16 hidden units, one logit) and its optimizer; one replica's step.

    Called under the strategy's scope, so that the variables are the strategy's (mirrored on
    every MWMS worker, on the ps for the parameter server). The loss is averaged over the
    global batch (`compute_average_loss`), as a distributed custom loop should.
    """
    model = tf.keras.Sequential([tf.keras.Input(shape=(NUM_FEATURES,)),
                                 tf.keras.layers.Dense(16, activation="relu"), tf.keras.layers.Dense(1)])
    optimizer = tf.keras.optimizers.legacy.SGD(learning_rate)
    loss_fn = tf.keras.losses.BinaryCrossentropy(from_logits=True, reduction=tf.keras.losses.Reduction.NONE)

    def step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.nn.compute_average_loss(loss_fn(y, model(x, training=True)))
        grads = tape.gradient(loss, model.trainable_variables)
        update = optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        with tf.control_dependencies([update]):
            return tf.identity(loss)  # ready once the weights are updated: the clock waits for it

    return step


def _timed(tf, strategy, step, iterator):
    """One step on the next batch of `iterator`, with `tf.timestamp()` before it and after its update.

    The order is written out: automatic control dependencies order stateful ops by the
    resources they use, and a timestamp uses none (tensorflow/python/framework/
    auto_control_deps.py, "serialize non-resource-taking stateful ops as well" is a TODO).
    """
    began = tf.timestamp()
    with tf.control_dependencies([began]):
        batch = next(iterator)
    done = strategy.experimental_local_results(strategy.run(step, args=batch))
    with tf.control_dependencies(done):
        return began, tf.timestamp()


def _worker_input(tf, worker, factor: float, settings: Settings):
    """Worker `worker`'s shard of the toy data, each batch after a wait of d (k x d on the slow worker).

    `worker` is a Python int (MWMS's input pipeline id) or an int64 tensor (the parameter
    server's worker index, known when the worker runs the traced function).
    """
    from pstutor.data import toy_classification
    from pstutor.slow_input import slowed

    x, y = toy_classification(NUM_EXAMPLES, NUM_FEATURES, seed=0)
    wait = settings.delay * tf.where(tf.equal(worker, settings.slow_worker), factor, 1.0)
    data = (tf.data.Dataset.from_tensor_slices((x, y[:, None])).shard(settings.workers, worker).repeat()
            .batch(BATCH, drop_remainder=True))
    return slowed(data, wait).prefetch(1)  # the wait overlaps the step, as a real input pipeline does


def run_sync(settings: Settings) -> dict[str, list[float]]:
    """One MWMS worker (this process, TF_CONFIG set by `run_workers`): when each step ended, per factor."""
    import tensorflow as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()  # before any other operation
    with strategy.scope():
        step = _model_and_step(tf)

    @tf.function
    def train_step(iterator):
        return _timed(tf, strategy, step, iterator)[1]

    ended = {}
    for factor in settings.factors:
        dataset = strategy.distribute_datasets_from_function(
            lambda context, factor=factor: _worker_input(tf, context.input_pipeline_id, factor, settings))
        iterator = iter(dataset)
        ended[str(factor)] = [float(train_step(iterator)) for _ in range(settings.slow_steps(factor))]
    return ended


def run_async(settings: Settings) -> dict[str, list[list[float]]]:
    """The parameter server run (this process is its coordinator): [worker, began, ended] of every step."""
    import tensorflow as tf

    from pstutor.local_cluster import LocalCluster

    with LocalCluster(settings.workers, 1) as cluster:
        strategy = tf.distribute.ParameterServerStrategy(cluster.resolver())
        coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
        with strategy.scope():
            step = _model_and_step(tf)

        @tf.function
        def train_step(iterator):
            began, ended = _timed(tf, strategy, step, iterator)
            worker = tf.distribute.coordinator.experimental_get_current_worker_index()
            return tf.stack([tf.cast(worker, tf.float64), began, ended])

        steps = {}
        for factor in settings.factors:
            def dataset_fn(factor: float = factor):
                worker = tf.distribute.coordinator.experimental_get_current_worker_index()
                return _worker_input(tf, worker, factor, settings)

            iterator = iter(coordinator.create_per_worker_dataset(dataset_fn))
            scheduled = [coordinator.schedule(train_step, args=(iterator,))
                         for _ in range(settings.closures(factor))]
            coordinator.join()
            steps[str(factor)] = [value.fetch().tolist() for value in scheduled]
        return steps


# ---- the analysis ---------------------------------------------------------------------------

class StragglerError(RuntimeError):
    """A run could not measure what its rounds need."""


def _median_spread(values: Sequence[float]) -> dict[str, float]:
    """The rounds' median and their range."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def sync_rounds(ended: Sequence[float], factor: float, settings: Settings) -> list[dict]:
    """The rounds of the synchronous run: `steps_per_round` whole steps each, after the warm-up."""
    per_round, ended = settings.steps_per_round(factor), sorted(ended)
    rounds = []
    for number in range(settings.rounds):
        start = ended[WARMUP_STEPS - 1 + number * per_round]
        end = ended[WARMUP_STEPS - 1 + (number + 1) * per_round]
        examples = per_round * settings.workers * BATCH
        rounds.append({"seconds": end - start, "steps": per_round, "examples": examples,
                       "examples_per_s": examples / (end - start)})
    return rounds


def async_rounds(steps: Sequence[Sequence[float]], factor: float, settings: Settings) -> list[dict]:
    """The rounds of the parameter server run, bounded by ends of the slow worker's steps.

    Every step that ended within a round counts, on whichever worker it ran; `steps` holds
    (worker, began, ended) per step. A round must end before the last step began.
    """
    slow_ends = sorted(end for worker, _, end in steps if worker == settings.slow_worker)
    per_round, last_began = settings.steps_per_round(factor), max(began for _, began, _ in steps)
    needed = settings.slow_steps(factor)
    if len(slow_ends) < needed or slow_ends[needed - 1] > last_began:
        raise StragglerError(say(
            f"k={factor}: the closures ran out before the slow worker's {needed}th step "
            f"(it ran {len(slow_ends)}); raise SAFETY.",
            f"k={factor}：慢工作进程的第 {needed} 步之前闭包就已用完（它只运行了 {len(slow_ends)} 步）；"
            "请调大 SAFETY。"))
    rounds = []
    for number in range(settings.rounds):
        start = slow_ends[WARMUP_STEPS - 1 + number * per_round]
        end = slow_ends[WARMUP_STEPS - 1 + (number + 1) * per_round]
        by_worker = [sum(1 for w, _, e in steps if w == worker and start < e <= end)
                     for worker in range(settings.workers)]
        examples = sum(by_worker) * BATCH
        rounds.append({"seconds": end - start, "steps_by_worker": by_worker, "examples": examples,
                       "examples_per_s": examples / (end - start)})
    return rounds


def step_times(steps: Sequence[Sequence[float]], factor: float, settings: Settings) -> list[float]:
    """Each worker's median time from the end of one of its steps to the end of its next, under
    the parameter server (no worker waits for another), over the rounds' span."""
    slow_ends = sorted(end for worker, _, end in steps if worker == settings.slow_worker)
    per_round = settings.steps_per_round(factor)
    start, end = slow_ends[WARMUP_STEPS - 1], slow_ends[WARMUP_STEPS - 1 + settings.rounds * per_round]
    times = []
    for worker in range(settings.workers):
        ends = sorted(e for w, _, e in steps if w == worker and start <= e <= end)
        times.append(statistics.median(b - a for a, b in itertools.pairwise(ends)))
    return times


def summarize(sync: dict[str, list[float]], ps: dict[str, list[list[float]]],
              settings: Settings) -> list[dict]:
    """Per factor: both strategies' rounds, the step times, the formulas' predictions, who won."""
    results = []
    for factor in settings.factors:
        key, workers = str(factor), settings.workers
        sync_r = sync_rounds(sync[key], factor, settings)
        async_r = async_rounds(ps[key], factor, settings)
        times = step_times(ps[key], factor, settings)
        sync_rates = [r["examples_per_s"] for r in sync_r]
        async_rates = [r["examples_per_s"] for r in async_r]
        fast_steps = [sum(r["steps_by_worker"][:-1]) / (workers - 1) for r in async_r]
        slow_steps = [r["steps_by_worker"][-1] for r in async_r]
        winner = ("async" if min(async_rates) > max(sync_rates)
                  else "sync" if min(sync_rates) > max(async_rates) else "neither")
        results.append({
            "factor": factor,
            "sync": {"rounds": sync_r, "examples_per_s": _median_spread(sync_rates),
                     "step_seconds": statistics.median(r["seconds"] / r["steps"] for r in sync_r)},
            "async": {"rounds": async_r, "examples_per_s": _median_spread(async_rates),
                      "fast_to_slow_steps": _median_spread([f / s for f, s in zip(fast_steps, slow_steps,
                                                                                 strict=True)])},
            "step_seconds_by_worker": times,
            "predicted": {"sync": workers * BATCH / max(times), "async": BATCH * sum(1 / t for t in times)},
            "by_design": {"sync": workers * BATCH / (factor * settings.delay),
                          "async": BATCH / settings.delay * (workers - 1 + 1 / factor)},
            "async_to_sync": statistics.median(async_rates) / statistics.median(sync_rates),
            "faster_in_every_round": winner,
        })
    return results


def crossover(results: Sequence[dict]) -> dict:
    """The smallest k at which async beat sync in every round, and the k at which sync did."""
    async_wins = [r["factor"] for r in results if r["faster_in_every_round"] == "async"]
    return {"async_faster_from": min(async_wins) if async_wins else None,
            "sync_faster_at": [r["factor"] for r in results if r["faster_in_every_round"] == "sync"],
            "rule": "faster_in_every_round: every round of one strategy beat every round of the other"}


def report(results: Sequence[dict]) -> None:
    """One line per factor: measured (median, range) beside the two predictions."""
    for r in results:
        s, a, p = r["sync"]["examples_per_s"], r["async"]["examples_per_s"], r["predicted"]
        ratio = r["async"]["fast_to_slow_steps"]["median"]
        print(say(
            f"k={r['factor']:g}: sync {s['median']:.0f} examples/s ({s['min']:.0f}-{s['max']:.0f}; "
            f"predicted {p['sync']:.0f}), async {a['median']:.0f} ({a['min']:.0f}-{a['max']:.0f}; "
            f"predicted {p['async']:.0f}); under the ps a fast worker ran {ratio:.1f}x the slow one's steps; "
            f"faster in every round: {_en_winner(r['faster_in_every_round'])}",
            f"k={r['factor']:g}：同步训练每秒 {s['median']:.0f} 个样本（{s['min']:.0f}-{s['max']:.0f}；"
            f"预测 {p['sync']:.0f}），异步训练 {a['median']:.0f}（{a['min']:.0f}-{a['max']:.0f}；"
            f"预测 {p['async']:.0f}）；参数服务器训练中，快的工作进程运行的步数是"
            f"慢的工作进程的 {ratio:.1f} 倍；"
            f"每一轮都更快的一方：{_zh_winner(r['faster_in_every_round'])}"), flush=True)


def _en_winner(winner: str) -> str:
    return {"async": "async", "sync": "sync", "neither": "neither (their rounds overlap)"}[winner]


def _zh_winner(winner: str) -> str:
    return {"async": "异步训练", "sync": "同步训练", "neither": "都不是（两者的各轮有重叠）"}[winner]


# ---- the launcher ---------------------------------------------------------------------------

def measure(settings: Settings, timeout: float = 600.0) -> dict:
    """Run both strategies in fresh processes; the stored record (without machine and date)."""
    from pstutor.compare import run_program, run_workers

    load_before = os.getloadavg()
    script, args = Path(__file__).resolve(), settings.args()
    sync_runs = run_workers(script, settings.workers, args=["--role", "sync", *args], timeout=timeout)
    ps_run = run_program(script, args=["--role", "async", *args], timeout=timeout)
    sync, ps = _result(sync_runs[0]), _result(ps_run)
    results = summarize(sync, ps, settings)
    return {"settings": {**dataclasses.asdict(settings), "batch_per_worker": BATCH,
                         "warmup_steps": WARMUP_STEPS, "slow_worker": settings.slow_worker,
                         "steps_per_round": {str(k): settings.steps_per_round(k) for k in settings.factors}},
            "results": results, "crossover": crossover(results),
            "load_average": {"before": [round(v, 2) for v in load_before],
                             "after": [round(v, 2) for v in os.getloadavg()]}}


def _result(run) -> dict:
    """The RESULT line a run printed (its exit code and output checked)."""
    line = next((line for line in run.output.splitlines() if line.startswith("RESULT ")), None)
    if run.returncode != 0 or line is None:
        raise StragglerError(say(f"a run failed (exit code {run.returncode}):\n{run.output[-3000:]}",
                                 f"一次运行失败（退出码 {run.returncode}）：\n{run.output[-3000:]}"))
    return json.loads(line[len("RESULT "):])


def parse(argv: Sequence[str] | None) -> tuple[str | None, Settings, bool]:
    """The role (None: the launcher), the settings, and whether to write nothing."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--factors", default=",".join(f"{k:g}" for k in FACTORS),
                        help="straggler factors k, comma-separated (each >= 1)")
    parser.add_argument("--workers", type=int, default=Settings.workers)
    parser.add_argument("--delay", type=float, default=Settings.delay, help="d: seconds before each batch")
    parser.add_argument("--rounds", type=int, default=Settings.rounds)
    parser.add_argument("--round-seconds", type=float, default=Settings.round_seconds)
    parser.add_argument("--dry-run", action="store_true", help="print the results, write nothing")
    parser.add_argument("--role", choices=("sync", "async"), help=argparse.SUPPRESS)  # a run's own process
    args = parser.parse_args(argv)
    try:
        factors = tuple(float(k) for k in args.factors.split(","))
    except ValueError:
        parser.error(say("--factors must be numbers separated by commas", "--factors 必须是以逗号分隔的数字"))
    if min(factors) < 1 or args.workers < 2 or args.delay <= 0 or args.rounds < 3 or args.round_seconds <= 0:
        parser.error(say("need factors >= 1, --workers >= 2, --delay > 0, --rounds >= 3, --round-seconds > 0",
                         "要求：k >= 1，--workers >= 2，--delay > 0，--rounds >= 3，--round-seconds > 0"))
    settings = Settings(factors, args.workers, args.delay, args.rounds, args.round_seconds)
    return args.role, settings, args.dry_run


def main(argv: Sequence[str] | None = None) -> int:
    role, settings, dry_run = parse(argv)
    import pstutor

    pstutor.setup()
    if role is not None:  # one of the runs, started by `measure`
        ended = run_sync(settings) if role == "sync" else run_async(settings)
        if role == "async" or json.loads(os.environ["TF_CONFIG"])["task"]["index"] == 0:
            print("RESULT " + json.dumps(ended), flush=True)
        return 0
    record = measure(settings)
    report(record["results"])
    if not dry_run:
        from pstutor import measured

        print(say("written:", "已写入："), measured.store("stragglers", record))
    return 0


if __name__ == "__main__":
    sys.exit(main())
