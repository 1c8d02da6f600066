#!/usr/bin/env bash
# One entry point for a fresh clone: creates .venv (if missing), installs the course, runs a job.
#   ./dev.sh demo     the main job: train on an in-process cluster, write pictures to pstutor-demo/
#   ./dev.sh test     the system packages the tests need (where it can), lint, the whole test suite
#                     (unit tests and nbval of every notebook); skipped groups named first and last
#   ./dev.sh build    regenerate and execute the notebooks from lessons/
#   ./dev.sh doctor   check the environment
#   ./dev.sh test-tf220  the suite again in .venv-tf220 with Colab's TensorFlow 2.20 / tf_keras 2.20
#   ./dev.sh test-colab  the Colab rehearsal: lessons run unchanged in a Colab-shaped .venv-colab,
#                        their first cell installing pstutor from a local copy of this tree
#   ./dev.sh test-browser  JupyterLab in Chromium: run notebooks from the Run menu, screenshots in
#                          browser-screenshots/ (Chromium and fonts: .ci/system-packages.sh)
set -euo pipefail
cd "$(dirname "$0")"

say() {  # the message in the user's language: PSTUTOR_LANG=zh, or (without it) a zh* locale
  case "${PSTUTOR_LANG:-${LC_ALL:-${LANG:-}}}" in zh*) echo "$2" ;; *) echo "$1" ;; esac
}

usage() {
  say "usage: ./dev.sh [demo|test|test-tf220|test-colab|test-browser|build|doctor] [args...]" \
      "用法：./dev.sh [demo|test|test-tf220|test-colab|test-browser|build|doctor] [参数...]" >&2
  exit 2
}
case "${1:-demo}" in  # a job that does not exist: say so before anything is created or installed
  demo|doctor|build|test|test-tf220|test-colab|test-browser) ;;
  *) usage ;;
esac

colab_python() {  # Colab runs Python 3.13: use it where this machine has one
  for candidate in python3.13 "$HOME"/.pyenv/versions/3.13*/bin/python3.13; do
    if "$candidate" --version >/dev/null 2>&1; then echo "$candidate"; return; fi
  done
  echo python3
}

if [ "${1:-}" = test-tf220 ]; then  # a second environment, as close to Colab as we can: 2.20 on 3.13
  shift
  PYTHON=${PYTHON:-$(colab_python)} PSTUTOR_VENV=.venv-tf220 \
    PSTUTOR_PINS="tensorflow==2.20.* tf-keras==2.20.* tensorboard==2.20.*" exec "$0" test "$@"
fi
VENV=${PSTUTOR_VENV:-.venv}
PYTHON=${PYTHON:-python3}

if [ ! -x "$VENV/bin/python" ]; then
  say "creating $VENV with $($PYTHON --version)" "正在用 $($PYTHON --version) 创建 $VENV"
  "$PYTHON" -m venv "$VENV"
fi
# Reinstall only when the dependency list changed (a stamp holds pyproject.toml's hash).
stamp="$VENV/.pstutor-installed"
want=$( (cat pyproject.toml; echo "${PSTUTOR_PINS:-}"; "$VENV/bin/python" --version) | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  say "installing the course into $VENV (first time: a few minutes)" "正在把课程安装到 $VENV（第一次需要几分钟）"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip 2>&1 | grep -v "is ignored" || true
  # shellcheck disable=SC2086  # the pins are separate words
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check -e ".[dev]" ${PSTUTOR_PINS:-} 2>&1 \
    | grep -v "is ignored" || true
  "$VENV/bin/python" -c "import pstutor, tensorflow, tf_keras, nbval" >/dev/null 2>&1 \
    || { say "installation failed: see the pip output above" "安装失败：请看上面 pip 的输出" >&2; exit 1; }
  echo "$want" > "$stamp"
fi
export PATH="$PWD/$VENV/bin:$PATH"

job=${1:-demo}
[ $# -gt 0 ] && shift
case "$job" in
  demo)   exec pstutor demo "$@" ;;
  doctor) exec pstutor doctor "$@" ;;
  build)  exec pstutor build "$@" ;;
  test)
    bash .ci/system-packages.sh  # where it can; the suite's first lines name what it skips, -rs again at the end
    ruff check .
    [ -n "${PSTUTOR_COLAB_PYTHON:-}" ] && exec python -m pytest -rs "$@"
    # The Colab rehearsal needs an environment of its own: a step of its own, not a skip.
    say "not in this run: the Colab rehearsal, a step of its own: ./dev.sh test-colab" \
        "本次运行不包括 Colab 演练，它单独运行：./dev.sh test-colab"
    exec python -m pytest -rs --ignore=tests/test_colab.py "$@" ;;
  test-colab)
    colab=.venv-colab  # Colab's stack, without pstutor: the notebooks' first cell installs it
    [ -x "$colab/bin/python" ] || { say "creating $colab" "正在创建 $colab"; "$(colab_python)" -m venv "$colab"; }
    want=$( (cat tests/colab-requirements.txt; "$colab/bin/python" --version) | sha256sum | cut -d' ' -f1)
    if [ "$(cat "$colab/.pstutor-installed" 2>/dev/null)" != "$want" ]; then
      say "installing Colab's stack into $colab (first time: a few minutes)" \
          "正在把 Colab 的软件栈安装到 $colab（第一次需要几分钟）"
      "$colab/bin/python" -m pip install -q --disable-pip-version-check -r tests/colab-requirements.txt 2>&1 \
        | grep -v "is ignored" || true
      "$colab/bin/python" -c "import tensorflow, tf_keras, ipykernel" >/dev/null 2>&1 \
        || { say "installing Colab's stack failed: see the pip output above" \
                 "安装 Colab 的软件栈失败：请看上面 pip 的输出" >&2; exit 1; }
      echo "$want" > "$colab/.pstutor-installed"
    fi
    PSTUTOR_COLAB_PYTHON="$PWD/$colab/bin/python" exec python -m pytest tests/test_colab.py -s "$@" ;;
  test-browser)
    bash .ci/system-packages.sh
    status=0
    python -m pytest -m browser -rs tests/test_browser.py "$@" || status=$?
    cat browser-screenshots/wall-times.txt 2>/dev/null || true
    exit "$status" ;;
  *) usage ;;
esac
