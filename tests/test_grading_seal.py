"""The grader's side of the seal: a record counts only with this kernel's HMAC, and no bytes a
submission puts in a record make the check itself fail (red-team: a non-ASCII seal raised
TypeError, and the student's row said "could not be graded" on every rerun)."""

import hmac

import pytest

from pstutor.grading import integrity
from pstutor.grading.run import new_key, sealed

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
