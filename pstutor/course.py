"""Where the course's own files are: the clone a maintainer or a teacher works in.

What a notebook imports works from an installed package alone (Colab installs pstutor like
any package). The course's tools — the notebook build, grading, the benchmarks — work on the
sources and notebooks of a clone, so they take its folder explicitly (`--course DIR`) or find
it from the working directory, never from where the package happens to be installed.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pstutor.language import say

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10 has no tomllib: tomli is the same parser as a package (a dependency there only)
    import tomli as tomllib


class CourseNotFoundError(LookupError):
    """A course tool was run outside a clone of the course."""


def is_course(folder: Path) -> bool:
    """Whether `folder` is the top of a clone: a pyproject.toml with `[tool.pstutor]`, and lessons/."""
    if not ((folder / "pyproject.toml").is_file() and (folder / "lessons").is_dir()):
        return False
    try:
        return "pstutor" in read_pyproject(folder).get("tool", {})
    except (OSError, ValueError):  # unreadable, not UTF-8, or not TOML (TOMLDecodeError is a ValueError)
        return False


def find_course(start: Path | str | None = None) -> Path:
    """The clone that holds `start` (default: the working directory), or an error saying what to do."""
    if start is not None and not Path(start).is_dir():
        raise CourseNotFoundError(say(f"{start} is not a folder",
                                      f"{start} 不是文件夹"))
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if is_course(folder):
            return folder
    raise CourseNotFoundError(say(
        f"{here} is not inside a clone of the course (a folder with lessons/ and a pyproject.toml "
        "that has [tool.pstutor]): run this command in the clone, or pass --course DIR",
        f"{here} 不在课程仓库的克隆中（应有 lessons/ 和含 [tool.pstutor] 的 pyproject.toml）："
        "请在克隆目录中运行此命令，或用 --course DIR 指定"))


def read_toml(path: Path) -> dict:
    """A parsed TOML file of the clone, read the same way on every Python (tomli on 3.10)."""
    return tomllib.loads(path.read_text(encoding="utf-8"))


def read_pyproject(folder: Path) -> dict:
    """The parsed pyproject.toml of `folder` (the tests read it this way too, on every Python)."""
    return read_toml(folder / "pyproject.toml")


def publication(root: Path) -> dict[str, str]:
    """Where the course is published (`[tool.pstutor]` in pyproject.toml, the only place)."""
    return read_pyproject(root)["tool"]["pstutor"]
