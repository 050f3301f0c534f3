"""Fine-tuning on VoxParadox-lite items (issue 21, training data): `--category voxparadox-<task>` trains on the
task's train-split items asked with lettered options, DPO rejects the adversarial option, and evaluation
reports GT accuracy, ALA and the paired test against the base model."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from finetune.items import item_split, run_training_data
from finetune.objective import AnswerTask, answer_options
from finetune.settings import TrainSettings
from finetune.train import main
from harness.mcq import mcq_text
from harness.parsing import OptionParser

RUN = ["--model", "tiny-qwen2-audio", "--category", "voxparadox-pitch", "--scope", "all_linear",
       "--num-workers", "0", "--no-progress", "--val-limit", "2", "--train-limit", "4", "--grad-accum", "2"]
# The first items of the pitch task's train split, in build order (a seeded shuffle of voice x order pairs).
FIRST_PITCH_TRAIN = "vpl-pitch-train-c7b956144c"


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _settings(**kw: object) -> TrainSettings:
    s = TrainSettings(model="tiny-qwen2-audio", category="voxparadox-pitch", scope="all_linear", out="unused", **kw)
    s.check()
    return s


def test_item_rows_are_asked_with_lettered_options_and_reject_a_random_wrong_one() -> None:
    settings = _settings(train_limit=4)
    assert (settings.source, settings.eval_configs, settings.dpo_rejected) == (None, ["voxparadox-pitch"], "random")  # the paper's
    data = run_training_data(settings)
    assert data.train_ids[0] == FIRST_PITCH_TRAIN and len(data.train_ids) == 4
    assert not set(data.train_ids) & set(data.split.val)
    row = data.renderer.row(FIRST_PITCH_TRAIN)
    # the item's labels (builder 3's, kept by builder 4); its four options come from the build's balanced plan
    assert (row["answer"], row["adversarial"], row["kind"]) == ("high-medium-low", "medium-high-low", "mcq")
    assert len(row["options"]) == 4 and {row["answer"], row["adversarial"]} <= set(row["options"])
    letter = {o: "ABCD"[i] for i, o in enumerate(row["options"])}
    assert row["audio"]["sampling_rate"] == 16000 and row["audio"]["array"].shape == (72160,)  # 4.51 s
    task = AnswerTask.of("default", "voxparadox-pitch")
    prompt = task.prompts([row])[0]
    assert prompt.segments[0] == mcq_text(row["question"], row["options"])  # the harness' own MCQ prompt
    assert prompt.segments[0].splitlines()[2:4] == [f"A. {row['options'][0]}", f"B. {row['options'][1]}"]
    opts = answer_options(row, task.vocabulary)
    wrong = tuple(sorted(set("ABCD") - {letter[row["answer"]]}))
    assert (opts.answer, opts.wrong, opts.claim) == (letter[row["answer"]], wrong, letter[row["adversarial"]])
    assert OptionParser(tuple(row["options"])).parse(opts.answer) == row["answer"]  # the parser reads it back
    assert opts.pair("claim", seed=1, key=FIRST_PITCH_TRAIN) == (opts.answer, opts.claim)  # --rejected claim: y_adv
    drawn = {opts.pair("random", seed=s, key=FIRST_PITCH_TRAIN)[1] for s in range(30)}
    assert drawn == set(wrong)  # --rejected random (default): any wrong option, never the answer


def test_item_split_is_decided_per_item_so_a_limit_takes_a_prefix() -> None:
    ids = [f"vpl-pitch-train-{i:03d}" for i in range(400)]
    full = item_split(ids, val_fraction=0.1, seed=1234)
    head = item_split(ids[:50], val_fraction=0.1, seed=1234)
    assert head.train == full.train[: len(head.train)] and head.val == full.val[: len(head.val)]
    assert 25 <= len(full.val) <= 55  # ~10 % held out (binomial, n = 400)
    assert item_split(ids, val_fraction=0.1, seed=7).val != full.val


def test_training_items_are_the_built_items(tmp_path: Path) -> None:
    """What training hears is what a `vocalgrad-dataset build` of the same items holds (PCM16)."""
    from harness.data import ParquetSource
    from vocalgrad_dataset.voxparadox.export import build_voxparadox

    build_voxparadox("voxparadox-pitch", ["train"], tmp_path, limit=1)
    source = ParquetSource(tmp_path, "train")
    built = next(iter(source.rows("voxparadox-pitch", source.units("voxparadox-pitch"))))
    mine = run_training_data(_settings(train_limit=1)).renderer.row(FIRST_PITCH_TRAIN)
    assert built["benchmark_clip_id"] == FIRST_PITCH_TRAIN
    assert np.array_equal(built["audio"]["array"], mine["audio"]["array"])
    assert {k: built[k] for k in ("options", "answer", "adversarial", "question")} == {
        k: mine[k] for k in ("options", "answer", "adversarial", "question")}


def test_settings_refuse_a_source_and_mixed_eval_configs() -> None:
    with pytest.raises(ValueError, match="built from its vendored items: --source"):
        _settings(source="vctk")
    with pytest.raises(ValueError, match="mixes built-item configs"):
        _settings(eval_configs=["voxparadox-pitch", "volume"])


def test_dpo_on_items_starts_at_ln2(tmp_path: Path) -> None:
    out = tmp_path / "dpo"
    assert main([*RUN, "--objective", "dpo", "--max-steps", "2", "--skip-eval", "--out", str(out)]) == 0
    info = json.loads((out / "training.json").read_text())
    assert abs(info["first_loss"] - math.log(2)) <= 1e-4  # the policy equals its reference at step 0
    assert info["dpo"]["rejected"] == "random" and info["steps"] == 2
    assert info["data"]["source"] == "voxparadox-lite" and info["data"]["n_train"] == 4


def test_a_short_run_reports_ala_and_the_paired_test(tmp_path: Path) -> None:
    from harness.metrics import mcnemar
    from harness.report import compare, load_samples

    out = tmp_path / "ce"
    assert main([*RUN, "--max-steps", "1", "--lr", "0.05", "--eval-base", "--eval-limit", "6",
                 "--eval-mode", "choices", "--out", str(out)]) == 0
    info = json.loads((out / "training.json").read_text())
    metrics = info["eval"]["kind_metrics"]
    assert set(metrics) == {"base", "voxparadox-pitch (all_linear)"}
    for label, by_config in metrics.items():
        m = by_config["voxparadox-pitch"]
        samples = load_samples(out / ("eval_base" if label == "base" else "eval"))["voxparadox-pitch"]
        assert m["n"] == len(samples) == 6
        assert m["acc"] == pytest.approx(sum(r["pred"] == r["gold"] for r in samples) / 6)
        assert m["ala"] == pytest.approx(sum(r["pred"] == r["adversarial"] for r in samples) / 6)
        assert m["ala_gap"] == pytest.approx(m["ala"] - m["acc"])
    paired = info["eval"]["paired_vs_base"]["voxparadox-pitch"]
    base, tuned = load_samples(out / "eval_base"), load_samples(out / "eval")
    assert paired["p_value"] == mcnemar(base["voxparadox-pitch"], tuned["voxparadox-pitch"]).p_value
    assert paired["n_pairs"] == 6 and f"{paired['p_value']:.4g}" in compare(out / "eval_base", out / "eval")
    card = (out / "adapter" / "README.md").read_text()
    assert "`voxparadox-pitch` (%)" in card and "ala_gap" in card and "exact McNemar, 6 items" in card
