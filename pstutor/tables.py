"""Printed tables and progress lines in the course's language, so lesson code stays the same in both.

A lesson cell names its columns and values with plain keys (`loss`, `global_batch`); these
helpers print them as words of the current language. Keys that are not course words (API
names such as `steps_per_execution`) are printed as they are.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence

import wcwidth

from pstutor.glossary import words
from pstutor.language import say

# the keys lessons and helpers name columns and metrics with, and their English label; the
# Chinese of each label is in `pstutor.glossary.WORDS`
COLUMNS = {
    "accuracy": "accuracy",
    "bytes": "bytes",
    "changed_lines": "changed lines",
    "concats": "concats",
    "device": "device",
    "epoch": "epoch",
    "examples_per_s": "examples/s",
    "global_batch": "global batch",
    "learning_rate": "learning rate",
    "loss": "loss",
    "ms_per_step": "ms per step",
    "partitioner": "partitioner",
    "rank": "rank",
    "reads": "reads",
    "replicas": "replicas",
    "seconds": "s",
    "shape": "shape",
    "shard": "shard",
    "startup_s": "start-up s",
    "step": "step",
    "steps_per_s": "steps/s",
    "strategy": "strategy",
    "task": "task",
    "training": "training",
    "updates": "updates",
    "variable": "variable",
    "variables": "variables",
    "warmup_s": "warm-up s",
    "worker": "worker",
}
# cell values that are words, not names: printed in the course's language too
VALUE_WORDS = ("sync", "async")


def word(key: str) -> str:
    """The key as a word of the current language; API names and unknown keys stay as they are."""
    return words(COLUMNS[key]) if key in COLUMNS else key


def value_word(text: str) -> str:
    """A cell's text in the current language: `VALUE_WORDS` translated, names as they are."""
    return words(text) if text in VALUE_WORDS else text


def text_width(text: str) -> int:
    """Columns `text` takes in a terminal: CJK characters two, combining marks none (wcwidth)."""
    width = wcwidth.wcswidth(text)
    return len(text) if width < 0 else width  # a control character: wcwidth has no width for it


def _cell(value: object, digits: int) -> str:
    """One value as table text: floats with `digits` decimals, ints with thousands separators."""
    if not _is_number(value):
        return value_word(str(value))
    return f"{int(value):,}" if isinstance(value, numbers.Integral) else f"{float(value):,.{digits}f}"


def _is_number(value: object) -> bool:
    """Python and NumPy ints and floats, but not booleans."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def format_table(rows: Sequence[Mapping[str, object]], columns: Sequence[str] | None = None,
                 digits: int = 4) -> str:
    """The rows as an aligned text table whose headers are in the course's language."""
    columns = list(columns or (rows[0] if rows else []))
    numeric = [all(_is_number(row[c]) for row in rows) for c in columns]
    table = [[word(c) for c in columns], *([_cell(row[c], digits) for c in columns] for row in rows)]
    return "\n".join(line.rstrip() for line in align(table, numeric))


def align(table: Sequence[Sequence[str]], right: Sequence[bool]) -> list[str]:
    """The rows of text cells padded into columns (two spaces apart), `right` ones right-aligned."""
    widths = [max(text_width(line[i]) for line in table) for i in range(len(right))]

    def pad(text: str, width: int, to_right: bool) -> str:
        space = " " * (width - text_width(text))
        return space + text if to_right else text + space

    return ["  ".join(pad(*cell) for cell in zip(line, widths, right, strict=True)) for line in table]


def show_table(rows: Sequence[Mapping[str, object]], columns: Sequence[str] | None = None,
               digits: int = 4) -> None:
    """Print the rows as a table with headers in the course's language (default: the first row's keys)."""
    print(format_table(rows, columns, digits))


def format_progress(**values: object) -> str:
    """'epoch 2: loss 0.4100, accuracy 0.9880' in the course's language; the first keyword says where."""
    if not values:
        raise ValueError(say("progress() needs at least one keyword, e.g. epoch=1.",
                             "progress() 至少需要一个关键字参数，例如 epoch=1。"))
    (where, number), *metrics = values.items()
    place = {"epoch": say(f"epoch {number}", f"第 {number} 个周期"),
             "step": say(f"step {number}", f"第 {number} 步"),
             "checkpoint_step": say(f"checkpoint at step {number}", f"第 {number} 步的检查点"),
             }.get(where, f"{word(where)} {number}")
    shown = [f"{word(key)} {_cell(value, 4)}" for key, value in metrics]
    return say(f"{place}: {', '.join(shown)}", f"{place}：{'，'.join(shown)}") if shown else place


def progress(**values: object) -> None:
    """Print one progress line, e.g. progress(epoch=2, loss=0.41) in the course's language."""
    print(format_progress(**values))
