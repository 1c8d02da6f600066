"""Lesson 10's embedding table (benchmarks/embedding_table.py): the ps hold it in shards, the
workers hold none of it, a step moves the rows it looks up, not the table; under synchronous
training every worker holds all of it.

The ps tests read one quick real run of the benchmark (2 worker processes; the table on 1 ps,
then on 2), the lesson's run made shorter. Memory bands: every page of a shard is written by
its initializer, so a ps grows by at least its shard; on top of it the runtime allocates a
little for the first functions it runs (measured: 4-10 MiB after building, 12-16 MiB after
training), whatever the table's size; a worker that trains allocates more for its own
(25-35 MiB measured, with no table at all). Bytes: the looked-up rows are a lower bound of what each
direction carries; their int64 ids (8 bytes next to a 128-byte row) and gRPC's framing add
a few per cent.
"""

import importlib.util
import json
import os
import socket
import statistics
import subprocess
import sys
import time

import pytest
from conftest import ROOT, clean_env

from pstutor import task_usage

SCRIPT = ROOT / "benchmarks" / "embedding_table.py"
ROWS, WIDTH = 2_000_000, 32  # a 244 MiB table: large next to what a task allocates for itself
MIB = 2**20
RUNTIME_SLACK = {"created": 16 * MIB, "trained": 32 * MIB, "worker": 64 * MIB}  # see the module docstring


def _script():
    """The benchmark script as a module (benchmarks/ is no package)."""
    spec = importlib.util.spec_from_file_location("embedding_table", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BENCHMARK = _script()
STEP_ROW_BYTES = BENCHMARK.BATCH_SIZE * BENCHMARK.FIELDS * WIDTH * 4  # one worker step's lookups


@pytest.fixture(scope="module")
def stored(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("embedding_table")
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--rows", str(ROWS), "--width", str(WIDTH), "--ps", "1,2",
         "--steps", "100", "--rounds", "3", "--no-mwms", "--no-onednn-run", "--folder", str(folder)],
        capture_output=True, text=True, cwd=ROOT, timeout=240, env=clean_env())
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    return json.loads((folder / "embedding_table.json").read_text())


def _growth(run: dict, when: str, task: str) -> int:
    return run["rss_bytes"][when][task] - run["rss_bytes"]["empty"][task]


def _tasks(run: dict, job: str) -> list[str]:
    return [name for name in run["rss_bytes"]["empty"] if name.startswith(job)]


def test_each_ps_holds_its_shard_and_then_its_slot_too(stored):
    table = stored["expected"]["table_bytes"]
    assert table == ROWS * WIDTH * 4 and [run["num_ps"] for run in stored["runs"]] == [1, 2]
    for run in stored["runs"]:
        shard = table / run["num_ps"]  # 2,000,000 rows split evenly
        for ps in _tasks(run, "ps"):
            created, trained = _growth(run, "created", ps), _growth(run, "trained", ps)
            where = (run["num_ps"], ps, created / MIB, trained / MIB)
            assert shard <= created <= shard + RUNTIME_SLACK["created"], where
            # after the first step: the Adagrad accumulator, as large as the shard, beside it
            assert 2 * shard <= trained <= 2 * shard + RUNTIME_SLACK["trained"], where


def test_the_workers_and_the_coordinator_hold_none_of_the_table(stored):
    table = stored["expected"]["table_bytes"]
    for run in stored["runs"]:
        for task in [*_tasks(run, "worker"), "coordinator"]:
            growth = _growth(run, "trained", task)
            assert growth < table / 4, (run["num_ps"], task, growth / MIB)


def test_a_step_moves_the_rows_it_looks_up_and_far_less_than_the_table(stored):
    expected = stored["expected"]
    assert expected["lookup_bytes_per_step"] == STEP_ROW_BYTES
    assert expected["unique_rows_per_step"] > 0.99 * expected["lookups_per_step"]  # hashed ids barely repeat
    for run in stored["runs"]:
        rows = STEP_ROW_BYTES / run["num_ps"]  # the ids fall evenly on the shards
        for ps in _tasks(run, "ps"):
            traffic = run["bytes_per_step"][ps]
            sent, received = statistics.median(traffic["sent"]), statistics.median(traffic["received"])
            where = (run["num_ps"], ps, sent, received, rows)
            assert rows <= sent <= 1.05 * rows, where  # the looked-up rows, to the workers
            assert rows <= received <= 1.2 * rows, where  # the gradient's rows and the ids, from them
            assert 100 * max(traffic["sent"] + traffic["received"]) < expected["table_bytes"]


def test_every_mwms_worker_holds_the_whole_table_and_its_slot():
    """Synchronous training for contrast: two MultiWorkerMirroredStrategy worker processes."""
    rows = 1_000_000  # 122 MiB: a copy per worker, and as much again for the slot
    run = BENCHMARK.measure_mwms(rows, WIDTH, steps=20, rounds=3)
    table = slot = rows * WIDTH * 4
    for worker in ("worker 0", "worker 1"):
        trained, trimmed = _growth(run, "trained", worker), _growth(run, "trimmed", worker)
        # malloc_trim returns only free memory: what is left is held, the copy and its slot among it
        assert table + slot <= trimmed <= trained, (worker, trimmed / MIB, trained / MIB)
        assert trimmed <= table + slot + RUNTIME_SLACK["worker"], (worker, trimmed / MIB)
        # each worker sends its gradient's rows to the other (IndexedSlices are all-gathered)
        sent = statistics.median(run["bytes_per_step"][worker]["sent"])
        assert STEP_ROW_BYTES <= sent <= 1.2 * STEP_ROW_BYTES, (worker, sent)


def test_the_counters_see_the_bytes_between_two_processes_and_not_within_one():
    """task_usage against a known exchange: 100,000 bytes from another process, 5,000 back."""
    peer_code = ("import socket, sys\n"
                 "s = socket.create_connection(('127.0.0.1', int(sys.argv[1])))\n"
                 "s.sendall(b'x' * 100_000)\n"
                 "got = 0\n"
                 "while got < 5_000: got += len(s.recv(65536))\n"
                 "sys.stdin.read()\n")  # keep the socket open until the test is done
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = str(server.getsockname()[1])
        with socket.create_connection(("127.0.0.1", port)) as own_client, server.accept()[0] as own_server:
            before = task_usage.snapshot([os.getpid()])
            peer = subprocess.Popen([sys.executable, "-c", peer_code, port], stdin=subprocess.PIPE)
            try:
                with server.accept()[0] as connection:
                    own_client.sendall(b"y" * 50_000)  # both ends in this process: between no two tasks
                    own_server.recv(65536)
                    received = 0
                    while received < 100_000:
                        received += len(connection.recv(65536))
                    connection.sendall(b"z" * 5_000)
                    time.sleep(0.2)  # the peer has read the 5,000 bytes
                    moved = task_usage.traffic_between(before, task_usage.snapshot([os.getpid(), peer.pid]))
            finally:
                peer.stdin.close()
                peer.wait(timeout=10)
    assert moved[os.getpid()] == task_usage.Traffic(sent=5_000, received=100_000)
    assert moved[peer.pid] == task_usage.Traffic(sent=100_000, received=5_000)


def test_resident_memory_follows_what_a_process_writes():
    before = task_usage.resident_bytes(os.getpid())
    block = b"x" * (64 * MIB)  # every page written, so resident
    assert task_usage.resident_bytes(os.getpid()) - before >= 63 * MIB
    del block


@pytest.mark.parametrize("args", [["--rounds", "2"], ["--ps", "0"], ["--ps", "one"], ["--rows", "10"]])
def test_bad_arguments_start_nothing(args):
    result = subprocess.run([sys.executable, str(SCRIPT), *args, "--dry-run"], capture_output=True, text=True,
                            cwd=ROOT, timeout=60, env=clean_env())
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
