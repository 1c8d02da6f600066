"""The course manifest, `lessons/course.toml`: every lesson, in order, declared once.

Whatever enumerates the lessons (the build, the benchmarks, the tests) reads them here, not
from a file pattern such as `0*`, so a new lesson is one entry in the manifest and nothing
can miss it. Reading it refuses a manifest that disagrees with the sources: a source in
`lessons/` or `lessons/exercises/` it does not declare, a declared lesson whose source is
missing, lessons out of order. Like the sources, the manifest lives in the clone, not in the
package: the course tools find it from the clone's top folder.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from pstutor.course import read_toml

PATH = Path("lessons", "course.toml")  # inside the clone
_SLUG = re.compile(r"[0-9]{2}_[a-z0-9_]+")


class ManifestError(ValueError):
    """A manifest that is malformed or disagrees with the sources in `lessons/`."""


@dataclasses.dataclass(frozen=True)
class Lesson:
    """One lesson as the manifest declares it (the top of `lessons/course.toml` says what for)."""

    slug: str  # the file stem of its sources and notebooks: "01_cluster"
    title: str  # after "Lesson N: " in its source's first heading
    title_zh: str  # after "第 N 课：" in the Chinese heading
    summary: str  # its line in the README's course map
    budget_seconds: float  # the most each of its notebooks may take on the 2-core machine
    guide_ratio: float  # ... and the most, in times the official guide's time
    fresh_kernel: tuple[int, ...] = ()  # exercise tasks whose answers each need a fresh kernel

    @property
    def number(self) -> str:
        """Its two digits, "01": how commands name it (`pstutor build 01`), its task ids' prefix."""
        return self.slug[:2]


@dataclasses.dataclass(frozen=True)
class Course:
    """The whole manifest."""

    lessons: tuple[Lesson, ...]
    total_budget_seconds: float  # the lesson notebooks of one language together


def read(root: Path) -> Course:
    """The manifest of the course at `root`, checked against its sources."""
    path = root / PATH
    if not path.is_file():
        raise ManifestError(f"{PATH} is missing: it declares the course's lessons")
    try:
        data = read_toml(path)
    except ValueError as err:  # tomllib.TOMLDecodeError is a ValueError
        raise ManifestError(f"{PATH}: {err}") from None
    _check_keys(data, {"total_budget_seconds", "lesson"}, set(), str(PATH))
    if not isinstance(data["lesson"], list):
        raise ManifestError(f"{PATH}: each lesson is a [[lesson]] table")
    fields = dataclasses.fields(Lesson)
    required = {f.name for f in fields if f.default is dataclasses.MISSING}
    lessons = []
    for index, entry in enumerate(data["lesson"], 1):
        where = f"{PATH}, lesson {index}"
        _check_keys(entry, required, {f.name for f in fields} - required, where)
        lesson = Lesson(**{**entry, "fresh_kernel": tuple(entry.get("fresh_kernel", ()))})
        if not _SLUG.fullmatch(lesson.slug) or lesson.number != f"{index:02d}":
            raise ManifestError(f"{where}: slug {lesson.slug!r} must be '{index:02d}_name' "
                                "(lessons are numbered 01, 02, ... in the manifest's order)")
        lessons.append(lesson)
    _check_sources(root, lessons)
    return Course(tuple(lessons), data["total_budget_seconds"])


def _check_keys(table: dict, required: set[str], optional: set[str], where: str) -> None:
    """A table has every required key and no other than the optional ones (a typo is not ignored)."""
    problems = []
    if missing := sorted(required - set(table)):
        problems.append(f"missing {missing}")
    if unknown := sorted(set(table) - required - optional):
        problems.append(f"unknown {unknown}")
    if problems:
        raise ManifestError(f"{where}: {'; '.join(problems)}")


def _check_sources(root: Path, lessons: list[Lesson]) -> None:
    """Every source in `lessons/` and `lessons/exercises/` is declared; every lesson's source exists.

    A lesson need not have an exercise here (tests/test_exercises.py requires one of each).
    """
    declared = {lesson.slug for lesson in lessons}
    problems = [f"{source.relative_to(root).as_posix()} is not declared in {PATH}: add a [[lesson]] "
                f"with slug = {source.stem!r}, or move the file out of lessons/"
                for folder in (root / "lessons", root / "lessons" / "exercises")
                for source in sorted(folder.glob("*.md")) if source.stem not in declared]
    problems += [f"{PATH} declares {lesson.slug!r}, but lessons/{lesson.slug}.md does not exist"
                 for lesson in lessons if not (root / "lessons" / f"{lesson.slug}.md").is_file()]
    if problems:
        raise ManifestError("\n".join(problems))
