#!/usr/bin/env bash
# One entry point for a fresh clone: creates .venv (if missing), installs the course, runs a job.
#   ./dev.sh demo     the main job: train on an in-process cluster, write pictures to pstutor-demo/
#   ./dev.sh test     lint + the whole test suite (unit tests and nbval of every notebook)
#   ./dev.sh build    regenerate and execute the notebooks from lessons/
#   ./dev.sh doctor   check the environment
#   ./dev.sh test-tf220  the suite again in .venv-tf220 with Colab's TensorFlow 2.20 / tf_keras 2.20
#   ./dev.sh test-colab  the Colab rehearsal: lessons run unchanged in a Colab-shaped .venv-colab,
#                        their first cell installing pstutor from a local copy of this tree
#   ./dev.sh test-browser  JupyterLab in Chromium: run notebooks from the Run menu, screenshots in
#                          browser-screenshots/ (Chromium and fonts: .ci/system-packages.sh)
set -euo pipefail
cd "$(dirname "$0")"

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
  echo "creating $VENV with $($PYTHON --version)"
  "$PYTHON" -m venv "$VENV"
fi
# Reinstall only when the dependency list changed (a stamp holds pyproject.toml's hash).
stamp="$VENV/.pstutor-installed"
want=$( (cat pyproject.toml; echo "${PSTUTOR_PINS:-}"; "$VENV/bin/python" --version) | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "installing the course into $VENV (first time: a few minutes)"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip 2>&1 | grep -v "is ignored" || true
  # shellcheck disable=SC2086  # the pins are separate words
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check -e ".[dev]" ${PSTUTOR_PINS:-} 2>&1 \
    | grep -v "is ignored" || true
  "$VENV/bin/python" -c "import pstutor, tensorflow, tf_keras, nbval" >/dev/null 2>&1 \
    || { echo "installation failed: see the pip output above" >&2; exit 1; }
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
    ruff check .
    exec python -m pytest "$@" ;;
  test-colab)
    colab=.venv-colab  # Colab's stack, without pstutor: the notebooks' first cell installs it
    [ -x "$colab/bin/python" ] || { echo "creating $colab"; "$(colab_python)" -m venv "$colab"; }
    want=$( (cat tests/colab-requirements.txt; "$colab/bin/python" --version) | sha256sum | cut -d' ' -f1)
    if [ "$(cat "$colab/.pstutor-installed" 2>/dev/null)" != "$want" ]; then
      echo "installing Colab's stack into $colab (first time: a few minutes)"
      "$colab/bin/python" -m pip install -q --disable-pip-version-check -r tests/colab-requirements.txt 2>&1 \
        | grep -v "is ignored" || true
      "$colab/bin/python" -c "import tensorflow, tf_keras, ipykernel" >/dev/null 2>&1 \
        || { echo "installing Colab's stack failed: see the pip output above" >&2; exit 1; }
      echo "$want" > "$colab/.pstutor-installed"
    fi
    PSTUTOR_COLAB_PYTHON="$PWD/$colab/bin/python" exec python -m pytest tests/test_colab.py -s "$@" ;;
  test-browser)
    status=0
    python -m pytest -m browser -rs tests/test_browser.py "$@" || status=$?
    cat browser-screenshots/wall-times.txt 2>/dev/null || true
    exit "$status" ;;
  *) echo "usage: ./dev.sh [demo|test|test-tf220|test-colab|test-browser|build|doctor] [args...]" >&2; exit 2 ;;
esac
