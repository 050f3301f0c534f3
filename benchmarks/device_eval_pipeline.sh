#!/usr/bin/env bash
# One short GPU check of the evaluation path (issue #37): clips/s per tiny family in generate mode (the
# paper's), serial front end vs 2 front-end threads, and for the Whisper-style families the fast encoder on;
# the samples files of the serial and overlapped runs must be byte-identical. Then the CPU bench for reference.
# Usage (on the lent machine, repository root): bash benchmarks/device_eval_pipeline.sh   (about 3-6 minutes)
# Writes $OUT/eval_pipeline_cuda.json and $OUT/device_eval_pipeline.log (OUT: ./bench_out). LIMIT: clips/config.
set -euo pipefail
source "$(dirname "$0")/device_env.sh"
export VOCALGRAD_TINY_CACHE="${VOCALGRAD_TINY_CACHE:-/tmp/vocalgrad-tiny}"
{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
  OUT="$OUT" LIMIT="${LIMIT:-64}" PYTHONPATH=. "$PY" - <<'PY'
import json, os, tempfile, time
from pathlib import Path
import torch
from harness import results as res
from harness.data import GeneratorSource
from harness.models.base import ModelError
from harness.models.tiny import TINY_FAMILIES, tiny_model
from harness.runner import EvalSettings, run_eval

class OneProcess:
    rank, world_size, device, is_main = 0, 1, "cuda", True
    def barrier(self): pass

limit, rows = int(os.environ["LIMIT"]), []
for family in TINY_FAMILIES:
    for fast in ((False, True) if family in ("qwen2-audio", "audio-flamingo-3") else (False,)):
        try:
            lm = tiny_model(family, device="cuda", batch_size=16, fast_encoder=fast)
        except ModelError as exc:
            rows.append({"family": family, "skipped": exc.message}); print(family, "SKIPPED", exc.message); continue
        got = {}
        for workers in (0, 2):
            out = Path(tempfile.mkdtemp())
            s = EvalSettings(model=lm.name, configs=["volume", "pitch"], out=str(out), limit=limit, batch_size=16,
                             preflight=False, frontend_workers=workers, max_new_tokens=8, retry_max_new_tokens=0)
            torch.cuda.synchronize(); start = time.perf_counter()
            r = run_eval(s, model=lm, source=GeneratorSource("test", "demo"), dist=OneProcess())
            torch.cuda.synchronize(); sec = time.perf_counter() - start
            n = sum(m["n"] for m in res.task_metrics(r).values())
            got[workers] = ({c: res.samples_path(out, c).read_bytes() for c in s.configs}, n / sec)
        row = {"family": family, "fast_encoder": fast, "serial_clips_per_s": round(got[0][1], 2),
               "ours_clips_per_s": round(got[2][1], 2), "ratio": round(got[2][1] / got[0][1], 2),
               "identical": got[0][0] == got[2][0]}
        rows.append(row); print(json.dumps(row))
with open(os.path.join(os.environ["OUT"], "eval_pipeline_cuda.json"), "w") as f:
    json.dump({"gpu": torch.cuda.get_device_name(), "limit": limit, "rows": rows}, f, indent=1)
PY
  "$PY" benchmarks/bench_eval_pipeline.py --tiny-limit 0 --out "$OUT/bench_eval_pipeline_cpu.json" || true
} 2>&1 | tee "$OUT/device_eval_pipeline.log"
