"""Grading a class: `pstutor grade SUBMISSIONS/` runs every student's exercise notebook and writes
the results where the teacher keeps grades.

The package, one job per module:

- `model`: the results (per task: status, points, details in both languages, review reasons),
  which every writer reads and a rerun resumes from;
- `identify`: reading an untrusted notebook within bounds, and finding its exercise, language
  and answers — from the metadata the build writes, or from the cells when it is gone;
- `run`: the answers in a fresh copy of the exercise, one kernel per submission in its sandbox
  (`pstutor.sandbox`), verdicts read back only from sealed check records;
- `integrity`: inside the kernel, the audit hook that seals genuine verdicts and notes what an
  answer did that the grader cannot vouch for; `kernel`: the kernel's start-up;
- `review`: those reasons in words; a flagged task scores 0 until the teacher accepts it;
- `limits`: one cgroup and CPUs of its own per submission, or what holds without cgroups;
- `record`: the neutral record beside a table, settings fingerprints, which `--out` may be written;
- `export`: the course CSV, a Canvas/Moodle gradebook, Gradescope's and PrairieLearn's
  results.json, the screen summary; `escape`: student text made safe to show;
- `autograder`: the files Gradescope runs (`pstutor autograder gradescope`).

`classroom.grade()` ties them together: every submission is identified without running anything, the
ones already graded with the same file and settings are kept from the record, the others run
`jobs` at a time, and each result is written (inside its own guard) as soon as it is known.

The package itself imports nothing: the kernel a submission runs in imports
`pstutor.grading.integrity` before any cell, and must not pay for what only the grader
needs (nbformat alone brings in jsonschema and its grammars, several seconds on two cores).
`grade`, `summary` and the errors are loaded from `classroom` when first asked for.
"""

from __future__ import annotations

__all__ = ["GradingError", "GradingFailed", "grade", "summary"]


def __getattr__(name: str):
    """The grader's entry points, imported from `classroom` on first use (PEP 562)."""
    if name in __all__:
        from pstutor.grading import classroom

        return getattr(classroom, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
