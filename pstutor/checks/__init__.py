"""Exercise checks: `pstutor.check("01.1", strategy=strategy)` inspects the real objects a
student built and answers in the notebook's language: what passed, what failed, and a hint
that points at the concept without giving the answer away.

Each exercise has a module here (`ex01`, `ex02`, ...) whose check functions are registered
with `@task("NN.k")` and state their requirements with `expect(...)`, in order: the first
unmet requirement stops the check, because later ones usually build on it. Each requirement
comes with what was found when it is not met, so a failure line (✗) says what the answer
does, not only what it should do. A task whose
answers are still `None` (the student copy's stub) is "not done", never a crash.

The result is shown as text and also carries a small JSON record (`MIME`, with the failure
in both languages), which is how `pstutor grade` reads the verdict of every task without
parsing prose. When a check runs in a graded kernel, it announces itself and hands its record
to the grader's integrity hook (audit events `pstutor.check` and `pstutor.verdict`, see
`pstutor.grading.integrity`), which seals it; anywhere else those events cost nothing. In
IPython, a check cell whose answer names are undefined (its ✏️ cell stopped early) shows a
failed check saying so, instead of a bare `NameError`.

Checks read the objects an answer built, so they test what those objects are, not what they
claim: `genuine(value, cls)` accepts only an instance whose real class descends from `cls`
(not an object that reports another `__class__`, nor one of an unrelated class that merely
has the same attributes).
"""

from __future__ import annotations

import contextvars
import dataclasses
import importlib
import sys
from collections.abc import Callable

from pstutor.language import say
from pstutor.metadata import CHECK_CALL

MIME = "application/vnd.pstutor.check+json"
PASSED, FAILED, NOT_DONE = "passed", "failed", "not done"
Text = tuple[str, str]  # (English, Chinese)

_CHECKS: dict[str, Callable[..., None]] = {}
_passed: contextvars.ContextVar[list[Text]] = contextvars.ContextVar("passed")


class Unmet(Exception):
    """A requirement of the task that the student's answer does not meet yet."""

    def __init__(self, found: Text, hint_id: str, hint: Text) -> None:
        super().__init__(hint_id)
        self.found, self.hint_id, self.hint = found, hint_id, hint


@dataclasses.dataclass(frozen=True)
class Result:
    """The verdict on one task, shown in the current language."""

    task: str
    status: str
    passed: tuple[str, ...] = ()
    failed: str = ""
    hint: str = ""
    hint_id: str = ""
    details: tuple[Text, Text] | None = None  # (what was found, hint) in both languages, for the grader
    sealed: dict | None = dataclasses.field(default=None, compare=False)  # as a graded kernel sealed it

    def text(self) -> str:
        """The verdict as a few lines of text."""
        if self.status == NOT_DONE:
            return say(f"⏳ Task {self.task}: not done yet. Write your code in the cell marked ✏️ "
                       "above, run it, then run this cell again.",
                       f"⏳ 任务 {self.task}：还没有完成。请在上方标有 ✏️ 的单元格中写代码并运行，"
                       "然后再运行这个单元格。")
        head = say(f"✅ Task {self.task} passed", f"✅ 任务 {self.task} 通过") if self.status == PASSED \
            else say(f"❌ Task {self.task} is not right yet", f"❌ 任务 {self.task} 还不正确")
        lines = [head] + [f"   ✓ {item}" for item in self.passed]
        if self.status == FAILED:
            lines += [f"   ✗ {self.failed}", say("   Hint: ", "   提示：") + self.hint]
        return "\n".join(lines)

    def record(self) -> dict[str, str]:
        """The machine-readable verdict that `pstutor grade` collects."""
        if self.sealed is not None:
            return dict(self.sealed)
        detail = f"✗ {self.failed} — {self.hint}" if self.status == FAILED else ""
        record = {"task": self.task, "status": self.status, "hint": self.hint_id, "detail": detail}
        if self.status == FAILED and self.details:
            (what_en, what_zh), (hint_en, hint_zh) = self.details
            record["details"] = {"en": f"✗ {what_en} — {hint_en}", "zh": f"✗ {what_zh} — {hint_zh}"}
        return record

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        return {"text/plain": self.text(), MIME: self.record()}

    def __repr__(self) -> str:
        return self.text()


def task(task_id: str) -> Callable:
    """Register a check function for one exercise task."""
    def register(function: Callable[..., None]) -> Callable[..., None]:
        _CHECKS[task_id] = function
        return function
    return register


def expect(condition: object, what: Text, hint_id: str, hint: Text, found: Text) -> None:
    """Record `what` as passed, or stop the check with what was `found` and a hint when `condition`
    is false."""
    if not condition:
        raise Unmet(found, hint_id, hint)
    _passed.get().append(what)


def check(task_id: str, **answers: object) -> Result:
    """Check the student's answers to one task and show what passed, what failed and a hint."""
    sys.audit("pstutor.check", task_id)
    result = _verdict(task_id, answers)
    record = result.record()
    sys.audit("pstutor.verdict", record, answers)  # a graded kernel's hook seals the record here
    return dataclasses.replace(result, sealed=record) if "seal" in record else result


def genuine(value: object, cls: type) -> bool:
    """Whether `value` really is a `cls`: its real class descends from `cls` (`isinstance` would also
    believe an object whose `__class__` says so, or a class registered with an ABC)."""
    return cls in type.__dict__["__mro__"].__get__(type(value))


def _verdict(task_id: str, answers: dict[str, object]) -> Result:
    function = _find(task_id)
    if any(value is None or value is ... for value in answers.values()):
        return Result(task_id, NOT_DONE)
    passed: list[Text] = []
    token = _passed.set(passed)
    try:
        function(**answers)
    except Unmet as unmet:
        return _failed(task_id, passed, unmet.found, unmet.hint, unmet.hint_id)
    except Exception as err:  # the student's code failed while the check used it
        name = type(err).__name__
        what = (f"your code raised {name}: {err}", f"你的代码抛出了 {name}：{err}")
        hint = ("read the error and fix the cell marked ✏️", "读一读错误信息，修改标有 ✏️ 的单元格")
        return _failed(task_id, passed, what, hint, "raised")
    finally:
        _passed.reset(token)
    return Result(task_id, PASSED, _say_all(passed))


def _failed(task_id: str, passed: list[Text], what: Text, hint: Text, hint_id: str) -> Result:
    return Result(task_id, FAILED, _say_all(passed), say(*what), say(*hint), hint_id, (what, hint))


def _answer_missing(shell, etype, value, tb, tb_offset=None):
    """A check cell whose answer names are undefined (the ✏️ cell stopped early): a ✗, not a NameError."""
    found = CHECK_CALL.findall(shell.user_ns.get("In", [""])[-1] if shell.user_ns.get("In") else "")
    if len(found) != 1 or not isinstance(value, NameError):
        shell.showtraceback((etype, value, tb), tb_offset=tb_offset)
        return None
    name = getattr(value, "name", None) or str(value)
    what = (f"`{name}` is not defined: the cell marked ✏️ above stopped before it set it (or was not run)",
            f"`{name}` 没有定义：上方标有 ✏️ 的单元格在给它赋值之前就停下了（或者还没有运行）")
    hint = ("run the cell marked ✏️ again and fix the first error it shows",
            "重新运行标有 ✏️ 的单元格，并修改它显示的第一个错误")
    from IPython.display import display

    display(_failed(found[0], [], what, hint, "answer-missing"))
    return None


def watch_check_cells() -> None:
    """In IPython, a NameError in a check cell becomes a failed check that says what is missing."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is not None and hasattr(shell, "set_custom_exc"):
        shell.set_custom_exc((NameError,), _answer_missing)


def _find(task_id: str) -> Callable[..., None]:
    exercise = task_id.split(".")[0]
    if task_id not in _CHECKS:
        try:
            importlib.import_module(f"pstutor.checks.ex{exercise}")
        except ModuleNotFoundError as err:
            if err.name != f"pstutor.checks.ex{exercise}":
                raise
    if task_id not in _CHECKS:
        raise ValueError(say(f"no check for task {task_id!r}", f"没有任务 {task_id!r} 的检查"))
    return _CHECKS[task_id]


def _say_all(items: list[Text]) -> tuple[str, ...]:
    return tuple(say(*item) for item in items)


watch_check_cells()
