"""`pstutor autograder gradescope --exercise 03 --out DIR`: the files Gradescope runs to grade one exercise.

Gradescope builds an image from a zip holding `setup.sh` (run once, as root) and
`run_autograder` (run for every submission, in `/autograder`), and reads the results from
`/autograder/results/results.json` (https://gradescope-autograders.readthedocs.io/en/latest/specs/).
The folder written here holds both, and `course/`: the course's settings and the committed
student copy of the exercise in both languages, which the grader grades against.

`setup.sh` installs bubblewrap and pstutor (from the course's published `package_ref`, as
Colab does) into `/opt/pstutor`; `run_autograder` grades `/autograder/submission/*.ipynb`
into `results.json` with `pstutor grade --format gradescope`. Each Gradescope submission runs
in a container of its own; where that container lets bubblewrap make user namespaces the
submission also runs in the grader's sandbox, and where it does not, the container is the
only wall (the script says which, in the output only the teacher sees).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from pstutor.course import find_course, publication
from pstutor.language import LANGUAGES, say

SETUP = """#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder image.
set -euo pipefail
apt-get install -y bubblewrap python3-venv git
python3 -m venv /opt/pstutor
/opt/pstutor/bin/pip install --quiet "pstutor @ git+https://github.com/{repository}@{package_ref}"
"""

RUN = """#!/usr/bin/env bash
# Gradescope runs this for every submission, in /autograder: it grades exercise {exercise}
# of /autograder/submission into /autograder/results/results.json.
set -u
AUTOGRADER="${{AUTOGRADER_ROOT:-/autograder}}"
PSTUTOR="${{PSTUTOR:-/opt/pstutor/bin/pstutor}}"
mkdir -p "$AUTOGRADER/results"
SANDBOX=""
if ! bwrap --unshare-all --unshare-user --die-with-parent --ro-bind / / --proc /proc true 2>/dev/null; then
    echo "bubblewrap cannot make user namespaces in this container: the container is the only wall"
    SANDBOX="--no-sandbox"
fi
exec $PSTUTOR grade "$AUTOGRADER/submission" --format gradescope --exercise {exercise} $SANDBOX \\
    --course "$AUTOGRADER/source/course" --out "$AUTOGRADER/results/results.json" --jobs 1 --timeout 600
"""


class AutograderError(ValueError):
    """The autograder files cannot be written (bad exercise, folder in the way)."""


def write_gradescope(out: Path, *, exercise: str, course: Path | None = None) -> list[Path]:
    """Write setup.sh, run_autograder and course/ into `out` (a new or empty folder)."""
    course = find_course(course)
    matches = sorted(
        {path.stem for lang in LANGUAGES for path in (course / "exercises" / lang).glob(f"{exercise}*.ipynb")}
    )
    if len(matches) != 1:
        raise AutograderError(
            say(
                f"--exercise {exercise}: {'no' if not matches else 'more than one'} exercise "
                "of this course matches",
                f"--exercise {exercise}：本课程中{'没有' if not matches else '有多个'}练习与之匹配",
            )
        )
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise AutograderError(
            say(
                f"{out} exists and is not an empty folder: choose a new one",
                f"{out} 已存在且不是空文件夹：请换一个新的",
            )
        )
    source = matches[0]
    pub = publication(course)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, body in (
        ("setup.sh", SETUP.format(**pub)),
        ("run_autograder", RUN.format(exercise=source[:2])),
    ):
        path = out / name
        path.write_text(body, encoding="utf-8")
        os.chmod(path, 0o755)
        written.append(path)
    (out / "course" / "lessons").mkdir(parents=True)
    shutil.copy2(course / "pyproject.toml", out / "course" / "pyproject.toml")
    written.append(out / "course" / "pyproject.toml")
    for lang in LANGUAGES:
        target = out / "course" / "exercises" / lang / f"{source}.ipynb"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(course / "exercises" / lang / f"{source}.ipynb", target)
        written.append(target)
    return written
