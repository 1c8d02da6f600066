"""What `./dev.sh test` does before the suite: system packages where it can, the skips named first.

`.ci/system-packages.sh` runs here on a PATH of stand-ins (`id`, `sudo`, `apt-get`, and
Chromium, fonts or bubblewrap only where a case has them), so every case — root, password-free
sudo, sudo that asks for a password, no sudo, nothing missing, apt failing — is played without
installing or removing anything. The skip plan is checked on real pytest runs of the test files
that skip, as a user who is not root (a user namespace, where this suite runs as root) and with
neither Chromium nor bubblewrap on the PATH: each group's line, printed before the first test,
says how many tests of which file, why, and the command; pytest's own `-rs` summary agrees.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, clean_env

SCRIPT = ROOT / ".ci" / "system-packages.sh"
PACKAGES = ["chromium", "fonts-noto-cjk", "fonts-noto-color-emoji", "bubblewrap"]
TOOLS = ["mktemp", "tail", "rm", "grep", "env", "cat", "true"]  # what the script uses besides the stand-ins


def _stand_ins(folder: Path, *, uid: int, sudo: str | None, have: tuple[str, ...] = (),
               apt_fails: bool = False) -> Path:
    """A bin folder: real basic tools, a fake `id -u`, `apt-get` and `sudo` that log their calls."""
    folder.mkdir()
    for tool in TOOLS:
        os.symlink(shutil.which(tool), folder / tool)
    calls = folder / "calls.log"
    scripts = {
        "id": f"echo {uid}",
        "apt-get": f'echo "apt-get $*" >> {calls}' + ('; echo "E: Unable to locate package" >&2; exit 100'
                                                       if apt_fails else ""),
    }
    if sudo == "no password":
        scripts["sudo"] = f'echo "sudo $*" >> {calls}; [ "$1" = -n ] && shift; exec "$@"'
    elif sudo == "password":
        scripts["sudo"] = 'echo "sudo: a password is required" >&2; exit 1'
    if "chromium" in have:
        scripts["chromium"] = "exit 0"
    if "fonts" in have:
        scripts["fc-list"] = 'echo "/usr/share/fonts/some-font.ttc: Some Font:style=Regular"'
    if "bwrap" in have:
        scripts["bwrap"] = "exit 0"
    for name, body in scripts.items():
        (folder / name).write_text(f"#!/bin/sh\n{body}\n")
        (folder / name).chmod(0o755)
    return folder


def _system_packages(tmp_path: Path, lang: str = "en", **case) -> tuple[subprocess.CompletedProcess, list]:
    """Run the script on the stand-ins of `case`: what it printed, and the calls it made."""
    folder = _stand_ins(tmp_path / "bin", **case)
    env = {"PATH": str(folder), "HOME": str(tmp_path), "PSTUTOR_LANG": lang}
    done = subprocess.run(["/bin/bash", str(SCRIPT)], capture_output=True, text=True, env=env, timeout=60)
    log = folder / "calls.log"
    return done, log.read_text().splitlines() if log.exists() else []


def test_as_root_the_missing_packages_are_installed_with_apt(tmp_path):
    done, calls = _system_packages(tmp_path, uid=0, sudo=None)
    assert done.returncode == 0, done.stderr
    assert len(calls) == 2 and calls[0].startswith("apt-get ") and calls[0].endswith(" update -qq"), calls
    assert calls[1].startswith("apt-get ") and calls[1].endswith(" install -y -qq " + " ".join(PACKAGES))
    assert done.stdout.strip() == "system packages: installed " + " ".join(PACKAGES)


def test_with_password_free_sudo_apt_runs_through_sudo(tmp_path):
    done, calls = _system_packages(tmp_path, uid=1000, sudo="no password", have=("chromium", "fonts"))
    assert done.returncode == 0, done.stderr
    through_sudo = [c for c in calls if c.startswith("sudo ")]
    assert through_sudo[0] == "sudo -n true", calls  # first asked whether sudo wants a password
    assert through_sudo[1].startswith("sudo -n apt-get ") and through_sudo[1].endswith(" update -qq")
    assert through_sudo[2].startswith("sudo -n env DEBIAN_FRONTEND=noninteractive apt-get ")
    assert calls[-1].startswith("apt-get ") and calls[-1].endswith(" install -y -qq bubblewrap")  # only that
    assert done.stdout.strip() == "system packages: installed bubblewrap"


@pytest.mark.parametrize(("sudo", "why"), [("password", "not root, and sudo asks for a password"),
                                           (None, "not root, and no sudo")])
def test_without_root_or_password_free_sudo_nothing_runs_and_one_line_says_how(tmp_path, sudo, why):
    done, calls = _system_packages(tmp_path, uid=1000, sudo=sudo)
    assert done.returncode == 0, done.stderr
    assert calls == [], "apt must not run"
    assert done.stdout.splitlines() == [
        f"system packages: {' '.join(PACKAGES)} not installed ({why}); "
        "to install them: sudo bash .ci/system-packages.sh"]


def test_the_line_is_in_chinese_for_a_chinese_user(tmp_path):
    done, _ = _system_packages(tmp_path, lang="zh", uid=1000, sudo=None)
    assert done.stdout.strip() == ("系统软件包：未安装 " + " ".join(PACKAGES)
                                   + "（不是 root，也没有 sudo）；安装方法：sudo bash .ci/system-packages.sh")


def test_nothing_missing_means_no_apt_at_all(tmp_path):
    done, calls = _system_packages(tmp_path, uid=0, sudo=None, have=("chromium", "fonts", "bwrap"))
    assert (done.returncode, calls) == (0, [])
    assert "already installed" in done.stdout


def test_apt_failing_is_reported_and_never_fails_the_run(tmp_path):
    done, calls = _system_packages(tmp_path, uid=0, sudo=None, apt_fails=True)
    assert done.returncode == 0
    assert len(calls) == 1  # install is not tried after update failed
    assert "could not install" in done.stderr and "Unable to locate package" in done.stderr


def _as_a_user(tmp_path: Path, *pytest_args: str, lang: str = "en") -> subprocess.CompletedProcess:
    """pytest on the files that skip, as a user who is not root, with no Chromium or bubblewrap."""
    empty = tmp_path / "bin"
    empty.mkdir(exist_ok=True)
    env = clean_env()
    env.pop("PSTUTOR_CHROMIUM", None)
    env.update(PATH=str(empty), PSTUTOR_LANG=lang)
    prefix: list[str] = []
    if os.geteuid() == 0:  # a user namespace: this process's uid there is nobody's, its files stay readable
        unshare = shutil.which("unshare")
        if unshare is None or subprocess.run([unshare, "--user", "true"]).returncode != 0:
            pytest.fail("running as root, and `unshare --user` cannot make a user who is not root")
        prefix = [unshare, "--user"]
    command = [*prefix, sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--setup-plan",
               "-rs", *pytest_args]
    return subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)


FILES = ["tests/test_browser.py", "tests/test_grade.py", "tests/test_multihost.py"]


def test_skipped_groups_are_named_before_the_first_test_with_the_command_that_runs_them(tmp_path):
    done = _as_a_user(tmp_path, *FILES)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = done.stdout.splitlines()
    plan = [line for line in lines if line.startswith("skipped in this run: ")]
    assert len(plan) == 3, done.stdout[-3000:]
    browser, grader, multihost = plan  # sorted by file
    assert browser.startswith("skipped in this run: the JupyterLab rehearsal in Chromium "
                              "(all of tests/test_browser.py): Chromium is not installed")
    assert browser.endswith(". To run them: sudo bash .ci/system-packages.sh")
    assert re.match(r"skipped in this run: the grader's sandbox \(bubblewrap\) "
                    r"\(\d+ tests in tests/test_grade.py\): needs bubblewrap", grader), grader
    assert grader.endswith(". To run them: sudo bash .ci/system-packages.sh")
    assert multihost.startswith("skipped in this run: the multi-host rehearsal (network namespaces) "
                                "(1 test in tests/test_multihost.py): making network namespaces needs root")
    python = Path(sys.executable)
    shown = python.relative_to(ROOT) if python.is_relative_to(ROOT) else python
    assert multihost.endswith(f". To run them: sudo {shown} -m pytest -rs tests/test_multihost.py")
    first_test = next(i for i, line in enumerate(lines) if line.startswith("tests/test_"))
    assert lines.index(browser) < first_test, "the plan comes before the tests"

    # pytest's closing summary skips exactly what the plan announced, file by file
    summary = lines[lines.index(next(x for x in lines if "short test summary info" in x)):]
    skipped: dict[str, int] = {}
    for line in summary:
        if found := re.match(r"SKIPPED \[(\d+)\] (tests/[\w.]+)", line):
            skipped[found[2]] = skipped.get(found[2], 0) + int(found[1])
    announced = {f: int(n) for n, f in (re.search(r"(\d+) tests? in (tests/[\w.]+)", x).groups()
                                        for x in (grader, multihost))}
    assert skipped == {"tests/test_browser.py": 1, **announced}, summary


def test_the_plan_speaks_chinese_for_a_chinese_user(tmp_path):
    done = _as_a_user(tmp_path, "tests/test_multihost.py", lang="zh")
    plan = [line for line in done.stdout.splitlines() if line.startswith("本次运行将跳过：")]
    assert len(plan) == 1 and plan[0].startswith(
        "本次运行将跳过：多主机演练（网络命名空间）（tests/test_multihost.py 中的 1 个测试）："), done.stdout
    assert "。运行它们：sudo " in plan[0]


def test_a_run_that_skips_nothing_prints_no_plan(tmp_path):
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--setup-plan",
                           "tests/test_tables.py"], capture_output=True, text=True, cwd=ROOT,
                          env=clean_env(), timeout=300)
    assert done.returncode == 0, done.stdout[-2000:]
    assert "skipped in this run" not in done.stdout


def test_dev_sh_test_installs_first_and_names_skips_at_the_end():
    script = (ROOT / "dev.sh").read_text()
    job = script[script.index("\n  test)"):script.index("\n  test-colab)")]
    assert job.index("bash .ci/system-packages.sh") < job.index("exec python -m pytest")
    assert all("-rs" in line for line in job.splitlines() if "python -m pytest" in line)


def test_an_unknown_job_is_one_line_and_exit_2_before_anything_is_made(tmp_path):
    shutil.copy(ROOT / "dev.sh", tmp_path / "dev.sh")  # a folder of its own: nothing there to reuse
    done = subprocess.run(["bash", str(tmp_path / "dev.sh"), "tset"], capture_output=True, text=True,
                          env={**clean_env(), "PSTUTOR_LANG": "en"}, timeout=60)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.splitlines() == [
        "usage: ./dev.sh [demo|test|test-tf220|test-colab|test-browser|build|doctor] [args...]"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dev.sh"], "no .venv made"
