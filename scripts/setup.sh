#!/usr/bin/env bash
# Set up a fresh machine: FFmpeg for datasets' Audio decoding (Debian), .venv with the project (editable).
# Idempotent: reinstalls only when pyproject.toml changed since the last install.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v ffmpeg >/dev/null 2>&1; then
  # torchcodec (datasets' Audio feature) links against FFmpeg; our own generation/eval paths do not need it.
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq ffmpeg >/dev/null
fi

[ -x .venv/bin/python ] || python3 -m venv .venv
stamp=.venv/.vocalgrad-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  # torch==2.13.0 is pinned: pip takes the CPU wheel that lies on disk here instead of a multi-GB CUDA build
  .venv/bin/python -m pip install -q --disable-pip-version-check -e '.[dev]'
  touch "$stamp"
fi
