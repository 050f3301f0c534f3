"""Kimi-Audio LoRA fine-tuning, adapters and option scoring through its runtime (a small fake of kimia_infer's
KimiAudio, prompt manager and MoonshotKimiaForCausalLM; tests/helpers/fake_runtimes.py).

The expectations are computed here from the fake's own pieces with torch.nn.functional: the paper's loss is the
mean cross-entropy of the text head (logits[1]) at the positions that predict the assistant's label token and its
text end-of-stream token; option scores are the text head's log-probabilities of " A", " B", ... after the prompt.
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file

from finetune.runtimes import runtime_losses
from finetune.train import main
from harness.models.protocol import AudioClip, Prompt
from harness.models.registry import get_model
from tests.helpers import fake_runtimes
from tests.helpers.runtime_finetune import (
    cli_args,
    kill_9_and_resume,
    losses,
    training_prompts,
    wav_of,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")
QUESTION = 'Does the volume increase or decrease over time?\n\nAnswer with only one word: "increase" or "decrease".'
SPECIALS = fake_runtimes.KIMI_SPECIALS


def word_id(word: str) -> int:
    """The fake tokenizer's id of a word, computed here: specials first, then CRC-32 over the rest of the vocab."""
    return len(SPECIALS) + zlib.crc32(word.encode()) % (fake_runtimes.KIMI_VOCAB - len(SPECIALS))


def _prompt(seconds: float = 0.6, level: float = 0.3) -> Prompt:
    x = (level * np.sin(np.arange(int(seconds * 16000)) / 5) * np.linspace(0.2, 1, int(seconds * 16000)))
    return Prompt((QUESTION, AudioClip(x.astype(np.float32), 16000)), clip_id="k1")


def hand_loss(runtime, prompt: Prompt, answer: str, folder: Path) -> float:
    """The paper's messages (user text, user audio, assistant label) through the fake's prompt manager, its text
    logits, and the cross-entropy at the two positions before the label and before the text EOS (the assistant
    turn ends: assistant start, label, text EOS, message end)."""
    path = wav_of(prompt.audios[0], folder, "hand")
    messages = [{"role": "user", "message_type": "text", "content": QUESTION},
                {"role": "user", "message_type": "audio", "content": path},
                {"role": "assistant", "message_type": "text", "content": answer}]
    history = runtime.prompt_manager.get_prompt(messages, output_type="text", add_assistant_start_msg=False)
    audio, text, cont, _, _ = history.to_tensor()
    with torch.no_grad():
        _, text_logits = runtime.alm(input_ids=audio, text_input_ids=text, whisper_input_feature=history.continuous_feature,
                                     is_continuous_mask=cont).logits
    n = text.shape[1]
    assert text[0, n - 3] == word_id(answer) and text[0, n - 2] == SPECIALS.index("<text_eos>")
    return float(F.cross_entropy(text_logits[0, [n - 4, n - 3]], text[0, [n - 3, n - 2]]))


def test_kimi_finetune_loss_is_the_text_heads_masked_cross_entropy(shims, tmp_path: Path) -> None:
    lm = get_model("kimi-audio", trust_remote_code=True)
    prompt = _prompt()
    inputs = lm.training_inputs([prompt], ["increase"])
    (batch,) = inputs["rows"]
    n = batch["text_input_ids"].shape[1]
    # the loss mask covers exactly the label and the text EOS (the last two text tokens before the turn ends)
    assert torch.nonzero(batch["text_loss_mask"][0]).flatten().tolist() == [n - 3, n - 2]
    loss = runtime_losses(lm)(lm.model, inputs, False).detach()
    assert loss.shape == (1,)
    assert float(loss[0]) == pytest.approx(hand_loss(lm.runtime, prompt, "increase", tmp_path), rel=1e-6)


def test_kimi_finetune_all_linear_scope_is_every_linear_layer_of_the_alm(shims, tmp_path: Path) -> None:
    from finetune.runtimes import runtime_lora
    from finetune.settings import TrainSettings

    lm = get_model("kimi-audio", trust_remote_code=True)
    settings = TrainSettings(model="kimi-audio", category="volume", scope="all_linear", out=str(tmp_path))
    plan = runtime_lora(lm, settings)
    want = sorted(n for n, m in fake_runtimes.KimiALM().named_modules() if isinstance(m, torch.nn.Linear))
    assert plan.targets == want and plan.task_type == "CAUSAL_LM"
    assert {"lm_head", "mimo_output", "model.vq_adaptor.layers.0"} <= set(plan.targets)
    assert any(t.startswith("model.mimo_layers.") for t in plan.targets)
    settings.scope = "lm_head"
    assert runtime_lora(lm, settings).targets == ["lm_head"]
    settings.objective = "dpo"
    with pytest.raises(ValueError, match="--method lora --objective ce"):
        runtime_lora(lm, settings)


def test_kimi_finetune_cli_first_loss_is_the_hand_computed_one_and_the_adapter_reloads(shims, tmp_path: Path) -> None:
    out = tmp_path / "run"
    argv = cli_args("kimi-audio", out, "--train-limit", "2", "--grad-accum", "2", "--epochs", "3", "--val-limit",
                    "0", "--eval-configs", "volume", "--eval-limit", "2", "--eval-mode", "choices")
    assert main(argv) == 0
    prompts, answers = training_prompts(argv)
    runtime = fake_runtimes.KimiAudio("x")
    want = np.mean([hand_loss(runtime, p, a, tmp_path) for p, a in zip(prompts, answers, strict=True)])
    log = losses(out)
    assert log[0] == pytest.approx(want, rel=1e-6) and log[-1] < log[0]  # one step of both clips, then it learns
    info = json.loads((out / "training.json").read_text())
    assert info["base_model"]["family"] == "kimi-audio" and info["lora"]["n_target_modules"] == 16
    config = json.loads((out / "adapter" / "adapter_config.json").read_text())
    assert (config["task_type"], config["r"], config["lora_alpha"], config["lora_dropout"], config["bias"]) == (
        "CAUSAL_LM", 8, 16, 0.05, "none")
    assert "kimi-audio" in (out / "adapter" / "README.md").read_text()  # the card
    assert (out / "eval" / "samples_volume.jsonl").is_file()  # evaluated through the harness with the adapter

    # reloaded: the adapter's text head moves the scores of the options off the base model's
    base = get_model("kimi-audio", trust_remote_code=True)
    tuned = get_model("kimi-audio", trust_remote_code=True, adapter=str(out))
    assert tuned.provenance()["adapter"] == str((out / "adapter").resolve())
    choices = ("increase", "decrease")
    assert not np.allclose(base.score_choices(prompts, choices), tuned.score_choices(prompts, choices))
    # the reloaded adapter is the trained one: its loss on the training clips is below the base model's
    with torch.no_grad():
        tuned_loss = float(runtime_losses(tuned)(tuned.model, tuned.training_inputs(prompts, answers), False).mean())
    assert tuned_loss < log[0] - 0.1


def test_kimi_choices_are_the_text_heads_log_probabilities_of_the_letters(shims, tmp_path: Path) -> None:
    lm = get_model("kimi-audio", trust_remote_code=True)
    prompt = _prompt()
    letters = tuple("ABCDEFG")
    scores = lm.score_choices([prompt], letters)[0]
    path = wav_of(prompt.audios[0], tmp_path, "open")
    history = lm.runtime.prompt_manager.get_prompt(
        [{"role": "user", "message_type": "text", "content": QUESTION},
         {"role": "user", "message_type": "audio", "content": path}], output_type="text")
    audio, text, cont, _, _ = history.to_tensor()
    assert text.shape[1] == audio.shape[1] and int(audio[0, -1]) == SPECIALS.index("<assistant_start>")
    with torch.no_grad():
        _, logits, _ = lm.runtime.alm(input_ids=audio, text_input_ids=text, whisper_input_feature=history.continuous_feature,
                                      is_continuous_mask=cont, return_dict=False)
    want = F.log_softmax(logits[0, -1].double(), dim=-1)[[word_id(f" {c}") for c in letters]]
    np.testing.assert_allclose(scores, want.numpy(), rtol=1e-5)


def test_kimi_harness_eval_with_adapter_scores_the_meld_letters(shims, tmp_path: Path) -> None:
    from harness.cli import main as harness_main
    from tests.helpers.meld import build_meld_shaped

    out = tmp_path / "run"
    assert main(cli_args("kimi-audio", out, "--train-limit", "2", "--grad-accum", "2", "--val-limit", "0",
                         "--skip-eval")) == 0
    folder = build_meld_shaped(tmp_path)
    run = tmp_path / "meld-volume"
    assert harness_main(["eval", "--model", "kimi-audio", "--model-arg", "trust_remote_code=true", "--adapter",
                         str(out), "--dataset", str(folder), "--kind", "classify", "--mode", "choices",
                         "--out", str(run), "--no-preflight"]) == 0
    rows = [json.loads(line) for line in (run / "samples_meld.jsonl").read_text().splitlines()]
    assert len(rows) == 36 and all(r["parsed"] and r["pred"] in r["options"] for r in rows)
    results = json.loads((run / "results.json").read_text())
    assert results["model_info"]["adapter"] == str((out / "adapter").resolve())


def test_kimi_finetune_resumes_after_kill_9_to_the_same_adapter(shims, tmp_path: Path) -> None:
    extra = ["--train-limit", "8", "--grad-accum", "1", "--epochs", "3", "--val-limit", "0", "--skip-eval"]
    ref, killed, step = kill_9_and_resume("kimi-audio", tmp_path, shims, extra)
    assert 3 <= step < 24
    a = load_file(ref / "adapter" / "adapter_model.safetensors")
    b = load_file(killed / "adapter" / "adapter_model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert losses(ref) == losses(killed)
