"""The repairs side by side on the tiny random Qwen2-Audio: LoRA, PCLM, DPO and PCLM + DPO against the base model.

For each config, every method trains from the same base on the config's train split and is tested on held-out
rows; the base model is evaluated once per config, and each method is paired with it by clip (exact McNemar,
`harness compare`). Configs: `volume` trains on the demo source's train split (speaker librivox_m) and tests on
its test split (an4_speaker, arctic_female, arctic_male: speaker-disjoint); `voxparadox-pitch` trains on
VoxParadox-lite's train items and tests on its test items. Not a CI test: a few minutes on a CPU.

    python benchmarks/bench_pclm_dpo.py --out runs/bench-repairs [--methods lora,pclm,dpo,pclm+dpo]
        [--configs volume,voxparadox-pitch] [--max-steps 30] [--eval-limit N] [--pclm-stage1-steps K]

Methods (`vocalgrad-finetune` flags): lora = `--method lora` (cross-entropy), dpo = `--objective dpo` on a LoRA
(reference: the base), pclm = `--method pclm` (stage 1 mixer, stage 2 mixer + LoRA, cross-entropy), pclm+dpo =
`--recipe pclm+dpo` (the paper's three stages, DPO against the stage-2 model). The learning rates default to
ones that move a randomly initialised tiny model in a few steps (`--ce-lr`, `--dpo-lr`), not the paper's 5e-5 /
5e-7, which are for 7B checkpoints; evaluation scores the answer options (`--eval-mode choices`), since a random
tiny model's free generations rarely parse.

Measured (2026-12-07, shared 2-core CPU, 2 min 17 s; the defaults: 30 steps of 4 clips per method, lrs 5e-3,
whole test splits, choices mode):

    | config | method | n | base acc % [95 % CI] | tuned acc % [95 % CI] | only base | only tuned | McNemar p |
    |---|---|---|---|---|---|---|---|
    | volume | lora | 72 | 48.6 [37.4, 59.9] | 90.3 [81.3, 95.2] | 2 | 32 | 6.94e-08 |
    | volume | pclm | 72 | 48.6 [37.4, 59.9] | 55.6 [44.1, 66.5] | 16 | 21 | 0.511 |
    | volume | dpo | 72 | 48.6 [37.4, 59.9] | 95.8 [88.5, 98.6] | 3 | 37 | 1.95e-08 |
    | volume | pclm+dpo | 72 | 48.6 [37.4, 59.9] | 50.0 [38.7, 61.3] | 15 | 16 | 1 |
    | voxparadox-pitch | lora | 100 | 17.0 [10.9, 25.5] | 18.0 [11.7, 26.7] | 0 | 1 | 1 |
    | voxparadox-pitch | pclm | 100 | 17.0 [10.9, 25.5] | 18.0 [11.7, 26.7] | 0 | 1 | 1 |
    | voxparadox-pitch | dpo | 100 | 17.0 [10.9, 25.5] | 27.0 [19.3, 36.4] | 17 | 27 | 0.174 |
    | voxparadox-pitch | pclm+dpo | 100 | 17.0 [10.9, 25.5] | 18.0 [11.7, 26.7] | 0 | 1 | 1 |

Every DPO stage starts at 0.693147 (ln 2). On this random model, PCLM's stage 1 (mixer and projectors at
lr 5e-3, LM frozen) lowers the loss through the answer format while it loses the volume cue: with
`--pclm-stage1-steps 1` (stage 2 gets the rest) volume reaches pclm 98.6 % [92.5, 99.8] (1 / 37 discordant,
p = 2.8e-10) and pclm+dpo 66.7 % [55.2, 76.5] (14 / 27, p = 0.060), 1 min 18 s. No method learns the
three-part pitch order of VoxParadox-lite in 30 steps on a 2-layer model (chance is 25 %; DPO's +10 points
move predictions toward the most frequent answer, p = 0.17). These are checks that each repair trains and
evaluates end to end, not the paper's numbers (docs/repairs.md lists those).

Prints the table and writes OUT/benchmark.json (per config and method: n, accuracies with 95 % Wilson
intervals, discordant pairs, exact McNemar p, training stages, settings). A finished method is not retrained
when the benchmark is run again with the same OUT.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from finetune.settings import EVAL_BASE_DIR, EVAL_DIR, TrainSettings  # noqa: E402
from finetune.train import train  # noqa: E402
from harness.metrics import binomial_interval, mcnemar  # noqa: E402
from harness.report import load_samples  # noqa: E402
from vocalgrad_dataset.fileio import atomic_write_text  # noqa: E402
from vocalgrad_dataset.tasks import is_vocalgrad  # noqa: E402

METHODS: dict[str, dict[str, Any]] = {  # TrainSettings fields of each method
    "lora": {"method": "lora", "objective": "ce"},
    "pclm": {"method": "pclm", "objective": "ce"},
    "dpo": {"method": "lora", "objective": "dpo"},
    "pclm+dpo": {"recipe": "pclm+dpo"},
}


def _names(text: str, allowed: tuple[str, ...] | None = None) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    bad = [n for n in names if allowed is not None and n not in allowed]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a comma-separated subset of {', '.join(allowed or ())}")
    return names


def build_parser() -> argparse.ArgumentParser:
    """The benchmark's arguments (the recipe's knobs that matter on the tiny model)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="run directory (one folder per config and method)")
    p.add_argument("--methods", type=lambda s: _names(s, tuple(METHODS)), default=list(METHODS),
                   help="comma-separated: lora, pclm, dpo, pclm+dpo (default: all four)")
    p.add_argument("--configs", type=_names, default=["volume", "voxparadox-pitch"],
                   help="comma-separated configs trained and tested (default: volume,voxparadox-pitch)")
    p.add_argument("--max-steps", type=int, default=30, help="optimizer steps per stage of a method (at most)")
    p.add_argument("--grad-accum", type=int, default=4, help="clips per optimizer step")
    p.add_argument("--train-limit", type=int, default=None, help="a balanced subset of the training clips")
    p.add_argument("--eval-limit", type=int, default=None, help="held-out rows per config (default: the whole test split)")
    p.add_argument("--eval-mode", choices=("choices", "generate"), default="choices", help="how answers are read")
    p.add_argument("--ce-lr", type=float, default=5e-3, help="cross-entropy lr (LoRA and both PCLM stages)")
    p.add_argument("--dpo-lr", type=float, default=5e-3, help="DPO lr")
    p.add_argument("--pclm-stage1-steps", type=int, default=None,
                   help="PCLM stage-1 steps (default: the recipe's, an epoch of the data, at most --max-steps)")
    p.add_argument("--seed", type=int, default=1234, help="seed of init, order and rejected options")
    return p


def _rates(ns: argparse.Namespace, method: str) -> dict[str, float]:
    """The learning-rate flags a method's stages read (finetune refuses the others)."""
    return {"lora": {"lr": ns.ce_lr}, "pclm": {"pclm_lr": ns.ce_lr}, "dpo": {"dpo_lr": ns.dpo_lr},
            "pclm+dpo": {"pclm_lr": ns.ce_lr, "dpo_lr": ns.dpo_lr}}[method]


def method_settings(ns: argparse.Namespace, config: str, method: str, out: Path, eval_base: bool) -> TrainSettings:
    """One method's training run on one config."""
    source = "demo" if is_vocalgrad(config) else None  # items bring their own audio
    return TrainSettings(
        model="tiny-qwen2-audio", category=config, source=source, scope="all_linear", out=str(out),
        **METHODS[method], max_steps=ns.max_steps, grad_accum=ns.grad_accum, train_limit=ns.train_limit,
        **_rates(ns, method), seed=ns.seed,
        pclm_stage1_steps=ns.pclm_stage1_steps if method in ("pclm", "pclm+dpo") else None,
        num_workers=0, progress=True, val_fraction=0.0, save_every=10_000, eval_configs=[config],
        eval_mode=ns.eval_mode, eval_base=eval_base, eval_limit=ns.eval_limit, eval_batch_size=8)


def run_method(ns: argparse.Namespace, config: str, method: str, out: Path, eval_base: bool) -> dict[str, Any]:
    """Train and evaluate one method (or read back a finished run's record)."""
    record = out / "training.json"
    done = record.exists() and (out / EVAL_DIR).exists() and (not eval_base or (out / EVAL_BASE_DIR).exists())
    if done:
        return json.loads(record.read_text())
    return train(method_settings(ns, config, method, out, eval_base))


def _accuracy(k: int, n: int) -> dict[str, float]:
    lo, hi = binomial_interval(k, n)
    return {"acc": k / n, "ci_low": lo, "ci_high": hi}


def compare_to_base(base: list[dict[str, Any]], tuned: list[dict[str, Any]]) -> dict[str, Any]:
    """Held-out accuracies with intervals and the exact McNemar test, paired by clip."""
    test = mcnemar(base, tuned)
    n = test.n_pairs
    return {"n": n, "base": _accuracy(round(test.accuracy_a * n), n), "tuned": _accuracy(round(test.accuracy_b * n), n),
            "only_base_right": test.only_a_correct, "only_tuned_right": test.only_b_correct,
            "mcnemar_exact_p": test.p_value}


def table(results: dict[str, dict[str, dict[str, Any]]]) -> str:
    """The side-by-side table (markdown)."""
    def pct(a: dict[str, float]) -> str:
        return f"{100 * a['acc']:.1f} [{100 * a['ci_low']:.1f}, {100 * a['ci_high']:.1f}]"

    lines = ["| config | method | n | base acc % [95 % CI] | tuned acc % [95 % CI] | only base | only tuned | McNemar p |",
             "|---|---|---|---|---|---|---|---|"]
    for config, by_method in results.items():
        for method, r in by_method.items():
            lines.append(f"| {config} | {method} | {r['n']} | {pct(r['base'])} | {pct(r['tuned'])} | "
                         f"{r['only_base_right']} | {r['only_tuned_right']} | {r['mcnemar_exact_p']:.3g} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Train every method on every config, evaluate against the base, print and record the table."""
    ns = build_parser().parse_args(argv)
    root = Path(ns.out)
    started = time.time()
    results: dict[str, dict[str, dict[str, Any]]] = {}
    stages: dict[str, dict[str, Any]] = {}
    for config in ns.configs:
        results[config] = {}
        base_dir = root / config / ns.methods[0] / EVAL_BASE_DIR  # the base, evaluated once per config
        for i, method in enumerate(ns.methods):
            out = root / config / method
            info = run_method(ns, config, method, out, eval_base=i == 0)
            base = load_samples(base_dir)[config]
            tuned = load_samples(out / EVAL_DIR)[config]
            results[config][method] = compare_to_base(base, tuned)
            stages[f"{config}/{method}"] = info.get("stages") or [
                {"name": method, "first_loss": info.get("first_loss"), "last_loss": info.get("final_loss")}]
    text = table(results)
    print(text)
    record = {
        "model": "tiny-qwen2-audio", "eval_mode": ns.eval_mode, "results": results, "stages": stages,
        "settings": {k: getattr(ns, k) for k in ("methods", "configs", "max_steps", "grad_accum", "train_limit",
                                                 "eval_limit", "ce_lr", "dpo_lr", "pclm_stage1_steps", "seed")},
        "seconds": round(time.time() - started, 1),
    }
    atomic_write_text(root / "benchmark.json", json.dumps(record, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
