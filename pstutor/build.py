"""The notebook build: one lesson source -> an English and a Chinese notebook.

A lesson source (`lessons/NN_name.md`) is a sequence of cells, each opened by a marker line:

    <!-- cell: en -->          markdown in English; must be followed by its zh twin
    <!-- cell: zh -->          markdown in Chinese
    <!-- cell: code -->        code shared by both languages, inside a ```python fence
    <!-- cell: code tags=nbval-ignore-output -->   the same, with notebook cell tags
    <!-- cell: setup -->       the generated setup cell (Colab install, pstutor.setup())

The first markdown pair is the title (one H1); the build puts the "Open in Colab" badge
right after it. Generated notebooks are never edited by hand: change the source and run
`pstutor build`.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from pathlib import Path

import nbformat

from pstutor.language import LANGUAGES

ROOT = Path(__file__).resolve().parent.parent
LESSONS = ROOT / "lessons"
NOTEBOOKS = ROOT / "notebooks"
_MARKER = re.compile(r"^<!-- cell: (en|zh|code|setup)((?: [a-z]+=[^ ]+)*) -->$")
_FENCE = re.compile(r"^```python\n(.*?)\n```$", re.S)
_BADGE_IMAGE = "https://colab.research.google.com/assets/colab-badge.svg"
_KERNELSPEC = {"display_name": "Python 3", "language": "python", "name": "python3"}
_SETUP = '''\
import sys

if "google.colab" in sys.modules:  # Colab: install the course's helper package first
    %pip install -q "pstutor @ git+https://github.com/{repository}@{ref}"

import pstutor

pstutor.setup(lang="{lang}")  # before TensorFlow is imported: tf.keras becomes Keras 2'''


class LessonError(ValueError):
    """A lesson source that does not follow the format above."""


@dataclasses.dataclass(frozen=True)
class Cell:
    """One cell of a lesson source."""

    kind: str  # "en", "zh", "code" or "setup"
    source: str
    tags: tuple[str, ...] = ()


def publication() -> dict[str, str]:
    """Where the course is published (`[tool.pstutor]` in pyproject.toml, the only place)."""
    import tomllib  # Python 3.11+: the build is a maintainer's tool

    with open(ROOT / "pyproject.toml", "rb") as handle:
        return tomllib.load(handle)["tool"]["pstutor"]


def lesson_paths() -> list[Path]:
    """Every lesson source, in course order."""
    return sorted(LESSONS.glob("[0-9][0-9]_*.md"))


def read_lesson(path: Path) -> list[Cell]:
    """Parse a lesson source into cells, checking the format."""
    cells: list[Cell] = []
    kind, tags, lines = None, (), []

    def close() -> None:
        if kind is None:
            if "".join(lines).strip():
                raise LessonError(f"{path.name}: text before the first cell marker")
            return
        text = "\n".join(lines).strip("\n")
        if kind == "code":
            match = _FENCE.match(text)
            if not match:
                raise LessonError(f"{path.name}: a code cell must be one ```python fence")
            text = match.group(1)
        cells.append(Cell(kind, text, tags))

    for line in path.read_text(encoding="utf-8").splitlines():
        match = _MARKER.match(line)
        if match:
            close()
            kind, lines = match.group(1), []
            options = dict(item.split("=", 1) for item in match.group(2).split())
            tags = tuple(options.pop("tags", "").split(",")) if "tags" in options else ()
            if options:
                raise LessonError(f"{path.name}: unknown cell option(s) {sorted(options)}")
        else:
            lines.append(line)
    close()
    _check_pairs(path, cells)
    return cells


def _check_pairs(path: Path, cells: list[Cell]) -> None:
    """Every English markdown cell is followed by its Chinese twin, and vice versa."""
    for i, cell in enumerate(cells):
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


def notebook_path(lesson: Path, lang: str) -> Path:
    """Where the generated notebook of `lesson` in `lang` lives."""
    return NOTEBOOKS / lang / f"{lesson.stem}.ipynb"


def colab_url(path: Path) -> str:
    """The Colab address of a notebook of this repository."""
    pub = publication()
    relative = path.resolve().relative_to(ROOT).as_posix()
    return f"https://colab.research.google.com/github/{pub['repository']}/blob/{pub['ref']}/{relative}"


def render(lesson: Path, lang: str) -> nbformat.NotebookNode:
    """The notebook of `lesson` in `lang`, without outputs."""
    if lang not in LANGUAGES:
        raise ValueError(f"unknown language {lang!r}")
    pub = publication()
    badge = {"en": "Open in Colab", "zh": "在 Colab 中打开"}[lang]
    cells = []
    for cell in read_lesson(lesson):
        if cell.kind in LANGUAGES and cell.kind != lang:
            continue
        if cell.kind == "code":
            cells.append(nbformat.v4.new_code_cell(cell.source))
        elif cell.kind == "setup":  # its output shows versions and devices: not compared
            cells.append(nbformat.v4.new_code_cell(_SETUP.format(lang=lang, **pub)))
            cells[-1].metadata["tags"] = ["nbval-ignore-output"]
        else:
            cells.append(nbformat.v4.new_markdown_cell(cell.source))
        if cell.tags:
            cells[-1].metadata["tags"] = list(cell.tags)
        if len(cells) == 1:  # the title: the badge follows it
            url = colab_url(notebook_path(lesson, lang))
            cells.append(nbformat.v4.new_markdown_cell(f"[![{badge}]({_BADGE_IMAGE})]({url})"))
    for index, cell in enumerate(cells):
        cell.id = f"{lesson.stem[:2]}-{index:03d}"
    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata = {
        "colab": {"name": f"{lesson.stem}.ipynb", "toc_visible": True},
        "kernelspec": _KERNELSPEC,
        "language_info": {"name": "python"},
    }
    return notebook


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
    from nbclient import NotebookClient

    client = NotebookClient(
        notebook, timeout=timeout, kernel_name="python3", record_timing=False,
        resources={"metadata": {"path": str(folder)}},
    )
    client.execute()
    notebook.metadata = render_metadata(notebook)


def render_metadata(notebook: nbformat.NotebookNode) -> dict:
    """Keep only the metadata the build writes (execution adds version details)."""
    keep = ("colab", "kernelspec")
    meta = {key: notebook.metadata[key] for key in keep if key in notebook.metadata}
    meta["language_info"] = {"name": "python"}
    return meta


def build(names: list[str] | None = None, run: bool = True, log=print) -> list[Path]:
    """Regenerate (and by default execute) the notebooks of the named lessons, or of all."""
    lessons = lesson_paths()
    if names:
        lessons = [p for p in lessons if any(p.stem.startswith(n) for n in names)]
        if not lessons:
            raise LessonError(f"no lesson matches {names}")
    written = []
    for lesson in lessons:
        for lang in LANGUAGES:
            path = notebook_path(lesson, lang)
            notebook = render(lesson, lang)
            if run:
                log(f"executing {path.relative_to(ROOT)} ...")
                execute(notebook, path.parent)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(dumps(notebook), encoding="utf-8")
            written.append(path)
    return written

