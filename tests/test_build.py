"""Notebooks are generated from one source per lesson: they match it, and the languages agree."""

import itertools
import json
import re
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT

from pstutor import build, literals

LESSONS = build.lesson_paths()
CJK = re.compile(r"[\u4e00-\u9fff]")
TARGETS = build.targets(ROOT)  # (source, variant, language) of every generated notebook
PAIRS = [(source, variant) for source, variant, lang in TARGETS if lang == "en"]


def _id(value) -> str:
    return getattr(value, "stem", value)


def _committed(source, lang, variant=None) -> dict:
    return json.loads(build.notebook_path(source, lang, variant).read_text(encoding="utf-8"))


def _code(notebook: dict) -> list[str]:
    return ["".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "code"]


def _markdown(notebook: dict) -> list[str]:
    return ["".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "markdown"]


def test_there_are_lessons_and_every_notebook_has_a_source():
    assert LESSONS and build.exercise_paths(), "no lesson or exercise sources found"
    for folder in ("notebooks", "solutions", "exercises"):
        for lang in ("en", "zh"):
            committed = set((ROOT / folder / lang).glob("*.ipynb"))
            generated = {build.notebook_path(s, lang, v) for s, v in PAIRS}
            generated = {p for p in generated if p.parent == ROOT / folder / lang}
            assert committed == generated, f"{folder}/{lang} differs from its sources"


@pytest.mark.parametrize("source, variant, lang", TARGETS, ids=_id)
def test_committed_notebook_is_what_its_source_generates(source, variant, lang):
    expected = build.without_outputs(json.loads(build.dumps(build.render(source, lang, variant))))
    assert build.without_outputs(_committed(source, lang, variant)) == expected, (
        f"regenerate with: pstutor build {source.stem[:2]}")


@pytest.mark.parametrize("source, variant, lang", TARGETS, ids=_id)
def test_committed_notebook_is_canonical_json_with_outputs(source, variant, lang):
    path = build.notebook_path(source, lang, variant)
    notebook = _committed(source, lang, variant)
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


@pytest.mark.parametrize("source, variant", PAIRS, ids=_id)
def test_both_languages_run_the_same_code(source, variant):
    """The same program in both: only the text of string literals may differ (the strings table)."""
    en, zh = _committed(source, "en", variant), _committed(source, "zh", variant)
    normalise = [re.sub(r"# ✏️ 任务 (\d+)：在这里写你的代码", r"# ✏️ Task \1: write your code here",
                        c.replace('lang="zh"', 'lang="en"')) for c in _code(zh)]
    assert len(_code(en)) == len(normalise)
    for english, chinese in zip(_code(en), normalise, strict=True):
        if english != chinese:
            assert literals.program_shape(english) == literals.program_shape(chinese), english[:200]
            assert [line for line in english.splitlines() if line.lstrip().startswith("#")] == \
                [line for line in chinese.splitlines() if line.lstrip().startswith("#")], "comments differ"
    assert len(_markdown(en)) == len(_markdown(zh))


@pytest.mark.parametrize("source, variant", PAIRS, ids=_id)
def test_the_stored_outputs_show_what_the_prose_claims(source, variant):
    """Every claim of a source holds on the committed notebooks of both languages."""
    unshown = [line for lang in ("en", "zh")
               for line in build.unshown_claims(source, _committed(source, lang, variant), lang, variant)]
    assert not unshown, "\n".join(unshown)


@pytest.mark.parametrize("source, variant", PAIRS, ids=_id)
def test_each_language_is_written_in_that_language(source, variant):
    for text in _markdown(_committed(source, "zh", variant))[2:]:  # after the title and badge
        assert CJK.search(text), f"untranslated Chinese cell: {text[:80]!r}"
    for text in _markdown(_committed(source, "en", variant)):
        assert not CJK.search(text), f"Chinese text in the English notebook: {text[:80]!r}"


@pytest.mark.parametrize("source, variant, lang", TARGETS, ids=_id)
def test_title_badge_and_setup_follow_the_conventions(source, variant, lang):
    notebook = _committed(source, lang, variant)
    cells = notebook["cells"]
    markdown = _markdown(notebook)
    assert sum(line.startswith("# ") for text in markdown for line in text.splitlines()) == 1
    assert cells[0]["cell_type"] == "markdown" and "".join(cells[0]["source"]).startswith("# ")
    badge = "".join(cells[1]["source"])
    path = build.notebook_path(source, lang, variant)
    url = build.colab_url(path)
    assert f"]({url})" in badge and "colab-badge.svg" in badge
    assert build.publication(ROOT)["repository"] in url
    assert url.endswith(path.relative_to(ROOT).as_posix())
    code = _code(notebook)
    setup = code[0]
    assert '"google.colab" in sys.modules' in setup and "-m pip install -q" in setup
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


EXERCISE_HEAD = "<!-- cell: en -->\n# T\n<!-- cell: zh -->\n# T\n<!-- cell: setup -->\n"


@pytest.mark.parametrize(
    "code, message",
    [
        ("### BEGIN ANSWER 1\nx = 1\n", "region 1 is not closed"),
        ("x = 1\n### END ANSWER\n", "without a region"),
        ("x = 1\n", "needs at least one"),
        ("### BEGIN ANSWER 1\nx = 1\n### END ANSWER\n", "have no wrong answer"),
        ("### BEGIN ANSWER 1\nx = 1\n### END ANSWER\n### BEGIN ANSWER 1\ny = 1\n### END ANSWER\n",
         "used by two answer regions"),
    ],
)
def test_malformed_exercise_sources_are_rejected_with_the_reason(tmp_path, code, message):
    exercises = tmp_path / "lessons" / "exercises"  # where an exercise source lives in a course
    exercises.mkdir(parents=True)
    text = EXERCISE_HEAD + f"<!-- cell: code -->\n```python\n{code}```\n"
    with pytest.raises(build.LessonError, match=message):
        build.read_lesson(_write(exercises, text))


def test_a_lesson_may_not_hold_answers(tmp_path):
    text = EXERCISE_HEAD + "<!-- cell: code -->\n```python\n### BEGIN ANSWER 1\nx\n### END ANSWER\n```\n"
    with pytest.raises(build.LessonError, match="belong in exercises"):
        build.read_lesson(_write(tmp_path, text))


def test_the_student_copy_gets_the_stub_and_the_solution_the_answer():
    code = ("a = 0\n    ### BEGIN ANSWER 2\n    x = solve()\n    ### STUB\n    x = None\n"
            "    ### END ANSWER\nb = x")
    assert build.fill_answers(code, "en", "solution") == "a = 0\n    x = solve()\nb = x"
    assert build.fill_answers(code, "zh", "exercise") == (
        "a = 0\n    # ✏️ 任务 2：在这里写你的代码\n    x = None\nb = x")
    replaced = build.fill_answers(code, "en", "solution", {"2": "x = 1\ny = 2"})
    assert replaced == "a = 0\n    x = 1\n    y = 2\nb = x"


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


LOCAL_ONLY = re.compile(r"\.\./|\b(lessons|tests|benchmarks|notebooks|solutions|exercises)/|__file__|/work/")


@pytest.mark.parametrize("source, variant, lang", TARGETS, ids=_id)
def test_code_needs_no_file_of_a_local_clone(source, variant, lang):
    """In Colab only the notebook and the installed package exist."""
    for code in _code(_committed(source, lang, variant)):
        assert not LOCAL_ONLY.search(code), f"refers to a file of the clone: {code[:120]}"


def test_prose_edits_can_keep_the_stored_outputs():
    source = LESSONS[0]
    stored = _committed(source, "en")
    notebook = build.render(source, "en")
    build.keep_outputs(notebook, stored)
    assert json.loads(build.dumps(notebook)) == stored
    code = [c for c in notebook.cells if c.cell_type == "code"]
    code[2].source += "\nprint('new')"
    with pytest.raises(build.LessonError, match="execute the notebook"):
        build.keep_outputs(notebook, stored)


def test_the_build_finds_its_course_from_the_working_directory_or_refuses(tmp_path):
    """The course tools never locate the clone through the installed package's own path."""
    from pstutor.course import CourseNotFoundError, find_course

    assert find_course(ROOT / "lessons" / "exercises") == ROOT
    assert build.course_of(build.exercise_paths(ROOT)[0]) == ROOT
    with pytest.raises(CourseNotFoundError, match="--course DIR"):
        find_course(tmp_path)
    result = subprocess.run([sys.executable, "-m", "pstutor", "build", "--no-execute", "01"],
                            capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert result.returncode == 2 and "not inside a clone" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_chinese_lines_of_one_paragraph_are_joined():
    wrapped = "第一行，\n第二行 `code`\n继续。\n\n- 列表\n# 标题\n正文\n```\n代码\n注释\n```"
    joined = "第一行，第二行 `code`\n继续。\n\n- 列表\n# 标题\n正文\n```\n代码\n注释\n```"
    assert build.join_cjk_lines(wrapped) == joined
    assert build.join_cjk_lines("文字\n`api` 随后") == "文字 `api` 随后"
    assert build.join_cjk_lines("English\nlines") == "English\nlines"


def _headings(markdown: str) -> list[int]:
    """The levels of the markdown headings outside code blocks."""
    levels, fenced = [], False
    for line in markdown.splitlines():
        fenced ^= line.lstrip().startswith("```")
        if not fenced and (match := re.match(r"^(#+) ", line)):
            levels.append(len(match.group(1)))
    return levels


@pytest.mark.parametrize("source", build.lesson_paths(ROOT) + build.exercise_paths(ROOT), ids=_id)
def test_both_languages_have_the_same_headings(source):
    """Every English markdown cell and its Chinese twin open the same sections, in order."""
    cells = build.read_lesson(source)
    for en, zh in itertools.pairwise(cells):
        if en.kind == "en":
            assert _headings(en.source) == _headings(zh.source), (
                f"{source.name}: headings differ\n{en.source[:200]}\n---\n{zh.source[:200]}")


def _prose(markdown: str) -> str:
    """Markdown without code blocks, inline code and HTML comments."""
    markdown = re.sub(r"```.*?```|<!--.*?-->", "", markdown, flags=re.S)
    return re.sub(r"`[^`]*`", "", markdown)


@pytest.mark.parametrize("source, variant", PAIRS, ids=lambda v: _id(v))
def test_chinese_text_reads_as_chinese(source, variant):
    """No line break inside a Chinese sentence, and the glossary's term for an epoch (周期)."""
    for text in _markdown(_committed(source, "zh", variant)):
        assert build.join_cjk_lines(text) == text, f"a Chinese sentence is broken across lines:\n{text[:300]}"
        prose = _prose(text).replace("周期（epoch）", "")  # the term glossed once is fine
        assert "epoch" not in prose.lower(), f"'epoch' is 周期 in Chinese prose:\n{text[:300]}"


def _literal_asterisks(markdown: str) -> list[str]:
    """Text that CommonMark (JupyterLab, GitHub, Colab) would show with its `**` unparsed."""
    from markdown_it import MarkdownIt

    found = []
    for block in MarkdownIt("commonmark").parse(markdown):
        found += [t.content for t in block.children or [] if t.type == "text" and "**" in t.content]
    return found


def test_bold_text_next_to_chinese_punctuation_renders_as_bold():
    assert _literal_asterisks("**下一课：**第 2 课")  # what CommonMark does with the raw source
    assert build.bold_outside_cjk_punctuation("**下一课：**第 2 课") == "**下一课**：第 2 课"
    fixed = build.bold_outside_cjk_punctuation("**（注）**正文，**谁也不等谁。**每一行")
    assert fixed == "（**注**）正文，**谁也不等谁**。每一行" and not _literal_asterisks(fixed)


@pytest.mark.parametrize("source, variant, lang", TARGETS, ids=lambda v: _id(v))
def test_no_markdown_cell_shows_literal_asterisks(source, variant, lang):
    for text in _markdown(_committed(source, lang, variant)):
        assert not _literal_asterisks(text), f"{source.name} ({lang}): {_literal_asterisks(text)}"


def _lesson_with(tmp_path, code: str, extra: str = "") -> object:
    """A one-cell lesson in a course folder of its own (`tmp_path`)."""
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    for folder in ("lessons", "notebooks/en", "notebooks/zh"):
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
    return _write(tmp_path / "lessons", "<!-- cell: en -->\n# T\n<!-- cell: zh -->\n# T\n"
                  f"<!-- cell: setup -->\n<!-- cell: code -->\n```python\n{code}\n```\n{extra}")


def test_the_chinese_notebook_prints_the_strings_table_and_runs_the_same_program(tmp_path):
    strings = ('<!-- cell: strings -->\n```python\n{"I am": "我是", "{n} steps": "{n} 步",\n'
               ' "a\\nb": "甲\\n乙"}\n```\n')
    source = _lesson_with(tmp_path, 'n = 2\nprint("I am", "worker")\nprint(f"{n} steps")\nprint("a\\nb")',
                          strings)
    en = _code(build.render(source, "en"))[1]
    zh = _code(build.render(source, "zh"))[1]
    assert 'print("I am", "worker")' in en and 'print("我是", "worker")' in zh
    assert 'print(f"{n} 步")' in zh and 'print("甲\\n乙")' in zh
    assert literals.program_shape(en) == literals.program_shape(zh)
    assert literals.program_shape(en) != literals.program_shape(en.replace("n = 2", "n = 3"))


@pytest.mark.parametrize(
    "code, strings, message",
    [
        ('print("hi")', '{"bye": "再见"}', "no code cell uses"),
        ('print("hi")', '["hi"]', "must map English strings"),
        ('print("hi")', '{"hi": 再见}', "not a Python dict literal"),
        ('print("你好")', '{}', "Chinese in a code cell"),
    ],
)
def test_a_strings_table_that_does_not_fit_the_code_is_rejected(tmp_path, code, strings, message):
    source = _lesson_with(tmp_path, code, f"<!-- cell: strings -->\n```python\n{strings}\n```\n")
    with pytest.raises(build.LessonError, match=message):
        build.read_lesson(source)


def test_a_claim_reads_the_output_of_the_cell_before_it_in_both_languages(tmp_path):
    claim = ("<!-- cell: claim -->\n```python\n# the second count is larger\n"
             "assert nums[1] > nums[0], nums\n```\n")
    source = _lesson_with(tmp_path, 'print("counts:", 3, 5)', claim)
    (claim_,) = build.claims_of(source)
    assert claim_.cell == 1 and claim_.title == "the second count is larger"
    notebook = json.loads(build.dumps(build.render(source, "en")))
    notebook["cells"][-1]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "counts: 3 5\n"}]
    assert build.unshown_claims(source, notebook, "en", "lesson") == []
    notebook["cells"][-1]["outputs"][0]["text"] = "counts: 5 3\n"
    (failure,) = build.unshown_claims(source, notebook, "zh", "lesson")
    assert "[zh]" in failure and "the second count is larger" in failure and "[5.0, 3.0]" in failure
    assert build.unshown_claims(source, notebook, "zh", "exercise") == [], "student copies claim nothing"


def test_the_build_refuses_to_write_a_notebook_that_stops_showing_its_claim(tmp_path):
    claim = "<!-- cell: claim -->\n```python\n# one is two\nassert nums == [2.0], nums\n```\n"
    source = _lesson_with(tmp_path, "print(1)", claim)
    source.rename(tmp_path / "lessons" / "01_t.md")
    (tmp_path / "lessons" / "course.toml").write_text(
        'total_budget_seconds = 1\n[[lesson]]\nslug = "01_t"\ntitle = "T"\ntitle_zh = "T"\nsummary = "T"\n'
        "budget_seconds = 1\nguide_ratio = 1\n")
    with pytest.raises(build.LessonError, match="does not show what its prose claims"):
        build.build(tmp_path, ["01"], run=True, log=lambda _: None)
    assert not (tmp_path / "notebooks" / "en" / "01_t.ipynb").exists()
    assert (tmp_path / "build-failed" / "notebooks" / "en" / "01_t.ipynb").exists()
