"""PCLM + DPO (`vocalgrad-finetune --recipe pclm+dpo`) on the tiny random Qwen2-Audio: does held-out accuracy rise?

Trains on the demo source's train split (speaker librivox_m) and tests on its test split (speakers an4_speaker,
arctic_female, arctic_male: speaker-disjoint), the base model (adapter and mixer off) against the trained one,
paired by clip with the exact McNemar test (`harness compare`). Not a CI test: minutes on a CPU.

    python benchmarks/bench_pclm_dpo.py --out runs/bench-pclm-dpo [--category volume] [--epochs 1]

Measured (2026-12-02, shared 2-core CPU, 29 min; the defaults below): volume, 72 held-out clips, base 48.6 % ->
PCLM + DPO 80.6 %, 4 clips only the base got right, 27 only the trained model, exact McNemar p = 3.4e-05;
30 optimizer steps (20 PCLM stage 1 by cross-entropy, 10 DPO), first DPO step loss 0.693147 (ln 2).

Prints the McNemar table and writes OUT/benchmark.json (accuracies, discordant pairs, p, settings).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from finetune.settings import EVAL_BASE_DIR, EVAL_DIR, TrainSettings  # noqa: E402
from finetune.train import train  # noqa: E402
from harness.metrics import mcnemar  # noqa: E402
from harness.report import compare, load_samples  # noqa: E402
from vocalgrad_dataset.fileio import atomic_write_text  # noqa: E402


def build_parser() -> argparse.ArgumentParser:
    """The benchmark's arguments (the recipe's knobs that matter on the tiny model)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="run directory")
    p.add_argument("--category", default="volume", help="VocalGrad config trained and tested")
    p.add_argument("--epochs", type=int, default=1, help="passes over the 120 training clips")
    p.add_argument("--grad-accum", type=int, default=4, help="clips per optimizer step")
    p.add_argument("--lr", type=float, default=5e-3, help="learning rate of both stages")
    p.add_argument("--stage1-steps", type=int, default=20, help="PCLM stage-1 steps (the rest are DPO)")
    p.add_argument("--seed", type=int, default=1234, help="seed of init, order and rejected options")
    return p


def main(argv: list[str] | None = None) -> int:
    """Train, evaluate base and trained model on the held-out speakers, print and record the paired test."""
    ns = build_parser().parse_args(argv)
    out = Path(ns.out)
    settings = TrainSettings(
        model="tiny-qwen2-audio", category=ns.category, source="demo", scope="all_linear", out=str(out),
        recipe="pclm+dpo", epochs=ns.epochs, grad_accum=ns.grad_accum, lr=ns.lr, seed=ns.seed,
        pclm_stage1_steps=ns.stage1_steps, num_workers=0, progress=True, val_fraction=0.0, save_every=10_000,
        eval_configs=[ns.category], eval_mode="choices", eval_base=True, eval_batch_size=8)
    started = time.time()
    info = train(settings)
    base, tuned = load_samples(out / EVAL_BASE_DIR)[ns.category], load_samples(out / EVAL_DIR)[ns.category]
    test = mcnemar(base, tuned)
    table = compare(out / EVAL_BASE_DIR, out / EVAL_DIR)
    print(table)
    record = {
        "category": ns.category, "train": "demo train split (speaker librivox_m)",
        "test": "demo test split (an4_speaker, arctic_female, arctic_male)", "n_test": test.n_pairs,
        "accuracy_base": test.accuracy_a, "accuracy_pclm_dpo": test.accuracy_b,
        "only_base_right": test.only_a_correct, "only_tuned_right": test.only_b_correct,
        "mcnemar_exact_p": test.p_value, "steps": info["steps"], "stage1_steps": info["pclm"]["stage1_steps"],
        "first_loss": info["first_loss"], "first_dpo_loss": info["dpo"]["first_dpo_loss"],
        "final_loss": info["final_loss"], "pclm_added_params": info["pclm"]["added_params"],
        "settings": {k: getattr(ns, k) for k in ("epochs", "grad_accum", "lr", "stage1_steps", "seed")},
        "seconds": round(time.time() - started, 1),
    }
    atomic_write_text(out / "benchmark.json", json.dumps(record, indent=2) + "\n")
    print(json.dumps(record, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
