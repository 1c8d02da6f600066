"""Checking what the user typed before anything starts: one line in the user's language per mistake.

Each checker takes the text (or value) the user gave and returns it in the form the program
uses, or raises `BadInput`, whose message says what is wrong and what would be accepted. The
command line uses them as argparse types (`argument_type`); library functions such as
`write_launch_files` call them directly, so a value is refused the same way from a shell and
from a notebook.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from pstutor.language import say

T = TypeVar("T")

_DIGITS = re.compile(r"[+-]?[0-9]{1,30}")  # int() would also take '１２' or '1_0', and 10**4300 digits
MAX_PORT = 65535

# RFC 1123 section 2.1: a host name label is letters, digits and '-', neither first nor last,
# at most 63 characters; the whole name at most 253 (RFC 1035's 255 octets on the wire).
_LABEL = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?")

# The reference grammar of container images, written from distribution/reference (v0.5.0,
# reference.go's grammar and regexp.go), which the OCI distribution spec's <name> and <tag>
# rules agree with:
#   reference        := name [ ":" tag ] [ "@" digest ]
#   name             := [domain '/'] path-component ['/' path-component]*
#   domain           := host [':' port-number]
#   host             := domain-name | IPv4address | \[ IPv6address \]
#   domain-component := /([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])/
#   path-component   := alpha-numeric [separator alpha-numeric]*
#   alpha-numeric    := /[a-z0-9]+/
#   separator        := /[_.]|__|[-]*/            (regexp.go: `(?:[._]|__|[-]+)`)
#   tag              := /[\w][\w.-]{0,127}/       (Go's \w is ASCII: [A-Za-z0-9_])
#   digest           := algorithm ":" /[0-9a-fA-F]{32,}/
# and a name of at most 255 characters (NameTotalLengthMax).
_ALPHA_NUMERIC = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|[-]+)"
_PATH_COMPONENT = rf"{_ALPHA_NUMERIC}(?:{_SEPARATOR}{_ALPHA_NUMERIC})*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?"
_NAME = rf"(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*"
_TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
_REFERENCE = re.compile(rf"(?P<name>{_NAME})(?::{_TAG})?(?:@{_DIGEST})?")
_NAME_MAX = 255

# POSIX's portable filename character set (letters, digits, '.', '_', '-'), '/' between
# components: nothing a shell, YAML or a Dockerfile's COPY line would read specially.
_PROGRAM = re.compile(r"/?[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*")


def shown(value: object, limit: int = 40) -> str:
    """`repr(value)`, shortened in the middle when long: a message echoes input, never floods."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit // 2]}…{text[-limit // 2:]}"


class BadInput(ValueError):
    """A value the user gave that cannot be used; the message is one line in the user's language."""


def argument_type(check: Callable[..., T], *args: object) -> Callable[[str], T]:
    """`check(text, *args)` as an argparse type: its `BadInput` becomes argparse's own error."""
    import argparse

    def convert(text: str) -> T:
        try:
            return check(text, *args)
        except BadInput as err:
            raise argparse.ArgumentTypeError(str(err)) from None

    convert.__name__ = check.__name__  # argparse names the type in its messages
    return convert


def whole_number(text: str, low: int, high: int | None = None) -> int:
    """An integer from `low` to `high` (None: no upper bound), written in ASCII digits."""
    if not _DIGITS.fullmatch(text.strip()):
        raise BadInput(say(f"must be a whole number, not {shown(text)}", f"必须是整数，而不是 {shown(text)}"))
    value = int(text)
    if value < low:
        raise BadInput(say(f"must be at least {low}, not {value}", f"必须至少为 {low}，而不是 {value}"))
    if high is not None and value > high:
        raise BadInput(say(f"must be at most {high:,}, not {value:,}", f"最大为 {high:,}，而不是 {value:,}"))
    return value


def port(text: str) -> int:
    """A TCP port, 1 to 65535."""
    value = whole_number(text, 1)
    if value > MAX_PORT:
        raise BadInput(say(f"a port is at most {MAX_PORT}, not {value}",
                           f"端口最大为 {MAX_PORT}，而不是 {value}"))
    return value


def folder(text: str) -> Path:
    """A folder to write into or read from: a path that is not empty (Path('') would mean '.')."""
    if not text.strip():
        raise BadInput(say("an empty path: give a folder, e.g. out/",
                           "路径为空：请给出一个文件夹，例如 out/"))
    if "\0" in text:
        raise BadInput(say(f"{shown(text)} is not a path (it holds a NUL character)",
                           f"{shown(text)} 不是路径（含有 NUL 字符）"))
    return Path(text)


def host(text: str) -> str:
    """A host for a TF_CONFIG address: an IP address or an RFC 1123 name, optionally ':PORT'.

    Returned as TF_CONFIG writes it: an IPv6 address in brackets.
    """
    text = text.strip()
    bracketed = re.fullmatch(r"\[([^\]]*)\](?::([^:]*))?", text)
    if bracketed:
        name, given_port = f"[{bracketed[1]}]", bracketed[2]
        ok = _is_ip(bracketed[1], ipaddress.IPv6Address)
    elif text.count(":") > 1:  # a bare IPv6 address has no room for a port
        name, given_port = f"[{text}]", None
        ok = _is_ip(text, ipaddress.IPv6Address)
    else:
        name, _, given_port = text.partition(":")
        given_port = given_port if ":" in text else None
        ok = _is_ip(name, ipaddress.IPv4Address) if re.fullmatch(r"[0-9.]+", name) else _is_dns_name(name)
    if not ok:
        raise BadInput(say(
            f"{shown(text)} is not a host: give an IP address (10.0.0.5, [fd00::5]) or a DNS name "
            "(node-1.example.com), optionally with :PORT",
            f"{shown(text)} 不是主机：请给出 IP 地址（10.0.0.5、[fd00::5]）或 DNS 名称"
            "（node-1.example.com），可带 :端口"))
    if given_port is None:
        return name
    if not re.fullmatch(r"[0-9]{1,30}", given_port):
        raise BadInput(say(f"{shown(text)} is not a host: the part after ':' must be a port number",
                           f"{shown(text)} 不是主机：“:”后面必须是端口号"))
    try:
        return f"{name}:{port(given_port)}"
    except BadInput as err:
        raise BadInput(f"{shown(text)}: {err}") from None


def hosts(text: str) -> list[str]:
    """A comma-separated list of hosts (`host`), none of them empty."""
    entries = [entry.strip() for entry in text.split(",")]
    for number, entry in enumerate(entries, start=1):
        if not entry:
            raise BadInput(say(f"host {number} of {len(entries)} is empty: give one host per task, "
                               "separated by commas",
                               f"第 {number} 个主机（共 {len(entries)} 个）为空："
                               "每个任务一个主机，用逗号分隔"))
    return [host(entry) for entry in entries]


def image_reference(text: str) -> str:
    """A container image reference that registries accept (see the grammar above)."""
    match = _REFERENCE.fullmatch(text) if isinstance(text, str) and len(text) <= 1024 else None
    if match is None or len(match["name"]) > _NAME_MAX:
        raise BadInput(say(
            f"{shown(text)} is not a container image reference; registries take lowercase names such as "
            "registry.example.com/team/train:1",
            f"{shown(text)} 不是容器镜像引用；镜像仓库只接受小写名称，"
            "例如 registry.example.com/team/train:1"))
    return text


def program_path(text: str) -> str:
    """The training program's path: portable file-name characters, '/' between folders."""
    name = text.rsplit("/", 1)[-1] if isinstance(text, str) else ""
    if not (name and _PROGRAM.fullmatch(text) and not text.startswith("-")
            and name not in (".", "..") and len(text) <= 1024):
        raise BadInput(say(
            f"{shown(text)}: give the program as a path of letters, digits, '.', '_', '-' and '/', "
            "e.g. train.py or src/train.py",
            f"{shown(text)}：程序路径只能由字母、数字、“.”、“_”、“-”和“/”组成，"
            "例如 train.py 或 src/train.py"))
    return text


def _is_ip(text: str, kind: type) -> bool:
    try:
        kind(text)
    except ValueError:
        return False
    return True


def _is_dns_name(name: str) -> bool:
    """RFC 1123 host name; a last label of digits only is a mistyped IPv4 address (RFC 1123 2.1)."""
    labels = name[:-1].split(".") if name.endswith(".") else name.split(".")
    return (0 < len(name) <= 253 and all(_LABEL.fullmatch(label) for label in labels)
            and not labels[-1].isdigit())
