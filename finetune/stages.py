"""A run's recipe (finetune.recipe) made concrete: each stage's data and length, the micro-batch plan over all
stages, whether the LLM stages fine-tune every weight or LoRA, the --init-adapter starting point, and the
per-stage record in training.json.

Each stage runs over its own data set for its own length (its declared steps, else its epochs over its data;
--max-steps caps each stage), with its own epoch orders (seed + stage index) and its own learning-rate
schedule (warm-up and decay restart per stage).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from finetune.data import MicroBatch, StepCounts, TrainingData, plan_steps, steps_per_epoch
from finetune.pclm import Phases, lm_parameters
from finetune.recipe import Recipe, StageDecl

if TYPE_CHECKING:
    from peft import PeftModel

    from finetune.settings import TrainSettings
    from harness.models.pclm import LayerMixer
    from harness.models.protocol import TrainableAudioLM

NOT_PAPER = "not the paper's protocol"


def stage_data(recipe: Recipe, data: TrainingData) -> list[TrainingData]:
    """Each stage's data set: the run's training data, or the set its recipe names (built in data.sets)."""
    return [data if s.data.describe() == "train" else data.sets[s.data.describe()] for s in recipe.stages]


def stage_length(settings: TrainSettings, decl: StageDecl, data: TrainingData) -> StepCounts:
    """A stage's optimizer steps: its declared steps, else its epochs (default --epochs) over its data; at most
    --max-steps."""
    n = len(data.train_ids)
    per_epoch = steps_per_epoch(n, settings.examples_per_step)
    total = decl.steps if decl.steps is not None else per_epoch * (decl.epochs or settings.epochs)
    if settings.max_steps is not None:
        total = min(total, settings.max_steps)
    return StepCounts(n, settings.examples_per_step, per_epoch, total)


@dataclass(frozen=True)
class StagedSteps:
    """The optimizer steps of every stage in order (StepCounts' interface over the whole run)."""

    counts: tuple[StepCounts, ...]  # the non-empty stages'
    starts: tuple[int, ...]

    @classmethod
    def of(cls, counts: list[StepCounts]) -> StagedSteps:
        kept = tuple(c for c in counts if c.total > 0)
        starts = tuple(sum(c.total for c in kept[:i]) for i in range(len(kept)))
        return cls(kept, starts)

    @property
    def total(self) -> int:
        return sum(c.total for c in self.counts)

    @property
    def examples_per_step(self) -> int:
        return self.counts[0].examples_per_step

    @property
    def per_epoch(self) -> int:
        return self.counts[0].per_epoch

    @property
    def n_train(self) -> int:
        return self.counts[0].n_train

    def stage_index(self, step: int) -> int:
        return max(i for i, s in enumerate(self.starts) if s <= step)

    def clips(self, step: int) -> int:
        """How many clips optimizer step `step` takes (of its stage's data)."""
        i = self.stage_index(step)
        return self.counts[i].clips(step - self.starts[i])


@dataclass(frozen=True)
class RunPlan:
    """The concrete stages: the recipe, the phases (steps per stage), the counts and each kept stage's data."""

    recipe: Recipe
    phases: Phases
    steps: StagedSteps
    data: tuple[TrainingData, ...]  # per kept (non-empty) stage


def run_plan(settings: TrainSettings, data: TrainingData, full: bool) -> RunPlan:
    """The run's stages from its recipe and data; full: the LLM stages train every weight."""
    from finetune.recipe import run_recipe

    recipe = run_recipe(settings)
    datas = stage_data(recipe, data)
    counts = [stage_length(settings, d, x) for d, x in zip(recipe.stages, datas, strict=True)]
    if not any(c.total for c in counts):
        raise ValueError(f"recipe {recipe.name}: every stage has 0 steps")
    phases = Phases.build(recipe, [c.total for c in counts], full)
    kept = tuple(x for x, c in zip(datas, counts, strict=True) if c.total > 0)
    return RunPlan(recipe, phases, StagedSteps.of(counts), kept)


def plan_micro_batches(settings: TrainSettings, plan: RunPlan, *, rank: int, world_size: int,
                       start_step: int) -> list[MicroBatch]:
    """This process's micro-batches of every stage from start_step on (stage k's orders drawn from seed + k)."""
    out: list[MicroBatch] = []
    for k, (stage, data) in enumerate(zip(plan.phases.stages, plan.data, strict=True)):
        local = max(0, start_step - stage.start)
        if local >= stage.steps:
            continue
        part = plan_steps(data.train_ids, seed=settings.seed + k, examples_per_step=settings.examples_per_step,
                          micro_batch=settings.batch_size, rank=rank, world_size=world_size, start_step=local,
                          total_steps=stage.steps)
        out += [replace(mb, step=mb.step + stage.start, stage=k) for mb in part]
    return out


def lr_lambda(settings: TrainSettings, phases: Phases,
              schedule: Callable[[TrainSettings, int], Callable[[int], float]]) -> Callable[[int], float]:
    """The absolute learning rate at each optimizer step (AdamW's base rate is 1): the stage's rate times its
    own schedule (warm-up, then constant, linear or cosine over the stage)."""
    per_stage = {s.name: schedule(settings, s.steps) for s in phases.stages}

    def rate(step: int) -> float:
        stage = phases.stage_at(step)
        return stage.lr * per_stage[stage.name](step - stage.start)

    return rate


# ---- full fine-tuning or LoRA ------------------------------------------------------------------------------
def free_bytes(device: torch.device) -> int:
    """Memory free on the model's device now (CUDA: the driver's count; CPU: available physical pages)."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))


def full_fits(lm: TrainableAudioLM, recipe: Recipe) -> tuple[bool, str]:
    """Whether the device holds full fine-tuning of the LLM: its gradients and AdamW's two moments (and DPO's
    reference snapshot), in the weights' dtype, under 90 % of the free memory; (fits, the numbers in words)."""
    params = list(lm_parameters(lm).values())
    n = sum(p.numel() for p in params)
    copies = 3 + int(recipe.has_dpo)
    need = n * params[0].element_size() * copies if params else 0
    free = free_bytes(params[0].device) if params else 0
    return need < 0.9 * free, f"{n:,} LLM weights need ~{need / 2**30:.1f} GiB more, {free / 2**30:.1f} GiB free"


def resolve_full(settings: TrainSettings, recipe: Recipe, lm: TrainableAudioLM) -> tuple[bool, str]:
    """(whether the LLM stages train every weight, why): --full-finetune / --no-full-finetune, else the recipe's
    `llm` (full only where the device holds it)."""
    if settings.full_finetune is not None:
        return settings.full_finetune, "--full-finetune" if settings.full_finetune else "--no-full-finetune"
    if recipe.llm != "full":
        return False, f"recipe {recipe.name}: llm lora"
    fits, words = full_fits(lm, recipe)
    return fits, f"recipe {recipe.name}: llm full; {words}" + ("" if fits else ": LoRA instead")


def deviations(settings: TrainSettings, recipe: Recipe, phases: Phases, mixer: LayerMixer | None) -> list[str]:
    """What of a PCLM run is not VoxParadox's protocol (training.json, the card, the adapter's evaluations)."""
    if mixer is None and recipe.method != "pclm":
        return []
    from harness.models.pclm import LM_EMBEDDINGS

    out = []
    if not phases.full and any(s.llm for s in phases.stages):
        out.append(f"LLM stages trained by LoRA rank {settings.lora_r} ({settings.scope}), not full fine-tuning")
    if mixer is not None and mixer.config.prompt_encoder == LM_EMBEDDINGS:
        out.append("prompt embedding: the LM's mean-pooled token embeddings, not a BERT over the user's prompt")
    return out


def make_trainable(lm: TrainableAudioLM, full: bool) -> None:
    """Full fine-tuning: the LLM's weights join what the optimizer holds (a stage freezes what it does not train)."""
    if full:
        for p in lm_parameters(lm).values():
            p.requires_grad_(True)


# ---- --init-adapter ----------------------------------------------------------------------------------------
def load_init_adapter(settings: TrainSettings, lm: TrainableAudioLM, peft_model: PeftModel) -> LayerMixer | None:
    """Put a trained adapter's tensors in place before step 0: its LoRA (same rank, alpha and targets as this
    run's), its fully fine-tuned LM weights and its PCLM (attached; returned). ValueError naming the file when
    it does not fit."""
    from peft.utils import load_peft_weights

    from finetune.lora import load_adapter_state, lora_targets
    from harness.models import pclm

    folder = Path(str(settings.init_adapter))
    config_path = folder / "adapter_config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    pattern, _ = lora_targets(lm, settings.scope, settings.include_audio_tower)
    mine = {"r": settings.lora_r, "lora_alpha": settings.lora_alpha, "target_modules": pattern}
    if diff := [k for k, v in mine.items() if config.get(k) != v]:
        raise ValueError(f"{config_path}: its LoRA differs from this run's in {', '.join(diff)} (give the same "
                         "--lora-r, --lora-alpha, --scope)")
    load_adapter_state(peft_model, load_peft_weights(str(folder), device="cpu"))
    return pclm.attach_saved(lm, folder)  # also the fine-tuned LM weights saved beside the LoRA


# ---- training.json -----------------------------------------------------------------------------------------
def stage_records(plan: RunPlan, log: list[dict[str, Any]], trainable: dict[str, list[str]]) -> list[dict[str, Any]]:
    """training.json's "stages": each stage's name, objective, data, learning rate, steps, trainable parameter
    names, first and last loss."""
    from finetune.record import set_info

    out = []
    for stage, data in zip(plan.phases.stages, plan.data, strict=True):
        losses = [e["loss"] for e in log if stage.start < e["step"] <= stage.end]
        names = trainable.get(stage.name, [])
        out.append({"name": stage.name, "objective": stage.objective, "lr": stage.lr, "steps": stage.steps,
                    "first_step": stage.start + 1, "data": {"declared": stage.data, **set_info(data)},
                    "trains": [*(["mixer"] if stage.mixer else []), *(["llm"] if stage.llm else [])],
                    "n_trainable_params": len(names), "trainable_params": names,
                    "first_loss": losses[0] if losses else float("nan"),
                    "last_loss": losses[-1] if losses else float("nan")})
    return out
