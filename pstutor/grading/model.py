"""The results of grading, in one neutral shape every writer reads (CSV, gradebooks, autograders, screen).

A `TaskResult` is one task's status, its details in both languages and the ids of the
reasons a person should look at it; it scores 1 point only when it passed, nothing made it
suspect, or a teacher accepted it. A `StudentResult` is one submission: how it was recognised,
its tasks, or the problem that kept it from being graded. Both serialise to plain JSON
(`to_record` / `from_record`), which is what a rerun reads back: never a localised table.
"""

from __future__ import annotations

import dataclasses

from pstutor.glossary import words
from pstutor.language import say

PASSED, FAILED, NOT_ATTEMPTED, CRASHED, INVALID = "passed", "failed", "not attempted", "crashed", "invalid"
STATUSES = (PASSED, FAILED, NOT_ATTEMPTED, CRASHED, INVALID)
# How a submission ended: graded (its tasks are verdicts), invalid (the student's file is not an
# exercise), failed (the grader's own trouble: never a verdict, graded again by the next run).
GRADED, REFUSED, FAILED_TO_GRADE = "graded", "invalid", "failed"
RECORD_VERSION = 1

Text = dict[str, str]  # {"en": ..., "zh": ...}


def text(en: str, zh: str) -> Text:
    """A message in both languages."""
    return {"en": en, "zh": zh}


def shown(message: Text | None, lang: str | None = None) -> str:
    """A message in `lang` (default: the current language)."""
    if not message:
        return ""
    return message.get(lang) if lang in ("en", "zh") else say(message.get("en", ""), message.get("zh", ""))


def status_word(status: str, lang: str | None = None) -> str:
    """A task's status as a word of the table's language (default: the current language)."""
    return words(status, lang) if status in STATUSES else status


@dataclasses.dataclass
class TaskResult:
    """One task of one submission."""

    task: str
    status: str
    details: Text = dataclasses.field(default_factory=dict)
    review: list[str] = dataclasses.field(default_factory=list)  # reason ids (pstutor.grading.review)
    evidence: list[str] = dataclasses.field(default_factory=list)  # what each reason saw, for the teacher
    max_points: float = 1.0

    def points(self, accepted: bool = False) -> float:
        """The task's points: a flagged verdict counts 0 until a teacher accepts it."""
        if self.status != PASSED or (self.review and not accepted):
            return 0.0
        return self.max_points


@dataclasses.dataclass
class StudentResult:
    """One submission and what grading found."""

    student: str
    exercise: str = ""
    language: str = ""
    matched: str = ""  # "metadata", or "content" when the notebook had lost its metadata
    state: str = ""  # GRADED, REFUSED or FAILED_TO_GRADE ("" until it is graded)
    tasks: dict[str, TaskResult] = dataclasses.field(default_factory=dict)
    problem: Text = dataclasses.field(default_factory=dict)  # why it was not graded
    seconds: float = 0.0
    digest: str = ""  # of the file graded: a changed file is graded again
    settings: str = ""  # what the verdicts depend on besides the file: changed, it is graded again
    accepted: bool = False  # a teacher looked at the flagged tasks and accepts their verdicts

    def score(self) -> float:
        return sum(task.points(self.accepted) for task in self.tasks.values())

    def max_score(self) -> float:
        return sum(task.max_points for task in self.tasks.values())

    def flagged(self) -> list[str]:
        """Tasks waiting for a teacher: they passed, but a reason holds their points until accepted."""
        return (
            [] if self.accepted else [t.task for t in self.tasks.values() if t.review and t.status == PASSED]
        )

    def review(self) -> list[str]:
        """Every reason id of its tasks, in order, once."""
        return list(dict.fromkeys(reason for task in self.tasks.values() for reason in task.review))

    def to_record(self) -> dict:
        record = dataclasses.asdict(self)
        record["version"] = RECORD_VERSION
        return record

    @classmethod
    def from_record(cls, record: dict) -> StudentResult | None:
        """The result a record describes, or None for a record this version cannot read."""
        if not isinstance(record, dict) or record.get("version") != RECORD_VERSION:
            return None
        try:
            fields = {f.name for f in dataclasses.fields(cls)}
            values = {key: value for key, value in record.items() if key in fields}
            values["tasks"] = {name: TaskResult(**task) for name, task in record.get("tasks", {}).items()}
            return cls(**values)
        except (TypeError, AttributeError):
            return None
