"""The course's words and terms in both languages: one table the helpers and the tests read.

`WORDS` is every label the helpers print or draw themselves (table columns, progress lines,
a figure's title or curve, a task's status) with its Chinese: the one place such a word is
translated, so a new label cannot quietly stay English in a Chinese notebook. Sentences are
written in place with `say(en, zh)`, and a lesson's own literals in its `strings` table.
`tests/test_chinese.py` fails on an entry nothing uses and on English in a Chinese output.

One concept, one Chinese term (`TERMS`, COURSE.md's glossary): a learner who meets 副本 for a
replica in lesson 01 must not meet it for a copy of a dataset in lesson 05. `AVOID` lists the
variants readers stumbled on, each with the term to use instead; the tests fail on any of them
in Chinese prose, figures and printed lines.
"""

from __future__ import annotations

import re

from pstutor.language import say

# English label -> Chinese, with the glossary's terms
WORDS = {
    # columns of printed tables and the metrics of progress lines (keyed in `pstutor.tables.COLUMNS`)
    "accuracy": "准确率",
    "bytes": "字节数",
    "changed lines": "改动行数",
    "concats": "拼接次数",
    "device": "设备",
    "epoch": "周期",
    "examples/s": "样本/秒",
    "global batch": "全局批次大小",
    "learning rate": "学习率",
    "loss": "损失",
    "ms per step": "每步毫秒数",
    "partitioner": "分区器",
    "rank": "名次",
    "reads": "读取次数",
    "replicas": "副本数",
    "s": "秒",
    "shape": "形状",
    "shard": "分片",
    "start-up s": "启动秒数",
    "step": "步骤",
    "steps/s": "步/秒",
    "strategy": "策略",
    "task": "任务",
    "training": "训练方式",
    "updates": "更新次数",
    "variable": "变量",
    "variables": "变量数",
    "warm-up s": "预热秒数",
    "worker": "工作进程",
    # table cells that are words, not names
    "sync": "同步",
    "async": "异步",
    # curves and titles of the demo's figure
    "custom loop": "自定义训练循环",
    "Training loss per epoch": "每个周期的训练损失",
    # a graded task's status (`pstutor.grading.model.STATUSES`)
    "passed": "通过",
    "failed": "未通过",
    "not attempted": "未作答",
    "crashed": "崩溃",
    "invalid": "无效",
}


def words(text: str, lang: str | None = None) -> str:
    """`text` in `lang` (default: the current language): its Chinese from `WORDS`, or `text` itself."""
    return say(text, WORDS.get(text, text), lang)


TERMS = {
    "parameter server (ps)": "参数服务器",
    "worker": "工作进程",
    "coordinator (chief)": "协调器（chief）",
    "chief (MultiWorkerMirroredStrategy)": "主工作进程（chief）",
    "evaluator / sidecar evaluation": "评估器 / 边车评估",
    "cluster / job / task": "集群 / 作业 / 任务",
    "in-process cluster": "进程内集群",
    "variable sharding / shard / partitioner": "变量分片 / 分片 / 分区器",
    "training step / step function": "训练步骤 / 步骤函数",
    "schedule / join / fetch": "schedule（调度）/ join（等待）/ fetch（取回）",
    "closure / remote value": "闭包 / RemoteValue（远程值）",
    "per-worker dataset": "每个工作进程的数据集",
    "input pipeline / input context": "输入流水线 / 输入上下文",
    "callback / checkpoint": "回调 / 检查点",
    "epoch": "周期（“轮”只用于计时的轮次）",
    "fault tolerance / preemption": "容错 / 抢占",
    "synchronous / asynchronous training": "同步训练 / 异步训练",
    "replica / global batch size": "副本 / 全局批次大小",
}

# (what a reader met, the glossary's term, why): regular expressions over Chinese text
AVOID: list[tuple[str, str, str]] = [
    (r"(数据|完整|每份|一份|打乱的)副本", "一份数据", "副本 means a replica only"),
    (r"拷贝", "一份（数据）", "one word for a copy of the data: 一份"),
    (r"承诺", "RemoteValue（尚未就绪的结果）", "a RemoteValue is not a promise"),
    (r"占位符", "RemoteValue", "RemoteValue has one name"),
    (r"守护进程", "进程管理器", "a supervisor is not a daemon"),
    (r"小批量的方式", "分几小轮", "the meaning is rounds, not mini-batches"),
    (r"不分布(?!式)", "不使用分布式", "unidiomatic"),
    (r"看护", "监控", "unidiomatic"),
    (r"天真", "照搬默认写法", "unidiomatic"),
    (r"短命", "用完就停", "unidiomatic"),
]
# only in prose (markdown outside code): in code and printed job names these are TensorFlow's names
PROSE_ONLY: list[tuple[str, str, str]] = [
    (r"(?<![a-zA-Z_])ps(?![a-zA-Z_\-:])", "参数服务器", "参数服务器 in prose; `ps` only as the job's name"),
    (r"(?<![a-zA-Z_（])chief(?![a-zA-Z_）])", "协调器（chief）",
     "协调器 in prose; `chief` only as the task type"),
    (r"nbval|测试套件|不参与比较|检查范围|test suite", "—", "the learner does not run the course's tests"),
]


def avoided(text: str, prose: bool = False) -> list[str]:
    """The variants of `AVOID` (and in prose of `PROSE_ONLY`) that `text` uses, with the term to use."""
    rules = AVOID + PROSE_ONLY if prose else AVOID
    return [f"{match.group(0)!r} → {term} ({why})" for pattern, term, why in rules
            for match in re.finditer(pattern, text)]
