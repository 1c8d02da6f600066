"""Building, reading and checking `TF_CONFIG`, the variable that tells a task its cluster and role.

Every task of a real cluster gets the same `cluster` section and its own `task` section:

    {"cluster": {"chief": ["host0:2222"], "worker": [...], "ps": [...]},
     "task": {"type": "worker", "index": 1}}

TensorFlow's own errors for a wrong `TF_CONFIG` are often a hang or a message far from the
cause; these helpers name the problem instead.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import reprlib
from collections.abc import Mapping, Sequence

from pstutor.language import say

JOBS = ("chief", "worker", "ps", "evaluator")
LOOPBACK = "127.0.0.1"
_HOST = re.compile(r"\[[0-9a-fA-F:]+\]|[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?")
_PORT = re.compile(r"[0-9]{1,5}")  # ASCII digits only: str.isdigit() also accepts '２２２２'
_LOOPBACK_NAMES = ("localhost", "[::1]")  # with 127.x.y.z: this machine, whatever the spelling


class TFConfigError(ValueError):
    """A cluster description or `TF_CONFIG` that TensorFlow could not use."""


@dataclasses.dataclass(frozen=True)
class TFConfig:
    """A parsed, checked `TF_CONFIG`."""

    cluster: dict[str, list[str]]
    task_type: str
    task_index: int

    def to_dict(self) -> dict:
        """The JSON-ready form."""
        return {"cluster": self.cluster, "task": {"type": self.task_type, "index": self.task_index}}

    def to_json(self) -> str:
        """The string to put in the `TF_CONFIG` environment variable."""
        return json.dumps(self.to_dict(), sort_keys=True)


def cluster_dict(
    num_workers: int,
    num_ps: int = 0,
    *,
    chief: bool = False,
    evaluator: bool = False,
    hosts: Sequence[str] | None = None,
    port: int | None = None,
) -> dict[str, list[str]]:
    """A cluster description with addresses: free loopback ports, or `hosts` at `port`.

    Without `hosts` every task gets its own free port on 127.0.0.1 (one machine). With
    `hosts`, tasks are laid out in order chief, workers, ps, evaluator, one per host, on
    `port` (default 2222) unless a host is given as 'host:port', as on a real cluster.
    """
    _check_count("num_workers", num_workers, minimum=1)
    _check_count("num_ps", num_ps, minimum=0)
    if port is not None and (isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536):
        raise TFConfigError(say(f"The port must be an integer from 1 to 65535, not {_shown(port)}.",
                                f"端口必须是 1 到 65535 之间的整数，而不是 {_shown(port)}。"))
    counts = {"chief": int(chief), "worker": num_workers, "ps": num_ps, "evaluator": int(evaluator)}
    total = sum(counts.values())
    if hosts is None:
        import portpicker

        addresses = [f"{LOOPBACK}:{portpicker.pick_unused_port()}" for _ in range(total)]
    else:
        if isinstance(hosts, str) or not all(isinstance(host, str) for host in hosts):
            raise TFConfigError(say("The hosts must be a list of strings such as '10.0.0.5'.",
                                    "主机必须是字符串列表，例如 '10.0.0.5'。"))
        if len(hosts) != total:
            raise TFConfigError(
                say(
                    f"{len(hosts)} hosts given for {total} tasks; give one host per task.",
                    f"给出了 {len(hosts)} 台主机，但有 {total} 个任务；每个任务需要一台主机。",
                )
            )
        addresses = [host if re.fullmatch(r".+:[0-9]+", host) else f"{host}:{port or 2222}"
                     for host in hosts]
    cluster: dict[str, list[str]] = {}
    for job, count in counts.items():
        if count:
            cluster[job], addresses = addresses[:count], addresses[count:]
    validate_cluster(cluster)
    return cluster


def make_tf_config(cluster: Mapping[str, Sequence[str]], task_type: str, task_index: int) -> TFConfig:
    """The `TF_CONFIG` of one task of `cluster`, checked."""
    validate_cluster(cluster)
    _check_task(cluster, task_type, task_index)
    return TFConfig({job: list(cluster[job]) for job in cluster}, task_type, task_index)


def all_tf_configs(cluster: Mapping[str, Sequence[str]]) -> list[TFConfig]:
    """One `TF_CONFIG` per task of `cluster`, in job order."""
    validate_cluster(cluster)
    return [
        make_tf_config(cluster, job, index)
        for job in JOBS
        for index in range(len(cluster.get(job, ())))
    ]


# What `json` says, as a Chinese reader reads it (the messages of Python's json.decoder);
# one not listed reads as a plain syntax error.
_JSON_ZH = {
    "Expecting value": "缺少一个值",
    "Expecting ',' delimiter": "应为逗号（或右括号）",
    "Expecting ':' delimiter": "缺少冒号",
    "Expecting property name enclosed in double quotes": "应为带双引号的键名",
    "Unterminated string starting at": "有未闭合的字符串",
    "Extra data": "之后还有多余内容",
    "Invalid control character at": "有非法的控制字符",
    "Invalid \\escape": "有非法的转义",
}


def parse_tf_config(value: str | Mapping | None = None) -> TFConfig:
    """Read and check a `TF_CONFIG` (JSON text, a dict, or the environment variable)."""
    if value is None:
        value = os.environ.get("TF_CONFIG")
        if not value:
            raise TFConfigError(say("TF_CONFIG is not set.", "环境变量 TF_CONFIG 没有设置。"))
    if isinstance(value, str):
        if not value.strip():
            raise TFConfigError(say("TF_CONFIG is empty: no text, or only spaces and line breaks.",
                                    "TF_CONFIG 是空的：没有内容，或者只有空格和换行。"))
        try:
            value = json.JSONDecoder().decode(value)  # a fresh decoder: no hook another cell set
        except RecursionError:
            raise TFConfigError(say("TF_CONFIG is nested too deeply to be a cluster description.",
                                    "TF_CONFIG 嵌套过深，不可能是集群描述。")) from None
        except json.JSONDecodeError as err:
            if err.pos >= len(err.doc.rstrip()):  # cut off: json would ask for a comma at the end
                raise TFConfigError(say(
                    f"TF_CONFIG is not valid JSON: it ends (line {err.lineno}, column {err.colno}) "
                    "before every { and [ is closed.",
                    f"TF_CONFIG 不是合法的 JSON：文本在第 {err.lineno} 行第 {err.colno} 列就结束了，"
                    "还有 { 或 [ 没有闭合。",
                )) from None
            raise TFConfigError(
                say(
                    f"TF_CONFIG is not valid JSON: {err.msg} at line {err.lineno}, column {err.colno}.",
                    f"TF_CONFIG 不是合法的 JSON：第 {err.lineno} 行第 {err.colno} 列"
                    f"{_JSON_ZH.get(err.msg, '有语法错误')}。",
                )
            ) from None
    if not isinstance(value, Mapping):
        raise TFConfigError(
            say("TF_CONFIG must be a JSON object.", "TF_CONFIG 必须是一个 JSON 对象。")
        )
    for section in ("cluster", "task"):
        if not isinstance(value.get(section), Mapping):
            raise TFConfigError(
                say(
                    f"TF_CONFIG has no '{section}' section (an object).",
                    f"TF_CONFIG 缺少 '{section}' 部分（应为一个对象）。",
                )
            )
    task = value["task"]
    if "type" not in task or "index" not in task:
        raise TFConfigError(
            say(
                "TF_CONFIG's 'task' needs both 'type' and 'index', e.g. "
                '{"type": "worker", "index": 0}.',
                'TF_CONFIG 的 "task" 需要同时有 "type" 和 "index"，例如 {"type": "worker", "index": 0}。',
            )
        )
    return make_tf_config(value["cluster"], task["type"], task["index"])


def validate_cluster(cluster: Mapping[str, Sequence[str]]) -> None:
    """Raise `TFConfigError` naming the first problem in a cluster description."""
    if not isinstance(cluster, Mapping) or not cluster:
        raise TFConfigError(
            say("The cluster must be a non-empty mapping of job names to addresses.",
                "集群描述必须是一个非空的映射：作业名 -> 地址列表。")
        )
    seen: dict[str, str] = {}
    for job, addresses in cluster.items():
        if job not in JOBS:
            raise TFConfigError(
                say(
                    f"Unknown job name {_shown(job)}; use one of {', '.join(JOBS)}.",
                    f"未知的作业名 {_shown(job)}；只能是 {', '.join(JOBS)} 之一。",
                )
            )
        if isinstance(addresses, str) or not isinstance(addresses, Sequence) or not addresses:
            raise TFConfigError(
                say(
                    f"Job {_shown(job)} needs a non-empty list of 'host:port' addresses.",
                    f"作业 {_shown(job)} 需要一个非空的 'host:port' 地址列表。",
                )
            )
        if job == "chief" and len(addresses) > 1:
            raise TFConfigError(
                say("A cluster has at most one chief.", "一个集群最多只能有一个 chief。")
            )
        for index, address in enumerate(addresses):
            _check_address(job, index, address)
            same = _same_machine_key(address)
            if same in seen:
                raise TFConfigError(
                    say(
                        f"Address {address} is used twice ({seen[same]} and {job} {index}): "
                        "two servers cannot listen on one port of one machine.",
                        f"地址 {address} 被用了两次（{seen[same]} 和 {job} {index}）："
                        "同一台机器的同一个端口上不能有两个服务器。",
                    )
                )
            seen[same] = f"{job} {index}"


def _check_task(cluster: Mapping[str, Sequence[str]], task_type: str, task_index: int) -> None:
    if task_type not in JOBS:
        raise TFConfigError(
            say(
                f"Unknown task type {_shown(task_type)}; use one of {', '.join(JOBS)}.",
                f"未知的任务类型 {_shown(task_type)}；只能是 {', '.join(JOBS)} 之一。",
            )
        )
    if task_type not in cluster:
        raise TFConfigError(
            say(
                f"The task is a {task_type}, but the cluster has no {_shown(task_type)} job.",
                f"任务类型是 {task_type}，但集群里没有 {_shown(task_type)} 作业。",
            )
        )
    size = len(cluster[task_type])
    if isinstance(task_index, bool) or not isinstance(task_index, int):
        raise TFConfigError(
            say(f"The task index must be an integer, not {_shown(task_index)}.",
                f"任务序号必须是整数，而不是 {_shown(task_index)}。")
        )
    if not 0 <= task_index < size:
        raise TFConfigError(
            say(
                f"Task index {task_index} is out of range: job {_shown(task_type)} has {size} "
                f"task(s), so the index must be 0..{size - 1}.",
                f"任务序号 {task_index} 超出范围：作业 {_shown(task_type)} 有 {size} 个任务，"
                f"序号只能是 0..{size - 1}。",
            )
        )


def _same_machine_key(address: str) -> str:
    """The address with every name of this machine's loopback spelled the same way."""
    host, _, port = address.rpartition(":")
    host = host.lower()
    if host in _LOOPBACK_NAMES or re.fullmatch(r"127(\.[0-9]{1,3}){3}", host):
        host = "loopback"
    return f"{host}:{int(port)}"


def _check_address(job: str, index: int, address: object) -> None:
    host, _, port = address.rpartition(":") if isinstance(address, str) else ("", "", "")
    ok = (
        isinstance(address, str)
        and "://" not in address
        and bool(_HOST.fullmatch(host))
        and bool(_PORT.fullmatch(port))
        and 0 < int(port) < 65536
    )
    if not ok:
        shown = _shown(address)
        raise TFConfigError(
            say(
                f"Malformed address for {job} {index}: {shown}. Expected 'host:port', "
                "e.g. '10.0.0.5:2222' (no 'grpc://' prefix, port 1-65535).",
                f"{job} {index} 的地址格式不对：{shown}。应为 'host:port'，"
                "例如 '10.0.0.5:2222'（不带 'grpc://' 前缀，端口 1-65535）。",
            )
        )


def _check_count(name: str, value: object, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise TFConfigError(
            say(
                f"{name} must be an integer of at least {minimum}, not {_shown(value)}.",
                f"{name} 必须是不小于 {minimum} 的整数，而不是 {_shown(value)}。",
            )
        )


def _shown(value: object) -> str:
    """A short repr of user input for a message (never deep, never long)."""
    return reprlib.repr(value)
