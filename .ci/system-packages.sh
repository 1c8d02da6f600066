#!/usr/bin/env bash
# System packages some tests need: Chromium, and fonts for Chinese and for the checks' ✅/❌
# verdicts (the browser rehearsal, tests/test_browser.py); bubblewrap (the grader's sandbox).
# Run by `./dev.sh test` (and so by CI) before the suite. Idempotent and quiet: apt installs
# only what is missing, as root or through sudo where it asks for no password. Never fails:
# where nothing can be installed it says so in one line, and the suite's first lines name the
# tests that will be skipped (tests/skip_plan.py).
set -uo pipefail

say() {  # the message in the user's language: PSTUTOR_LANG=zh, or (without it) a zh* locale
  case "${PSTUTOR_LANG:-${LC_ALL:-${LANG:-}}}" in zh*) echo "$2" ;; *) echo "$1" ;; esac
}

has_browser() { command -v chromium || command -v chromium-browser; } >/dev/null 2>&1
has_font() { fc-list "$1" 2>/dev/null | grep -q .; }

missing=()
has_browser || missing+=(chromium)
has_font :lang=zh || missing+=(fonts-noto-cjk)
has_font "Noto Color Emoji" || missing+=(fonts-noto-color-emoji)
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)  # pstutor grade's sandbox
if [ ${#missing[@]} -eq 0 ]; then
  say "system packages: Chromium, CJK and emoji fonts, bubblewrap already installed" \
      "系统软件包：Chromium、中文与 emoji 字体、bubblewrap 均已安装"
  exit 0
fi

as_root=()
if [ "$(id -u)" -ne 0 ]; then
  if ! command -v sudo >/dev/null 2>&1; then
    why=$(say "not root, and no sudo" "不是 root，也没有 sudo")
  elif ! sudo -n true >/dev/null 2>&1; then
    why=$(say "not root, and sudo asks for a password" "不是 root，而 sudo 需要密码")
  fi
  if [ -n "${why:-}" ]; then
    say "system packages: ${missing[*]} not installed ($why); to install them: sudo bash .ci/system-packages.sh" \
        "系统软件包：未安装 ${missing[*]}（$why）；安装方法：sudo bash .ci/system-packages.sh"
    exit 0
  fi
  as_root=(sudo -n)
fi
log=$(mktemp)
apt_options=(-o Acquire::Retries=2 -o Acquire::http::Timeout=30 -o Dpkg::Use-Pty=0)
if "${as_root[@]}" apt-get "${apt_options[@]}" update -qq >"$log" 2>&1 \
  && "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get "${apt_options[@]}" install -y -qq "${missing[@]}" >>"$log" 2>&1; then
  say "system packages: installed ${missing[*]}" "系统软件包：已安装 ${missing[*]}"
else
  say "system packages: could not install ${missing[*]}; apt said:" \
      "系统软件包：无法安装 ${missing[*]}；apt 的输出：" >&2
  tail -n 5 "$log" >&2
fi
rm -f "$log"
exit 0
