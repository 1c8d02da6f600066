"""Before any test runs, one line per group of tests this run will skip, with the command that runs them.

A green suite that skipped the grader's sandbox or the browser never tested them, and a skip
listed only at the very end of a long run is easy to miss. So once collection is done, the
skips this run will make are worked out from the same marks pytest evaluates a moment later
(`skipif` conditions, and whole files skipped while being collected), grouped by test file and
printed first; `./dev.sh test` adds `-rs`, so the closing summary names them again.

Hooks of the suite's conftest.py (it imports them from here). The lines are in the language
of `PSTUTOR_LANG`, else of the locale (`LANG`): Chinese for zh*, English otherwise.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
from _pytest.skipping import evaluate_skip_marks  # what pytest itself runs before each test


@dataclass(frozen=True)
class Group:
    """Tests that skip for one reason a maintainer can fix: their name and how to run them."""

    en: str
    zh: str
    command: str  # `{python}`: this run's interpreter


INSTALL = "sudo bash .ci/system-packages.sh"
GROUPS = {
    "test_browser.py": Group("the JupyterLab rehearsal in Chromium", "Chromium 中的 JupyterLab 演练",
                             INSTALL),
    "test_grade.py": Group("the grader's sandbox (bubblewrap)", "评分器的沙箱（bubblewrap）", INSTALL),
    "test_multihost.py": Group("the multi-host rehearsal (network namespaces)", "多主机演练（网络命名空间）",
                               "sudo {python} -m pytest -rs tests/test_multihost.py"),
    "test_colab.py": Group("the Colab rehearsal", "Colab 演练", "./dev.sh test-colab"),
}


def say(en: str, zh: str) -> str:
    """The message in the plan's language: PSTUTOR_LANG=zh, or (without it) a zh* locale."""
    chosen = os.environ.get("PSTUTOR_LANG") or os.environ.get("LC_ALL") or os.environ.get("LANG", "")
    return zh if chosen.startswith("zh") else en


_skipped_files: dict[str, str] = {}  # test files skipped whole while collected: path -> reason


def pytest_collectreport(report: pytest.CollectReport) -> None:
    """Remember each test file skipped whole (a module-level `pytest.skip` or `importorskip`)."""
    if report.skipped and report.nodeid.endswith(".py"):
        _skipped_files[report.nodeid] = report.longrepr[2].removeprefix("Skipped: ")


def pytest_collection_finish(session: pytest.Session) -> None:
    """Print the plan: one line per group of tests that will be skipped, before the first test."""
    terminal = session.config.pluginmanager.get_plugin("terminalreporter")
    if terminal is None:
        return
    for line in plan(session.items, _skipped_files):
        terminal.write_line(line, yellow=True)


def plan(items: list[pytest.Item], skipped_files: dict[str, str]) -> list[str]:
    """The plan's lines: per test file with skips, how many, why, and the command that runs them."""
    counts: Counter[str] = Counter()
    reasons: dict[str, str] = dict(skipped_files)
    for item in items:
        skip = evaluate_skip_marks(item)
        if skip is not None:
            path = item.nodeid.split("::")[0]
            counts[path] += 1
            reasons.setdefault(path, skip.reason)
    return [_line(path, counts.get(path), reason) for path, reason in sorted(reasons.items())]


def _line(path: str, count: int | None, reason: str) -> str:
    group = GROUPS.get(Path(path).name)
    name = say(group.en, group.zh) if group else path
    if count is None:
        what = say(f"all of {path}", f"{path} 整个文件")
    else:
        what = say(f"{count} test{'s' * (count != 1)} in {path}", f"{path} 中的 {count} 个测试")
    line = say(f"skipped in this run: {name} ({what}): {reason}",
               f"本次运行将跳过：{name}（{what}）：{reason}")
    if group is GROUPS["test_grade.py"] and shutil.which("bwrap"):  # installed, but refused its namespaces
        return line + say(". bwrap is installed but may not create user namespaces here (a kernel setting)",
                          "。bwrap 已安装，但这里不允许它创建用户命名空间（内核设置）")
    if group:
        command = group.command.format(python=_python())
        return line + say(f". To run them: {command}", f"。运行它们：{command}")
    return line


def _python() -> str:
    """This run's interpreter, written from the clone's top folder where it lies inside it."""
    here, top = Path(sys.executable), Path.cwd()
    return str(here.relative_to(top)) if here.is_relative_to(top) else str(here)
