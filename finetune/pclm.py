"""Training VoxParadox's prompt-conditioned layer mixer (PCLM; the module itself is harness.models.pclm, shared
with evaluation) in stages, and which parameters each optimizer step trains.

    --method pclm --objective ce   stage 1 (steps < S): the mixer only (tapped layers' projectors + alpha MLP),
                                   LM frozen; stage 2 (steps >= S): the mixer and LoRA on the LM (--scope).
    --method pclm --objective dpo  (= --recipe pclm+dpo) stage 1 as above; then DPO trains LoRA only, the mixer
                                   frozen, against the same model with its LoRA off (the stage-1 model).
    --method lora                  every step trains LoRA (by --objective).

The encoder and the final layer's pretrained projector stay frozen throughout. S is --pclm-stage1-steps
(default: half of the steps, at least one). One optimizer holds every parameter that ever trains; a phase
freezes the others (requires_grad off, so they get no gradient and AdamW leaves them alone).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from harness.models import pclm
from harness.models.protocol import TrainableAudioLM

if TYPE_CHECKING:
    from peft import PeftModel

    from finetune.settings import TrainSettings

PCLM_PREFIX = "pclm."  # the mixer's tensors in a checkpoint's adapter file, beside the LoRA tensors
LM_PREFIX = "full-lm."  # the LM's own tensors there, under --full-finetune
STAGE1, STAGE2, LORA = "pclm-stage1", "pclm-stage2", "lora"


def attach_for_training(lm: TrainableAudioLM, settings: TrainSettings) -> pclm.LayerMixer | None:
    """The mixer of a --method pclm run, attached to lm (its init drawn from the already seeded RNG), else None.
    With --full-finetune the LM's own weights are made trainable too (the optimizer must hold them)."""
    if settings.method != "pclm":
        return None
    config = pclm.new_config(lm, taps=settings.pclm_taps, hidden=settings.pclm_hidden,
                             prompt_encoder=settings.prompt_encoder)
    mixer = pclm.attach(lm, config)
    mixer.requires_grad_(True)
    if settings.full_finetune:
        for p in lm_parameters(lm).values():
            p.requires_grad_(True)
    return mixer


def lm_parameters(lm: TrainableAudioLM) -> dict[str, torch.nn.Parameter]:
    """The LM weights full fine-tuning trains: every decoder parameter but the LoRA matrices and the input
    embeddings (frozen: they are the mixer's prompt embedding, and the head when tied), by state_dict name."""
    embeddings = lm.model.get_input_embeddings().weight
    prefix = lm.decoder_path + "."
    return {n: p for n, p in lm.model.named_parameters()
            if n.startswith(prefix) and "lora_" not in n and p is not embeddings}


@dataclass(frozen=True)
class Phases:
    """Which phase each optimizer step is in, and what it trains with which objective."""

    method: str
    objective: str
    stage1_steps: int  # 0 for --method lora
    full: bool = False  # stage 2 trains the whole LM instead of LoRA

    @classmethod
    def of(cls, settings: TrainSettings, total_steps: int) -> Phases:
        """The phases of a run of total_steps steps."""
        if settings.method != "pclm":
            return cls(settings.method, settings.objective, 0)
        s1 = settings.pclm_stage1_steps
        return cls(settings.method, settings.objective, max(1, total_steps // 2) if s1 is None else s1,
                   settings.full_finetune)

    def phase(self, step: int) -> str:
        """STAGE1 (mixer, CE), STAGE2 (mixer + LoRA; or LoRA alone by DPO), or LORA."""
        if self.method != "pclm":
            return LORA
        return STAGE1 if step < self.stage1_steps else STAGE2

    def objective_at(self, step: int) -> str:
        """Stage 1 always learns by cross-entropy; afterwards the run's objective."""
        return "ce" if self.phase(step) == STAGE1 else self.objective

    def set_trainable(self, step: int, lm: TrainableAudioLM, mixer: pclm.LayerMixer | None) -> None:
        """Freeze what step `step` does not train: LoRA (or the full LM) in stage 1, the mixer under DPO."""
        phase = self.phase(step)
        lm_on = phase != STAGE1
        for name, p in lm.model.named_parameters():
            if "lora_" in name:
                p.requires_grad_(lm_on and not self.full)
        if self.full:
            for p in lm_parameters(lm).values():
                p.requires_grad_(lm_on)
        if mixer is not None:
            mixer.requires_grad_(phase == STAGE1 or (phase == STAGE2 and self.objective == "ce"))


def _full_lm_state(lm: TrainableAudioLM, phases: Phases) -> dict[str, torch.Tensor]:
    return {k: v.detach() for k, v in lm_parameters(lm).items()} if phases.full else {}


def trainable_state(peft_model: PeftModel, mixer: pclm.LayerMixer | None, lm: TrainableAudioLM,
                    phases: Phases) -> dict[str, torch.Tensor]:
    """What a checkpoint keeps of the trained part: the LoRA tensors, the mixer's and the fully fine-tuned LM's
    (prefixed)."""
    from finetune.lora import adapter_state

    state = adapter_state(peft_model)
    if mixer is not None:
        state.update({PCLM_PREFIX + k: v for k, v in mixer.state_dict().items()})
    state.update({LM_PREFIX + k: v for k, v in _full_lm_state(lm, phases).items()})
    return state


def load_trainable_state(peft_model: PeftModel, mixer: pclm.LayerMixer | None, lm: TrainableAudioLM,
                         weights: dict[str, torch.Tensor]) -> None:
    """Put a checkpoint's trainable tensors (trainable_state) back."""
    from finetune.lora import load_adapter_state

    def part(prefix: str) -> dict[str, torch.Tensor]:
        return {k.removeprefix(prefix): v for k, v in weights.items() if k.startswith(prefix)}

    load_adapter_state(peft_model, {k: v for k, v in weights.items() if not k.startswith((PCLM_PREFIX, LM_PREFIX))})
    if mixer is not None:
        mixer.load_state_dict(part(PCLM_PREFIX))
    if full := part(LM_PREFIX):
        lm.model.load_state_dict(full, strict=False)


def saver(mixer: pclm.LayerMixer | None, lm: TrainableAudioLM, phases: Phases) -> Any:
    """What save_adapter writes beside the LoRA files: the mixer (and the fully fine-tuned LM); None for LoRA."""
    if mixer is None:
        return None

    def write(folder: Path) -> None:
        from safetensors.torch import save_file

        pclm.save(mixer, Path(folder))
        if full := _full_lm_state(lm, phases):
            save_file({k: v.contiguous().cpu() for k, v in full.items()}, str(Path(folder) / pclm.LM_WEIGHTS),
                      metadata={"format": "pt"})

    return write


def pclm_info(mixer: pclm.LayerMixer | None, phases: Phases, base_params: int) -> dict[str, Any] | None:
    """training.json's "pclm" entry: the mixer's config, its parameter count and share of the model, the stages."""
    if mixer is None:
        return None
    from dataclasses import asdict

    added = pclm.added_parameters(mixer)
    return {**asdict(mixer.config), "added_params": added, "added_share": added / base_params,
            "stage1_steps": phases.stage1_steps, "stage2_lm": "full" if phases.full else "lora",
            "prompt_embedding": (
                "the frozen LM's input-token embeddings, mean-pooled over the prompt's text tokens"
                if mixer.config.prompt_encoder == pclm.LM_EMBEDDINGS else
                f"sentence encoder {mixer.config.prompt_encoder}, mean-pooled")}
