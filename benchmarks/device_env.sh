# Sourced by the device_*.sh scripts: run from the repository root, $OUT ready, $PY the Python to use
# ($PYTHON, else .venv/bin/python, else python3; it needs CUDA torch on the lent machine).
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT="${OUT:-bench_out}"
mkdir -p "$OUT"
PY="${PYTHON:-}"
if [[ -z "$PY" ]]; then
  if [[ -x .venv/bin/python ]]; then PY=.venv/bin/python; else PY=python3; fi
fi
export PYTHONUNBUFFERED=1
