"""The Chinese of a code cell's own string literals: one program, printed in two languages.

A lesson's code is shared by both notebooks, but what it prints is part of the lesson: a
Chinese learner should read `我是 worker 1`, not `I am worker 1`. The source keeps the code
once and a table of its literals in Chinese; the Chinese notebook gets the code with those
literals replaced, so it is still plain Python that runs outside the course. Only literals
change: `same_program` proves it on the syntax tree.

A plain literal is matched by its value (`"I am"`), an f-string by the text between its
quotes (`"{n} steps done"`), so the table reads like the output it changes. A multi-line
literal in triple quotes (a program the lesson writes to a file) stays multi-line in its
translation, so the Chinese notebook shows that program as readably as the English one.
"""

from __future__ import annotations

import ast
import json
import re

_PREFIX = re.compile(r"^([a-zA-Z]*)('''|\"\"\"|'|\")")
# a triple-quoted literal, maybe opened by a backslash-newline
_TRIPLE = re.compile(r"^([a-zA-Z]*)('''|\"\"\")(\\\n)?")


class LiteralsError(ValueError):
    """A table of literals that does not fit the code (malformed, or an entry no code uses)."""


def parse_table(text: str, name: str = "source") -> dict[str, str]:
    """The `strings` cell of a source: a Python dict literal of English -> Chinese."""
    try:
        table = ast.literal_eval(text)
    except (ValueError, SyntaxError) as err:
        raise LiteralsError(f"{name}: the strings cell is not a Python dict literal ({err})") from None
    if not isinstance(table, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                              for k, v in table.items()):
        raise LiteralsError(f"{name}: the strings cell must map English strings to Chinese strings")
    return table


def _top_level_strings(tree: ast.AST) -> list[ast.Constant | ast.JoinedStr]:
    """String literals and f-strings, not the pieces inside an f-string."""
    found: list[ast.Constant | ast.JoinedStr] = []

    def visit(node: ast.AST) -> None:
        is_text = isinstance(node, ast.Constant) and isinstance(node.value, str)
        if is_text or isinstance(node, ast.JoinedStr):
            found.append(node)
            return
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _key_and_rewrite(segment: str, node: ast.Constant | ast.JoinedStr):
    """How the table names this literal, and how to write its translation in its place."""
    if isinstance(node, ast.Constant):
        return node.value, lambda zh: _as_literal(segment, zh)
    match = _PREFIX.match(segment)
    if not match:
        return None, None
    prefix, quote = match.groups()
    inner = segment[len(prefix) + len(quote):-len(quote)]
    if re.search(re.escape(quote) + r"\s*[a-zA-Z]*" + re.escape(quote), inner):
        return None, None  # f-strings joined by juxtaposition: write one f-string to translate it
    return inner, lambda zh: f"{prefix}{quote}{zh}{quote}"


def _as_literal(segment: str, zh: str) -> str:
    """`zh` as Python source: multi-line in the original's triple quotes (a program stays readable)."""
    triple = _TRIPLE.match(segment)
    if triple and "\n" in zh and triple.group(2) not in zh and not set(triple.group(1)) & set("rRbB"):
        prefix, quote, continuation = triple.groups()
        return f"{prefix}{quote}{continuation or ''}{zh.replace(chr(92), chr(92) * 2)}{quote}"
    return json.dumps(zh, ensure_ascii=False)


def translate(code: str, table: dict[str, str], used: set[str] | None = None) -> str:
    """`code` with every literal the table names replaced by its Chinese; `used` collects keys.

    Code that is not plain Python (an IPython magic) is returned unchanged.
    """
    if not table:
        return code
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return code
    lines = code.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line.encode("utf-8")))
    data = code.encode("utf-8")
    edits = []
    for node in _top_level_strings(tree):
        begin = starts[node.lineno - 1] + node.col_offset
        end = starts[node.end_lineno - 1] + node.end_col_offset
        segment = data[begin:end].decode("utf-8")
        key, rewrite = _key_and_rewrite(segment, node)
        if key is not None and key in table:
            edits.append((begin, end, rewrite(table[key]).encode("utf-8")))
            if used is not None:
                used.add(key)
    for begin, end, text in sorted(edits, reverse=True):
        data = data[:begin] + text + data[end:]
    return data.decode("utf-8")


def check_used(table: dict[str, str], used: set[str], name: str = "source") -> None:
    """Refuse entries that no code cell uses: a translation left behind by an edit of the code."""
    stale = sorted(set(table) - used)
    if stale:
        raise LiteralsError(f"{name}: strings no code cell uses (edit or remove them): {stale}")


def program_shape(code: str) -> str:
    """The syntax tree with every string's text removed: equal for a cell and its translation.

    An f-string keeps its expressions (their order may differ between languages: Chinese
    word order is not English word order), so a translation can only change words.
    """
    tree = ast.parse(code)

    class Blank(ast.NodeTransformer):
        def visit_Constant(self, node: ast.Constant) -> ast.AST:
            return ast.Constant("") if isinstance(node.value, str) else node

        def visit_JoinedStr(self, node: ast.JoinedStr) -> ast.AST:
            pieces = sorted(ast.dump(self.visit(v)) for v in node.values if isinstance(v, ast.FormattedValue))
            return ast.Constant("f:" + "|".join(pieces))

    return ast.dump(Blank().visit(tree))
