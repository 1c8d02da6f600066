"""The grader's side of the seal: a record counts only with this kernel's HMAC, and no bytes a
submission puts in a record make the check itself fail (red-team: a non-ASCII seal raised
TypeError, and the student's row said "could not be graded" on every rerun)."""

import hmac
import json

import pytest

from pstutor.checks import MIME, PASSED
from pstutor.grading import integrity
from pstutor.grading.run import _verdict, new_key, sealed

RECORD = {"task": "01.1", "status": "passed", "lines": [{"ok": True, "text": "✓ a cluster"}]}


def _seal(record: dict, key: bytes) -> dict:
    mac = hmac.new(key, integrity.canonical(record).encode(), "sha256").hexdigest()
    return {**record, "seal": mac}


def test_a_record_sealed_with_the_kernel_key_counts_and_no_other():
    key = new_key()
    assert sealed(_seal(RECORD, key), key)
    assert not sealed(_seal(RECORD, new_key()), key)
    assert not sealed({**_seal(RECORD, key), "status": "failed"}, key)


@pytest.mark.parametrize("seal", ["é" * 64, "\udcff" * 64, "A" * 64, "0" * 63, "0" * 65, 7, None, ["0" * 64]])
def test_a_seal_of_the_wrong_shape_is_no_seal_and_raises_nothing(seal):
    assert not sealed({**RECORD, "seal": seal}, new_key())


def test_a_record_holding_text_no_genuine_record_can_hold_is_no_seal():
    key = new_key()
    forged = {**RECORD, "lines": [{"ok": True, "text": "\udcff"}], "seal": "0" * 64}
    assert not sealed(forged, key)


def _check_cell(*records: dict) -> dict:
    outputs = [{"output_type": "execute_result", "data": {MIME: one}, "metadata": {}} for one in records]
    return {"cell_type": "code", "source": 'pstutor.check("01.1")', "outputs": outputs}


def test_a_sealed_verdict_counts_only_in_the_run_that_gave_it():
    """The seal covers the id of the execute request the check cell came in; a record sealed in
    another run (an earlier cell with the check cell's source, shown again from `_`) is a
    "passed" for a teacher to look at, and scores 0."""
    key = new_key()
    here = _seal({**RECORD, "integrity": [], "request": "run-of-the-check-cell"}, key)
    elsewhere = _seal({**RECORD, "integrity": [], "request": "an-earlier-run"}, key)
    counted = _verdict("01.1", _check_cell(here), True, key, "run-of-the-check-cell", [])
    assert (counted.status, counted.review) == (PASSED, [])
    for outputs in [(elsewhere,), (elsewhere, here)]:  # first in the outputs, or alone
        result = _verdict("01.1", _check_cell(*outputs), True, key, "run-of-the-check-cell", [])
        if outputs[-1] is here:
            assert (result.status, result.review) == (PASSED, []), result
        else:
            assert (result.status, result.review) == (PASSED, ["replayed"]), result
            assert result.points() == 0
    no_request = _verdict("01.1", _check_cell(here), True, key, "", [])  # the client saw no run
    assert no_request.review == ["replayed"]


def test_messages_that_steer_the_client_keep_only_what_it_reads():
    """A kernel can send any message: a status or an input message is not counted as output, so
    none of its fields may carry megabytes into the grader's copy of the notebook."""
    import nbformat

    from pstutor.grading.client import capped_client

    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1")])
    client = capped_client(set())(notebook)
    client.reset_execution_trackers()
    client.clear_before_next_output = False  # what execute_cell sets before a cell runs
    cell = notebook.cells[0]
    cell.metadata["execution"] = {}
    huge = "9" * (7 << 20)
    message = lambda kind, content: {"msg_type": kind, "content": content, "header": {"msg_type": kind},  # noqa: E731
                                     "parent_header": {}, "metadata": {}}
    client.process_message(message("execute_input", {"execution_count": huge, "code": huge}), cell, 0)
    client.process_message(message("status", {"execution_state": "busy", "x": huge}), cell, 0)
    stream = {"name": "stdout", "text": "hi", "execution_count": huge}
    client.process_message(message("stream", stream), cell, 0)
    assert cell.get("execution_count") is None and len(json.dumps(cell)) < 10_000, len(json.dumps(cell))
    assert cell.outputs and cell.outputs[0]["text"] == "hi"
    client.process_message(message("execute_input", {"execution_count": 3}), cell, 0)
    assert cell["execution_count"] == 3


def test_the_clients_request_ids_cannot_be_foreseen():
    """jupyter_client's own ids are `session_pid_counter`: from one, an answer knows the next."""
    from jupyter_client.session import Session

    from pstutor.grading.client import unguessable_requests

    plain = Session()
    first, second = plain.msg_id, plain.msg_id
    assert second == first[: first.rindex("_") + 1] + str(int(first.rsplit("_", 1)[1]) + 1)  # the gap closed
    session = unguessable_requests()()
    ids = [session.msg_id for _ in range(1000)]
    assert len(set(ids)) == 1000 and all(len(i) == 32 and int(i, 16) >= 0 for i in ids)
    assert session.msg("execute_request", {})["header"]["msg_id"] not in ids
