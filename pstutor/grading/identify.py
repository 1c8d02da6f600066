"""Which exercise a submission is, in which language, and which of its cells are the answers.

A submission is untrusted bytes. It is read only if it is a regular file, only up to a size,
a nesting depth and a number of values that a notebook of this course never comes near, and
parsed as plain JSON without validating (a schema check of a hostile file costs more than
the file). Only the cells' sources and metadata are looked at; outputs are never read.

The exercise and language come from the notebook metadata the build writes
(`pstutor.metadata`). When an editor or a learning platform dropped it, or the student pasted
the answers into a fresh notebook, they come from the cells: the task ids in the check cells
(`pstutor.check("03.1", ...)`), else the exercise's title; the language from the title, the
`pstutor.setup(lang=...)` call or the prose. An answer is the cell marked with its task in
the cell metadata, else the code cell before the check cell of its task, else the cell that
still starts with its ✏️ line. The result says which way it was matched.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import stat
from pathlib import Path

import numpy as np

from pstutor import metadata
from pstutor.grading.model import Text, text
from pstutor.language import LANGUAGES

MAX_NOTEBOOK_BYTES = 16 << 20
MAX_DEPTH = 64  # JSON nesting (a notebook of this course: under 10)
MAX_VALUES = 1_000_000  # JSON values (commas and brackets)
MAX_CELLS = 2000
MAX_ANSWER_BYTES = 1 << 20  # per answer cell
# A JSON string, or an unterminated one up to the end: it matches at the first try from every
# quote, so no input makes the search start again inside a string (a quote and then escaped
# quotes, 16 MiB of them, would otherwise take years).
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*(?:\\\Z)?(?:"|\Z)', re.S)
_TITLE = re.compile(r"^#\s+(.+?)\s*$", re.M)
_SETUP_LANG = re.compile(r'pstutor\.setup\(\s*lang\s*=\s*["\'](en|zh)["\']')
_CJK = re.compile(r"[\u4e00-\u9fff]")
_MARKER = {"en": re.compile(r"^\s*# ✏️ Task (\d+):"), "zh": re.compile(r"^\s*# ✏️ 任务 (\d+)：")}
_SUFFIXES = (" (solution)", "（参考答案）")


class Invalid(ValueError):
    """A submission that cannot be graded, with the reason in both languages."""

    def __init__(self, reason: Text) -> None:
        super().__init__(reason["en"])
        self.reason = reason


@dataclasses.dataclass
class Exercise:
    """One committed student copy of an exercise, as the grader compares submissions with it."""

    source: str  # e.g. "03_model_fit"
    lang: str
    path: Path
    title: str
    tasks: list[str]  # in notebook order


@dataclasses.dataclass
class Identified:
    """What reading a submission found."""

    digest: str
    exercise: Exercise
    matched: str  # "metadata" or "content"
    answers: dict[tuple[str, ...], str]  # the official cell's tasks -> the student's source


def catalogue(course: Path) -> list[Exercise]:
    """Every exercise the course's committed student copies hold, in both languages."""
    found = []
    for lang in LANGUAGES:
        for path in sorted((course / "exercises" / lang).glob("[0-9][0-9]_*.ipynb")):
            cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
            titles = _TITLE.findall(_joined(cells[0]["source"])) if cells else []
            tasks = [
                task for cell in cells if cell["cell_type"] == "code" for task in metadata.tasks_of(cell)
            ]
            found.append(Exercise(path.stem, lang, path, titles[0] if titles else "", tasks))
    return found


def read_submission(path: Path) -> tuple[bytes, dict]:
    """The bytes and the parsed JSON of a submission, refusing what no notebook of the course looks like."""
    data = _read_regular_file(path)
    _check_shape(data)
    try:
        notebook = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        raise Invalid(
            text(f"not a notebook (not JSON: {str(err)[:80]})", f"不是笔记本（不是 JSON：{str(err)[:80]}）")
        ) from None
    cells = notebook.get("cells") if isinstance(notebook, dict) else None
    if not isinstance(cells, list) or not all(isinstance(cell, dict) for cell in cells):
        raise Invalid(text("not a notebook (no list of cells)", "不是笔记本（没有单元格列表）"))
    if len(cells) > MAX_CELLS:
        raise Invalid(text(f"more than {MAX_CELLS} cells", f"超过 {MAX_CELLS} 个单元格"))
    return data, notebook


def identify(path: Path, course_exercises: list[Exercise], only: str | None = None) -> Identified:
    """Read the submission at `path` and find its exercise, language and answers (or raise Invalid)."""
    data, notebook = read_submission(path)
    digest = hashlib.sha256(data).hexdigest()[:16]
    cells = [_cell(cell) for cell in notebook["cells"]]
    known = metadata.read_notebook(notebook.get("metadata"))
    exercise = _by_metadata(known, course_exercises)
    matched = "metadata" if exercise else "content"
    if exercise is None:
        exercise = _by_content(cells, course_exercises)
    if only and not exercise.source.startswith(only):
        raise Invalid(
            text(
                f"this is exercise {exercise.source}, not {only}", f"这是练习 {exercise.source}，不是 {only}"
            )
        )
    answers, by_content = _answers(cells, exercise)
    if by_content and matched == "metadata":
        matched = "metadata+content"
    return Identified(digest, exercise, matched, answers)


def _read_regular_file(path: Path) -> bytes:
    """The bytes of a regular file; links, folders, FIFOs and devices are refused unopened."""
    try:
        info = os.lstat(path)
    except OSError as err:
        raise Invalid(text(f"cannot be read ({err.strerror})", f"无法读取（{err.strerror}）")) from None
    if not stat.S_ISREG(info.st_mode):
        raise Invalid(
            text(
                "not a regular file (a link, folder, FIFO or device): not opened",
                "不是普通文件（链接、文件夹、FIFO 或设备）：未打开",
            )
        )
    if info.st_size > MAX_NOTEBOOK_BYTES:
        size = MAX_NOTEBOOK_BYTES >> 20
        raise Invalid(text(f"larger than {size} MiB: not read", f"超过 {size} MiB：未读取"))
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as err:
        raise Invalid(text(f"cannot be read ({err.strerror})", f"无法读取（{err.strerror}）")) from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise Invalid(text("not a regular file: not opened", "不是普通文件：未打开"))
        data = handle.read(MAX_NOTEBOOK_BYTES + 1)
    if len(data) > MAX_NOTEBOOK_BYTES:
        raise Invalid(
            text(
                f"larger than {MAX_NOTEBOOK_BYTES >> 20} MiB: not read",
                f"超过 {MAX_NOTEBOOK_BYTES >> 20} MiB：未读取",
            )
        )
    return data


def _check_shape(data: bytes) -> None:
    """Refuse, before parsing, JSON nested deeper or holding more values than a notebook ever does."""
    outside = np.frombuffer(_STRING.sub(b'""', data), dtype=np.uint8)
    steps = np.zeros(len(outside), dtype=np.int32)
    steps[(outside == ord("[")) | (outside == ord("{"))] = 1
    steps[(outside == ord("]")) | (outside == ord("}"))] = -1
    depth = int(np.cumsum(steps).max()) if len(steps) else 0
    if depth > MAX_DEPTH:
        raise Invalid(
            text(f"nested deeper than {MAX_DEPTH} levels: not read", f"嵌套超过 {MAX_DEPTH} 层：未读取")
        )
    values = int(np.count_nonzero(outside == ord(","))) + int(np.count_nonzero(steps == 1))
    if values > MAX_VALUES:
        raise Invalid(
            text(f"more than {MAX_VALUES:,} JSON values: not read", f"JSON 值超过 {MAX_VALUES:,} 个：未读取")
        )


@dataclasses.dataclass
class _Cell:
    kind: str
    source: str
    tasks: list[str]


def _cell(cell: dict) -> _Cell:
    source = cell.get("source", "")
    return _Cell(str(cell.get("cell_type", "")), _joined(source), metadata.tasks_of(cell))


def _joined(source: object) -> str:
    if isinstance(source, str):
        return source
    if isinstance(source, list) and all(isinstance(line, str) for line in source):
        return "".join(source)
    return ""


def _by_metadata(known: tuple[str, str, str] | None, exercises: list[Exercise]) -> Exercise | None:
    if known is None:
        return None
    source, lang, _ = known
    return next((e for e in exercises if e.source == source and e.lang == lang), None)


def _title(text_: str) -> str:
    for suffix in _SUFFIXES:
        text_ = text_.removesuffix(suffix)
    return " ".join(text_.split())


def _by_content(cells: list[_Cell], exercises: list[Exercise]) -> Exercise:
    checked = {task for cell in cells if cell.kind == "code" for task in metadata.checked_tasks(cell.source)}
    numbers = sorted({task[:2] for task in checked})
    titles = {
        _title(title) for cell in cells if cell.kind == "markdown" for title in _TITLE.findall(cell.source)
    }
    by_title = [e for e in exercises if _title(e.title) in titles]
    if len(numbers) > 1:
        raise Invalid(
            text(
                f"no pstutor metadata, and it checks tasks of exercises {', '.join(numbers)}: "
                "grade each exercise in its own notebook",
                f"没有 pstutor 元数据，而且检查了练习 {'、'.join(numbers)} 的任务："
                "每个练习请用单独的笔记本提交",
            )
        )
    if numbers:
        candidates = [e for e in exercises if e.source[:2] == numbers[0]]
        if not candidates:
            raise Invalid(
                text(
                    f"no pstutor metadata, and this course has no exercise {numbers[0]}",
                    f"没有 pstutor 元数据，而且本课程没有练习 {numbers[0]}",
                )
            )
    elif by_title:
        candidates = by_title
    else:
        raise Invalid(
            text(
                'no pstutor metadata, no check cell (pstutor.check("NN.k", ...)) and no title '
                "of an exercise of this course: not recognised",
                '没有 pstutor 元数据，也没有检查单元格（pstutor.check("NN.k", ...)）'
                "或本课程练习的标题：无法识别",
            )
        )
    lang = _language(cells, by_title, candidates)
    return next(e for e in candidates if e.lang == lang)


def _language(cells: list[_Cell], by_title: list[Exercise], candidates: list[Exercise]) -> str:
    titled = {e.lang for e in by_title if e.source == candidates[0].source}
    if len(titled) == 1:
        return titled.pop()
    for cell in cells:
        found = _SETUP_LANG.search(cell.source) if cell.kind == "code" else None
        if found:
            return found.group(1)
    prose = "".join(cell.source for cell in cells if cell.kind == "markdown")
    return "zh" if _CJK.search(prose) else "en"


def _answers(cells: list[_Cell], exercise: Exercise) -> tuple[dict[tuple[str, ...], str], bool]:
    """The student's source for each answer cell of the exercise; and whether any was found by content."""
    official = [_cell(cell) for cell in json.loads(exercise.path.read_text(encoding="utf-8"))["cells"]]
    groups = [tuple(cell.tasks) for cell in official if cell.kind == "code" and cell.tasks]
    by_metadata = {tuple(cell.tasks): cell.source for cell in cells if cell.kind == "code" and cell.tasks}
    code = [cell for cell in cells if cell.kind == "code"]
    answers, by_content = {}, False
    for group in groups:
        source = by_metadata.get(group)
        if source is None:
            source = _answer_by_position(code, group[0]) or _answer_by_marker(code, group[0])
            by_content = by_content or source is not None
        if source is not None:
            if len(source.encode("utf-8", "surrogatepass")) > MAX_ANSWER_BYTES:
                raise Invalid(
                    text(
                        f"the answer to {group[0]} is larger than {MAX_ANSWER_BYTES >> 20} MiB",
                        f"{group[0]} 的答案超过 {MAX_ANSWER_BYTES >> 20} MiB",
                    )
                )
            answers[group] = source
    return answers, by_content


def _answer_by_position(code: list[_Cell], task: str) -> str | None:
    """The code cell before the first cell that checks `task` (and is not itself a check cell)."""
    for index, cell in enumerate(code):
        if metadata.checked_tasks(cell.source) == [task]:
            before = code[index - 1] if index else None
            if (
                before is not None
                and not metadata.checked_tasks(before.source)
                and not _SETUP_LANG.search(before.source)
            ):
                return before.source
            return None
    return None


def _answer_by_marker(code: list[_Cell], task: str) -> str | None:
    number = task.split(".")[1]
    for cell in code:
        first = cell.source.lstrip("\n").split("\n", 1)[0]
        if any((found := marker.match(first)) and found.group(1) == number for marker in _MARKER.values()):
            return cell.source
    return None
