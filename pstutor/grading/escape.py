"""Text from submissions made safe for a terminal and a spreadsheet.

File names and failure lines come from students: they may hold bytes that are not UTF-8,
terminal control sequences (which can hide or fake lines of the summary), bidirectional
overrides, or start like a spreadsheet formula. Every such character is shown as an escape,
and a cell that a spreadsheet would evaluate starts with `'`. For names the escaping is
one-to-one (a backslash is doubled, a leading `'` is quoted too, an undecodable byte and a
character of the same number are written differently), so two students whose names differ
only there stay two rows; names also escape what looks like nothing (spaces other than the
plain one, combining marks, blank letters), so no two rows look alike. On the screen a name
that holds spaces or is very long is quoted and cut, so it cannot pass for other columns.
"""

from __future__ import annotations

import hashlib
import unicodedata

import wcwidth

_FORMULA = ("=", "+", "-", "@", "\t", "\r")
_INVISIBLE = {"Cc", "Cf", "Cs", "Zl", "Zp", "Co", "Cn"}
_BLANK_LETTERS = frozenset({0x115F, 0x1160, 0x3164, 0xFFA0, 0x2800})  # Hangul fillers, braille blank
_SCREEN_WIDTH = 32  # columns a name may take on the summary


def _escaped(char: str) -> str:
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8 (os.fsdecode's surrogateescape)
        return f"\\x{code - 0xDC00:02x}"
    # \x only below 0x80, so U+0085 and the undecodable byte 0x85 stay apart
    return f"\\x{code:02x}" if code < 0x80 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _looks_blank(char: str) -> bool:
    category = unicodedata.category(char)
    return (category == "Zs" and char != " ") or category in ("Mn", "Me") or ord(char) in _BLANK_LETTERS


def visible(value: str, *, keep_lines: bool = False) -> str:
    """`value` with every control, format or undecodable character written as an escape."""
    return "".join(
        char
        if (keep_lines and char == "\n") or unicodedata.category(char) not in _INVISIBLE
        else _escaped(char)
        for char in str(value)
    )


def name(student: str) -> str:
    """A student's name as stored anywhere: every odd or blank-looking character escaped, one-to-one."""
    doubled = student.replace("\\", "\\\\")
    return visible("".join(_escaped(char) if _looks_blank(char) else char for char in doubled))


def on_screen(student: str) -> str:
    """A name for the teacher's terminal: `name()`, quoted when it holds a space or is cut to the
    summary's width (with a digest, so two cut names stay apart), so it cannot fake other columns."""
    shown = name(student)
    cut = wcwidth.wcswidth(shown) > _SCREEN_WIDTH
    if cut:
        digest = hashlib.sha256(student.encode("utf-8", "surrogatepass")).hexdigest()[:6]
        while wcwidth.wcswidth(shown) > _SCREEN_WIDTH - 8:
            shown = shown[:-1]
        shown = f"{shown}…#{digest}"
    if cut or " " in shown or shown.startswith('"'):
        return '"' + shown.replace('"', '\\"') + '"'
    return shown


def cell(value: object, *, student: bool = False) -> str:
    """A spreadsheet cell: visible text that no spreadsheet evaluates as a formula."""
    shown = name(str(value)) if student else visible(str(value), keep_lines=True)
    if shown.startswith(_FORMULA) or (student and shown.startswith("'")):
        return "'" + shown
    return shown
