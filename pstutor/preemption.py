"""Preemption under each strategy: one worker killed mid-run, and what each strategy loses.

Lesson 10 compares what happens when one of two workers is lost (`benchmarks/preemption.py`
measures it; lesson 7 shows the parameter server's side at length):

- `ps_round`: a parameter server cluster (`LocalCluster`: 2 worker processes, 1 ps process)
  and a `ClusterCoordinator` scheduling a fixed number of steps; worker 1 is killed once a
  given number of steps has been applied. The coordinator puts the closure that failed on
  it back in its queue and worker 0 runs the rest: training finishes, nothing restarts.
- `mwms_round`: `MultiWorkerMirroredStrategy` in two worker processes running `Model.fit`
  with `BackupAndRestore(save_freq=N)`; worker 1 is killed after a given step. The survivor
  waits in the next all-reduce until that fails; then the whole job is started again and
  resumes from the last backup, redoing the steps after it.

The kill moment is a step count by design, not a time. Every step waits `delay` seconds
without using the CPU (the parameter server's input waits before each batch,
`pstutor.slow_input.slowed`; an MWMS worker sleeps after each step), far longer than a
step's CPU time. The MWMS worker to be killed stops after step `kill_after` and waits
there until it is killed, so that step is the last one applied, however busy the machine.

Each round runs in fresh processes: a coordinator that has lost a worker for good keeps a
thread waiting for it (cluster_coordinator.py: `WorkerPreemptionHandler`), and the MWMS
survivor's collectives are aborted; neither process can be reused. Every process is a
`processes.Child` (or a `LocalCluster` task), stopped when its round ends, fails or times
out, and every wait is bounded.

Run as a program (`python -m pstutor.child program pstutor/preemption.py ps|mwms ...`) this
module plays one part of a round: the coordinator of a ps round, or one MWMS worker. Times
are `time.time()` stamps: all the processes run on this machine, on one clock.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pstutor.compare import run_program
from pstutor.processes import Child
from pstutor.tf_config import cluster_dict, make_tf_config

PROGRAM = Path(__file__).resolve()
BATCH = 16  # examples per step and worker
HOLD_LIMIT = 120.0  # how long the MWMS worker to be killed waits for its kill, at most
SURVIVOR_LIMIT = 90.0  # how long the MWMS survivor may take to fail and exit before it is stopped
TAGS = ("BEGIN", "STEP", "HOLD", "FAILED", "DONE")  # the lines an MWMS worker prints


class PreemptionError(RuntimeError):
    """A round did not go as designed; the message quotes the processes' last output."""


def _problem():
    """The data every round trains on: 256 examples of a linear function of 4 features."""
    import numpy as np

    x = np.random.default_rng(0).normal(size=(256, 4)).astype("float32")
    return x, x @ np.array([1.0, -2.0, 0.5, 3.0], dtype="float32")


# ---- the parameter server ----

def ps_coordinator(steps: int, kill_after: int, delay: float) -> dict:
    """Schedule `steps` steps on 2 workers and 1 ps; kill worker 1 once `kill_after` are applied.

    Steps are counted where they are applied: `optimizer.iterations` lives on the ps and
    grows by one per update. Each step returns the worker that ran it and when it ended
    (stamped after its update). Returns the round's raw numbers.
    """
    import tensorflow as tf

    from pstutor.local_cluster import LocalCluster
    from pstutor.slow_input import slowed

    x, y = _problem()
    with LocalCluster(num_workers=2, num_ps=1) as cluster:
        strategy = tf.distribute.ParameterServerStrategy(cluster.resolver())
        coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
        with strategy.scope():
            weights = tf.Variable(tf.zeros(4))
            optimizer = tf.keras.optimizers.legacy.SGD(learning_rate=0.05)

        def dataset_fn():
            batches = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(BATCH)
            options = tf.data.Options()
            options.experimental_optimization.inject_prefetch = False  # a batch waits when asked for
            return slowed(batches, delay).with_options(options)

        def replica_step(features, labels):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean((tf.linalg.matvec(features, weights) - labels) ** 2)
            applied = optimizer.apply_gradients([(tape.gradient(loss, weights), weights)])
            with tf.control_dependencies([applied]):
                return tf.identity(loss)  # ready once the update is applied

        @tf.function
        def step(iterator):
            batch = next(iterator)  # waits `delay`: most of a step is this wait
            loss = strategy.reduce("SUM", strategy.run(replica_step, args=batch), axis=None)
            with tf.control_dependencies([loss]):
                ended = tf.timestamp()
            return tf.distribute.coordinator.experimental_get_current_worker_index(), ended

        iterator = iter(coordinator.create_per_worker_dataset(dataset_fn))
        warmed: set[int] = set()
        while warmed != {0, 1}:  # the step's first run on each worker (tracing) is not measured
            warm_up = [coordinator.schedule(step, args=(iterator,)) for _ in range(2)]
            warmed.update(int(result.fetch()[0]) for result in warm_up)
        before = int(optimizer.iterations.numpy())
        started = time.time()
        results = [coordinator.schedule(step, args=(iterator,)) for _ in range(steps)]
        while int(optimizer.iterations.numpy()) - before < kill_after:
            time.sleep(0.01)
        killed = time.time()
        applied_at_kill = int(optimizer.iterations.numpy()) - before
        cluster.kill("worker", 1)
        coordinator.join()
        joined = time.time()
        ran = [{"index": i, "worker": int(worker), "ended": float(ended)}
               for i, (worker, ended) in enumerate(result.fetch() for result in results)]
        return {
            "steps_scheduled": steps, "kill_after": kill_after, "delay_s": delay,
            "steps_applied_at_kill": applied_at_kill,
            "steps_applied": int(optimizer.iterations.numpy()) - before,
            "steps_completed": len(ran),  # RemoteValues that delivered their result
            "worker_1_alive_at_end": cluster.alive("worker", 1),
            "started": started, "killed": killed, "joined": joined,
            "steps": ran,
        }


def ps_summary(raw: dict) -> dict:
    """What a parameter server round lost, from its raw numbers.

    The closure that failed on the killed worker goes back to the end of the queue
    (cluster_coordinator.py: `ClosureQueue.put_back`), so the step that ended last is the
    one that was run again.
    """
    killed, steps = raw["killed"], raw["steps"]
    after = [s for s in steps if s["ended"] > killed]
    last = max(steps, key=lambda s: s["ended"])
    return {
        "steps_lost": max(0, raw["steps_scheduled"] - raw["steps_applied"]),
        "updates_applied_twice": max(0, raw["steps_applied"] - raw["steps_scheduled"]),
        "next_step_after_kill_s": round(min(s["ended"] for s in after) - killed, 3),
        "steps_after_kill_by_worker_1": sum(s["worker"] == 1 for s in after),
        "retried_step": last["index"],
        "retried_on_worker": last["worker"],
        "kill_to_end_s": round(raw["joined"] - killed, 3),
        "total_s": round(raw["joined"] - raw["started"], 3),
    }


def ps_round(steps: int, kill_after: int, delay: float, timeout: float = 300.0) -> dict:
    """One parameter server round, its coordinator in a fresh process: raw numbers and summary."""
    args = ["ps", "--steps", str(steps), "--kill-after", str(kill_after), "--delay", str(delay)]
    run = run_program(PROGRAM, args=args, timeout=timeout)
    line = next((ln for ln in run.output.splitlines() if ln.startswith("RESULT ")), None)
    if run.returncode != 0 or line is None:
        raise PreemptionError(f"ps round failed (exit code {run.returncode}):\n{run.output[-3000:]}")
    raw = json.loads(line[len("RESULT "):])
    return {**raw, **ps_summary(raw)}


# ---- MultiWorkerMirroredStrategy ----

def mwms_worker(steps: int, save_every: int, delay: float, backup: str, collective_timeout: float,
                hold_after: int) -> int:
    """One worker of the MWMS job: one epoch of `steps` steps with `Model.fit` and `BackupAndRestore`.

    It prints `BEGIN step time` once the backup (if any) is restored, `STEP step time` after
    each step, `HOLD time` when it stops after step `hold_after` to be killed (0: never),
    `FAILED error time cause` when training fails, `DONE step time` at the end. The step is
    `optimizer.iterations`, which the backup holds. `collective_timeout` > 0 makes every
    collective fail with `DeadlineExceededError` after that many seconds
    (`CommunicationOptions(timeout_seconds=...)`); 0 keeps TensorFlow's default, no timeout.
    """
    import tensorflow as tf

    options = tf.distribute.experimental.CommunicationOptions(timeout_seconds=collective_timeout or None)
    strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    data = tf.data.Options()
    data.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    dataset = tf.data.Dataset.from_tensor_slices(_problem()).repeat().batch(2 * BATCH).with_options(data)
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.Input(shape=(4,)), tf.keras.layers.Dense(1)])
        model.compile(optimizer=tf.keras.optimizers.legacy.SGD(learning_rate=0.05), loss="mse")

    class Clock(tf.keras.callbacks.Callback):
        """Stamps every step, gives it a known length (`delay`), and holds after step `hold_after`."""

        def on_train_begin(self, logs=None):
            print(f"BEGIN {int(self.model.optimizer.iterations.numpy())} {time.time()}", flush=True)

        def on_train_batch_end(self, batch, logs=None):
            step = int(self.model.optimizer.iterations.numpy())
            print(f"STEP {step} {time.time()}", flush=True)
            if step == hold_after:
                print(f"HOLD {time.time()}", flush=True)
                time.sleep(HOLD_LIMIT)  # killed meanwhile
            time.sleep(delay)

    # BackupAndRestore first: a step's backup is written before the Clock waits or holds
    callbacks = [tf.keras.callbacks.BackupAndRestore(backup, save_freq=save_every), Clock()]
    try:
        model.fit(dataset, epochs=1, steps_per_epoch=steps, verbose=0, callbacks=callbacks)
    except tf.errors.OpError as error:
        print(f"FAILED {type(error).__name__} {time.time()} {_cause(error.message)}", flush=True)
        return 1
    print(f"DONE {int(model.optimizer.iterations.numpy())} {time.time()}", flush=True)
    return 0


def _cause(message: str) -> str:
    """An op error's own words on one line: its message without the traceback and the node line."""
    lines = message.splitlines()
    last_frame = max((i for i, line in enumerate(lines) if line.strip().startswith('File "')), default=-2)
    words = [line.strip() for line in lines[last_frame + 2:]]  # after the last frame and its blank line
    return " ".join(w for w in words if w and not w.startswith("[["))


def mwms_round(steps: int, kill_after: int, save_every: int, delay: float, collective_timeout: float,
               timeout: float = 300.0) -> dict:
    """One MWMS round: kill worker 1 after step `kill_after`, let the survivor fail, restart the job.

    The job (both workers, same `TF_CONFIG`, same backup folder) is started again once the
    survivor has ended, as a cluster manager restarts a failed job. `collective_timeout` 0
    leaves the collectives without a timeout (TensorFlow's default). Returns the raw numbers.
    """
    cluster = cluster_dict(2)
    with tempfile.TemporaryDirectory(prefix="pstutor-backup-") as backup:
        def job(hold_after: int = 0) -> list[Child]:
            """Both workers started; worker 1 holds after step `hold_after`."""
            return [Child("program", [PROGRAM, "mwms", "--steps", steps, "--save-every", save_every,
                                      "--delay", delay, "--collective-timeout", collective_timeout,
                                      "--backup", backup, "--hold-after", hold_after if task == 1 else 0],
                          env={"TF_CONFIG": make_tf_config(cluster, "worker", task).to_json()}).start()
                    for task in (0, 1)]

        survivor, victim = first = job(hold_after=kill_after)
        try:
            _wait_for_line(victim, "HOLD", timeout)
            killed = time.time()
            victim.send_signal(signal.SIGKILL)
            _wait(survivor, SURVIVOR_LIMIT, strict=False)
            survivor_ended = time.time()
            output = survivor.output()
        finally:
            for child in first:
                child.close()
        before = _tagged(output)
        if "FAILED" not in before:
            raise PreemptionError(f"no failure within {SURVIVOR_LIMIT:.0f} s:\n{output[-3000:]}")
        restarted = time.time()
        second = job()
        try:
            for child in second:
                _wait(child, timeout)
            after = _tagged(second[0].output())
            if any(child.returncode != 0 for child in second) or "DONE" not in after:
                raise PreemptionError("the restarted job failed:\n" + "\n".join(c.tail(20) for c in second))
        finally:
            for child in second:
                child.close()
    error, failed_at, cause = before["FAILED"][0]
    resumed_from = int(after["BEGIN"][0][0])
    first_step_again = float(after["STEP"][0][1])
    return {
        "steps": steps, "kill_after": kill_after, "save_every": save_every, "delay_s": delay,
        "collective_timeout_s": collective_timeout or None,
        "survivor_last_step": max(int(step) for step, _ in before["STEP"]),
        "error": error, "cause": cause,
        "failure_s": round(float(failed_at) - killed, 3),
        "survivor_exit_s": round(survivor_ended - killed, 3),
        "resumed_from": resumed_from,
        "steps_redone": kill_after - resumed_from,
        "restart_to_first_step_s": round(first_step_again - restarted, 3),
        "kill_to_training_again_s": round(first_step_again - killed, 3),
        "final_step": int(after["DONE"][0][0]),
    }


def _tagged(output: str) -> dict[str, list[list[str]]]:
    """An MWMS worker's tagged lines: tag -> the fields of each line, in order."""
    found: dict[str, list[list[str]]] = {}
    for line in output.splitlines():
        tag, _, rest = line.partition(" ")
        if tag in TAGS:
            found.setdefault(tag, []).append(rest.split(" ", 2))
    return found


def _wait_for_line(child: Child, tag: str, timeout: float) -> None:
    """Wait until `child` prints a line tagged `tag`; raise if it ends first or `timeout` passes."""
    deadline = time.monotonic() + timeout
    while tag not in _tagged(child.output()):
        if not child.running or time.monotonic() > deadline:
            raise PreemptionError(f"no {tag} line (exit code {child.returncode}):\n{child.tail(30)}")
        time.sleep(0.01)


def _wait(child: Child, timeout: float, strict: bool = True) -> None:
    """Wait for `child` to end; after `timeout` s stop it, and raise if `strict`."""
    try:
        child.wait(timeout)
    except subprocess.TimeoutExpired:
        child.stop()
        if strict:
            raise PreemptionError(f"a worker did not end within {timeout:.0f} s:\n{child.tail(30)}") from None


def main(argv: list[str] | None = None) -> int:
    """The program: `ps ...` (the coordinator of a ps round) or `mwms ...` (one MWMS worker)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parts = parser.add_subparsers(dest="part", required=True)
    ps = parts.add_parser("ps")
    mwms = parts.add_parser("mwms")
    for part in (ps, mwms):
        part.add_argument("--steps", type=int, required=True)
        part.add_argument("--delay", type=float, required=True)
    ps.add_argument("--kill-after", type=int, required=True)
    mwms.add_argument("--save-every", type=int, required=True)
    mwms.add_argument("--collective-timeout", type=float, required=True)
    mwms.add_argument("--backup", required=True)
    mwms.add_argument("--hold-after", type=int, required=True)
    args = parser.parse_args(argv)
    import pstutor

    pstutor.setup()
    if args.part == "ps":
        print("RESULT " + json.dumps(ps_coordinator(args.steps, args.kill_after, args.delay)), flush=True)
        return 0
    return mwms_worker(args.steps, args.save_every, args.delay, args.backup, args.collective_timeout,
                       args.hold_after)


if __name__ == "__main__":
    sys.exit(main())
