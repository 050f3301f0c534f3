"""Issue 33: `--recipe pclm+dpo` is VoxParadox's three stages (stage 1 the mixer, stage 2 the LM by
cross-entropy, DPO against the stage-2 model) with the paper's per-stage learning rates, and a PCLM adapter
that generates; plus the rejected-answer policy's default."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from finetune.objective import AnswerOptions
from finetune.settings import settings_from_argv
from finetune.train import main
from harness.cli import main as harness_main

RECIPE = ["--model", "tiny-qwen2-audio", "--category", "volume", "--source", "demo", "--recipe", "pclm+dpo",
          "--max-steps", "2", "--skip-eval", "--num-workers", "0", "--no-progress", "--val-limit", "2"]

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def recipe_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("recipe") / "run"
    assert main([*RECIPE, "--out", str(out)]) == 0
    return out


def test_three_stages_with_the_papers_rates_and_dpo_starting_at_ln2(recipe_run: Path) -> None:
    info = json.loads((recipe_run / "training.json").read_text())
    stages = info["stages"]
    assert [s["name"] for s in stages] == ["pclm-stage1", "pclm-stage2", "dpo"]
    assert [s["objective"] for s in stages] == ["ce", "ce", "dpo"]
    assert [s["lr"] for s in stages] == [5e-5, 5e-5, 5e-7]
    assert [s["steps"] for s in stages] == [2, 2, 2]
    # the reference is the stage-2 model itself and dropout is off (TRL's default), so the first DPO step's
    # policy equals it: -log sigma(0)
    assert abs(stages[2]["first_loss"] - math.log(2)) < 1e-4
    assert info["pclm"]["stage_lrs"] == [5e-5, 5e-5, 5e-7] and info["pclm"]["stage2_end"] == 4
    assert info["dpo"]["reference"] == info["pclm"]["dpo_reference"] and "stage-2 model" in info["dpo"]["reference"]


@pytest.mark.parametrize("mode", ["generate", "choices"])
def test_the_recipes_adapter_evaluates(recipe_run: Path, tmp_path: Path, mode: str) -> None:
    out = tmp_path / "eval"
    assert harness_main(["eval", "--model", "tiny-qwen2-audio", "--adapter", str(recipe_run / "adapter"),
                         "--configs", "volume", "--source", "demo", "--limit", "4", "--mode", mode,
                         "--batch-size", "2", "--out", str(out)]) == 0
    rows = [json.loads(line) for p in out.rglob("*.jsonl") for line in p.read_text().splitlines() if line]
    assert rows and not [r for r in rows if r.get("error")]


def test_rejected_policy_default_and_alias() -> None:
    base = ["--model", "tiny-qwen2-audio", "--source", "demo", "--recipe", "pclm+dpo", "--out", "x"]
    s = settings_from_argv([*base, "--category", "volume"])
    s.check()
    from finetune.recipe import run_recipe

    assert (s.dpo_rejected, s.scope) == ("claim", "all_linear")
    assert [st.lr for st in run_recipe(s).stages] == [5e-5, 5e-5, 5e-7]  # the paper's, from pclm_dpo.yaml
    assert settings_from_argv([*base, "--category", "volume", "--dpo-rejected", "random"]).dpo_rejected == "random"
    assert settings_from_argv([*base, "--category", "volume", "--rejected", "adversarial"]).dpo_rejected == "adversarial"
    options = AnswerOptions("B", ("A", "C"), claim="C")
    assert options.pair("adversarial", seed=0, key="k") == ("B", "C") == options.pair("claim", seed=0, key="k")
    assert options.pair("random", seed=0, key="k")[1] in ("A", "C")
    assert AnswerOptions("up", ("down",)).pair("claim", seed=0, key="k") == ("up", "down")  # binary: the opposite


def test_dpo_reference_is_the_model_stage_2_left(tmp_path: Path) -> None:
    """With a stage 2 that moves the LoRA a lot (lr 5e-2), DPO still starts at ln 2 only if its reference
    is taken when DPO begins; one taken before stage 2 would be the stage-1 model, and the first loss moves."""
    out = tmp_path / "run"
    assert main([*RECIPE, "--pclm-lr", "5e-2", "--out", str(out)]) == 0
    stages = json.loads((out / "training.json").read_text())["stages"]
    assert stages[1]["lr"] == 5e-2 and stages[1]["first_loss"] != stages[1]["last_loss"]
    assert abs(stages[2]["first_loss"] - math.log(2)) < 1e-4
