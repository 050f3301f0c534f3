"""Step-Audio 2 mini LoRA fine-tuning, adapters and option scoring through its runtime (a small fake of
stepaudio2.StepAudio2 and its causal LM with encoder and adapter; tests/helpers/fake_runtimes.py).

The expectation is computed here: the assistant turn "<|BOT|>assistant\\n{label}<|EOT|>" tokenized by the fake's
tokenizer, the LM's logits, and the cross-entropy of the label token and <|EOT|> (the positions at or after the
prompt's length) with torch.nn.functional.
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
SPECIALS = fake_runtimes.STEP_SPECIALS


def word_id(word: str) -> int:
    return len(SPECIALS) + zlib.crc32(word.encode()) % (fake_runtimes.STEP_VOCAB - len(SPECIALS))


def _prompt() -> Prompt:
    x = 0.3 * np.sin(np.arange(9600) / 5) * np.linspace(1, 0.1, 9600)
    return Prompt((QUESTION, AudioClip(x.astype(np.float32), 16000)), clip_id="s1")


def hand_loss(runtime, prompt: Prompt, answer: str, folder: Path) -> float:
    """Human turn (text, audio), then the assistant's label turn; CE of the label and <|EOT|> from the positions
    before them."""
    path = wav_of(prompt.audios[0], folder, "hand")
    text = next(s for s in prompt.segments if isinstance(s, str))
    human = {"role": "human", "content": [{"type": "text", "text": text}, {"type": "audio", "audio": path}]}
    chunks, mels = runtime.apply_chat_template([human, {"role": "assistant", "content": answer}])
    assert chunks[-1] == f"<|BOT|>assistant\n{answer}<|EOT|>"
    ids = torch.cat([runtime.llm_tokenizer(text=c)["input_ids"] for c in chunks], dim=-1)
    wavs, lens = fake_runtimes.padding_mels(mels)
    with torch.no_grad():
        logits = runtime.llm(input_ids=ids, wavs=wavs, wav_lens=lens).logits
    n = ids.shape[1]
    assert ids[0, -2:].tolist() == [word_id(answer), SPECIALS.index("<|EOT|>")]
    return float(F.cross_entropy(logits[0, [n - 3, n - 2]], ids[0, [n - 2, n - 1]]))


def test_step_finetune_loss_masks_the_prompt_and_trains_label_and_eot(shims, tmp_path: Path) -> None:
    lm = get_model("step-audio-2-mini", trust_remote_code=True)
    prompt = _prompt()
    inputs = lm.training_inputs([prompt], ["decrease"])
    (batch,) = inputs["rows"]
    assert batch["input_ids"].shape[1] == batch["prompt_token_count"] + 2  # the label and <|EOT|> follow the prompt
    loss = runtime_losses(lm)(lm.model, inputs, False).detach()
    assert float(loss[0]) == pytest.approx(hand_loss(lm.runtime, prompt, "decrease", tmp_path), rel=1e-6)


def test_step_finetune_all_linear_scope_includes_encoder_and_adapter(shims, tmp_path: Path) -> None:
    lm = get_model("step-audio-2-mini", trust_remote_code=True)
    settings = TrainSettings(model="step-audio-2-mini", category="volume", scope="all_linear", out=str(tmp_path))
    targets = runtime_lora(lm, settings).targets
    assert targets == sorted(n for n, m in fake_runtimes.StepLLM().named_modules() if isinstance(m, torch.nn.Linear))
    assert {"encoder.blocks.0", "adapter.linear1", "lm_head"} <= set(targets)


def test_step_finetune_cli_first_loss_is_the_hand_computed_one_and_the_adapter_reloads(shims, tmp_path: Path) -> None:
    out = tmp_path / "run"
    argv = cli_args("step-audio-2-mini", out, "--train-limit", "2", "--grad-accum", "2", "--epochs", "3",
                    "--val-limit", "0", "--skip-eval")
    assert main(argv) == 0
    prompts, answers = training_prompts(argv)
    runtime = fake_runtimes.StepAudio2("x")
    want = np.mean([hand_loss(runtime, p, a, tmp_path) for p, a in zip(prompts, answers, strict=True)])
    log = losses(out)
    assert log[0] == pytest.approx(want, rel=1e-6) and log[-1] < log[0]
    assert json.loads((out / "adapter" / "adapter_config.json").read_text())["task_type"] == "CAUSAL_LM"
    base = get_model("step-audio-2-mini", trust_remote_code=True)
    tuned = get_model("step-audio-2-mini", trust_remote_code=True, adapter=str(out))
    choices = ("increase", "decrease")
    assert not np.allclose(base.score_choices(prompts, choices), tuned.score_choices(prompts, choices))
    # the reloaded adapter is the trained one: its loss on the training clips is below the base model's
    with torch.no_grad():
        tuned_loss = float(runtime_losses(tuned)(tuned.model, tuned.training_inputs(prompts, answers), False).mean())
    assert tuned_loss < log[0] - 0.1


def test_step_finetune_resumes_after_kill_9_to_the_same_adapter(shims, tmp_path: Path) -> None:
    extra = ["--train-limit", "8", "--grad-accum", "1", "--epochs", "3", "--val-limit", "0", "--skip-eval"]
    ref, killed, step = kill_9_and_resume("step-audio-2-mini", tmp_path, shims, extra)
    assert 3 <= step < 24
    a = load_file(ref / "adapter" / "adapter_model.safetensors")
    b = load_file(killed / "adapter" / "adapter_model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert losses(ref) == losses(killed)
