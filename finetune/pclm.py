"""Training VoxParadox's prompt-conditioned layer mixer (PCLM; the module itself is harness.models.pclm, shared
with evaluation) in stages, and which parameters each optimizer step trains.

    --method pclm --objective ce   stage 1 (steps < S1): the mixer only (tapped layers' projectors + alpha MLP),
                                   LM frozen; stage 2 (steps >= S1): the mixer and LoRA on the LM (--scope), or
                                   the whole LM (--full-finetune).
    --method pclm --objective dpo  (= --recipe pclm+dpo, VoxParadox's pipeline) stage 1 as above (steps < S1),
                                   stage 2 as above by cross-entropy (S1 <= steps < S2), then DPO (steps >= S2)
                                   on the stage-2 LM (LoRA or the whole LM), the mixer frozen, against the
                                   stage-2 model as it was when DPO began.
    --method lora                  every step trains LoRA (by --objective).

The encoder and the final layer's pretrained projector stay frozen throughout. S1 is --pclm-stage1-steps
(default: half of the steps; a third under DPO), S2 - S1 --pclm-stage2-steps (default: a third). One optimizer
holds every parameter that ever trains; a phase freezes the others (requires_grad off, so they get no gradient
and AdamW leaves them alone). Learning rates per stage: --pclm-lr for both PCLM stages, --dpo-lr for DPO (the
paper's 5e-5 and 5e-7).

DPO's reference is an *adapter snapshot*, not a frozen copy of the model: at the first DPO step the trainable
tensors (LoRA, or the fully fine-tuned LM weights) are copied, and each reference pass swaps that copy in under
no_grad. It costs the trained part's memory (a LoRA's few MB) instead of a second 7B model, and it keeps the
model's own built-in adapters (Phi-4's speech LoRA, Granite's) active, which switching adapters off would not.
The snapshot is saved in every checkpoint, so a resumed run compares against the same reference.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from finetune.lora import our_lora_names
from harness.models import pclm
from harness.models.protocol import TrainableAudioLM

if TYPE_CHECKING:
    from peft import PeftModel

    from finetune.settings import TrainSettings

PCLM_PREFIX = "pclm."  # the mixer's tensors in a checkpoint's adapter file, beside the LoRA tensors
LM_PREFIX = "full-lm."  # the LM's own tensors there, under --full-finetune
STAGE1, STAGE2, DPO, LORA = "pclm-stage1", "pclm-stage2", "dpo", "lora"
REFERENCE_PREFIX = "dpo-reference."  # the DPO reference snapshot's tensors in a checkpoint


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
    stage2_end: int | None = None  # --objective dpo: the first DPO step
    lrs: tuple[float, float, float] | None = None  # --method pclm: stage 1's, stage 2's and DPO's rates

    @classmethod
    def of(cls, settings: TrainSettings, total_steps: int) -> Phases:
        """The phases of a run of total_steps steps."""
        if settings.method != "pclm":
            return cls(settings.method, settings.objective, 0)
        s1, s2 = settings.pclm_stage1_steps, settings.pclm_stage2_steps
        lrs = (settings.pclm_lr, settings.pclm_lr, settings.dpo_lr)
        if settings.objective != "dpo":
            return cls(settings.method, settings.objective, max(1, total_steps // 2) if s1 is None else s1,
                       settings.full_finetune, lrs=lrs)
        third = max(1, total_steps // 3)
        s1 = third if s1 is None else s1
        return cls(settings.method, settings.objective, s1, settings.full_finetune,
                   s1 + (third if s2 is None else s2), lrs)

    def phase(self, step: int) -> str:
        """STAGE1 (mixer, CE), STAGE2 (mixer + LM, CE), DPO (the LM against the stage-2 model), or LORA."""
        if self.method != "pclm":
            return LORA
        if step < self.stage1_steps:
            return STAGE1
        return DPO if self.stage2_end is not None and step >= self.stage2_end else STAGE2

    def objective_at(self, step: int) -> str:
        """Both PCLM stages learn by cross-entropy; DPO (and --method lora) by the run's objective."""
        return "ce" if self.phase(step) in (STAGE1, STAGE2) else self.objective

    def lr_at(self, step: int, base: float) -> float:
        """The learning rate of step `step`'s stage (`base`, --lr, for --method lora)."""
        if self.lrs is None:
            return base
        return self.lrs[(STAGE1, STAGE2, DPO).index(self.phase(step))]

    def set_trainable(self, step: int, lm: TrainableAudioLM, mixer: pclm.LayerMixer | None) -> None:
        """Freeze what step `step` does not train: LoRA (or the full LM) in stage 1, the mixer under DPO."""
        phase = self.phase(step)
        lm_on = phase != STAGE1
        params = dict(lm.model.named_parameters())
        for name in our_lora_names(lm.model):  # a built-in adapter (Phi-4's, Granite's) never trains
            params[name].requires_grad_(lm_on and not self.full)
        if self.full:
            for p in lm_parameters(lm).values():
                p.requires_grad_(lm_on)
        if mixer is not None:
            mixer.requires_grad_(phase in (STAGE1, STAGE2))


class ReferenceSnapshot:
    """DPO's reference: the named trainable tensors as they were when DPO began, swapped in for reference passes."""

    def __init__(self, model: torch.nn.Module, names: list[str]) -> None:
        self.params = dict(model.named_parameters())
        self.names = names
        self.saved: dict[str, torch.Tensor] | None = None

    def take(self) -> None:
        """Copy the tensors now (the first DPO step: the model is the stage-2 model)."""
        self.saved = {n: self.params[n].detach().clone() for n in self.names}

    def load(self, weights: dict[str, torch.Tensor]) -> None:
        """A checkpoint's snapshot (REFERENCE_PREFIX stripped); nothing when it held none."""
        if weights:
            self.saved = {n: weights[n].to(self.params[n].device, self.params[n].dtype) for n in self.names}

    def state(self) -> dict[str, torch.Tensor]:
        return {} if self.saved is None else {REFERENCE_PREFIX + k: v for k, v in self.saved.items()}

    @contextmanager
    def swapped_in(self) -> Iterator[None]:
        """The model with the snapshot's tensors; the policy's put back after (also on an error)."""
        if self.saved is None:
            raise RuntimeError("DPO reference snapshot used before it was taken")
        current = {n: self.params[n].detach().clone() for n in self.names}
        with torch.no_grad():
            for n in self.names:
                self.params[n].copy_(self.saved[n])
        try:
            yield
        finally:
            with torch.no_grad():
                for n in self.names:
                    self.params[n].copy_(current[n])


def reference_snapshot(lm: TrainableAudioLM, phases: Phases) -> ReferenceSnapshot | None:
    """The snapshot a three-stage run's DPO compares against (None without a DPO stage after PCLM): the LoRA
    tensors and, under --full-finetune, the LM's (the mixer is frozen under DPO, so it is the reference's)."""
    if phases.stage2_end is None:
        return None
    names = [] if phases.full else our_lora_names(lm.model)  # ours only: a built-in adapter never trains
    if phases.full:
        names = [n for n in lm_parameters(lm)]
    return ReferenceSnapshot(lm.model, names)


def stage_records(log: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """training.json's "stages": each phase's name, objective, learning rate, steps, first and last loss."""
    stages: list[dict[str, Any]] = []
    for entry in log:
        if not stages or stages[-1]["name"] != entry["phase"]:
            stages.append({"name": entry["phase"], "objective": entry["objective"], "lr": entry["lr"], "steps": 0,
                           "first_loss": entry["loss"]})
        stages[-1]["steps"] += 1
        stages[-1]["last_loss"] = entry["loss"]
    return stages


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

    load_adapter_state(peft_model, {k: v for k, v in weights.items()
                                    if not k.startswith((PCLM_PREFIX, LM_PREFIX, REFERENCE_PREFIX))})
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
            "stage2_end": phases.stage2_end, "stage_lrs": list(phases.lrs or ()),
            "dpo_reference": None if phases.stage2_end is None else (
                "the stage-2 model: a snapshot of its trained tensors taken at the first DPO step, swapped in "
                "for each reference pass (no second model in memory; built-in adapters stay active)"),
            "prompt_embedding": (
                "the frozen LM's input-token embeddings, mean-pooled over the prompt's text tokens"
                if mixer.config.prompt_encoder == pclm.LM_EMBEDDINGS else
                f"sentence encoder {mixer.config.prompt_encoder}, mean-pooled")}
