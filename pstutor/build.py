"""The notebook build: one source -> the English and the Chinese notebook (and, for an
exercise, its solution and its student copy in both languages).

A source (`lessons/NN_name.md`, or `lessons/exercises/NN_name.md` for an exercise, each
declared in the course manifest `lessons/course.toml`: `pstutor.manifest`) is a sequence of
cells, each opened by a marker line:

    <!-- cell: en -->          markdown in English; must be followed by its zh twin
    <!-- cell: zh -->          markdown in Chinese
    <!-- cell: code -->        code shared by both languages, inside a ```python fence
    <!-- cell: code tags=nbval-ignore-output -->   the same, with notebook cell tags
    <!-- cell: setup -->       the generated setup cell (Colab install, pstutor.setup())
    <!-- cell: wrong task=1 expect=HINT -->  exercises only: a realistic wrong answer to
                               task 1 that its check must catch with hint HINT (used by the
                               tests, never shown in a notebook)
    <!-- cell: right task=1 -->  exercises only: another correct answer to task 1, written
                               differently from the solution; its check must pass (tests only)
    <!-- cell: claim -->       a claim the prose makes about the output of the code cell
                               before it, as Python asserts in a ```python fence (never shown;
                               see `pstutor.claims`): the build and the tests run it on the
                               stored outputs of both languages
    <!-- cell: strings -->     the Chinese of the code's own string literals, a Python dict in a
                               ```python fence: {"I am": "我是", "{n} steps": "{n} 步"}

A code cell is the same program in both languages except for the literals the `strings` table
translates: a plain literal is matched by its value, an f-string by the text between its
quotes. The Chinese notebook prints Chinese, and what a learner copies still runs anywhere.

In an exercise, a code cell holds one answer region per task:

    ### BEGIN ANSWER 1
    strategy = tf.distribute.ParameterServerStrategy(resolver)   # the solution
    ### STUB
    strategy = None                                              # what students start from
    ### END ANSWER

The solution keeps the answer; the student copy gets a "write your code here" line in its
language and the stub. The first markdown pair is the title (one H1); the build puts the
"Open in Colab" badge right after it. Generated notebooks are never edited by hand: change
the source and run `pstutor build`.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
import subprocess
import threading
from pathlib import Path

import nbformat

from pstutor import literals, manifest, metadata
from pstutor.claims import Claim, failures
from pstutor.course import find_course, publication
from pstutor.language import LANGUAGES, say

VARIANTS = {"lesson": "notebooks", "solution": "solutions", "exercise": "exercises"}  # -> folder
_MARKER = re.compile(r"^<!-- cell: (en|zh|code|setup|wrong|right|claim|strings)((?: [a-z]+=[^ ]+)*) -->$")
_OPTIONS = {"code": {"tags"}, "wrong": {"task", "expect"}, "right": {"task"}}
_FENCE = re.compile(r"^```python\n(.*?)\n```$", re.S)
_BEGIN = re.compile(r"^( *)### BEGIN ANSWER (\d+)$")
_STUB, _END = "### STUB", "### END ANSWER"
_NOT_SHOWN = ("wrong", "right", "claim", "strings")  # cells for the build and the tests only
_BADGE_IMAGE = "https://colab.research.google.com/assets/colab-badge.svg"
_KERNELSPEC = {"display_name": "Python 3", "language": "python", "name": "python3"}
_SETUP = '''\
import sys

if "google.colab" in sys.modules:  # Colab: install the course's helper package first
    !{{sys.executable}} -m pip install -q --root-user-action=ignore "pstutor @ git+https://github.com/{repository}@{package_ref}"

import pstutor

pstutor.setup(lang="{lang}")  # before TensorFlow is imported: tf.keras becomes Keras 2'''
_CJK = "\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef"  # ideographs, CJK and full-width punctuation
_FULL_WIDTH_PUNCTUATION = "".join(chr(c) for c in [*range(0x3000, 0x3040), *range(0xFF01, 0xFF10),
                                                      *range(0xFF1A, 0xFF21), *range(0xFF3B, 0xFF41),
                                                      *range(0xFF5B, 0xFF66)])
_STRONG = re.compile(r"\*\*([^*\n]+?)\*\*")
_BLOCK_START = re.compile(r"^\s*([#>|*+-]|\d+[.)]\s|```|<!--|$)")  # a line that opens its own block


class LessonError(ValueError):
    """A source that does not follow the format above."""


@dataclasses.dataclass(frozen=True)
class Cell:
    """One cell of a source."""

    kind: str  # "en", "zh", "code", "setup", "wrong", "right", "claim" or "strings"
    source: str
    tags: tuple[str, ...] = ()
    task: str = ""  # wrong and right answers: the task they answer
    expect: str = ""  # wrong answers: the hint their check must give


@dataclasses.dataclass(frozen=True)
class Region:
    """One task's answer region inside a code cell."""

    task: str
    indent: str
    answer: str
    stub: str


def course_of(source: Path) -> Path:
    """The course folder a source belongs to (`lessons/` or `lessons/exercises/` sit in it)."""
    folder = source.resolve().parent
    return folder.parent.parent if is_exercise(source) else folder.parent


def lesson_paths(root: Path | None = None) -> list[Path]:
    """Every lesson source of the course at `root` (default: found from the working directory),
    in the order of its manifest (`pstutor.manifest`), which must declare every source."""
    root = root or find_course()
    return [root / "lessons" / f"{lesson.slug}.md" for lesson in manifest.read(root).lessons]


def exercise_paths(root: Path | None = None) -> list[Path]:
    """Every exercise source, in course order: a lesson's exercise has the lesson's file name."""
    root = root or find_course()
    paths = [root / "lessons" / "exercises" / f"{lesson.slug}.md" for lesson in manifest.read(root).lessons]
    return [path for path in paths if path.is_file()]


def is_exercise(source: Path) -> bool:
    """Whether `source` is an exercise (its answers are cut out of the student copy)."""
    folder = source.resolve().parent
    return folder.name == "exercises" and folder.parent.name == "lessons"


def variants(source: Path) -> tuple[str, ...]:
    """The notebooks a source generates per language."""
    return ("solution", "exercise") if is_exercise(source) else ("lesson",)


def read_lesson(path: Path) -> list[Cell]:
    """Parse a source into cells, checking the format."""
    cells: list[Cell] = []
    kind, options, lines = None, {}, []

    def close() -> None:
        if kind is None:
            if "".join(lines).strip():
                raise LessonError(f"{path.name}: text before the first cell marker")
            return
        text = "\n".join(lines).strip("\n")
        if kind in ("code", "wrong", "right", "claim", "strings"):
            match = _FENCE.match(text)
            if not match:
                raise LessonError(f"{path.name}: a code cell must be one ```python fence")
            text = match.group(1)
        tags = tuple(options["tags"].split(",")) if "tags" in options else ()
        cells.append(Cell(kind, text, tags, options.get("task", ""), options.get("expect", "")))

    for line in path.read_text(encoding="utf-8").splitlines():
        match = _MARKER.match(line)
        if match:
            close()
            kind, lines = match.group(1), []
            options = dict(item.split("=", 1) for item in match.group(2).split())
            unknown = set(options) - _OPTIONS.get(kind, set())
            if unknown:
                raise LessonError(f"{path.name}: unknown cell option(s) {sorted(unknown)}")
        else:
            lines.append(line)
    close()
    _check_pairs(path, cells)
    _check_tasks(path, cells)
    _check_strings(path, cells)
    return cells


def _check_pairs(path: Path, cells: list[Cell]) -> None:
    """Every English markdown cell is followed by its Chinese twin, and vice versa."""
    for i, cell in enumerate(cells):
        if cell.kind == "claim" and not any(c.kind == "code" for c in cells[:i]):
            raise LessonError(f"{path.name}: claim {i} has no code cell before it to read")
        if cell.kind == "en" and (i + 1 == len(cells) or cells[i + 1].kind != "zh"):
            raise LessonError(f"{path.name}: English cell {i} has no Chinese twin after it")
        if cell.kind == "zh" and (i == 0 or cells[i - 1].kind != "en"):
            raise LessonError(f"{path.name}: Chinese cell {i} has no English twin before it")
        if cell.kind != "setup" and not cell.source.strip():
            raise LessonError(f"{path.name}: cell {i} is empty")
    if not cells or cells[0].kind != "en" or not cells[0].source.startswith("# "):
        raise LessonError(f"{path.name}: the first cell must be the title, '# ...' in en and zh")
    if sum(c.kind == "setup" for c in cells) != 1:
        raise LessonError(f"{path.name}: exactly one setup cell is required")


def _check_tasks(path: Path, cells: list[Cell]) -> None:
    """Exercises: every task has one answer region and a wrong answer; lessons have neither."""
    tasks = [r.task for c in cells if c.kind == "code" for r in answer_regions(c.source, path.name)]
    wrong = [c.task for c in cells if c.kind == "wrong"]
    right = [c.task for c in cells if c.kind == "right"]
    if not is_exercise(path):
        if tasks or wrong or right:
            raise LessonError(f"{path.name}: answer regions and wrong answers belong in exercises")
        return
    if not tasks:
        raise LessonError(f"{path.name}: an exercise needs at least one ### BEGIN ANSWER region")
    if len(set(tasks)) != len(tasks):
        raise LessonError(f"{path.name}: a task number is used by two answer regions")
    for cell in cells:
        if cell.kind == "wrong" and (cell.task not in tasks or not cell.expect):
            raise LessonError(f"{path.name}: wrong answer for unknown task {cell.task!r} or no expect=")
        if cell.kind == "right" and cell.task not in tasks:
            raise LessonError(f"{path.name}: correct alternative for unknown task {cell.task!r}")
    missing = sorted(set(tasks) - set(wrong))
    if missing:
        raise LessonError(f"{path.name}: task(s) {missing} have no wrong answer to prove the check")


def _check_strings(path: Path, cells: list[Cell]) -> None:
    """The strings table parses, and every entry translates a literal of some code cell."""
    try:
        table = strings_table(cells, path.name)
        used: set[str] = set()
        for cell in cells:
            if cell.kind == "code":
                literals.translate(cell.source, table, used)
        literals.check_used(table, used, path.name)
    except literals.LiteralsError as err:
        raise LessonError(str(err)) from None
    for cell in cells:
        if cell.kind == "code" and re.search(f"[{_CJK}]", cell.source):
            raise LessonError(f"{path.name}: Chinese in a code cell (write it in the strings table): "
                              f"{cell.source.splitlines()[0][:60]!r}")


def strings_table(cells: list[Cell], name: str = "source") -> dict[str, str]:
    """The Chinese of the code's literals, from every `strings` cell of a source."""
    table: dict[str, str] = {}
    for cell in cells:
        if cell.kind == "strings":
            entries = literals.parse_table(cell.source, name)
            if twice := sorted(set(entries) & set(table)):
                raise literals.LiteralsError(f"{name}: strings given twice: {twice}")
            table.update(entries)
    return table


def claims_of(source: Path) -> list[Claim]:
    """The claims of a source, each tied to the code cell before it (counted as in the notebook)."""
    found, code_cells = [], 0
    for cell in read_lesson(source):
        if cell.kind in ("code", "setup"):
            code_cells += 1
        elif cell.kind == "claim":
            found.append(Claim(code_cells - 1, cell.source))
    return found


def unshown_claims(source: Path, notebook: dict, lang: str, variant: str) -> list[str]:
    """The claims of `source` that `notebook` does not show (student copies make none)."""
    return [] if variant == "exercise" else failures(claims_of(source), notebook, lang)


def answer_regions(code: str, name: str = "source") -> list[Region]:
    """The answer regions of one code cell, in order."""
    regions, current, part = [], None, None
    for line in code.splitlines():
        begin = _BEGIN.match(line)
        if begin:
            if current:
                raise LessonError(f"{name}: answer region {current['task']} is not closed")
            current, part = {"task": begin.group(2), "indent": begin.group(1),
                             "answer": [], "stub": []}, "answer"
        elif line.strip() == _STUB and current:
            part = "stub"
        elif line.strip() == _END:
            if not current:
                raise LessonError(f"{name}: {_END} without a region")
            regions.append(Region(current["task"], current["indent"], "\n".join(current["answer"]),
                                  "\n".join(current["stub"])))
            current = None
        elif current:
            current[part].append(line)
    if current:
        raise LessonError(f"{name}: answer region {current['task']} is not closed")
    return regions


def fill_answers(code: str, lang: str, variant: str, answers: dict[str, str] | None = None) -> str:
    """A code cell with its answer regions resolved for `variant` (or replaced by `answers`)."""
    out, region, part = [], None, None
    for line in code.splitlines():
        begin = _BEGIN.match(line)
        if begin:
            region, part = begin.groups(), "answer"
            indent, task = region
            if answers and task in answers:
                out += [indent + text if text else text for text in answers[task].splitlines()]
            elif variant == "exercise":
                out.append(indent + say(f"# ✏️ Task {task}: write your code here",
                                        f"# ✏️ 任务 {task}：在这里写你的代码", lang))
        elif region and line.strip() == _STUB:
            part = "stub"
        elif region and line.strip() == _END:
            region = None
        elif not region:
            out.append(line)
        else:  # inside a region: the solution keeps the answer, the student copy the stub
            replaced = bool(answers) and region[1] in answers
            if not replaced and (part == "answer") == (variant != "exercise"):
                out.append(line)
    return "\n".join(out)


def notebook_path(source: Path, lang: str, variant: str | None = None) -> Path:
    """Where the generated notebook of `source` in `lang` lives."""
    folder = VARIANTS[variant or variants(source)[0]]
    return course_of(source) / folder / lang / f"{source.stem}.ipynb"


def colab_url(path: Path) -> str:
    """The Colab address of a notebook of the course it lies in."""
    root = find_course(path.parent)
    pub = publication(root)
    relative = path.resolve().relative_to(root).as_posix()
    return f"https://colab.research.google.com/github/{pub['repository']}/blob/{pub['ref']}/{relative}"


def render(source: Path, lang: str, variant: str | None = None,
           answers: dict[str, str] | None = None) -> nbformat.NotebookNode:
    """The notebook of `source` in `lang`, without outputs; `answers` replace answer regions."""
    if lang not in LANGUAGES:
        raise ValueError(f"unknown language {lang!r}")
    variant = variant or variants(source)[0]
    if variant not in variants(source):
        raise ValueError(f"{source.name} has no {variant!r} notebook")
    pub = publication(course_of(source))
    badge = say("Open in Colab", "在 Colab 中打开", lang)
    source_cells = read_lesson(source)
    table = strings_table(source_cells) if lang == "zh" else {}
    cells = []
    for cell in source_cells:
        if (cell.kind in LANGUAGES and cell.kind != lang) or cell.kind in _NOT_SHOWN:
            continue
        if cell.kind == "code":
            code = literals.translate(fill_answers(cell.source, lang, variant, answers), table)
            cells.append(nbformat.v4.new_code_cell(code))
            tasks = [f"{source.stem[:2]}.{r.task}" for r in answer_regions(cell.source)]
            if tasks:  # how the grader finds the student's answer again
                cells[-1].metadata[metadata.KEY] = metadata.cell_metadata(tasks)
        elif cell.kind == "setup":  # its output shows versions and devices: not compared
            cells.append(nbformat.v4.new_code_cell(_SETUP.format(lang=lang, **pub)))
            cells[-1].metadata["tags"] = ["nbval-ignore-output"]
        elif not cells and variant == "solution":
            title, _, rest = cell.source.partition("\n")
            title += say(" (solution)", "（参考答案）", lang)
            cells.append(nbformat.v4.new_markdown_cell(title + _ + rest))
        else:
            cells.append(nbformat.v4.new_markdown_cell(bold_outside_cjk_punctuation(join_cjk_lines(cell.source))))
        if cell.tags:
            cells[-1].metadata["tags"] = list(cell.tags)
        if len(cells) == 1:  # the title: the badge follows it
            url = colab_url(notebook_path(source, lang, variant))
            cells.append(nbformat.v4.new_markdown_cell(f"[![{badge}]({_BADGE_IMAGE})]({url})"))
    for index, cell in enumerate(cells):
        cell.id = f"{source.stem[:2]}-{index:03d}"
    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata = {
        "colab": {"name": f"{source.stem}.ipynb", "toc_visible": True},
        "kernelspec": _KERNELSPEC,
        "language_info": {"name": "python"},
        metadata.KEY: metadata.notebook_metadata(source.stem, lang, variant),  # read by the grader
    }
    return notebook


def join_cjk_lines(markdown: str) -> str:
    """Join the lines of a paragraph that break after a Chinese character.

    Markdown renders a line break inside a paragraph as a space, which is a stray gap in a
    Chinese sentence. Sources may wrap Chinese text for readability; the notebook gets it
    joined (code blocks, lists, headings and tables keep their lines).
    """
    lines, fenced = [], False
    for line in markdown.split("\n"):
        previous = lines[-1] if lines else ""
        continues = (not fenced and re.search(f"[{_CJK}]$", previous)
                     and not _BLOCK_START.match(line) and not previous.lstrip().startswith(("|", "#", "<")))
        if continues:
            glue = "" if re.match(f"[{_CJK}]", line.lstrip()) or re.search(r"[\u3000-\u303f\uff00-\uffef]$",
                                                                           previous) else " "
            lines[-1] = previous + glue + line.lstrip()
        else:
            lines.append(line)
        if line.lstrip().startswith("```"):
            fenced = not fenced
    return "\n".join(lines)


def bold_outside_cjk_punctuation(markdown: str) -> str:
    """`**下一课：**第 2 课` -> `**下一课**：第 2 课`, which CommonMark renders as bold.

    A `**` between full-width punctuation and a Chinese character is not a delimiter in
    CommonMark (JupyterLab, GitHub, Colab): the asterisks would show. Punctuation at either
    end of the bold text moves outside it.
    """
    def move(match: re.Match) -> str:
        inner = match.group(1)
        core = inner.strip(_FULL_WIDTH_PUNCTUATION)
        if not core:
            return match.group(0)
        start = inner.index(core)
        return f"{inner[:start]}**{core}**{inner[start + len(core):]}"

    return _STRONG.sub(move, markdown)


def without_outputs(notebook: dict) -> dict:
    """A copy with outputs and execution counts removed, for comparing structure."""
    notebook = copy.deepcopy(notebook)
    for cell in notebook["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
    return notebook


def dumps(notebook: dict) -> str:
    """Canonical JSON: sorted keys, two-space indent, non-ASCII kept, newline at the end."""
    text = nbformat.writes(nbformat.from_dict(notebook))  # splits sources into lines
    return json.dumps(json.loads(text), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def execute(notebook: nbformat.NotebookNode, folder: Path, timeout: int = 600) -> None:
    """Run every cell in a fresh kernel (working directory `folder`), storing outputs."""
    client = _client_class()(
        notebook, timeout=timeout, kernel_name="python3", record_timing=False,
        resources={"metadata": {"path": str(folder)}},
    )
    client.execute(stderr=subprocess.DEVNULL)  # the kernel's own stderr: shutdown noise, not cells
    notebook.metadata = render_metadata(notebook)


def _client_class() -> type:
    """nbclient's NotebookClient, with a kernel clean-up that runs once, whoever calls it first.

    A build runs beside the command's main thread (see `pstutor build`). Stopped mid-run, the
    build's thread shuts its kernel down while nbclient's exit hook, in the main thread, may
    try the same: unguarded, the second finds the kernel manager gone and prints a traceback.
    """
    from jupyter_core.utils import run_sync
    from nbclient import NotebookClient

    class OnceCleanedClient(NotebookClient):
        _cleanup_lock = threading.Lock()

        async def _async_cleanup_kernel(self) -> None:
            with self._cleanup_lock:  # each caller runs its own event loop in its own thread
                if self.km is not None:
                    await super()._async_cleanup_kernel()

        _cleanup_kernel = run_sync(_async_cleanup_kernel)

    return OnceCleanedClient


def render_metadata(notebook: nbformat.NotebookNode) -> dict:
    """Keep only the metadata the build writes (execution adds version details)."""
    keep = ("colab", "kernelspec", "pstutor")
    meta = {key: notebook.metadata[key] for key in keep if key in notebook.metadata}
    meta["language_info"] = {"name": "python"}
    return meta


def targets(root: Path, names: list[str] | None = None) -> list[tuple[Path, str, str]]:
    """Every (source, variant, language) the build writes, in course order, or the named ones."""
    sources = lesson_paths(root) + exercise_paths(root)
    if names:
        sources = [p for p in sources if any(p.stem.startswith(n) for n in names)]
        if not sources:
            raise LessonError(f"no lesson or exercise matches {names}")
    return [(source, variant, lang) for source in sources
            for variant in variants(source) for lang in LANGUAGES]


def keep_outputs(notebook: nbformat.NotebookNode, stored: dict) -> None:
    """Give a re-rendered notebook the outputs stored for it (only markdown or setup changed)."""
    old = [c for c in stored["cells"] if c["cell_type"] == "code"]
    new = [c for c in notebook.cells if c.cell_type == "code"]
    changed = [i for i, (a, b) in enumerate(zip(old, new, strict=False))
               if i > 0 and "".join(a["source"]) != b.source]  # index 0: the generated setup cell
    if len(old) != len(new) or changed:
        raise LessonError("code cells changed: execute the notebook instead of keeping its outputs")
    for cell, before in zip(new, old, strict=True):
        cell.outputs = nbformat.from_dict(before["outputs"])
        cell.execution_count = before["execution_count"]


def build(root: Path, names: list[str] | None = None, run: bool = True, log=print,
          keep: bool = False, only: tuple[str, ...] = tuple(VARIANTS)) -> list[Path]:
    """Regenerate (and by default execute) the notebooks of the course at `root`, or the named ones.

    `keep` re-renders without executing and keeps the stored outputs: for edits of prose,
    of the setup cell or of the publication settings, which no output depends on. `only`
    limits the build to some variants (("lesson",) leaves the exercises as they are).
    """
    written = []
    for source, variant, lang in targets(root, names):
        if variant not in only:
            continue
        path = notebook_path(source, lang, variant)
        path.parent.mkdir(parents=True, exist_ok=True)
        notebook = render(source, lang, variant)
        if keep:
            keep_outputs(notebook, json.loads(path.read_text(encoding="utf-8")))
        elif run:
            log(f"executing {path.relative_to(root)} ...")
            execute(notebook, path.parent)
        if keep or run:
            unshown = unshown_claims(source, json.loads(dumps(notebook)), lang, variant)
            if unshown:
                failed = root / "build-failed" / path.relative_to(root)
                failed.parent.mkdir(parents=True, exist_ok=True)
                failed.write_text(dumps(notebook), encoding="utf-8")
                raise LessonError(f"{path.relative_to(root)} does not show what its prose claims "
                                  f"(not written; the run is in {failed.relative_to(root)}):\n"
                                  + "\n".join(unshown))
        path.write_text(dumps(notebook), encoding="utf-8")
        written.append(path)
    return written
