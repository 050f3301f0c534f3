"""LoRA beside a checkpoint's built-in adapters (Phi-4-multimodal's speech LoRA, Granite Speech's LLM LoRA):
ours is named apart and trains, theirs stays frozen and active in the policy and in the DPO reference, and the
saved adapter holds ours only."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from finetune.lora import (
    adapters_disabled,
    attach_lora,
    builtin_adapters,
    lora_targets,
    our_lora_names,
    trainable_parameters,
)
from finetune.settings import TrainSettings
from finetune.train import main
from harness.models.tiny import tiny_model

pytestmark = pytest.mark.usefixtures("one_torch_thread")

BUILTIN = {"phi-4-multimodal": ("speech", "default"), "granite-speech": ("default", "vocalgrad")}


def _logits(model: torch.nn.Module) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=torch.tensor([[5, 7, 11, 13, 17]])).logits.float()


@pytest.mark.parametrize("family", sorted(BUILTIN))
def test_ours_trains_beside_theirs(family: str) -> None:
    theirs, ours = BUILTIN[family]
    lm = tiny_model(family)
    lm.model.eval()
    assert builtin_adapters(lm.model) == {theirs}
    before = _logits(lm.model)
    frozen = {n: p.detach().clone() for n, p in lm.model.named_parameters() if "lora_" in n}
    settings = TrainSettings(model=f"tiny-{family}", category="volume", scope="all_linear", out="x")
    peft_model, names = attach_lora(lm, settings)
    lm.model.eval()  # the LoRA dropout PEFT just added starts in training mode
    assert names == lora_targets(lm, "all_linear")[1]
    assert not any(".base_layer" in n or ".lora_" in n for n in names)
    assert set(peft_model.peft_config) >= {theirs, ours}
    mine = set(our_lora_names(lm.model))
    assert mine and not mine & set(frozen)
    assert {n for n, p in lm.model.named_parameters() if p.requires_grad} == mine
    assert torch.equal(_logits(lm.model), before)  # ours starts at zero, theirs still on
    opt = torch.optim.SGD(trainable_parameters(lm.model), lr=1.0)  # built here, as the loop builds it
    # Theirs is active: switching every adapter off changes the outputs.
    from peft.tuners.tuners_utils import BaseTunerLayer

    layers = [m for m in lm.model.modules() if isinstance(m, BaseTunerLayer)]
    assert all(theirs in m.active_adapters for m in layers if theirs in m.lora_A)
    for m in layers:
        m.enable_adapters(False)
    assert not torch.allclose(_logits(lm.model), before)
    for m in layers:
        m.enable_adapters(True)

    for _ in range(2):
        loss = lm.model(input_ids=torch.tensor([[5, 7, 11, 13, 17]])).logits.float().pow(2).mean()
        assert math.isfinite(float(loss.detach()))
        loss.backward()
        opt.step()
        opt.zero_grad()
    params = dict(lm.model.named_parameters())
    assert [n for n, v in frozen.items() if not torch.equal(params[n], v)] == []  # theirs unchanged
    assert any(not torch.equal(p, torch.zeros_like(p)) for n, p in params.items() if n in mine and "lora_B" in n)
    trained = _logits(lm.model)
    assert not torch.allclose(trained, before)
    with adapters_disabled(lm.model):  # the reference: ours off, theirs on = the checkpoint as shipped
        assert torch.allclose(_logits(lm.model), before, atol=1e-6)
    assert torch.equal(_logits(lm.model), trained)
    assert all(theirs in m.active_adapters for m in layers if theirs in m.lora_A)


@pytest.mark.parametrize("family", sorted(BUILTIN))
def test_dpo_run_starts_at_ln2_and_saves_ours_only(family: str, tmp_path: Path) -> None:
    from safetensors import safe_open

    out = tmp_path / "run"
    assert main(["--model", f"tiny-{family}", "--category", "volume", "--source", "demo", "--scope", "all_linear",
                 "--max-steps", "2", "--skip-eval", "--objective", "dpo", "--out", str(out), "--num-workers", "0",
                 "--no-progress", "--val-limit", "2", "--train-limit", "4", "--grad-accum", "2"]) == 0
    info = json.loads((out / "training.json").read_text())
    assert abs(info["first_loss"] - math.log(2)) <= 1e-4  # reference = policy at step 0, theirs on in both
    assert math.isfinite(info["final_loss"])
    adapter = out / "adapter"
    assert {p.name for p in adapter.iterdir()} == {"adapter_config.json", "adapter_model.safetensors"}
    with safe_open(str(adapter / "adapter_model.safetensors"), "pt") as f:
        keys = list(f.keys())
    targets = info["lora"]["target_modules"]  # ours: 2 tensors per target, none of a built-in adapter
    assert sorted(keys) == sorted(f"base_model.model.{t}.lora_{x}.weight" for t in targets for x in "AB")
    config = json.loads((adapter / "adapter_config.json").read_text())
    assert config["base_model_name_or_path"] == f"tiny-{family}"


@pytest.mark.parametrize("family", sorted(BUILTIN))
def test_the_saved_adapter_evaluates_beside_theirs(family: str, tmp_path: Path) -> None:
    """`harness eval --adapter` on these models: ours loads under its own name and theirs stays active, so the
    evaluated model's outputs are the trained model's, not the trained LoRA on a model without its own."""
    from finetune.lora import save_adapter

    theirs, _ = BUILTIN[family]
    lm = tiny_model(family)
    settings = TrainSettings(model=f"tiny-{family}", category="volume", scope="all_linear", out="x")
    peft_model, _ = attach_lora(lm, settings)
    opt = torch.optim.SGD(trainable_parameters(lm.model), lr=1.0)
    lm.model.eval()
    for _ in range(2):
        lm.model(input_ids=torch.tensor([[5, 7, 11, 13, 17]])).logits.float().pow(2).mean().backward()
        opt.step()
        opt.zero_grad()
    trained = _logits(lm.model)
    save_adapter(peft_model, tmp_path / "adapter")

    fresh = tiny_model(family)
    shipped = _logits(fresh.model)
    fresh.load_adapter(str(tmp_path / "adapter"))
    assert not torch.allclose(trained, shipped)
    assert torch.allclose(_logits(fresh.model), trained, atol=1e-5)
    assert theirs in fresh.active_adapters and "vocalgrad" in fresh.active_adapters
