#!/usr/bin/env bash
# The whole test suite (what CI runs): set up if needed, then pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest -q "$@"
