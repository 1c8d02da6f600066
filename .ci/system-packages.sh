#!/usr/bin/env bash
# System packages some tests need: Chromium, and fonts for Chinese and for the checks' ✅/❌
# verdicts (the browser rehearsal, tests/test_browser.py); bubblewrap (the grader's sandbox).
# Idempotent and quiet: apt installs only what is missing, as root or through sudo. Never
# fails the CI: where apt cannot install them it says so, and the tests that need them skip.
set -uo pipefail

has_browser() { command -v chromium || command -v chromium-browser; } >/dev/null 2>&1
has_font() { fc-list "$1" 2>/dev/null | grep -q .; }

missing=()
has_browser || missing+=(chromium)
has_font :lang=zh || missing+=(fonts-noto-cjk)
has_font "Noto Color Emoji" || missing+=(fonts-noto-color-emoji)
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)  # pstutor grade's sandbox
if [ ${#missing[@]} -eq 0 ]; then
  echo "system packages: Chromium, CJK and emoji fonts, bubblewrap already installed"
  exit 0
fi

as_root=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "system packages: not root and no sudo; missing ${missing[*]}" >&2; exit 0; }
  as_root=(sudo -n)
fi
log=$(mktemp)
apt_options=(-o Acquire::Retries=2 -o Acquire::http::Timeout=30 -o Dpkg::Use-Pty=0)
if "${as_root[@]}" apt-get "${apt_options[@]}" update -qq >"$log" 2>&1 \
  && "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get "${apt_options[@]}" install -y -qq "${missing[@]}" >>"$log" 2>&1; then
  echo "system packages: installed ${missing[*]}"
else
  echo "system packages: could not install ${missing[*]}; apt said:" >&2
  tail -n 5 "$log" >&2
fi
rm -f "$log"
exit 0
