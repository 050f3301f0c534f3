#!/usr/bin/env bash
# One short GPU check: Qwen2-Audio-7B-shaped random model (bf16, sdpa), 4 s clips, clips/s and peak memory
# for generate-b1 / choices / choices-fast (target: choices-fast >= 200 clips/s on one H200).
# Usage (on the lent machine, repository root): bash benchmarks/device_choices.sh
# Needs a Python with CUDA torch + transformers 5.x: $PYTHON, else .venv/bin/python, else python3.
# Writes $OUT/bench_choices_7b.json and $OUT/bench_choices_7b.log (OUT defaults to ./bench_out).
set -euo pipefail
source "$(dirname "$0")/device_env.sh"
{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
  "$PY" -c 'import torch, transformers; print("torch", torch.__version__, "cuda", torch.cuda.is_available(), "transformers", transformers.__version__)'
  # 1024 clips for the batched modes, 32 for batch-1 generation; one warm-up batch each (see bench_choices.py).
  "$PY" benchmarks/bench_choices.py --device cuda --size 7b --seconds 4 --batch "${BATCH:-64}" \
    --clips "${CLIPS:-1024}" --gen-clips "${GEN_CLIPS:-32}" --out "$OUT/bench_choices_7b.json"
} 2>&1 | tee "$OUT/bench_choices_7b.log"
