"""The course manifest, lessons/course.toml, is the one list of lessons: the sources, their titles,
the README's course map and the exercises' fresh-kernel tasks agree with it, and the build
refuses a course where they do not."""

import re
import shutil

import pytest
from conftest import ROOT, run_pstutor

from pstutor import build, manifest
from pstutor.course import publication

COURSE = manifest.read(ROOT)
_COLAB_BADGE = "[![Colab](https://colab.research.google.com/assets/colab-badge.svg)]"
_TABLE_ROW = re.compile(r"^\| [0-9]{2} \|.*", re.M)


def _course_map_row(lesson: manifest.Lesson, colab: str) -> str:
    """The README's course-map row of `lesson`; `colab`: the Colab address of the repository's files."""
    def lesson_links(lang: str, word: str) -> str:
        path = f"notebooks/{lang}/{lesson.slug}.ipynb"
        return f"[{word}]({path}) · {_COLAB_BADGE}({colab}/{path})"

    def both(folder: str) -> str:
        return f"[en]({folder}/en/{lesson.slug}.ipynb) · [中文]({folder}/zh/{lesson.slug}.ipynb)"

    return (f"| {lesson.number} | {lesson.summary} | {lesson_links('en', 'notebook')} | "
            f"{lesson_links('zh', '笔记本')} | {both('exercises')} · solutions: {both('solutions')} |")


def course_map_disagreement(root) -> str:
    """What the README's course map should read if it differs from the manifest's, else ""."""
    pub = publication(root)
    colab = f"https://colab.research.google.com/github/{pub['repository']}/blob/{pub['ref']}"
    expected = [_course_map_row(lesson, colab) for lesson in manifest.read(root).lessons]
    found = _TABLE_ROW.findall((root / "README.md").read_text(encoding="utf-8"))
    if found == expected:
        return ""
    return ("README.md's course map disagrees with lessons/course.toml (order, summaries or links); "
            "its rows should read:\n" + "\n".join(expected))


@pytest.fixture
def course(tmp_path):
    """A copy of what declares the course: pyproject.toml, README.md and lessons/."""
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, tmp_path)
    shutil.copytree(ROOT / "lessons", tmp_path / "lessons")
    return tmp_path


def test_the_readme_course_map_is_the_manifests():
    assert not course_map_disagreement(ROOT), course_map_disagreement(ROOT)


@pytest.mark.parametrize("lesson", COURSE.lessons, ids=lambda lesson: lesson.slug)
def test_each_lesson_opens_with_its_declared_titles(lesson):
    en, zh = build.read_lesson(ROOT / "lessons" / f"{lesson.slug}.md")[:2]  # the title pair comes first
    number = int(lesson.number)
    assert en.source.splitlines()[0] == f"# Lesson {number}: {lesson.title}"
    assert zh.source.splitlines()[0] == f"# 第 {number} 课：{lesson.title_zh}"


@pytest.mark.parametrize("lesson", [lesson for lesson in COURSE.lessons if lesson.fresh_kernel],
                         ids=lambda lesson: lesson.slug)
def test_fresh_kernel_tasks_are_tasks_of_the_lessons_exercise(lesson):
    source = ROOT / "lessons" / "exercises" / f"{lesson.slug}.md"
    tasks = {int(region.task) for cell in build.read_lesson(source) if cell.kind == "code"
             for region in build.answer_regions(cell.source)}
    assert set(lesson.fresh_kernel) <= tasks, f"{lesson.slug}: fresh_kernel names a task its exercise lacks"


def test_a_copy_of_the_course_agrees_with_its_manifest(course):
    assert [p.name for p in build.lesson_paths(course)] == [f"{lesson.slug}.md" for lesson in COURSE.lessons]
    assert not course_map_disagreement(course)


@pytest.mark.parametrize("folder", ["lessons", "lessons/exercises"])
def test_a_source_the_manifest_does_not_declare_stops_the_build(course, folder):
    shutil.copy(course / folder / "09_choosing_a_strategy.md", course / folder / "10_next.md")
    with pytest.raises(manifest.ManifestError, match=rf"{folder}/10_next\.md is not declared"):
        build.targets(course)


def test_a_declared_lesson_whose_source_is_missing_stops_the_build(course):
    (course / "lessons" / "04_custom_loop.md").unlink()
    with pytest.raises(manifest.ManifestError,
                       match=r"declares '04_custom_loop', but lessons/04_custom_loop\.md does not exist"):
        build.targets(course)


def _declare_lesson_10(course) -> None:
    """Lesson 10: its source and its manifest entry, but no README row."""
    shutil.copy(course / "lessons" / "09_choosing_a_strategy.md", course / "lessons" / "10_next.md")
    with (course / "lessons" / "course.toml").open("a", encoding="utf-8") as toml:
        toml.write('\n[[lesson]]\nslug = "10_next"\ntitle = "Next"\ntitle_zh = "下一课"\n'
                   'summary = "Next: what follows"\nbudget_seconds = 45\nguide_ratio = 2.0\n')


def _edit_readme(old: str, new: str):
    def edit(course) -> None:
        readme = course / "README.md"
        text = readme.read_text(encoding="utf-8")
        assert old in text
        readme.write_text(text.replace(old, new, 1), encoding="utf-8")
    return edit


def _swap_rows_01_and_02(course) -> None:
    readme = course / "README.md"
    lines = readme.read_text(encoding="utf-8").splitlines(keepends=True)
    first = next(i for i, line in enumerate(lines) if line.startswith("| 01 |"))
    lines[first], lines[first + 1] = lines[first + 1], lines[first]
    readme.write_text("".join(lines), encoding="utf-8")


@pytest.mark.parametrize("edit", [
    _declare_lesson_10,
    _swap_rows_01_and_02,
    _edit_readme("| Variable sharding: partitioners", "| Variable sharding: the partitioners"),
    _edit_readme("(notebooks/zh/03_model_fit.ipynb)", "(notebooks/zh/03_fit.ipynb)"),
], ids=["a lesson without its row", "rows out of order", "another summary", "a wrong link"])
def test_a_course_map_that_disagrees_with_the_manifest_is_caught(course, edit):
    edit(course)
    assert "its rows should read:\n| 01 |" in course_map_disagreement(course)


@pytest.mark.parametrize("old, new, message", [
    ('slug = "02_sharding"', 'slug = "03_sharding"', "must be '02_name'"),
    ("guide_ratio = 1.0\n", "guide_ration = 1.0\n", r"unknown \['guide_ration'\]"),
    ("total_budget_seconds = 180\n", "", r"missing \['total_budget_seconds'\]"),
    ("[[lesson]]\n", "[[lesson\n", "lessons/course.toml: "),
], ids=["out of order", "a misspelt field", "no total budget", "not TOML"])
def test_a_malformed_manifest_is_refused(course, old, new, message):
    toml = course / "lessons" / "course.toml"
    text = toml.read_text(encoding="utf-8")
    assert old in text
    toml.write_text(text.replace(old, new, 1), encoding="utf-8")
    with pytest.raises(manifest.ManifestError, match=message):
        manifest.read(course)


def test_pstutor_build_says_what_the_manifest_lacks_in_one_line(course):
    shutil.copy(course / "lessons" / "09_choosing_a_strategy.md", course / "lessons" / "10_next.md")
    result = run_pstutor("build", "--no-execute", "10", "--course", str(course), timeout=120)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr == ("pstutor build: lessons/10_next.md is not declared in lessons/course.toml: "
                             "add a [[lesson]] with slug = '10_next', or move the file out of lessons/\n")
