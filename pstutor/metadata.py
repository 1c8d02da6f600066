"""The notebook metadata the build writes and the checks and the grader read: one place for its keys.

Every generated notebook carries `metadata.pstutor = {schema, source, lang, variant}`: which
source it was made from, in which language, as which variant (lesson, solution, exercise),
and the version of this layout. Every code cell that holds the answer of exercise tasks
carries `metadata.pstutor = {tasks: ["NN.k", ...]}`, and every check cell calls
`pstutor.check("NN.k", ...)`. The grader finds a submission's exercise and answers through
these keys — and, when an editor or a learning platform dropped them, from the cells
themselves (`pstutor.grading.identify`).

Notebooks written before the layout had a version (schema 1, the same keys) read as schema 1.
"""

from __future__ import annotations

import re

KEY = "pstutor"
SCHEMA = 1
VARIANTS = ("lesson", "solution", "exercise")
SOURCE_NAME = re.compile(r"^\d\d_[a-z0-9_]+$")
CHECK_CALL = re.compile(r'pstutor\.check\(\s*"(\d\d\.\d+)"')


def notebook_metadata(source: str, lang: str, variant: str) -> dict:
    """What the build writes into a notebook's metadata under `pstutor`."""
    return {"schema": SCHEMA, "source": source, "lang": lang, "variant": variant}


def read_notebook(metadata: object) -> tuple[str, str, str] | None:
    """(source, lang, variant) of a notebook's metadata, or None when it has none this version reads."""
    meta = metadata.get(KEY) if isinstance(metadata, dict) else None
    if not isinstance(meta, dict) or meta.get("schema", 1) != SCHEMA:
        return None
    source, lang, variant = meta.get("source"), meta.get("lang"), meta.get("variant", "exercise")
    if not (isinstance(source, str) and SOURCE_NAME.match(source) and isinstance(lang, str)
            and variant in VARIANTS):
        return None
    return source, lang, variant


def cell_metadata(tasks: list[str]) -> dict:
    """What the build writes into an answer cell's metadata under `pstutor`."""
    return {"tasks": list(tasks)}


def tasks_of(cell: object) -> list[str]:
    """The tasks whose answer a cell holds, from its metadata ([] for any other cell, or odd metadata)."""
    metadata = cell.get("metadata", {}) if isinstance(cell, dict) else {}
    meta = metadata.get(KEY, {}) if isinstance(metadata, dict) else {}
    tasks = meta.get("tasks", []) if isinstance(meta, dict) else []
    return [task for task in tasks if isinstance(task, str)] if isinstance(tasks, list) else []


def checked_tasks(source: str) -> list[str]:
    """The tasks a code cell's source checks with `pstutor.check("NN.k", ...)`."""
    return CHECK_CALL.findall(source) if isinstance(source, str) else []
