#!/usr/bin/env bash
# One short GPU check: probe training at the published shape (9 categories x 29 layers = 261 probes,
# 12,000 clips x 4,096 dims, float16 storage, 200 epochs), all probes batched vs one at a time (the
# published DataLoader loop and our kernels with P = 1, each timed on 3 probes and scaled). Target: >= 10x.
# Usage (on the lent machine, repository root): bash benchmarks/device_probes.sh   (about 3-4 minutes)
# Needs a Python with CUDA torch: $PYTHON, else .venv/bin/python, else python3.
# Writes $OUT/bench_probes_cuda.json and $OUT/bench_probes_cuda.log (OUT defaults to ./bench_out).
set -euo pipefail
source "$(dirname "$0")/device_env.sh"
{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
  "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.cuda.is_available())'
  "$PY" benchmarks/bench_probes.py --device cuda --sample "${SAMPLE:-3}" --epochs "${EPOCHS:-200}" \
    --out "$OUT/bench_probes_cuda.json"
  # The GPU path gives the probes the published loop gives (same seed, same batches; target 1e-5).
  "$PY" - <<'PY'
import numpy as np, torch
from probing.probes import ProbeSettings, train_batched, train_reference
rng = np.random.default_rng(1)
x = (rng.normal(size=(3, 700, 24)) * rng.uniform(0.1, 8, size=24) + 5).astype(np.float16)
y = (x[:, :, 0].astype(np.float32) + rng.normal(scale=4, size=(3, 700)) > 5).astype(np.float32)
s = ProbeSettings(epochs=25, seed=3, device="cuda")
fit = train_batched(torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda(), s)
diff = max(float(np.abs(train_reference(x[p].astype(np.float32), y[p], s).weight[0] - fit.weight[p]).max())
           for p in range(3))
print(f"cuda batched vs published loop: max |weight difference| {diff:.2e} ({'ok' if diff < 1e-5 else 'FAIL'})")
PY
} 2>&1 | tee "$OUT/bench_probes_cuda.log"
