#!/usr/bin/env bash
# Set everything up and run the main job offline on the embedded real speech (source "demo"):
# build two configs as Parquet, check label integrity with the signal oracle, evaluate a model on them,
# and probe a real pretrained encoder (Whisper tiny.en) for the direction of change.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
out=${1:-runs/demo}
mkdir -p "$out"
.venv/bin/vocalgrad-dataset build --config volume --split all --source demo --out "$out/dataset" --num-proc 2
.venv/bin/vocalgrad-dataset build --config pitch --split all --source demo --out "$out/dataset" --num-proc 2
.venv/bin/vocalgrad-dataset oracle --config all --split test --source demo | tail -n 1
.venv/bin/accelerate launch --multi_gpu --num_processes 2 harness/eval.py \
  --model signal-oracle --configs volume,pitch --split test --source demo --out "$out/eval-oracle"
.venv/bin/harness report "$out/eval-oracle"
# Where is the direction encoded? Linear probes on real pretrained Whisper tiny.en encoder states (and mel).
for split in train test; do
  .venv/bin/python -m probing.extract --model whisper-tiny-en --configs volume --source demo --split "$split" --out "$out/probe"
done
.venv/bin/python -m probing.train "$out/probe" | tail -n 1
