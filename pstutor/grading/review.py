"""Why a verdict needs a teacher's look: the reason ids the integrity hook and the grader give, in words.

A task with a reason scores 0 in every format until the teacher accepts the submission
(`pstutor grade ... --accept STUDENT`); the reasons say what the answer did, so the teacher
knows what to look at.
"""

from __future__ import annotations

from pstutor.grading.model import StudentResult, Text, shown, text

REASONS: dict[str, Text] = {
    "introspection": text("reads the interpreter's frames or object graph", "读取了解释器的栈帧或对象图"),
    "tracing": text("installs a tracer or profiler", "安装了跟踪器或性能分析器"),
    "audit-hooks": text("adds an audit hook of its own", "添加了自己的审计钩子"),
    "code-objects": text("makes code or function objects at run time", "在运行时构造代码对象或函数对象"),
    "dynamic-code": text(
        "runs code built at run time (exec, eval, compile)", "运行了在运行时构造的代码（exec、eval、compile）"
    ),
    "patching": text(
        "changes functions, classes or modules that the checks use", "修改了检查所依赖的函数、类或模块"
    ),
    "display-path": text(
        "changes how results are shown (IPython's or the interpreter's hooks)",
        "修改了结果的显示方式（IPython 或解释器的钩子）",
    ),
    "foreign-functions": text("calls foreign functions (ctypes, cffi)", "调用了外部函数（ctypes、cffi）"),
    "processes": text("starts other programs", "启动了其他程序"),
    "signals": text("sends signals", "发送了信号"),
    "process-memory": text("reads process memory", "读取了进程内存"),
    "threads": text("leaves threads running into later cells", "留下的线程在之后的单元格中仍在运行"),
    "imitation": text(
        "passes objects of classes it wrote where a check expects a library's",
        "在检查需要库中类型的地方，传入了自己编写的类的对象",
    ),
    "imports": text("imports code from outside the installed packages", "导入了已安装包之外的代码"),
    "forged-verdict": text("produces a verdict outside the official check", "在官方检查之外产生了判定"),
    "unsealed": text("shows a 'passed' that the checker did not give", "显示了并非由检查程序给出的“通过”"),
    "replayed": text(
        "shows a 'passed' that the checker gave in another cell's run",
        "显示了检查程序在另一个单元格的运行中给出的“通过”",
    ),
    "no-verdict": text("keeps a check cell from showing its verdict", "让检查单元格无法显示判定"),
}
_UNKNOWN = text("did something the grader cannot vouch for", "做了评分程序无法担保的事")


def reason_text(reason: str, lang: str | None = None) -> str:
    """One reason id in words."""
    return shown(REASONS.get(reason, _UNKNOWN), lang)


def review_text(result: StudentResult, lang: str | None = None) -> str:
    """The review column: empty, or what needs a look (and whether the teacher accepted it)."""
    reasons = result.review()
    if not reasons:
        return ""
    words = [reason_text(reason, lang) for reason in reasons]
    tasks = result.flagged()
    if result.accepted:
        return shown(text("accepted by the teacher: ", "教师已接受："), lang) + "; ".join(words)
    if not tasks:
        return shown(text("needs review: ", "需要人工查看："), lang) + "; ".join(words)
    where = ", ".join(tasks)
    return shown(
        text(
            f"needs review ({where} {'counts' if len(tasks) == 1 else 'count'} 0 until accepted): ",
            f"需要人工查看（{where} 在接受前计 0 分）：",
        ),
        lang,
    ) + "; ".join(words)


def evidence_text(result: StudentResult) -> list[str]:
    """What each reason saw, task by task (for the details column and the screen)."""
    return list(dict.fromkeys(item for task in result.tasks.values() for item in task.evidence))
