"""The grader's own record of a class, and which output file it may write.

Beside a table it writes (`grades.csv`), the grader keeps `grades.csv.pstutor.json`: every
result in the neutral shape of `pstutor.grading.model`, the settings each was graded with,
and the digest of the table as last written. A rerun reads that record, never the localised
table: a result is kept only if the same file was graded with the same settings by the same
grader (`fingerprint`), so changed settings, a new grader version or a changed exercise
regrade what they would judge differently. An interrupted or failed grading is not kept.

`--out` replaces only what the grader wrote itself: a table whose record says so and that
nobody changed since, or a JSON result it marked as its own; anything else — a submission,
a teacher's note, the course's exercise — is refused before anything is graded.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from pathlib import Path

import pstutor
from pstutor.grading.model import FAILED_TO_GRADE, StudentResult
from pstutor.language import say

RECORD_SUFFIX = ".pstutor.json"
MARK = "pstutor-grade"  # in the JSON results the grader writes (Gradescope, PrairieLearn)
CSV_FORMATS, JSON_FORMATS = ("csv", "canvas"), ("gradescope", "prairielearn")


class OutputError(ValueError):
    """An --out the grader will not write."""


def record_path(out: Path) -> Path:
    return out.with_name(out.name + RECORD_SUFFIX)


def grader_version() -> str:
    """pstutor's version and a digest of the code that decides verdicts (checks and grading)."""
    package = Path(pstutor.__file__).resolve().parent
    digest = hashlib.sha256(pstutor.__version__.encode())
    for path in sorted([*package.glob("checks/*.py"), *package.glob("grading/*.py"), package / "sandbox.py"]):
        digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()[:16]


def fingerprint(settings: dict, exercise_path: Path | None) -> str:
    """What a verdict depends on besides the submission: settings, grader version, the exercise."""
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode())
    digest.update(grader_version().encode())
    if exercise_path is not None:
        digest.update(exercise_path.read_bytes())
    return digest.hexdigest()[:16]


def check_output(out: Path, format: str) -> None:
    """Refuse (OutputError, one line) an --out the grader must not write; nothing is written here."""
    if not str(out) or str(out) in (".", ""):
        raise OutputError(say("--out needs a file name", "--out 需要一个文件名"))
    if out.is_dir():
        raise OutputError(
            say(
                f"--out {out} is a folder: give the file to write, e.g. {out / 'grades.csv'}",
                f"--out {out} 是文件夹：请给出要写入的文件，例如 {out / 'grades.csv'}",
            )
        )
    if out.suffix == ".ipynb":
        raise OutputError(
            say(
                f"--out {out} would be read as a submission: write the table elsewhere",
                f"--out {out} 会被当作提交读取：请把结果表写到别处",
            )
        )
    if (out.exists() or out.is_symlink()) and not _ours(out, format):
        raise OutputError(
            say(
                f"{out} was not written by pstutor grade (or was changed since): choose another --out, "
                "or move that file away",
                f"{out} 不是 pstutor grade 写的（或之后被改过）：请换一个 --out，或者把该文件移走",
            )
        )
    folder = next((parent for parent in [out.parent, *out.parent.parents] if parent.exists()), Path("/"))
    try:  # an unnamed file (O_TMPFILE): the folder is really writable, and nothing appears in it
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as err:
        raise OutputError(
            say(
                f"cannot write {out}: {folder} is not writable ({err.strerror})",
                f"无法写入 {out}：{folder} 不可写（{err.strerror}）",
            )
        ) from None


def _ours(out: Path, format: str) -> bool:
    if out.is_symlink() or not out.is_file():
        return False
    try:
        data = out.read_bytes()
    except OSError:
        return False
    if format in JSON_FORMATS:
        with contextlib.suppress(ValueError, UnicodeDecodeError, AttributeError):
            found = json.loads(data.decode("utf-8"))
            marker = found.get("extra_data", {}).get(MARK) if format == "gradescope" else found.get(MARK)
            return isinstance(marker, dict)
        return False
    record = _load(record_path(out))
    digest = hashlib.sha256(data).hexdigest()
    return (
        bool(record)
        and record.get("format") == format
        and digest in (record.get("table"), record.get("previous"))
    )


def _load(path: Path) -> dict:
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return {}
    return found if isinstance(found, dict) and found.get("kind") == MARK else {}


def earlier_results(out: Path, format: str) -> dict[tuple[str, str], StudentResult]:
    """The results an earlier run recorded for `out` (none when `out` is gone or is not ours)."""
    if format not in CSV_FORMATS or not out.is_file() or not _ours(out, format):
        return {}
    found = {}
    for entry in _load(record_path(out)).get("results", []):
        result = StudentResult.from_record(entry)
        if result is not None and result.state and result.state != FAILED_TO_GRADE:
            found[(result.student, result.exercise)] = result
    return found


def write(out: Path, data: bytes, format: str, results: list[StudentResult]) -> None:
    """Write the table and, for tables, the record beside it; each replaced whole or not at all."""
    out.parent.mkdir(parents=True, exist_ok=True)
    if format in CSV_FORMATS:  # the record first: until the table is replaced, it still knows the old one
        previous = hashlib.sha256(out.read_bytes()).hexdigest() if out.is_file() else None
        record = {
            "kind": MARK,
            "format": format,
            "table": hashlib.sha256(data).hexdigest(),
            "previous": previous,
            "results": [result.to_record() for result in results],
        }
        _replace(record_path(out), json.dumps(record, ensure_ascii=True, indent=1).encode())
    _replace(out, data)


def _replace(path: Path, data: bytes) -> None:
    partial = path.with_name(f".{path.name}.partial")
    with open(partial, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(partial, path)
