#!/usr/bin/env bash
# Set everything up and run the main job offline on the embedded real speech (source "demo"):
# build two configs as Parquet, check label integrity with the signal oracle, evaluate the oracle, a tiny
# audio LM and chance on them, probe a real pretrained encoder (Whisper tiny.en) for the direction of change,
# and end with the report table (the three runs beside the paper's Table 2).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
out=${1:-runs/demo}
mkdir -p "$out"
.venv/bin/vocalgrad-dataset build --config volume --split all --source demo --out "$out/dataset" --num-proc 2
.venv/bin/vocalgrad-dataset build --config pitch --split all --source demo --out "$out/dataset" --num-proc 2
.venv/bin/vocalgrad-dataset oracle --config all --split test --source demo | tail -n 1
.venv/bin/accelerate launch --multi_gpu --num_processes 2 --num_machines 1 --mixed_precision no --dynamo_backend no harness/eval.py \
  --model signal-oracle --configs volume,pitch --split test --source demo --out "$out/eval-oracle"
# A real (tiny, random-weight) audio LM and the random baseline (chance) on the same clips.
.venv/bin/harness eval --model tiny-qwen2-audio --mode choices --configs volume,pitch --split test --source demo \
  --out "$out/eval-tiny" >/dev/null
.venv/bin/harness eval --model random --configs volume,pitch --split test --source demo --out "$out/eval-chance" >/dev/null
# Where is the direction encoded? Linear probes on real pretrained Whisper tiny.en encoder states (and mel).
for split in train test; do
  .venv/bin/python -m probing.extract --model whisper-tiny-en --configs volume --source demo --split "$split" --out "$out/probe"
done
echo "probe: held-out accuracy of a linear probe that reads the direction (increase/decrease) from each"
echo "Whisper tiny.en encoder layer (and from the mel input); 0.5 means that layer holds no direction:"
.venv/bin/python -m probing.train "$out/probe" | tail -n 1
# The report table: the oracle (labels are right: 100 %), the tiny model and chance (~50 %), Table 2 beside.
.venv/bin/harness report "$out/eval-oracle" "$out/eval-tiny" "$out/eval-chance" --out "$out/report" \
  | awk '/^## VocalGrad report/ {done = 1} !done {print}'  # reads to the end: no SIGPIPE under pipefail
