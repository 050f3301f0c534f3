#!/usr/bin/env bash
# One short GPU check for the seven transformers families, then the 7B-sized choices throughput.
#  1. Every tiny-<family> (harness/models/tiny.py: saved checkpoint, loaded through from_pretrained) scores
#     the same prompts twice: fp32 on the CPU, then bf16 with sdpa on CUDA. Stated tolerance, per score
#     (summed log-prob of a choice): |bf16 - fp32| <= 0.01 * |fp32| + 0.1 nats, and the preferred choice agrees
#     wherever the fp32 margin exceeds 0.5 nats. bf16 keeps 8 mantissa bits (~0.4 % per rounding); 2 random
#     layers and answers of up to 8 tokens stay inside 1 % (bf16 on the CPU: at most 0.07 nats, 0.4 %). Generation is run once on CUDA as a smoke test.
#  2. bench_choices.py --size 7b: Qwen2-Audio-7B-shaped random model, bf16 + sdpa, 4 s clips, clips/s for
#     generate-b1 / choices / choices-fast (target: >= 200 clips/s in choices mode on one H200; the published
#     batch-1 protocol runs at 11-12). SKIP_7B=1 skips it.
# Usage (on the lent machine, repository root): bash benchmarks/device_families.sh   (about 4-6 minutes)
# Needs a Python with CUDA torch, transformers 5.x, peft and (for tiny-voxtral) mistral-common[audio]:
# $PYTHON, else .venv/bin/python, else python3. A family whose package is missing is reported, not fatal.
# Writes $OUT/families_cuda.json, $OUT/bench_choices_7b.json and $OUT/device_families.log (OUT: ./bench_out).
set -euo pipefail
source "$(dirname "$0")/device_env.sh"
export VOCALGRAD_TINY_CACHE="${VOCALGRAD_TINY_CACHE:-/tmp/vocalgrad-tiny}"
{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
  "$PY" -c 'import torch, transformers; print("torch", torch.__version__, "cuda", torch.cuda.is_available(), "transformers", transformers.__version__)'
  OUT="$OUT" PYTHONPATH=. "$PY" - <<'PY'
import json, os, sys, time
import numpy as np, torch
from harness.models.base import ModelError
from harness.models.protocol import AudioClip, Prompt
from harness.models.tiny import TINY_FAMILIES, tiny_model

DEVICE = os.environ.get("DEVICE", "cuda")  # DEVICE=cpu dry-runs the comparison (bf16 on the CPU) without a GPU
if DEVICE.startswith("cuda") and not torch.cuda.is_available():
    sys.exit("CUDA requested but torch.cuda.is_available() is False")
QUESTION = 'Does the {a} increase or decrease over time?\n\nAnswer with only one word: "increase" or "decrease".'
CHOICES = ("increase", "decrease", "decreasingly")  # the last: several tokens in every tiny vocabulary
rng = np.random.default_rng(0)
prompts = []
for i, (attr, seconds) in enumerate([("volume", 1.5), ("voice pitch", 3.0), ("speaking speed", 4.0),
                                     ("echo", 6.5), ("background noise", 2.2), ("voice clarity", 5.1)]):
    t = np.arange(int(seconds * 16000)) / 16000
    x = 0.3 * np.sin(2 * np.pi * (180 + 60 * i) * t * (1 + 0.2 * t)) + 0.05 * rng.standard_normal(t.size)
    prompts.append(Prompt((QUESTION.format(a=attr), AudioClip(x.astype(np.float32), 16000)), clip_id=f"c{i}"))

rows, failures = [], 0
for family in TINY_FAMILIES:
    row = {"family": family}
    try:
        ref = tiny_model(family, device="cpu", dtype="float32").score_choices(prompts, CHOICES)
        lm = tiny_model(family, device=DEVICE, dtype="bfloat16", attn_implementation="sdpa", batch_size=8)
        start = time.perf_counter()
        got = lm.score_choices(prompts, CHOICES)
        if DEVICE.startswith("cuda"):
            torch.cuda.synchronize()
        row["cuda_score_s"] = round(time.perf_counter() - start, 3)
        row["generate"] = lm.generate(prompts[:2], max_new_tokens=4)
    except ModelError as exc:  # e.g. a missing optional package: one line naming the pip command
        row["skipped"] = exc.message
        rows.append(row)
        print(f"{family:18s} SKIPPED: {exc.message}")
        continue
    diff = np.abs(got - ref)
    allowed = 0.01 * np.abs(ref) + 0.1
    margin = ref[:, 0] - ref[:, 1]
    clear = np.abs(margin) > 0.5
    agree = bool(np.all(np.sign(got[clear, 0] - got[clear, 1]) == np.sign(margin[clear])))
    ok = bool(np.all(diff <= allowed)) and agree
    failures += not ok
    row.update(max_abs_diff=float(diff.max()), max_rel_diff=float((diff / np.abs(ref)).max()),
               within_tolerance=bool(np.all(diff <= allowed)), choice_agrees=agree, ok=ok)
    rows.append(row)
    print(f"{family:18s} max|d| {diff.max():.4f} nats (rel {row['max_rel_diff']:.2%}), choices agree: {agree} "
          f"-> {'ok' if ok else 'FAIL'}")
with open(os.path.join(os.environ["OUT"], "families_cuda.json"), "w") as f:
    json.dump({"tolerance": "|bf16 - fp32| <= 0.01*|fp32| + 0.1 nats; argmax agrees where fp32 margin > 0.5",
               "rows": rows}, f, indent=1)
print(f"{len(rows) - failures} of {len(rows)} families within tolerance (skipped ones count as within)")
PY
  if [[ "${SKIP_7B:-0}" != 1 ]]; then
    # 1024 clips for the batched modes, 32 for batch-1 generation; one warm-up batch each (see bench_choices.py).
    "$PY" benchmarks/bench_choices.py --device cuda --size 7b --seconds 4 --batch "${BATCH:-64}" \
      --clips "${CLIPS:-1024}" --gen-clips "${GEN_CLIPS:-32}" --out "$OUT/bench_choices_7b.json"
  fi
} 2>&1 | tee "$OUT/device_families.log"
