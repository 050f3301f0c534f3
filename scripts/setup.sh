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
# Installed apart from .venv, each into its own folder, for the tests that need it: lm-eval needs transformers 4
# (its package is never imported; tests read its utils.py and result_schema.py by path), lmms-eval pulls CUDA-only
# torchvision (tests/test_export_lmms.py loads our exported task folder with its own task loader) and wandb
# brings protobuf 7, which must not load beside transformers (tests/test_tracking.py runs it in its own process).
apart() {  # apart FOLDER PACKAGE==VERSION...: pip install --no-deps into .extras/FOLDER when missing
  local dir=".extras/$1"; shift
  [ -f "$dir/.installed" ] && return 0
  .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps --target "$dir" "$@" && touch "$dir/.installed"
}
apart lmms-eval lmms-eval==0.7.3 loguru==0.7.3 portalocker==4.4.2 pytz==2026.6 sacrebleu==2.6.0 tabulate==0.10.0 \
  tenacity==9.2.1 lxml==6.2.1
apart lm-eval lm-eval==0.4.13  # its sample schema and make_table, loaded by file path (tests/test_lm_eval_samples.py)
apart wandb wandb==0.31.0 protobuf==7.36.2 sentry-sdk==3.0.0 gitpython==3.2.1 gitdb==4.0.12 smmap==5.0.3
