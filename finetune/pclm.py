"""Training VoxParadox's prompt-conditioned layer mixer (PCLM; the module itself is harness.models.pclm, shared
with evaluation) in stages, and which parameters each optimizer step trains.

A run's stages come from its recipe (finetune.recipe: finetune/recipes/*.yaml), made concrete by
finetune.stages; Phases maps each optimizer step to its Stage (objective, rate, whether it trains the mixer
and/or the LLM). VoxParadox's (--recipe pclm+dpo):

    pclm-stage1   the mixer only (tapped layers' projectors + alpha MLP), LLM frozen, cross-entropy
    pclm-stage2   the LLM (LoRA on --scope, or every LLM weight and the head under full fine-tuning), the mixer
                  frozen (the paper's Fig. 5), cross-entropy
    dpo           the LLM, the mixer frozen, DPO against the stage-2 model as it was when DPO began

The encoder and the final layer's pretrained projector stay frozen throughout. One optimizer holds every
parameter that ever trains; a stage freezes the others (requires_grad off, so they get no gradient and AdamW
leaves them alone).

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

    from finetune.recipe import Recipe
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
    """The LM weights full fine-tuning trains: every decoder parameter and the LM head (the paper fine-tunes the
    full LLM), but the LoRA matrices and the input embeddings (frozen: they are the mixer's default prompt
    embedding; so is a head tied to them), by state_dict name."""
    embeddings = lm.model.get_input_embeddings().weight
    prefixes = (lm.decoder_path + ".", lm.lm_head_path + ".")
    return {n: p for n, p in lm.model.named_parameters()
            if n.startswith(prefixes) and "lora_" not in n and p is not embeddings}


@dataclass(frozen=True)
class Stage:
    """One stage of a run as planned: its optimizer steps [start, end), objective, rate, what it trains, its data."""

    name: str
    objective: str
    start: int
    end: int
    lr: float
    mixer: bool  # trains the mixer
    llm: bool  # trains the LLM (LoRA, or every weight when the run is full)
    data: str  # the recipe's name of its data set (DataDecl.describe)

    @property
    def steps(self) -> int:
        return self.end - self.start


@dataclass(frozen=True)
class Phases:
    """Which stage each optimizer step is in, and what it trains with which objective at which rate."""

    method: str
    objective: str
    stages: tuple[Stage, ...]
    full: bool = False  # the LLM stages train every LLM weight instead of LoRA

    @classmethod
    def build(cls, recipe: Recipe, lengths: list[int], full: bool) -> Phases:
        """The stages of a recipe with the given lengths in optimizer steps (a 0-step stage is left out)."""
        stages, start = [], 0
        for decl, n in zip(recipe.stages, lengths, strict=True):
            if n > 0:
                stages.append(Stage(decl.name, decl.objective, start, start + n, decl.lr, decl.trains_mixer,
                                    decl.trains_llm, decl.data.describe()))
                start += n
        return cls(recipe.method, "dpo" if recipe.has_dpo else "ce", tuple(stages), full)

    @property
    def total(self) -> int:
        return self.stages[-1].end if self.stages else 0

    def stage_at(self, step: int) -> Stage:
        """The stage step `step` belongs to (the last one past the end)."""
        return next((s for s in self.stages if step < s.end), self.stages[-1])

    def phase(self, step: int) -> str:
        """The stage's name: pclm-stage1 (mixer, CE), pclm-stage2 (LLM, CE), dpo, lora, or a recipe's own."""
        return self.stage_at(step).name

    def objective_at(self, step: int) -> str:
        return self.stage_at(step).objective

    @property
    def stage1_steps(self) -> int:
        """Steps before the first stage that trains the LLM (0 for --method lora)."""
        return next((s.start for s in self.stages if s.llm), self.total)

    @property
    def dpo_start(self) -> int | None:
        """The first DPO step, None without DPO."""
        return next((s.start for s in self.stages if s.objective == "dpo"), None)

    @property
    def stage2_end(self) -> int | None:
        """The first DPO step after a cross-entropy stage (DPO against the model those stages left), else None."""
        start = self.dpo_start
        return start if start is not None and start > 0 else None

    @property
    def lrs(self) -> tuple[float, ...]:
        return tuple(s.lr for s in self.stages)

    def set_trainable(self, step: int, lm: TrainableAudioLM, mixer: pclm.LayerMixer | None) -> None:
        """Freeze what step `step`'s stage does not train: the LLM (LoRA or every weight) and the mixer."""
        stage = self.stage_at(step)
        params = dict(lm.model.named_parameters())
        for name in our_lora_names(lm.model):  # a built-in adapter (Phi-4's, Granite's) never trains
            params[name].requires_grad_(stage.llm and not self.full)
        if self.full:
            for p in lm_parameters(lm).values():
                p.requires_grad_(stage.llm)
        if mixer is not None:
            mixer.requires_grad_(stage.mixer)

    def trainable_names(self, step: int, lm: TrainableAudioLM, mixer: pclm.LayerMixer | None) -> list[str]:
        """The parameter names step `step`'s stage trains (training.json's per-stage record)."""
        self.set_trainable(step, lm, mixer)
        return [n for n, p in lm.model.named_parameters() if p.requires_grad]


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


def reference_snapshot(lm: TrainableAudioLM, phases: Phases, initialised: bool = False) -> ReferenceSnapshot | None:
    """The snapshot DPO compares against, the model as DPO begins: after earlier stages (the stage-2 model), from
    an --init-adapter, or under full fine-tuning; the LoRA tensors, or the LM's (the mixer is frozen under DPO, so
    it is the reference's). None where the LoRA-off model is that model (DPO from a fresh LoRA), or no DPO."""
    if phases.dpo_start is None or not (phases.stage2_end is not None or initialised or phases.full):
        return None
    names = [] if phases.full else our_lora_names(lm.model)  # ours only: a built-in adapter never trains
    if phases.full:
        names = [n for n in lm_parameters(lm)]
    return ReferenceSnapshot(lm.model, names)


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
    """What save_adapter writes beside the LoRA files: the mixer and the fully fine-tuned LM; None for LoRA."""
    if mixer is None and not phases.full:
        return None

    def write(folder: Path) -> None:
        from safetensors.torch import save_file

        if mixer is not None:
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
            "stage2_end": phases.stage2_end, "stage_lrs": list(phases.lrs),
            "dpo_reference": None if phases.stage2_end is None else SNAPSHOT_REFERENCE.format("the stage-2 model"),
            "prompt_embedding": (
                "the frozen LM's input-token embeddings, mean-pooled over the prompt's text tokens of the whole "
                "chat template (not the paper's protocol: a BERT over the user's prompt)"
                if mixer.config.prompt_encoder == pclm.LM_EMBEDDINGS else
                f"BERT-style encoder {mixer.config.prompt_encoder} over the user's prompt text only, mean-pooled")}


SNAPSHOT_REFERENCE = ("{}: a snapshot of its trained tensors taken at the first DPO step, swapped in for each "
                      "reference pass (no second model in memory; built-in adapters stay active)")
