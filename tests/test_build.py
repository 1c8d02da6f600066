"""Notebooks are generated from one source per lesson: they match it, and the languages agree."""

import json
import re
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT

from pstutor import build

LESSONS = build.lesson_paths()
CJK = re.compile(r"[\u4e00-\u9fff]")
PAIRS = [(lesson, lang) for lesson in LESSONS for lang in ("en", "zh")]


def _committed(lesson, lang) -> dict:
    return json.loads(build.notebook_path(lesson, lang).read_text(encoding="utf-8"))


def _code(notebook: dict) -> list[str]:
    return ["".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "code"]


def _markdown(notebook: dict) -> list[str]:
    return ["".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "markdown"]


def test_there_are_lessons_and_every_notebook_has_a_source():
    assert LESSONS, "no lesson sources found"
    stems = {p.stem for p in LESSONS}
    for lang in ("en", "zh"):
        generated = {p.stem for p in (ROOT / "notebooks" / lang).glob("*.ipynb")}
        assert generated == stems, f"notebooks/{lang} differs from lessons/"


@pytest.mark.parametrize("lesson, lang", PAIRS, ids=lambda v: getattr(v, "stem", v))
def test_committed_notebook_is_what_its_source_generates(lesson, lang):
    expected = build.without_outputs(json.loads(build.dumps(build.render(lesson, lang))))
    assert build.without_outputs(_committed(lesson, lang)) == expected, (
        f"regenerate with: pstutor build {lesson.stem[:2]}")


@pytest.mark.parametrize("lesson, lang", PAIRS, ids=lambda v: getattr(v, "stem", v))
def test_committed_notebook_is_canonical_json_with_outputs(lesson, lang):
    path = build.notebook_path(lesson, lang)
    notebook = _committed(lesson, lang)
    assert path.read_text(encoding="utf-8") == build.dumps(notebook)
    code = [c for c in notebook["cells"] if c["cell_type"] == "code"]
    counts = [c["execution_count"] for c in code]
    assert counts == list(range(1, len(code) + 1)), "stored outputs must come from one full run"
    assert any(c["outputs"] for c in code)
    for cell in code:
        assert all(o["output_type"] != "error" for o in cell["outputs"]), cell["source"]
        for output in cell["outputs"]:
            if "".join(output.get("data", {}).get("text/plain", "")).startswith("<Figure size"):
                assert "image/png" in output["data"], "a picture must be stored as an image"
    assert notebook["metadata"]["kernelspec"]["name"] == "python3"


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.stem)
def test_both_languages_run_the_same_code(lesson):
    en, zh = _committed(lesson, "en"), _committed(lesson, "zh")
    normalise = [c.replace('lang="zh"', 'lang="en"') for c in _code(zh)]
    assert _code(en) == normalise
    assert len(_markdown(en)) == len(_markdown(zh))


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.stem)
def test_each_language_is_written_in_that_language(lesson):
    for text in _markdown(_committed(lesson, "zh"))[2:]:  # after the title and badge
        assert CJK.search(text), f"untranslated Chinese cell: {text[:80]!r}"
    for text in _markdown(_committed(lesson, "en")):
        assert not CJK.search(text), f"Chinese text in the English notebook: {text[:80]!r}"


@pytest.mark.parametrize("lesson, lang", PAIRS, ids=lambda v: getattr(v, "stem", v))
def test_title_badge_and_setup_follow_the_conventions(lesson, lang):
    notebook = _committed(lesson, lang)
    cells = notebook["cells"]
    markdown = _markdown(notebook)
    assert sum(line.startswith("# ") for text in markdown for line in text.splitlines()) == 1
    assert cells[0]["cell_type"] == "markdown" and "".join(cells[0]["source"]).startswith("# ")
    badge = "".join(cells[1]["source"])
    url = build.colab_url(build.notebook_path(lesson, lang))
    assert f"]({url})" in badge and "colab-badge.svg" in badge
    assert build.publication()["repository"] in url and url.endswith(f"notebooks/{lang}/{lesson.stem}.ipynb")
    code = _code(notebook)
    setup = code[0]
    assert '"google.colab" in sys.modules' in setup and "%pip install" in setup
    assert f'pstutor.setup(lang="{lang}")' in setup
    assert "import tensorflow" in code[1], "the imports cell follows the setup cell"
    for later in code[2:]:
        assert not re.search(r"^(import|from) \w", later, re.M), f"import outside setup: {later[:60]}"


def _write(tmp_path, text):
    path = tmp_path / "99_broken.md"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "text, message",
    [
        ("<!-- cell: en -->\n# T\n<!-- cell: setup -->\n", "no Chinese twin"),
        ("<!-- cell: zh -->\n# T\n<!-- cell: setup -->\n", "no English twin"),
        ("<!-- cell: en -->\n# T\n<!-- cell: zh -->\n# T\n<!-- cell: code -->\nx = 1\n"
         "<!-- cell: setup -->\n", "one ```python fence"),
        ("stray\n<!-- cell: en -->\n# T\n<!-- cell: zh -->\n# T\n", "before the first cell marker"),
        ("<!-- cell: en -->\n# T\n<!-- cell: zh -->\n# T\n<!-- cell: code colour=red -->\n"
         "```python\nx\n```\n", "unknown cell option"),
        ("<!-- cell: en -->\n# T\n<!-- cell: zh -->\n# T\n", "exactly one setup cell"),
        ("<!-- cell: en -->\nT\n<!-- cell: zh -->\nT\n<!-- cell: setup -->\n", "must be the title"),
    ],
)
def test_malformed_lesson_sources_are_rejected_with_the_reason(tmp_path, text, message):
    with pytest.raises(build.LessonError, match=message):
        build.read_lesson(_write(tmp_path, text))


def test_a_changed_output_is_caught_by_nbval(tmp_path):
    """The stored outputs are really compared: alter one deterministic output and nbval fails."""
    source = build.notebook_path(LESSONS[0], "en")
    notebook = json.loads(source.read_text(encoding="utf-8"))
    target = next(c for c in notebook["cells"] if c["cell_type"] == "code"
                  and any("workers: 3" in "".join(o.get("text", "")) for o in c["outputs"]))
    for output in target["outputs"]:
        output["text"] = ["".join(output["text"]).replace("workers: 3", "workers: 4")]
    tampered = tmp_path / source.name
    tampered.write_text(json.dumps(notebook), encoding="utf-8")
    shutil.copy(ROOT / "tests" / "nbval_sanitize.cfg", tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-c", "/dev/null",
         "--rootdir", str(tmp_path), "--nbval", "--nbval-current-env",
         "--nbval-sanitize-with", str(tmp_path / "nbval_sanitize.cfg"), str(tampered)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )
    assert result.returncode == 1, result.stdout[-2000:]
    assert "workers: 4" in result.stdout and "1 failed" in result.stdout
