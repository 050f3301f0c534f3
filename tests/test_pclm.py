"""VoxParadox's prompt-conditioned layer mixer (PCLM) on the tiny Qwen2-Audio and Audio Flamingo 3: the paper's
taps mapped onto the encoder, base logits when alpha sits on the final layer, alpha from the prompt (never the
answer), under 1 % added parameters on the published models, stage 1 training only the mixer, and a saved
mixer that `harness eval --adapter` reloads exactly."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from finetune import loop
from finetune.train import main
from harness.models import pclm
from harness.models.families import WHISPER_STACK
from harness.models.protocol import AudioClip, ModelError, Prompt
from harness.models.registry import get_model
from harness.models.tiny import tiny_model

ACCEPTANCE = ["--model", "tiny-qwen2-audio", "--category", "volume", "--source", "demo", "--scope", "all_linear",
              "--method", "pclm", "--pclm-stage1-steps", "1", "--pclm-stage2-steps", "1", "--skip-eval"]
FAST = ["--num-workers", "0", "--no-progress", "--val-limit", "2", "--train-limit", "4", "--grad-accum", "2",
        "--pclm-lr", "1e-2"]


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _clip(seed: int, seconds: float = 1.5) -> AudioClip:
    return AudioClip((0.1 * np.random.default_rng(seed).standard_normal(int(16000 * seconds))).astype(np.float32), 16000)


def _logits(lm, prompts: list[Prompt]) -> torch.Tensor:
    with torch.no_grad():
        return lm.model(**lm._encode(prompts)).logits.float()


def test_paper_taps_map_proportionally_onto_the_encoder() -> None:
    assert pclm.paper_taps(32) == (5, 15, 25, 30)  # the paper's AF3 encoder: its own layers
    # 12 layers: 5*12/32 = 1.875, 15*12/32 = 5.625, 25*12/32 = 9.375, 30*12/32 = 11.25 (by hand)
    assert pclm.paper_taps(12) == (2, 6, 9, 11)
    assert pclm.paper_taps(2) == (1,)  # the tiny encoders: layer 1 besides the final layer 2
    with pytest.raises(ValueError, match="encoder layers 1..1"):
        pclm.PCLMConfig(taps=(2,), n_layers=2, prompt_dim=4)


def test_windows_fill_their_rows_audio_slots_in_order() -> None:
    assert pclm.window_rows([3, 0, 5], [3, 2, 3]) == [0, 2, 2]
    with pytest.raises(pclm.ModelError, match="do not fit"):
        pclm.window_rows([2], [3])


def test_families_without_the_seam_are_refused_by_name() -> None:
    lm = SimpleNamespace(name="tiny-voxtral", family="voxtral", audio_stack=None)
    with pytest.raises(ValueError, match="family 'voxtral' has none"):
        pclm.new_config(lm)


@pytest.mark.parametrize("family", ["qwen2-audio", "audio-flamingo-3"])
def test_alpha_on_the_final_layer_gives_the_base_logits(family: str) -> None:
    lm = tiny_model(family)
    many = family == "qwen2-audio"  # AF3 takes one clip per prompt
    prompts = [Prompt((_clip(0), "Does the volume rise or fall?")),
               Prompt((_clip(1, 2.5), *((_clip(2),) if many else ()), "Is the pitch going up?"))]
    base = _logits(lm, prompts)
    config = pclm.new_config(lm)
    mixer = pclm.attach(lm, config)
    mixer.fixed_alpha = torch.tensor([0.0] * len(config.taps) + [1.0])
    assert (_logits(lm, prompts) - base).abs().max() <= 1e-5
    mixer.fixed_alpha = torch.tensor([1.0] + [0.0] * len(config.taps))  # the tapped layer alone: other tokens
    assert (_logits(lm, prompts) - base).abs().max() > 1e-3
    with pclm.pclm_disabled(lm.model):
        assert (_logits(lm, prompts) - base).abs().max() <= 1e-5


def test_alpha_follows_the_prompt_and_never_the_answer() -> None:
    lm = tiny_model("qwen2-audio")
    torch.manual_seed(0)  # the mixer's own initialisation, whatever ran before (the test order must not matter)
    mixer = pclm.attach(lm, pclm.new_config(lm))
    site = mixer._site
    audio = _clip(3)
    texts = ["Does the volume rise or fall?", "Describe the speaker's accent in detail, please.", "Is it louder?"]
    inputs = lm._encode([Prompt((audio, t)) for t in texts])
    e = pclm.prompt_embedding(site, inputs["input_ids"], inputs["attention_mask"])
    alpha = mixer.alpha(e)
    assert alpha.shape == (3, 2) and torch.allclose(alpha.sum(-1), torch.ones(3))
    # A prompt-blind alpha would be bit-identical across rows; the tiny model's 0.02-scale embeddings move it by
    # ~1e-4, so the bound sits far above float32 rounding (6e-8) rather than at that scale.
    assert (alpha[0] - alpha[1]).abs().max() > 1e-6 and (alpha[0] - alpha[2]).abs().max() > 1e-6
    # A training row (prompt + answer): the answer's tokens are left out, so alpha is the prompt's alone.
    train = lm.training_inputs([Prompt((audio, texts[0]))], ["increase"])
    with pclm.prompt_without_answer(lm.model, train["labels"]):
        e_train = pclm.prompt_embedding(site, train["input_ids"], train["attention_mask"])
    assert torch.allclose(e_train[0], e[0], atol=1e-6)
    assert not torch.allclose(pclm.prompt_embedding(site, train["input_ids"], train["attention_mask"])[0], e[0])


# The published checkpoints' config.json (Qwen/Qwen2-Audio-7B-Instruct; nvidia/audio-flamingo-3-hf, whose LM is
# Qwen2.5-7B): a Whisper-large-v3 encoder (32 layers, d_model 1280) in both.
WHISPER_LARGE = {"d_model": 1280, "encoder_layers": 32, "encoder_attention_heads": 20, "encoder_ffn_dim": 5120,
                 "num_mel_bins": 128}
PUBLISHED = {
    "Qwen2AudioForConditionalGeneration": ("Qwen2AudioConfig", "qwen2_audio_encoder", {
        "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32, "num_attention_heads": 32,
        "num_key_value_heads": 32, "vocab_size": 156032},
        # 4 projectors Linear(1280, 4096) + MLP 4096 -> 256 -> 5, counted by hand
        4 * (1280 * 4096 + 4096) + (4096 * 256 + 256) + (256 * 5 + 5)),
    "AudioFlamingo3ForConditionalGeneration": ("AudioFlamingo3Config", "audioflamingo3_encoder", {
        "hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28, "num_attention_heads": 28,
        "num_key_value_heads": 4, "vocab_size": 151936},
        # 4 projectors Linear(1280, 3584) -> GELU -> Linear(3584, 3584) + MLP 3584 -> 256 -> 5
        4 * (1280 * 3584 + 3584 + 3584 * 3584 + 3584) + (3584 * 256 + 256) + (256 * 5 + 5)),
}


@pytest.mark.parametrize("model_class", sorted(PUBLISHED))
def test_added_parameters_stay_under_one_percent_of_the_published_models(model_class: str) -> None:
    import transformers as tf

    config_class, encoder_type, text, expected = PUBLISHED[model_class]
    config = getattr(tf, config_class)(audio_config={"model_type": encoder_type, **WHISPER_LARGE},
                                       text_config={"model_type": "qwen2", **text})
    with torch.device("meta"):  # shapes only: no memory, no weights
        model = getattr(tf, model_class)._from_config(config)
    total = sum(p.numel() for p in model.parameters())
    lm = SimpleNamespace(name=model_class, model=model, audio_stack=WHISPER_STACK, audio_token_id=0, tokenizer=None,
                         spec=SimpleNamespace(feature_mask_key="feature_attention_mask"))
    mixer = pclm.attach(lm, pclm.new_config(lm))
    assert mixer.config.taps == (5, 15, 25, 30)
    added = pclm.added_parameters(mixer)
    assert added == expected
    assert added / total < 0.01, f"{added:,} of {total:,}"


def _recorded_run(out: Path, *flags: str) -> SimpleNamespace:
    """The acceptance command (plus flags) with the model's state before step 1 and after every step."""
    snapshots: list[dict[str, torch.Tensor]] = []
    original = loop.Stepper.optimizer_step

    def recording(self, mb):
        if not snapshots:
            snapshots.append({k: v.detach().clone() for k, v in self.lm.model.state_dict().items()})
        loss = original(self, mb)
        snapshots.append({k: v.detach().clone() for k, v in self.lm.model.state_dict().items()})
        return loss

    mp = pytest.MonkeyPatch()
    mp.setattr(loop.Stepper, "optimizer_step", recording)
    try:
        assert main([*ACCEPTANCE, "--out", str(out), *FAST, *flags]) == 0
    finally:
        mp.undo()
    return SimpleNamespace(out=out, snapshots=snapshots, info=json.loads((out / "training.json").read_text()))


@pytest.fixture(scope="module")
def pclm_run(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    """The acceptance command: stage 1 at step 1, stage 2 (+ LoRA) at step 2."""
    return _recorded_run(tmp_path_factory.mktemp("pclm") / "X")


def _changed(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> set[str]:
    return {k for k in a if not torch.equal(a[k], b[k])}


def test_stage_1_trains_only_the_mixer_and_stage_2_the_lora_with_the_mixer_frozen(pclm_run: SimpleNamespace) -> None:
    init, after1, after2 = pclm_run.snapshots
    stage1 = _changed(init, after1)
    assert stage1 and all(k.startswith("pclm.") for k in stage1), sorted(stage1)[:5]
    assert any(k.startswith("pclm.projectors.") for k in stage1) and any(k.startswith("pclm.mlp.") for k in stage1)
    stage2 = _changed(after1, after2)
    # the paper's Fig. 5: the mixer is frozen after stage 1; encoder, projector, LM base too (LoRA trains)
    assert stage2 and all("lora_" in k for k in stage2), sorted(stage2)[:5]
    log = [json.loads(line) for line in (pclm_run.out / "train_log.jsonl").read_text().splitlines()]
    assert [e["phase"] for e in log] == ["pclm-stage1", "pclm-stage2"]
    info = pclm_run.info
    assert info["method"] == "pclm" and info["pclm"]["taps"] == [1] and info["pclm"]["stage1_steps"] == 1
    assert info["pclm"]["added_params"] == sum(v.numel() for k, v in init.items() if k.startswith("pclm."))


def test_saved_mixer_reloads_exactly_and_harness_eval_runs(pclm_run: SimpleNamespace, tmp_path: Path) -> None:
    adapter = pclm_run.out / "adapter"
    assert {"adapter_config.json", "adapter_model.safetensors", "pclm.safetensors", "pclm_config.json"} <= {
        p.name for p in adapter.iterdir()}
    reloaded = get_model("tiny-qwen2-audio", adapter=str(pclm_run.out))  # the run folder resolves to adapter/
    base = get_model("tiny-qwen2-audio")
    prompts = [Prompt((_clip(5), "Does the volume rise or fall?"))]
    mixer = pclm.mixer_of(reloaded.model)
    assert mixer is not None
    trained = {k.removeprefix("pclm."): v for k, v in pclm_run.snapshots[-1].items() if k.startswith("pclm.")}
    assert all(torch.equal(mixer.state_dict()[k], v) for k, v in trained.items())
    assert (_logits(reloaded, prompts) - _logits(base, prompts)).abs().max() > 1e-4
    with pclm.pclm_disabled(reloaded.model):
        from finetune.lora import adapters_disabled

        with adapters_disabled(reloaded.model):
            assert (_logits(reloaded, prompts) - _logits(base, prompts)).abs().max() <= 1e-5
    from harness.cli import main as harness_main

    run = tmp_path / "eval"
    assert harness_main(["eval", "--model", "tiny-qwen2-audio", "--adapter", str(pclm_run.out), "--configs", "volume",
                         "--source", "demo", "--limit", "2", "--mode", "choices", "--out", str(run)]) == 0
    assert json.loads((run / "results.json").read_text())["metrics"]["volume"]["n"] == 2


def test_hub_staging_carries_the_mixer(pclm_run: SimpleNamespace, tmp_path: Path) -> None:
    from finetune.hub import stage_adapter

    files = stage_adapter(pclm_run.out, tmp_path, repo_id="org/pclm")
    assert {"pclm.safetensors", "pclm_config.json", "adapter_model.safetensors", "README.md"} <= set(files)
    card = (tmp_path / "README.md").read_text()
    assert "+ PCLM + LoRA (all_linear)" in card and f"{pclm_run.info['pclm']['added_params']:,} added parameters" in card


def test_a_damaged_mixer_file_is_one_clear_error(pclm_run: SimpleNamespace, tmp_path: Path) -> None:
    import shutil

    broken = tmp_path / "adapter"
    shutil.copytree(pclm_run.out / "adapter", broken)
    (broken / "pclm.safetensors").write_bytes(b"not a safetensors file")
    # the adapter's weight files are checked before loading (harness.models.weights_check), the mixer's too
    with pytest.raises(ModelError, match=r"pclm\.safetensors: not a safetensors file or truncated") as err:
        get_model("tiny-qwen2-audio", adapter=str(broken))
    assert "\n" not in str(err.value)


def test_full_finetuning_on_request_trains_the_lm_and_reloads(tmp_path: Path) -> None:
    run = _recorded_run(tmp_path / "full", "--full-finetune")
    init, after1, after2 = run.snapshots
    assert all(k.startswith("pclm.") for k in _changed(init, after1))
    stage2 = _changed(after1, after2)
    lm_side = {k for k in stage2 if not k.startswith("pclm.")}
    assert lm_side and all(k.startswith(("model.language_model.", "lm_head.")) and "lora_" not in k for k in lm_side)
    assert "lm_head.weight" in lm_side  # the paper fine-tunes the full LLM: its head too
    assert not any("embed_tokens" in k for k in stage2)  # the prompt embedding stays the frozen LM's
    assert run.info["pclm"]["stage2_lm"] == "full"
    assert (run.out / "adapter" / "lm_weights.safetensors").is_file()
    reloaded = get_model("tiny-qwen2-audio", adapter=str(run.out)).model.state_dict()
    assert all(torch.equal(reloaded[k], after2[k]) for k in lm_side)
    from finetune.pclm import Phases
    from finetune.recipe import run_recipe
    from finetune.settings import TrainSettings

    paper = TrainSettings(model="m", category="volume", scope="all_linear", out="x", recipe="pclm+dpo",
                          source="demo", full_finetune=True)
    paper.check()  # the paper's recipe: stage 2 and DPO on the whole LLM
    phases = Phases.build(run_recipe(paper), [2, 2, 2], full=True)
    assert phases.full and phases.phase(5) == "dpo" and [s.llm for s in phases.stages] == [False, True, True]


BATCHES = {  # issue 33: generate() drops the all-ones mask of unpadded batches, which PCLM's hook must survive
    "single": [("Does the volume rise or fall?", 1.5, 0)],
    "equal-length": [("Does the volume rise or fall?", 1.5, 4), ("Does the volume rise or fall?", 1.5, 5)],
    "padded": [("Does the volume rise or fall?", 1.5, 6), ("Is the pitch of this voice going up now?", 2.5, 7)],
}


@pytest.mark.parametrize("shape", sorted(BATCHES))
def test_pclm_generates_and_scores_in_every_batch_shape(shape: str) -> None:
    lm = tiny_model("qwen2-audio")
    prompts = [Prompt((_clip(seed, seconds), text)) for text, seconds, seed in BATCHES[shape]]
    base_text = lm.generate(prompts, max_new_tokens=6)
    base_scores = lm.score_choices(prompts, ("increase", "decrease"))
    torch.manual_seed(0)
    config = pclm.new_config(lm)
    mixer = pclm.attach(lm, config)
    mixer.fixed_alpha = torch.tensor([0.0] * len(config.taps) + [1.0])  # all weight on the final layer
    assert lm.generate(prompts, max_new_tokens=6) == base_text  # greedy strings identical, no KeyError
    np.testing.assert_allclose(lm.score_choices(prompts, ("increase", "decrease")), base_scores, atol=1e-5)
    mixer.fixed_alpha = None  # the MLP's own alpha: still generates (other tokens are allowed)
    out = lm.generate(prompts, max_new_tokens=6)
    assert len(out) == len(prompts) and all(isinstance(t, str) for t in out)


def test_a_pclm_adapter_generates_with_the_fast_encoder_on(pclm_run: SimpleNamespace, tmp_path: Path) -> None:
    """Issue 44: PCLM switches the fast encoder off for generate too (it read lm.fast after attach cleared it)."""
    from harness.cli import main as harness_main

    run = tmp_path / "eval"
    assert harness_main(["eval", "--model", "tiny-qwen2-audio", "--adapter", str(pclm_run.out), "--configs", "volume",
                         "--source", "demo", "--limit", "2", "--mode", "generate", "--model-arg", "fast_encoder=true",
                         "--out", str(run)]) == 0
    rows = [json.loads(line) for p in run.rglob("*.jsonl") for line in p.read_text().splitlines() if line]
    assert rows and not [r for r in rows if r.get("error")]
