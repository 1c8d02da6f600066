"""Claims: what a lesson's prose reads off an output, checked against the stored outputs.

A sentence such as "the slowed worker ran fewer steps" is only true if every run shows it,
in both languages. The source states it next to the code cell as a `claim` cell: Python
asserts over that cell's output. The build runs every claim on the notebook it has just
executed and refuses to write a notebook that no longer shows what its prose says; the test
suite runs them on the committed notebooks of both languages.

A claim sees:
- `out`: the text the cell before it printed (stdout and its value), `outs`: the same for
  every code cell so far (`outs[-1] is out`);
- `nums`: the numbers in `out`, in order (`1,024` is 1024; `12.5%` is 12.5);
- `images`: how many pictures the cell drew; `lang`: "en" or "zh".
Numbers are the same in both languages (the code is the same), so a claim is written once.
"""

from __future__ import annotations

import dataclasses
import re
import traceback

_NUMBER = re.compile(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?")


@dataclasses.dataclass(frozen=True)
class Claim:
    """One claim: the code cell it reads (its index among the notebook's code cells) and its asserts."""

    cell: int
    code: str

    @property
    def title(self) -> str:
        """The claim's first comment line: the sentence it proves."""
        first = self.code.strip().splitlines()[0] if self.code.strip() else ""
        return first.lstrip("# ").strip() if first.startswith("#") else first


def numbers(text: str) -> list[float]:
    """Every number in `text`, in order; thousands separators are read as such."""
    return [float(n.replace(",", "")) for n in _NUMBER.findall(text)]


def cell_text(cell: dict) -> str:
    """What a stored code cell shows as text: its stdout and its value (not stderr, not images)."""
    parts = []
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream" and output.get("name") == "stdout":
            parts.append("".join(output.get("text", "")))
        elif output.get("output_type") in ("execute_result", "display_data"):
            data = output.get("data", {})
            if "image/png" not in data:
                parts.append("".join(data.get("text/plain", "")))
    return "".join(parts)


def images(cell: dict) -> int:
    """How many pictures a stored code cell holds."""
    return sum("image/png" in o.get("data", {}) for o in cell.get("outputs", []))


def failures(claims: list[Claim], notebook: dict, lang: str) -> list[str]:
    """The claims `notebook` does not show, one line each with the sentence and the reason."""
    code = [c for c in notebook["cells"] if c["cell_type"] == "code"]
    texts = [cell_text(c) for c in code]
    failed = []
    for claim in claims:
        if claim.cell >= len(code):
            failed.append(f"[{lang}] {claim.title}: the notebook has no code cell {claim.cell}")
            continue
        scope = {"out": texts[claim.cell], "outs": texts[:claim.cell + 1], "lang": lang,
                 "nums": numbers(texts[claim.cell]), "images": images(code[claim.cell]),
                 "numbers": numbers}
        try:
            exec(compile(claim.code, f"<claim: {claim.title}>", "exec"), scope)  # the course's own code
        except AssertionError as err:
            failed.append(f"[{lang}] code cell {claim.cell}: {claim.title}: {err or 'assertion failed'}"
                          f"\n    output: {texts[claim.cell].strip()[:300]!r}")
        except Exception:  # a claim that cannot even be evaluated proves nothing
            failed.append(f"[{lang}] code cell {claim.cell}: {claim.title}: the claim raised\n"
                          + traceback.format_exc(limit=1))
    return failed
