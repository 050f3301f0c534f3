"""The training loop: LoRA attached, AdamW and its schedule, resume from the newest checkpoint, one optimizer
step after another (micro-batches accumulated over processes), checkpoints, validation and the written run.

The order of every seeded or random operation is part of the result: a resumed run and an uninterrupted
one draw the same numbers at the same step, so they end with the same adapter.
"""

from __future__ import annotations

import json
import math
import shutil
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from finetune import checkpoint
from finetune.data import MicroBatch, StepRows, TrainingData
from finetune.evaluate import evaluate_clips
from finetune.lora import (
    attach_lora,
    base_parameter_count,
    save_adapter,
    set_activation_checkpointing,
    trainable_parameters,
)
from finetune.mixture import VALIDATION
from finetune.objective import AnswerTask, answer_losses, keeps_logits, pair_dpo_losses
from finetune.pclm import (
    DPO,
    REFERENCE_PREFIX,
    SNAPSHOT_REFERENCE,
    Phases,
    ReferenceSnapshot,
    attach_for_training,
    load_trainable_state,
    pclm_info,
    reference_snapshot,
    saver,
    trainable_state,
)
from finetune.record import training_record, write_training_record
from finetune.runtimes import runtime_losses
from finetune.settings import ADAPTER_DIR, TRAIN_LOG, TrainSettings, check_resumable
from finetune.stages import (
    RunPlan,
    StagedSteps,
    deviations,
    load_init_adapter,
    lr_lambda,
    make_trainable,
    plan_micro_batches,
    resolve_full,
    run_plan,
    stage_records,
)
from harness.data import BenchRow
from harness.models.pclm import PROTOCOL_FILE
from harness.models.protocol import TrainableAudioLM
from harness.results import write_jsonl
from vocalgrad_dataset.fileio import atomic_write_text
from vocalgrad_dataset.progress import progress

METHOD_LABELS = {"lora": "LoRA", "pclm": "PCLM"}  # progress-line prefix per --method

if TYPE_CHECKING:
    from accelerate import Accelerator
    from peft import PeftModel

    from harness.models.pclm import LayerMixer


def lr_factor(settings: TrainSettings, total_steps: int) -> Callable[[int], float]:
    """The learning-rate multiplier at each optimizer step of a stage of total_steps steps: linear warm-up, then
    constant, linear or cosine (finetune.stages.lr_lambda multiplies it by the stage's rate)."""
    warm = settings.warmup_steps

    def schedule(step: int) -> float:
        if warm and step < warm:
            return (step + 1) / warm
        if settings.lr_scheduler == "constant":
            return 1.0
        frac = (step - warm) / max(1, total_steps - warm)
        return max(0.0, 1.0 - frac) if settings.lr_scheduler == "linear" else 0.5 * (1 + math.cos(math.pi * frac))

    return schedule


@dataclass
class Optimization:
    """What an optimizer step updates and how: the trainable parameters, AdamW and its schedule."""

    trainable: list[torch.nn.Parameter]
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LambdaLR

    @classmethod
    def of(cls, model: torch.nn.Module, settings: TrainSettings, phases: Phases) -> Optimization:
        """AdamW over the model's trainable parameters with each stage's rate and schedule and the settings' decay
        (its base rate is 1: the schedule gives the absolute rate)."""
        trainable = trainable_parameters(model)
        optimizer = torch.optim.AdamW(trainable, lr=1.0, weight_decay=settings.weight_decay)
        rate = lr_lambda(settings, phases, lr_factor)
        return cls(trainable, optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, rate))


def new_state(settings: TrainSettings) -> dict[str, Any]:
    """The loop state of a run at step 0 (what a checkpoint's state.json holds)."""
    return {"step": 0, "seed": settings.seed, "fingerprint": settings.fingerprint(), "log": []}


def resume(settings: TrainSettings, lm: TrainableAudioLM, peft_model: PeftModel, mixer: LayerMixer | None,
           opt: Optimization, acc: Accelerator, out: Path, total_steps: int,
           reference: ReferenceSnapshot | None = None) -> dict[str, Any]:
    """The loop state to continue from: the newest usable checkpoint's (its adapter and PCLM, optimizer,
    scheduler and this process's RNG restored), else a fresh one."""
    ckpt = checkpoint.latest(out)
    if ckpt is None:
        return new_state(settings)
    check_resumable(checkpoint.read_state(ckpt)["fingerprint"], settings, out)
    weights, state = checkpoint.load(ckpt, optimizer=opt.optimizer, scheduler=opt.scheduler, rank=acc.process_index)
    load_trainable_state(peft_model, mixer, lm, weights)
    if reference is not None:  # DPO had begun: its reference is the stage-2 model saved then, not today's policy
        reference.load({k.removeprefix(REFERENCE_PREFIX): v for k, v in weights.items()
                        if k.startswith(REFERENCE_PREFIX)})
    if acc.is_main_process:
        print(f"resuming {out} from {ckpt.name} (step {state['step']} of {total_steps})")
    return state


def _identity(item: Any) -> Any:
    return item  # the rows stay numpy: the processor, not DataLoader's collate, makes tensors


def step_loader(settings: TrainSettings, run: RunPlan, acc: Accelerator,
                start_step: int) -> torch.utils.data.DataLoader:
    """This process's micro-batches of every stage from start_step on, rendered (and augmented) by DataLoader
    workers with their stage's renderer."""
    augment = None
    if settings.augment:
        from finetune.augment import build_augmenter

        augment = build_augmenter(settings.category, settings.seed)
    plan = plan_micro_batches(settings, run, rank=acc.process_index, world_size=acc.num_processes,
                              start_step=start_step)
    # Its own generator: iterating a DataLoader draws a worker seed, which from the global generator would
    # shift every later dropout mask by one draw in a resumed run (the original drew it at step 0).
    return torch.utils.data.DataLoader(StepRows([d.renderer for d in run.data], plan, augment), batch_size=None,
                                       shuffle=False,
                                       num_workers=settings.num_workers if plan else 0, collate_fn=_identity,
                                       generator=torch.Generator().manual_seed(settings.seed))


def disable_dropout(model: torch.nn.Module) -> None:
    """Dropout off, as TRL's DPOTrainer does by default (disable_dropout): else the policy's pass draws masks
    the reference's does not, and DPO would not start at ln 2 once stage 2 has moved the LoRA."""
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0


@dataclass
class Stepper:
    """Runs the optimizer steps: each micro-batch's forward and backward, then at a step's last one the
    gradient clip, the update, the log entry and (every save_every steps) a checkpoint."""

    settings: TrainSettings
    lm: TrainableAudioLM
    acc: Accelerator
    out: Path
    peft_model: PeftModel
    ddp_model: torch.nn.Module
    opt: Optimization
    steps: StagedSteps
    state: dict[str, Any]
    task: AnswerTask
    keep_logits: bool
    mixer: LayerMixer | None
    phases: Phases
    reference: ReferenceSnapshot | None = None  # DPO's reference: the model's trained tensors as DPO began
    plan: RunPlan | None = None  # the stages' data and lengths
    step_loss: torch.Tensor = field(default_factory=lambda: torch.zeros((), dtype=torch.float64))

    def run(self, loader: torch.utils.data.DataLoader) -> None:
        """Every remaining step of the plan."""
        # a bar on a terminal, one whole line per 5 % in a log (never carriage-return frames in a job log)
        bar = progress(total=self.steps.total, initial=self.state["step"],
                       desc=f"{METHOD_LABELS.get(self.settings.method, self.settings.method)} {self.settings.scope} "
                             f"{self.settings.category}", unit="step",
                       disable=not (self.settings.progress and self.acc.is_main_process), dynamic_ncols=True)
        for mb, rows in loader:
            self.micro_batch(mb, rows)
            if mb.last:
                bar.update(1)
                bar.set_postfix(loss=f"{self.optimizer_step(mb):.4f}")
        bar.close()

    def micro_batch(self, mb: MicroBatch, rows: list[BenchRow]) -> None:
        """Forward and backward of one micro-batch; gradients are synchronised after the step's last one."""
        acc, world = self.acc, self.acc.num_processes
        self.phases.set_trainable(mb.step, self.lm, self.mixer)
        if self.phases.objective_at(mb.step) == "dpo":
            disable_dropout(self.lm.model)  # DPO's stage ends the run, so it stays off
        if self.reference is not None and self.reference.saved is None and self.phases.objective_at(mb.step) == DPO:
            self.reference.take()  # the first DPO micro-batch: the model is exactly the one DPO starts from
        with nullcontext() if mb.last else acc.no_sync(self.ddp_model):
            losses = self.losses(mb.step, rows)
            # DDP averages over processes: scaling by W / n_step makes the update the mean over the step's clips.
            acc.backward(losses.sum() * (mb.weight * world / self.steps.clips(mb.step)))
        self.step_loss += float(losses.detach().sum()) * mb.weight

    def losses(self, step: int, rows: list[BenchRow]) -> torch.Tensor:
        """(B,) the rows' losses under the step's objective: answer cross-entropy, or DPO per (chosen, rejected)."""
        s = self.settings
        if self.phases.objective_at(step) == "ce":
            _, inputs = self.task.inputs(self.lm, rows, end_of_turn=s.end_of_turn)
            return (runtime_losses(self.lm) or answer_losses)(self.ddp_model, inputs, self.keep_logits)
        inputs = self.task.pair_inputs(self.lm, rows, end_of_turn=s.end_of_turn, rejected=s.dpo_rejected or "random", seed=s.seed)
        context = self.reference.swapped_in if self.reference is not None else None
        return pair_dpo_losses(self.ddp_model, self.lm.model, inputs, self.keep_logits, s.dpo_beta, context)

    def optimizer_step(self, mb: MicroBatch) -> float:
        """Clip, update and schedule; then log the step's mean loss (returned) and checkpoint when it is time."""
        grad_norm = torch.nn.utils.clip_grad_norm_(self.opt.trainable, self.settings.max_grad_norm)
        lr = self.opt.optimizer.param_groups[0]["lr"]  # this step's rate (the scheduler moves it on next)
        self.opt.optimizer.step()
        self.opt.scheduler.step()
        self.opt.optimizer.zero_grad(set_to_none=True)
        loss = self.log(mb, float(grad_norm), lr)
        if self.state["step"] % self.settings.save_every == 0 and self.state["step"] < self.steps.total:
            self.save_checkpoint()
        return loss

    def log(self, mb: MicroBatch, grad_norm: float, lr: float) -> float:
        """The step's loss (its mean over the step's clips on every process) into the state's log; returns it."""
        acc = self.acc
        total = acc.reduce(self.step_loss.to(acc.device), reduction="sum") if acc.num_processes > 1 else self.step_loss
        loss = float(total) / self.steps.clips(mb.step)
        self.step_loss = torch.zeros((), dtype=torch.float64)
        self.state["step"] = mb.step + 1
        self.state["log"].append({"step": self.state["step"], "epoch": mb.epoch, "loss": loss,
                                  "lr": lr, "grad_norm": grad_norm,
                                  "phase": self.phases.phase(mb.step), "objective": self.phases.objective_at(mb.step)})
        return loss

    def save_checkpoint(self) -> None:
        """Checkpoint the adapter, optimizer, scheduler, loop state and every process's RNG."""
        acc = self.acc
        adapter = trainable_state(self.peft_model, self.mixer, self.lm, self.phases)
        if self.reference is not None:
            adapter.update(self.reference.state())
        checkpoint.save(self.out, self.state["step"], adapter=adapter,
                        optimizer=self.opt.optimizer, scheduler=self.opt.scheduler, state=self.state,
                        rank=acc.process_index, is_main=acc.is_main_process, barrier=acc.wait_for_everyone,
                        keep=self.settings.keep_checkpoints)


@dataclass
class Prepared:
    """What _prepare sets up: the stepper, the LoRA targets, the checkpointed module, the trainable parameter
    names of each stage and what of the run is not the paper's protocol."""

    stepper: Stepper
    targets: list[str]
    checkpointed: torch.nn.Module | None
    trainable: dict[str, list[str]]
    full_reason: str
    not_paper: list[str]


def _attach_trainable(settings: TrainSettings, lm: TrainableAudioLM, plan: RunPlan,
                      full: bool) -> tuple[PeftModel, list[str], LayerMixer | None]:
    """LoRA attached, the --init-adapter loaded, the mixer (the init adapter's, or a new one under --method pclm)
    and under full fine-tuning the LLM's weights made trainable."""
    peft_model, targets = attach_lora(lm, settings)
    mixer = load_init_adapter(settings, lm, peft_model) if settings.init_adapter else None
    if mixer is None:
        # After LoRA (whose targets must not include the mixer's projectors); its init continues the seeded draws.
        mixer = attach_for_training(lm, settings)
    elif plan.recipe.method == "pclm":
        mixer.requires_grad_(True)  # the optimizer holds it; the stages that do not train it freeze it
    make_trainable(lm, full)
    return peft_model, targets, mixer


def _prepare(settings: TrainSettings, lm: TrainableAudioLM, acc: Accelerator, out: Path,
             data: TrainingData) -> Prepared:
    """LoRA attached (and the mixer, the init adapter, full fine-tuning), checkpointing on, the optimizer built
    and the checkpoint (if any) restored, in the order that the seeded draws require."""
    from accelerate.utils import set_seed

    from finetune.recipe import run_recipe

    # Seeded after the model is built (a tiny model seeds its own init) and before LoRA's random init.
    set_seed(settings.seed)
    full, full_reason = resolve_full(settings, run_recipe(settings), lm)
    plan = run_plan(settings, data, full)
    peft_model, targets, mixer = _attach_trainable(settings, lm, plan, full)
    if (mixer is not None or full) and acc.num_processes > 1:
        raise ValueError("--method pclm and --full-finetune train on one process (their stages switch parameters "
                         "on and off, which DDP does not allow); run without accelerate launch")
    checkpointed = (set_activation_checkpointing(lm, settings.include_audio_tower, True)
                    if settings.gradient_checkpointing else None)
    phases = plan.phases
    opt = Optimization.of(lm.model, settings, phases)
    trainable = {s.name: phases.trainable_names(s.start, lm, mixer) for s in phases.stages}
    keep_logits = keeps_logits(lm.model)
    reference = reference_snapshot(lm, phases, initialised=settings.init_adapter is not None)
    state = resume(settings, lm, peft_model, mixer, opt, acc, out, plan.steps.total, reference)
    ddp_model = acc.prepare(lm.model)
    lm.model.train()
    configs = dict.fromkeys(c for d in plan.data for c in d.renderer.config.split(","))  # every stage's
    stepper = Stepper(settings, lm, acc, out, peft_model, ddp_model, opt, plan.steps, state,
                      AnswerTask.of(settings.prompt, ",".join(configs), settings.kind), keep_logits, mixer, phases,
                      reference, plan)
    return Prepared(stepper, targets, checkpointed, trainable, full_reason,
                    deviations(settings, plan.recipe, phases, mixer))


def _write_run(out: Path, stepper: Stepper, info: dict[str, Any]) -> None:
    """The log, the adapter (with protocol.json when the run is not the paper's protocol) and training.json (main
    process); the adapter supersedes the checkpoints."""
    write_jsonl(out / TRAIN_LOG, stepper.state["log"])
    extra = saver(stepper.mixer, stepper.lm, stepper.phases)

    def write(folder: Path) -> None:
        if extra is not None:
            extra(folder)
        if info.get("not_paper_protocol"):
            atomic_write_text(folder / PROTOCOL_FILE,
                              json.dumps({"not_paper_protocol": info["not_paper_protocol"]}, indent=2) + "\n")

    save_adapter(stepper.peft_model, out / ADAPTER_DIR, write)
    write_training_record(out, info)
    shutil.rmtree(out / checkpoint.CHECKPOINTS, ignore_errors=True)


def run_training(settings: TrainSettings, lm: TrainableAudioLM, acc: Accelerator, out: Path,
                 data: TrainingData) -> dict[str, Any]:
    """Train every stage of the run's recipe on its data (resuming from out's newest checkpoint), validate, write
    the adapter, the log and training.json; returns the training record."""
    started = time.time()
    prep = _prepare(settings, lm, acc, out, data)
    stepper = prep.stepper
    stepper.run(step_loader(settings, stepper.plan, acc, stepper.state["step"]))
    if prep.checkpointed is not None:
        set_activation_checkpointing(lm, settings.include_audio_tower, False)
    lm.model.eval()

    val_data = data.sets.get(VALIDATION, data)  # --val-category's held-out shares, else the training configs'
    val_ids = val_data.split.val[: settings.val_limit] if settings.val_limit is not None else val_data.split.val
    validation = evaluate_clips(lm, val_data.renderer, val_ids, settings.prompt, batch_size=settings.eval_batch_size,
                                end_of_turn=settings.end_of_turn, accelerator=acc, kind=settings.kind) if val_ids else {}
    base_params = base_parameter_count(lm.model)
    info = training_record(settings, lm, data, stepper.steps, base_params=base_params, targets=prep.targets,
                           trainable_params=sum(p.numel() for p in stepper.opt.trainable), log=stepper.state["log"],
                           world_size=acc.num_processes, validation=validation, seconds=time.time() - started,
                           pclm=pclm_info(stepper.mixer, stepper.phases, base_params))
    info["stages"] = stage_records(stepper.plan, stepper.state["log"], prep.trainable)
    info["llm_training"] = {"mode": "full" if stepper.phases.full else "lora", "why": prep.full_reason}
    info["init_adapter"] = settings.init_adapter
    info["validation_set"] = {"config": val_data.renderer.config, "n_val": len(val_data.split.val),
                              "n_scored": len(val_ids)}
    info["recipe_file"] = stepper.plan.recipe.source or None
    info["not_paper_protocol"] = prep.not_paper
    if settings.init_adapter and info.get("dpo"):
        info["dpo"]["reference"] = SNAPSHOT_REFERENCE.format(f"the --init-adapter {settings.init_adapter}")
    if acc.is_main_process:
        _write_run(out, stepper, info)
    acc.wait_for_everyone()
    return info
