"""Issue 44: repairs trained the way VoxParadox trains them. The recipe as a declared file (stages with their own
data, trainable part, rate and length), several training configs at once with a separate DPO set, every
learning-rate flag honoured or refused, --init-adapter (DPO's reference), full-LLM fine-tuning with the LM head,
and LoRA where the device cannot hold it recorded as not the paper's protocol."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from finetune.mixture import SEP, MixedRenderer, weighted
from finetune.recipe import load_recipe
from finetune.train import main

TINY = ["--model", "tiny-qwen2-audio", "--source", "demo", "--skip-eval", "--num-workers", "0", "--no-progress",
        "--val-limit", "2", "--train-limit", "4", "--grad-accum", "2"]
LORA = [*TINY, "--category", "volume", "--scope", "all_linear", "--max-steps", "2"]

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _record(out: Path) -> dict:
    return json.loads((out / "training.json").read_text())


def _log(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]


# ---- the acceptance run: --recipe pclm+dpo on two configs of different questions and a separate DPO set -----
@pytest.fixture(scope="module")
def recipe_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("recipe") / "run"
    assert main([*TINY, "--recipe", "pclm+dpo", "--category", "volume,pitch", "--dpo-category", "speed",
                 "--max-steps", "2", "--pclm-lr", "5e-2", "--out", str(out)]) == 0
    return out


def test_each_stage_records_its_data_trainable_names_steps_and_rate(recipe_run: Path) -> None:
    info = _record(recipe_run)
    stages = {s["name"]: s for s in info["stages"]}
    assert list(stages) == ["pclm-stage1", "pclm-stage2", "dpo"]  # as declared in finetune/recipes/pclm_dpo.yaml
    assert [s["lr"] for s in stages.values()] == [5e-2, 5e-2, 5e-7]  # --pclm-lr for both PCLM stages, the paper's DPO
    assert [s["steps"] for s in stages.values()] == [2, 2, 2]
    assert [s["data"]["config"] for s in stages.values()] == ["volume,pitch", "volume,pitch", "speed"]
    assert {p["config"] for p in stages["pclm-stage1"]["data"]["mixture"]} == {"volume", "pitch"}
    # stage 1: the mixer only; stage 2 and DPO: the whole LLM with its head, the mixer frozen (the paper's Fig. 5)
    assert stages["pclm-stage1"]["trainable_params"] and all(
        n.startswith("pclm.") for n in stages["pclm-stage1"]["trainable_params"])
    for name in ("pclm-stage2", "dpo"):
        names = stages[name]["trainable_params"]
        assert "lm_head.weight" in names and not any(n.startswith("pclm.") or "lora_" in n for n in names)
        assert not any("embed_tokens" in n or "audio_tower" in n for n in names)
    assert info["llm_training"]["mode"] == "full" and info["not_paper_protocol"] == [
        "prompt embedding: the LM's mean-pooled token embeddings, not a BERT over the user's prompt"]
    log = _log(recipe_run)
    assert [e["lr"] for e in log] == [5e-2] * 4 + [5e-7] * 2  # the rate each optimizer step used
    # DPO's reference is the stage-2 model itself (dropout off), so its first loss is -log sigma(0)
    assert stages["dpo"]["first_loss"] == pytest.approx(math.log(2), abs=1e-4)


def _alpha(lm, rows) -> torch.Tensor:
    """The mixer's weights for each row's prompt (the hook leaves them on the mixer's site)."""
    from finetune.objective import AnswerTask

    prompts = AnswerTask.of("default", "volume,pitch").prompts(rows)
    with torch.no_grad():
        lm.model(**lm._encode(prompts))
    from harness.models.pclm import mixer_of

    return mixer_of(lm.model)._site.window_alpha.float()


def test_two_prompts_get_different_mixing_weights_after_multi_task_training(recipe_run: Path) -> None:
    from finetune.data import RowRenderer
    from harness.models.registry import get_model

    lm = get_model("tiny-qwen2-audio", adapter=str(recipe_run))
    volume, pitch = (RowRenderer(c, "train", "demo") for c in ("volume", "pitch"))
    same_clip = [volume.row(volume.ids()[0]), pitch.row(pitch.ids()[0])]
    alpha = _alpha(lm, same_clip)
    assert alpha.shape[0] == 2 and torch.allclose(alpha.sum(-1), torch.ones(2))
    assert (alpha[0] - alpha[1]).abs().max() > 1e-4, alpha  # the volume question and the pitch question differ


def test_dpo_set_and_mixture_hold_their_own_ids(tmp_path: Path) -> None:
    """A mixture's ids name their config; its weight is its share of an epoch (hand counts)."""
    ids = ("a", "b", "c", "d")
    assert weighted(ids, 1.0, seed=0) == ids
    assert weighted(ids, 2.0, seed=0) == ("a", "a", "b", "b", "c", "c", "d", "d")
    half = weighted(ids, 0.5, seed=0)
    assert len(half) == 2 and set(half) < set(ids) and list(half) == sorted(half)  # a subset, in dataset order
    more = weighted(ids, 1.5, seed=3)
    assert len(more) == 6 and set(more) == set(ids) and sorted(np.unique(more, return_counts=True)[1]) == [1, 1, 2, 2]
    with pytest.raises(ValueError, match=r"x::y: not an id of the mixture 'volume'"):
        MixedRenderer({"volume": type("D", (), {"renderer": type("R", (), {"source_name": "demo"})()})()}).row(
            f"x{SEP}y")


def test_mix_weights_change_each_configs_share(tmp_path: Path) -> None:
    out = tmp_path / "mixed"
    assert main([*TINY, "--category", "volume,pitch", "--mix-weights", "2,1", "--scope", "lm_head", "--max-steps", "1",
                 "--val-category", "speed", "--out", str(out)]) == 0
    info = _record(out)
    assert info["validation_set"]["config"] == "speed" and info["validation"]["n"] == 2  # --val-limit 2
    parts = {p["config"]: p for p in info["data"]["mixture"]}
    assert parts["volume"]["per_epoch"] == 2 * parts["volume"]["n_train"] == 8
    assert parts["pitch"]["per_epoch"] == parts["pitch"]["n_train"] == 4 and parts["pitch"]["weight"] == 1.0


# ---- learning-rate flags: honoured or refused in one line ---------------------------------------------------
def test_dpo_lr_is_the_rate_of_every_dpo_step(tmp_path: Path) -> None:
    out = tmp_path / "dpo"
    assert main([*LORA, "--objective", "dpo", "--dpo-lr", "5e-7", "--out", str(out)]) == 0
    assert [e["lr"] for e in _log(out)] == [5e-7, 5e-7]
    assert [(s["name"], s["lr"]) for s in _record(out)["stages"]] == [("lora", 5e-7)]


@pytest.mark.parametrize(("flags", "message"), [
    (["--dpo-lr", "5e-7"], "--dpo-lr is read by no stage of this run (recipe lora: lora at 0.0002 (--lr))"),
    (["--method", "pclm", "--lr", "1e-3"], "--lr is read by no stage of this run (recipe pclm: "),
    (["--objective", "dpo", "--lr", "1e-3", "--dpo-lr", "5e-7"], "both name the rate of the one DPO stage"),
    (["--pclm-lr", "1e-3"], "--pclm-lr is read by no stage"),
    (["--dpo-category", "pitch"], "--dpo-category is DPO's data set"),
    (["--mix-weights", "1,2"], "--mix-weights needs one positive weight per --category config (1)"),
    (["--category", "volume,pitch", "--augment"], "--augment takes one --category config"),
])
def test_a_flag_no_stage_reads_is_refused_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                       flags: list[str], message: str) -> None:
    assert main([*LORA, "--out", str(tmp_path / "x"), *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err
    assert not (tmp_path / "x").exists()


# ---- --init-adapter -----------------------------------------------------------------------------------------
def test_dpo_from_a_trained_adapter_starts_at_ln2_against_it(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    sft = tmp_path / "sft"  # "SFT w/o PCLM", moved far from the base model
    assert main([*LORA, "--lr", "5e-2", "--out", str(sft)]) == 0
    dpo = tmp_path / "dpo"  # "SFT + DPO w/o PCLM"
    assert main([*LORA, "--objective", "dpo", "--dpo-lr", "1e-3", "--init-adapter", str(sft), "--out", str(dpo)]) == 0
    info = _record(dpo)
    # its reference is the init adapter itself: -log sigma(0); the LoRA-off base model would give another loss
    assert info["dpo"]["first_dpo_loss"] == pytest.approx(math.log(2), abs=1e-4)
    assert "--init-adapter" in info["dpo"]["reference"] and info["init_adapter"] == str(sft / "adapter")
    from safetensors.torch import load_file

    start, end = (load_file(str(d / "adapter" / "adapter_model.safetensors")) for d in (sft, dpo))
    assert start.keys() == end.keys() and any(not torch.equal(start[k], end[k]) for k in start)
    capsys.readouterr()
    assert main([*LORA, "--lora-r", "4", "--init-adapter", str(sft), "--out", str(tmp_path / "bad")]) == 2
    err = capsys.readouterr().err
    assert "adapter_config.json: its LoRA differs from this run's in r" in err and err.count("\n") == 1


def test_a_missing_init_adapter_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main([*LORA, "--init-adapter", str(tmp_path / "none"), "--out", str(tmp_path / "x")]) == 2
    assert "--init-adapter" in capsys.readouterr().err


# ---- a recipe file: stages of other data and lengths --------------------------------------------------------
def test_a_recipe_file_declares_each_stages_data_length_and_rate(tmp_path: Path) -> None:
    recipe = tmp_path / "two_tasks.yaml"
    recipe.write_text("""
name: two-tasks
method: lora
stages:
  - name: volume-first
    objective: ce
    trains: [llm]
    data: {configs: [volume]}
    lr: 1.0e-3
    steps: 1
  - name: then-pitch
    objective: ce
    trains: [llm]
    data: {configs: [pitch], weights: [2]}
    lr: 2.0e-3
    epochs: 1
""")
    out = tmp_path / "run"
    assert main([*TINY, "--category", "volume", "--scope", "lm_head", "--recipe", str(recipe), "--out", str(out)]) == 0
    stages = _record(out)["stages"]
    # then-pitch: one epoch of pitch at weight 2 = 8 clips, 2 per step
    assert [(s["name"], s["lr"], s["steps"], s["data"]["config"]) for s in stages] == [
        ("volume-first", 1e-3, 1, "volume"), ("then-pitch", 2e-3, 4, "pitch")]
    assert stages[1]["data"]["mixture"][0]["per_epoch"] == 8
    assert load_recipe(str(recipe)).stages[1].data.weights == (2.0,)


@pytest.mark.parametrize(("text", "message"), [
    ("stages: []", "not a recipe"),
    ("stages: [{name: a, objective: kto, trains: [llm], lr: 1}]", "stage a: objective must be one of"),
    ("stages: [{name: a, trains: [llm]}]", "stage a: lr (a number) is required"),
    ("stages: [{name: a, trains: [llm], lr: 1, data: nope}]", "stage a: data 'nope' is not one of"),
    ("stages: [{name: a, trains: [llm], lr: 1, steps: 0}]", "stage a: steps must be an integer >= 1"),
    ("method: lora\nstages: [{name: a, trains: [mixer], lr: 1}]", "a stage trains the mixer but the method is lora"),
    ("stages: [", "not valid YAML"),
])
def test_a_bad_recipe_file_is_one_error_naming_it(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ValueError, match=re.escape(message)) as err:
        load_recipe(str(path))
    assert str(path) in str(err.value) and "\n" not in str(err.value)


# ---- full fine-tuning where the device holds it, else LoRA flagged -----------------------------------------
def test_lora_instead_of_full_finetuning_is_recorded_as_not_the_papers_protocol(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from finetune import stages
    from finetune.card import model_card
    from harness.cli import main as harness_main

    monkeypatch.setattr(stages, "free_bytes", lambda device: 0)  # a device that cannot hold the LLM's optimizer
    out = tmp_path / "run"
    assert main([*TINY, "--recipe", "pclm+dpo", "--category", "volume", "--max-steps", "1", "--out", str(out)]) == 0
    info = _record(out)
    assert info["llm_training"]["mode"] == "lora" and "LoRA instead" in info["llm_training"]["why"]
    flagged = [d for d in info["not_paper_protocol"] if "not full fine-tuning" in d]
    assert flagged and all("lora_" in n for s in info["stages"][1:] for n in s["trainable_params"])
    assert json.loads((out / "adapter" / "protocol.json").read_text())["not_paper_protocol"] == info["not_paper_protocol"]
    assert "not the paper's protocol" in model_card(info, None, dataset_repo="ynklab/vocalgrad")
    run = tmp_path / "eval"  # the leaderboard reads model_info["not_paper_protocol"] of the adapter's evaluation
    assert harness_main(["eval", "--model", "tiny-qwen2-audio", "--adapter", str(out), "--configs", "volume",
                         "--source", "demo", "--limit", "2", "--mode", "choices", "--out", str(run)]) == 0
    model_info = json.loads((run / "results.json").read_text())["model_info"]
    assert flagged[0] in model_info["not_paper_protocol"]


def test_a_recipe_interrupted_in_its_dpo_stage_resumes_to_the_same_model(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Stages of their own data and lengths resume like one pass: the plan, the per-stage schedule and DPO's
    reference snapshot (taken at step 5) come back from the checkpoint."""
    from finetune import loop

    args = [*TINY, "--recipe", "pclm+dpo", "--category", "volume,pitch", "--dpo-category", "speed", "--max-steps", "2",
            "--pclm-lr", "5e-2", "--dpo-lr", "1e-2", "--save-every", "1", "--val-limit", "0"]
    assert main([*args, "--out", str(tmp_path / "whole")]) == 0
    original = loop.Stepper.optimizer_step

    def stop_after_step_5(self, mb):
        loss = original(self, mb)
        if self.state["step"] == 5:
            raise KeyboardInterrupt
        return loss

    monkeypatch.setattr(loop.Stepper, "optimizer_step", stop_after_step_5)
    assert main([*args, "--out", str(tmp_path / "cut")]) == 130
    monkeypatch.setattr(loop.Stepper, "optimizer_step", original)
    assert main([*args, "--out", str(tmp_path / "cut")]) == 0
    from safetensors.torch import load_file

    for name in ("adapter_model.safetensors", "pclm.safetensors", "lm_weights.safetensors"):
        a, b = (load_file(str(tmp_path / d / "adapter" / name)) for d in ("whole", "cut"))
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), name
    assert _log(tmp_path / "cut") == _log(tmp_path / "whole")


def test_a_recipe_files_own_configs_are_checked_before_training(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    recipe = tmp_path / "typo.yaml"
    recipe.write_text("method: lora\nstages: [{name: a, trains: [llm], lr: 1.0e-3, data: {configs: [volumee]}}]\n")
    assert main([*TINY, "--category", "volume", "--scope", "lm_head", "--recipe", str(recipe),
                 "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert "unknown config 'volumee'" in err and err.count("\n") == 1 and not (tmp_path / "x").exists()


def test_full_finetuning_without_pclm_saves_and_reloads_the_llm(tmp_path: Path) -> None:
    """The paper's "SFT w/o PCLM" trains the full LLM: --method lora --full-finetune, head included."""
    from safetensors.torch import load_file

    from harness.models.registry import get_model

    out = tmp_path / "sft"
    assert main([*LORA, "--full-finetune", "--lr", "1e-2", "--out", str(out)]) == 0
    info = _record(out)
    names = info["stages"][0]["trainable_params"]
    assert info["llm_training"]["mode"] == "full" and "lm_head.weight" in names
    assert not any("lora_" in n for n in names) and info["not_paper_protocol"] == []
    files = {p.name for p in (out / "adapter").iterdir()}
    assert "lm_weights.safetensors" in files and "pclm_config.json" not in files
    saved = load_file(str(out / "adapter" / "lm_weights.safetensors"))
    reloaded = get_model("tiny-qwen2-audio", adapter=str(out)).model.state_dict()
    base = get_model("tiny-qwen2-audio").model.state_dict()
    assert all(torch.equal(reloaded[k], v) for k, v in saved.items())
    assert any(not torch.equal(base[k], v) for k, v in saved.items() if k in base)


# ---- a foreign dataset mapped onto a task kind (harness' own --kind / --columns) ----------------------------
def _mapped_dataset(root: Path) -> Path:
    """Two tasks of lettered multiple-choice items, train and test splits, in a layout of its own columns."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq
    import soundfile as sf

    def wav(seed: int) -> bytes:
        buf = io.BytesIO()
        sf.write(buf, 0.1 * np.random.default_rng(seed).standard_normal(16000).astype(np.float32), 16000,
                 format="WAV", subtype="PCM_16")
        return buf.getvalue()

    root.mkdir()
    for split, n in (("train", 8), ("test", 4)):
        rows = [{"key": f"{split}{i}", "clip": {"bytes": wav(i), "path": None}, "task": ("loud", "fast")[i % 2],
                 "q": "Is the speaker loud or soft?" if i % 2 == 0 else "Is the speech fast or slow?",
                 "opts": ["loud", "soft"] if i % 2 == 0 else ["fast", "slow"],
                 "gold": ("loud", "fast", "soft", "slow")[i % 4]} for i in range(n)]
        pq.write_table(pa.Table.from_pylist(rows), root / f"{split}-00000.parquet")
    return root


def test_a_dataset_mapped_onto_a_kind_trains_by_dpo_and_evaluates(tmp_path: Path) -> None:
    data = _mapped_dataset(tmp_path / "mine")
    out = tmp_path / "run"
    assert main(["--model", "tiny-qwen2-audio", "--dataset", str(data), "--kind", "mcq", "--columns",
                 "audio=clip,question=q,options=opts,answer=gold,task=task,id=key", "--category", "loud,fast",
                 "--scope", "lm_head", "--objective", "dpo", "--max-steps", "2", "--grad-accum", "2",
                 "--val-fraction", "0.25", "--num-workers", "0", "--no-progress", "--eval-mode", "choices",
                 "--out", str(out)]) == 0
    info = _record(out)
    parts = {p["config"]: p for p in info["data"]["mixture"]}
    assert set(parts) == {"loud", "fast"} and all(p["kind"] == "mcq" for p in parts.values())
    assert sum(p["n_train"] + p["n_val"] for p in parts.values()) == 8
    assert info["dpo"]["first_dpo_loss"] == pytest.approx(math.log(2), abs=1e-4) and info["dpo"]["rejected"] == "random"
    results = json.loads((out / "eval" / "results.json").read_text())
    assert {c: m["n"] for c, m in results["metrics"].items()} == {"loud": 2, "fast": 2}  # its own test split
    assert set(info["eval"]["kind_metrics"]["loud,fast (lm_head)"]) == {"loud", "fast"}
    assert "mapped onto the task kind `mcq`" in (out / "adapter" / "README.md").read_text()


def test_a_mapped_dataset_needs_its_kind_and_names_its_tasks(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    data = _mapped_dataset(tmp_path / "mine")
    base = ["--model", "tiny-qwen2-audio", "--dataset", str(data), "--scope", "lm_head", "--out", str(tmp_path / "x"),
            "--num-workers", "0", "--skip-eval"]
    assert main([*base, "--category", "loud"]) == 2
    assert "needs --dataset PATH_OR_REPO and --kind K" in capsys.readouterr().err
    columns = "audio=clip,question=q,options=opts,answer=gold,task=task,id=key"
    assert main([*base, "--kind", "mcq", "--columns", columns, "--category", "lowd"]) == 2
    err = capsys.readouterr().err
    assert "no task 'lowd'; did you mean 'loud'?" in err and err.count("\n") == 1
