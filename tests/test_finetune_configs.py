"""Fine-tuning data beyond the nine categories (issue 21): a lexical-conflict config trains from its carriers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from finetune.data import RowRenderer
from finetune.objective import answer_options
from finetune.settings import TrainSettings
from harness.prompts import get_variant
from vocalgrad_dataset.generate import config_ids


def test_the_source_defaults_to_the_configs_own() -> None:
    """No --source: a -conflict config trains on its carriers (claims), a category on VCTK (SPEC §1)."""
    for category, want in (("volume-conflict", "claims"), ("volume", "vctk"), ("beep-pitch", "beep")):
        settings = TrainSettings(model="tiny-qwen2-audio", category=category, scope="all_linear", out="unused")
        settings.check()
        assert settings.source == want, category


def test_conflict_rows_render_with_their_claim_and_the_claim_is_the_rejected_answer() -> None:
    renderer = RowRenderer("volume-conflict", "test")
    ids = renderer.ids()
    assert renderer.source_name == "claims" and ids == config_ids("volume-conflict", "test", "claims")
    vocab = get_variant("default").vocabulary("volume-conflict")
    up = next(i for i in ids if "-inc-" in i and i.endswith("__linear__high__up"))  # a carrier claiming "increase"
    rows = [renderer.row(cid) for cid in (up, up.removesuffix("__up") + "__down")]
    assert [r["benchmark_clip_id"] for r in rows] == [up, up.removesuffix("__up") + "__down"]
    assert [r["label"] for r in rows] == ["increase", "decrease"]
    assert [r["claim"] for r in rows] == ["increase", "increase"] and [r["congruent"] for r in rows] == [True, False]
    assert {r["category"] for r in rows} == {"volume-conflict"} and rows[0]["transcript"]
    incongruent = answer_options(rows[1], vocab)  # DPO's rejected answer on an incongruent row is the claim
    assert (incongruent.answer, incongruent.wrong) == ("decrease", ("increase",))


@pytest.mark.slow  # ~40 s: training and two evaluations on the claims carriers
def test_a_conflict_config_is_evaluated_too_and_reports_claim_following(tmp_path: Path) -> None:
    """A -conflict run evaluates its own config beside the nine; training.json holds its CF (VoxParadox's ALA)
    per model and the paired test against the base model."""
    from finetune.train import main
    from harness.data import CONFIGS
    from harness.report import load_samples

    settings = TrainSettings(model="tiny-qwen2-audio", category="volume-conflict", scope="all_linear", out="unused")
    settings.check()
    assert settings.eval_configs == [*CONFIGS, "volume-conflict"]
    out = tmp_path / "run"
    assert main(["--model", "tiny-qwen2-audio", "--category", "volume-conflict", "--scope", "all_linear",
                 "--num-workers", "0", "--no-progress", "--train-limit", "4", "--grad-accum", "2", "--val-limit", "2",
                 "--max-steps", "1", "--eval-configs", "volume-conflict", "--eval-limit", "8", "--eval-base",
                 "--eval-mode", "choices", "--out", str(out)]) == 0
    info = json.loads((out / "training.json").read_text())
    for label, run in (("base", "eval_base"), ("volume-conflict (all_linear)", "eval")):
        metrics = info["eval"]["kind_metrics"][label]["volume-conflict"]
        rows = [r for r in load_samples(out / run)["volume-conflict"] if r.get("congruent") is False]
        assert metrics["claim_following"] == pytest.approx(sum(r["pred"] == r["claim"] for r in rows) / len(rows))
    assert info["eval"]["paired_vs_base"]["volume-conflict"]["n_pairs"] == 8
