"""Text from submissions made safe for a terminal and a spreadsheet.

File names and failure lines come from students: they may hold bytes that are not UTF-8,
terminal control sequences (which can hide or fake lines of the summary), bidirectional
overrides, or start like a spreadsheet formula. Every such character is shown as an escape,
and a cell that a spreadsheet would evaluate starts with `'`. For names the escaping is
one-to-one (a backslash is doubled, a leading `'` is quoted too), so two students whose names
differ only there stay two rows.
"""

from __future__ import annotations

import unicodedata

_FORMULA = ("=", "+", "-", "@", "\t", "\r")
_INVISIBLE = {"Cc", "Cf", "Cs", "Zl", "Zp", "Co", "Cn"}


def _escaped(char: str) -> str:
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8 (os.fsdecode's surrogateescape)
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def visible(value: str, *, keep_lines: bool = False) -> str:
    """`value` with every control, format or undecodable character written as an escape."""
    return "".join(
        char
        if (keep_lines and char == "\n") or unicodedata.category(char) not in _INVISIBLE
        else _escaped(char)
        for char in str(value)
    )


def name(student: str) -> str:
    """A student's name as shown anywhere: every odd character escaped, one-to-one."""
    return visible(student.replace("\\", "\\\\"))


def cell(value: object, *, student: bool = False) -> str:
    """A spreadsheet cell: visible text that no spreadsheet evaluates as a formula."""
    shown = name(str(value)) if student else visible(str(value), keep_lines=True)
    if shown.startswith(_FORMULA) or (student and shown.startswith("'")):
        return "'" + shown
    return shown
