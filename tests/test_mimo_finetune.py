"""MiMo-Audio LoRA fine-tuning, adapters and option scoring through its runtime (a small fake of
src.mimo_audio.mimo_audio.MimoAudio and MiMoAudioForCausalLM; tests/helpers/fake_runtimes.py).

The expectation is computed here: the SFT prompt plus the answer segment "{label}<|im_end|>\\n" as the fake's ids,
one text token per group of four, lm_head over the decoder's last hidden state per group, and the cross-entropy
of the answer's three groups (label, <|im_end|>, newline) with torch.nn.functional.
"""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file

from finetune.runtimes import runtime_lora, runtime_losses
from finetune.settings import TrainSettings
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
QUESTION = "Does the volume increase or decrease over time?"
SPECIALS = fake_runtimes.MIMO_SPECIALS
GROUP = fake_runtimes.GROUP


def word_id(word: str) -> int:
    return len(SPECIALS) + zlib.crc32(word.encode()) % (fake_runtimes.MIMO_VOCAB - len(SPECIALS))


def _prompt() -> Prompt:
    x = 0.3 * np.sin(np.arange(12000) / 5) * np.linspace(0.1, 1, 12000)
    return Prompt((QUESTION, AudioClip(x.astype(np.float32), 24000)), clip_id="m1")


def hand_loss(runtime, prompt: Prompt, answer: str, folder: Path) -> float:
    """The prompt's and the answer's ids, the text logits per group, CE of the last three groups' text tokens."""
    path = wav_of(prompt.audios[0], folder, "hand")
    text = next(s for s in prompt.segments if isinstance(s, str))
    ids = runtime.get_audio_understanding_sft_prompt(path, text, thinking=False)
    answer_ids = runtime.get_input_ids([fake_runtimes.InputSegment(text=f"{answer}<|im_end|>\n")])
    full = torch.cat([ids, answer_ids], dim=1)  # (1 + channels, T)
    groups = full.shape[1] // GROUP
    text_groups = full[0, ::GROUP]
    want = [word_id(answer), SPECIALS.index("<|im_end|>"), word_id("\n")]
    assert text_groups[-3:].tolist() == want and ids.shape[1] == (groups - 3) * GROUP
    model = runtime.model
    with torch.no_grad():
        hidden = model.model(inputs_embeds=model._prepare_input_embeds(full.unsqueeze(0))).last_hidden_state
        logits = model.lm_head(hidden)[0]
    rows = [groups - 4, groups - 3, groups - 2]
    return float(F.cross_entropy(logits[rows], torch.tensor(want)))


def test_mimo_finetune_loss_is_the_text_groups_masked_cross_entropy(shims, tmp_path: Path) -> None:
    lm = get_model("mimo-audio")
    prompt = _prompt()
    inputs = lm.training_inputs([prompt], ["increase"])
    loss = runtime_losses(lm)(lm.model, inputs, False).detach()
    assert float(loss[0]) == pytest.approx(hand_loss(lm.runtime, prompt, "increase", tmp_path), rel=1e-6)


def test_mimo_finetune_all_linear_scope_is_the_model_without_the_audio_tokenizer(shims, tmp_path: Path) -> None:
    lm = get_model("mimo-audio")
    settings = TrainSettings(model="mimo-audio", category="volume", scope="all_linear", out=str(tmp_path))
    targets = runtime_lora(lm, settings).targets
    assert targets == sorted(n for n, m in fake_runtimes.MiMoModel().named_modules() if isinstance(m, torch.nn.Linear))
    assert {"lm_head", "speech_group_downcast", "local_transformer_lm_heads.0"} <= set(targets)
    assert not any("audio_tokenizer" in t for t in targets)


def test_mimo_finetune_cli_first_loss_is_the_hand_computed_one_and_the_adapter_reloads(shims, tmp_path: Path) -> None:
    out = tmp_path / "run"
    argv = cli_args("mimo-audio", out, "--train-limit", "2", "--grad-accum", "2", "--epochs", "3", "--val-limit", "0",
                    "--skip-eval")
    assert main(argv) == 0
    prompts, answers = training_prompts(argv)
    runtime = fake_runtimes.MimoAudio("x", "y")
    want = np.mean([hand_loss(runtime, p, a, tmp_path) for p, a in zip(prompts, answers, strict=True)])
    log = losses(out)
    assert log[0] == pytest.approx(want, rel=1e-6) and log[-1] < log[0]
    base, tuned = get_model("mimo-audio"), get_model("mimo-audio", adapter=str(out))
    choices = ("increase", "decrease")
    assert not np.allclose(base.score_choices(prompts, choices), tuned.score_choices(prompts, choices))
    # the reloaded adapter is the trained one: its loss on the training clips is below the base model's
    with torch.no_grad():
        tuned_loss = float(runtime_losses(tuned)(tuned.model, tuned.training_inputs(prompts, answers), False).mean())
    assert tuned_loss < log[0] - 0.1


def test_mimo_finetune_resumes_after_kill_9_to_the_same_adapter(shims, tmp_path: Path) -> None:
    extra = ["--train-limit", "8", "--grad-accum", "1", "--epochs", "3", "--val-limit", "0", "--skip-eval"]
    ref, killed, step = kill_9_and_resume("mimo-audio", tmp_path, shims, extra)
    assert 3 <= step < 24
    a = load_file(ref / "adapter" / "adapter_model.safetensors")
    b = load_file(killed / "adapter" / "adapter_model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert losses(ref) == losses(killed)
