#!/usr/bin/env bash
# Set up a fresh machine: Debian packages the tests need, and .venv with the project (editable, dev extras).
# Idempotent: reinstalls only when pyproject.toml changed since the last install.
set -euo pipefail
cd "$(dirname "$0")/.."

need_deb() {  # need_deb FILE PACKAGE: install a Debian package when FILE (a command or path) is missing
  if ! command -v "$1" >/dev/null 2>&1 && [ ! -x "$1" ]; then
    if [ "$(id -u)" = 0 ]; then sudo=""; else sudo="sudo"; fi
    $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$2" >/dev/null
  fi
}
# torchcodec (datasets' Audio feature) links against FFmpeg; our own generation/eval paths do not need it.
need_deb ffmpeg ffmpeg
# The leaderboard page is tested in Debian's headless chromium, driven by Playwright through
# executable_path (Playwright's own browser download, `playwright install`, is never used).
need_deb /usr/bin/chromium chromium

[ -x .venv/bin/python ] || python3 -m venv .venv
stamp=.venv/.vocalgrad-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  # torch==2.13.0 is pinned: pip takes the CPU wheel that lies on disk here instead of a multi-GB CUDA build
  .venv/bin/python -m pip install -q --disable-pip-version-check -e '.[dev,listen,tiny-models]'
  touch "$stamp"
fi
