"""LoRA fine-tuning on one VocalGrad category (SPEC §6), then evaluation on all nine and optional Hub push.

    accelerate launch finetune/train.py --model qwen2-audio-7b-instruct --category volume \
        --scope all_linear --source vctk --data-dir VCTK-Corpus --out runs/lora-volume [--push-to-hub ORG/NAME]

Recipe defaults are SPEC §6 exactly: LoRA r 8, alpha 16, dropout 0.05; AdamW lr 2e-4, weight decay 0,
constant rate; batch 1 with 16-step accumulation (16 clips per optimizer step on any number of
processes); 1 epoch; grad-norm clip 1.0; seed 1234; 10 % of the train split held out, stratified by label.
Scopes: `lm_head` adapts only the text head; `all_linear` every linear layer of the language model (PEFT's
"all-linear" convention, so not the head); `--include-audio-tower` adds the audio encoder and projector,
as the published runs did. Loss: cross-entropy on the answer word's tokens and the end-of-turn token only.

A rerun with the same --out resumes from the newest checkpoint (optimizer, scheduler and RNG included)
and ends with the same adapter as an uninterrupted run; a finished run goes straight to what is left
(evaluation, card, push).
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):
    # Run as a script: the repository root first, and finetune/ itself out (its data.py would shadow others).
    _here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _here]
    sys.path.insert(0, str(_here.parent))

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import inspect  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import time  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from contextlib import nullcontext  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from typing import Any  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from tqdm.auto import tqdm  # noqa: E402

from finetune import checkpoint  # noqa: E402
from finetune.data import (  # noqa: E402
    RowRenderer,
    StepRows,
    balanced_subset,
    label_of,
    plan_steps,
    split_ids,
    steps_per_epoch,
)
from harness.data import CONFIGS, config_name  # noqa: E402
from harness.models.protocol import TrainableAudioLM  # noqa: E402
from harness.models.registry import load_model  # noqa: E402
from harness.prompts import build_prompt, get_variant  # noqa: E402
from harness.redact import public, redact  # noqa: E402
from harness.results import atomic_write_text, write_jsonl  # noqa: E402
from harness.settings import (  # noqa: E402
    ModelSettings,
    SourceSettings,
    add_model_arguments,
    add_source_arguments,
    configs_type,
    derive,
    settings_from_args,
)
from vocalgrad_dataset import grid  # noqa: E402

SCOPES = ("lm_head", "all_linear")
SCHEDULES = ("constant", "linear", "cosine")
EVAL_MODES = ("generate", "choices")
ADAPTER_DIR = "adapter"
TRAINING_JSON = "training.json"


def _defines(default: Any = dataclasses.MISSING, **kw: Any) -> Any:
    """A settings field that changes the trained adapter (part of the resume fingerprint)."""
    return field(default=default, metadata={"defines": True}, **kw)


@dataclass(kw_only=True)
class TrainSettings(ModelSettings, SourceSettings):
    """Everything a fine-tuning run needs: the shared model and source settings (fields redeclared here are
    marked `defines`: they change the adapter, so a resumed run directory must agree on them) and the recipe.

    `batch_size` is the recipe's clips per forward (SPEC §6: 1); scoring (validation, evaluation) batches
    `eval_batch_size` prompts per model call.
    """

    model: str = _defines()
    model_args: dict[str, Any] = field(default_factory=dict, metadata={"defines": True})
    dtype: str | None = _defines(None)
    source: str = _defines("vctk")
    data_dir: str | None = _defines(None)
    category: str = _defines()
    scope: str = _defines()
    out: str = ""
    include_audio_tower: bool = _defines(False)
    prompt: str = _defines("default")
    # SPEC §6 recipe
    lora_r: int = _defines(8)
    lora_alpha: int = _defines(16)
    lora_dropout: float = _defines(0.05)
    lr: float = _defines(2e-4)
    weight_decay: float = _defines(0.0)
    batch_size: int = _defines(1)
    grad_accum: int = _defines(16)
    epochs: int = _defines(1)
    max_grad_norm: float = _defines(1.0)
    seed: int = _defines(1234)
    val_fraction: float = _defines(0.1)
    lr_scheduler: str = _defines("constant")
    warmup_steps: int = _defines(0)
    max_steps: int | None = _defines(None)
    train_limit: int | None = _defines(None)  # a balanced toy subset of the training clips
    augment: bool = _defines(False)
    end_of_turn: bool = _defines(True)
    # mechanics (do not change the result)
    save_every: int = 50
    keep_checkpoints: int = 2
    num_workers: int = 2
    gradient_checkpointing: bool = True
    val_limit: int | None = None
    progress: bool = True
    # after training
    skip_eval: bool = False
    eval_configs: list[str] = field(default_factory=lambda: list(CONFIGS))
    eval_mode: str = "generate"
    eval_source: str | None = None  # default: the training source
    eval_data_dir: str | None = None
    eval_limit: int | None = None
    eval_batch_size: int = 8
    eval_base: bool = False
    push_to_hub: str | None = None
    hub_private: bool = False
    results_repo: str | None = None
    dataset_repo: str = "ynklab/vocalgrad"

    def fingerprint(self) -> dict[str, Any]:
        """The fields that define the adapter (a resumed run must agree on all of them)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.metadata.get("defines")}
        return {**out, "model_args": public(self.model_args)}  # secrets change no weight and stay out of files

    def model_settings(self) -> ModelSettings:
        """The base model to load: these settings' model, scoring `eval_batch_size` prompts per call."""
        return derive(ModelSettings, self, batch_size=self.eval_batch_size)

    def check(self) -> None:
        """Raise ValueError for settings that cannot work, before any model is loaded."""
        self.category = config_name(self.category)
        if self.scope not in SCOPES:
            raise ValueError(f"unknown scope {self.scope!r}; expected one of {SCOPES}")
        if self.lr_scheduler not in SCHEDULES:
            raise ValueError(f"unknown lr scheduler {self.lr_scheduler!r}; expected one of {SCHEDULES}")
        if self.eval_mode not in EVAL_MODES:
            raise ValueError(f"unknown eval mode {self.eval_mode!r}; expected one of {EVAL_MODES}")
        for name in ("batch_size", "grad_accum", "epochs", "save_every", "keep_checkpoints", "lora_r"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name.replace('_', '-')} must be >= 1, got {getattr(self, name)}")
        if self.max_steps is not None and self.max_steps < 1:
            raise ValueError(f"max-steps must be >= 1, got {self.max_steps}")
        if not self.out:
            raise ValueError("--out is required")
        if "adapter" in self.model_args or self.adapter is not None:
            raise ValueError("training starts from the base model; an adapter (--adapter, --model-arg adapter=) "
                             "is for evaluation")
        self.eval_configs = [config_name(c) for c in self.eval_configs]
        get_variant(self.prompt).vocabulary(self.category)


# ---- LoRA -------------------------------------------------------------------------------------------------
def _linear_names(model: torch.nn.Module) -> list[str]:
    return [n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)]


def lora_targets(lm: Any, scope: str, include_audio_tower: bool = False) -> tuple[str, list[str]]:
    """(PEFT target regex, the module names it selects) for a scope on a wrapped transformers model."""
    head = lm.lm_head_path
    decoder = lm.decoder_path
    linear = _linear_names(lm.model)
    if scope == "lm_head":
        if include_audio_tower:
            raise ValueError("--include-audio-tower goes with --scope all_linear")
        names = [n for n in linear if n == head]
    else:
        names = [n for n in linear if n.startswith(decoder + ".")]
        if include_audio_tower:
            # Everything outside the decoder and the head that serves audio (encoder, projector); not vision.
            names += [n for n in linear if n != head and not n.startswith(decoder + ".")
                      and not re.search(r"vision|visual|image", n)]
    if not names:
        raise ValueError(f"{lm.name}: scope {scope!r} selects no linear layer (decoder {decoder!r}, head {head!r})")
    # The decoder by its path; audio-side modules by their top two levels (e.g. model.audio_tower).
    prefixes = sorted({decoder if n.startswith(decoder + ".") else ".".join(n.split(".")[:2]) for n in names})
    leaves = sorted({n.rsplit(".", 1)[-1] for n in names})
    pattern = (f"^{re.escape(head)}$" if scope == "lm_head" else
               "^(?:" + "|".join(map(re.escape, prefixes)) + r")\.(?:.*\.)?(?:" + "|".join(map(re.escape, leaves)) + ")$")
    selected = [n for n in linear if re.fullmatch(pattern, n)]
    if sorted(selected) != sorted(names):  # the regex is what PEFT gets: it must select exactly these
        extra = sorted(set(selected) - set(names))[:3]
        raise RuntimeError(f"LoRA target pattern selects other modules too, e.g. {extra}")
    return pattern, sorted(names)


def attach_lora(lm: Any, settings: TrainSettings) -> tuple[Any, list[str]]:
    """Inject trainable LoRA layers into lm.model in place; returns (the PeftModel handle, targeted modules)."""
    from peft import LoraConfig, get_peft_model

    pattern, names = lora_targets(lm, settings.scope, settings.include_audio_tower)
    config = LoraConfig(
        r=settings.lora_r,
        lora_alpha=settings.lora_alpha,
        lora_dropout=settings.lora_dropout,
        target_modules=pattern,
        bias="none",
        revision=lm.base_revision(),
    )
    peft_model = get_peft_model(lm.model, config)
    # Set after creation: PEFT would overwrite it from the model's own (possibly empty) name_or_path.
    peft_model.peft_config["default"].base_model_name_or_path = getattr(lm, "model_id", settings.model)
    wrapped = sorted(n.removeprefix("base_model.model.") for n, m in peft_model.named_modules()
                     if hasattr(m, "lora_A") and isinstance(getattr(m, "base_layer", None), torch.nn.Linear))
    if wrapped != names:
        raise RuntimeError(f"PEFT wrapped {len(wrapped)} modules, expected {len(names)}")
    return peft_model, names


def _checkpointing(lm: Any, whole: bool, on: bool) -> Any:
    """Switch activation checkpointing of the decoder (the whole model when the audio tower trains too).

    Only the trained part: checkpointing the whole model would also make the frozen encoder's outputs
    require grad, so every step would run (and recompute) a backward through it for nothing.
    Non-reentrant checkpointing works with frozen inputs and replays dropout with the saved RNG state.
    """
    module = lm.model if whole else lm.model.get_submodule(lm.decoder_path)
    if not getattr(module, "supports_gradient_checkpointing", False):
        return None
    if on:
        if hasattr(module, "activation_checkpointing_enable"):
            module.activation_checkpointing_enable({"use_reentrant": False})
        else:
            module.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    else:
        (getattr(module, "activation_checkpointing_disable", None) or module.gradient_checkpointing_disable)()
    return module


def adapter_state(peft_model: Any) -> dict[str, torch.Tensor]:
    """The trainable adapter tensors only (no base weights, no embedding copies)."""
    from peft import get_peft_model_state_dict

    return get_peft_model_state_dict(peft_model, save_embedding_layers=False)


def answer_losses(model: Any, inputs: dict[str, torch.Tensor], keep_logits: bool) -> torch.Tensor:
    """(B,) mean cross-entropy over each row's answer tokens (labels != -100; they end every row)."""
    labels = inputs["labels"]
    n = int((labels != -100).sum(-1).max())
    kwargs = {k: v for k, v in inputs.items() if k != "labels"}
    if keep_logits:
        kwargs["logits_to_keep"] = n + 1  # only the positions that predict the answer: no (T, V) logits
    logits = model(**kwargs, use_cache=False).logits[:, -(n + 1) : -1].float()
    target = labels[:, -n:]
    ce = F.cross_entropy(logits.transpose(1, 2), target, ignore_index=-100, reduction="none")
    mask = (target != -100).float()
    return (ce * mask).sum(-1) / mask.sum(-1)


def _schedule(settings: TrainSettings, total_steps: int) -> Any:
    warm = settings.warmup_steps

    def factor(step: int) -> float:
        if warm and step < warm:
            return (step + 1) / warm
        if settings.lr_scheduler == "constant":
            return 1.0
        frac = (step - warm) / max(1, total_steps - warm)
        return max(0.0, 1.0 - frac) if settings.lr_scheduler == "linear" else 0.5 * (1 + math.cos(math.pi * frac))

    return factor


# ---- evaluation on clips (validation, fit) ---------------------------------------------------------------
@torch.no_grad()
def evaluate_clips(lm: Any, renderer: RowRenderer, ids: Sequence[str], prompt: str, *, batch_size: int = 8,
                   end_of_turn: bool = True, accelerator: Any = None) -> dict[str, float]:
    """Answer loss and choice accuracy (the harness' `choices` scoring) over clips, shared across processes."""
    variant = get_variant(prompt)
    vocab = variant.vocabulary(renderer.config)
    rank, world = (accelerator.process_index, accelerator.num_processes) if accelerator else (0, 1)
    mine = list(ids)[rank::world]
    was_training = lm.model.training
    lm.model.eval()
    keep = "logits_to_keep" in inspect.signature(lm.model.forward).parameters
    loss_sum, correct = 0.0, 0
    for i in range(0, len(mine), batch_size):
        rows = [renderer.row(cid) for cid in mine[i : i + batch_size]]
        prompts = [build_prompt(r, variant)[0] for r in rows]
        answers = [vocab.increase if r["label"] == "increase" else vocab.decrease for r in rows]
        loss_sum += float(answer_losses(lm.model, lm.training_inputs(prompts, answers, end_of_turn=end_of_turn),
                                        keep).sum())
        scores = lm.score_choices(prompts, vocab.choices)
        correct += sum((s[0] > s[1]) == (r["label"] == "increase") for s, r in zip(scores, rows, strict=True))
    lm.model.train(was_training)
    totals = torch.tensor([loss_sum, float(correct), float(len(mine))], dtype=torch.float64)
    if accelerator is not None and world > 1:
        totals = accelerator.reduce(totals.to(accelerator.device), reduction="sum").cpu()
    n = float(totals[2])
    return {"n": int(n), "loss": float(totals[0]) / n if n else float("nan"),
            "accuracy": float(totals[1]) / n if n else float("nan")}


# ---- the run ----------------------------------------------------------------------------------------------
def _accelerator() -> Any:
    from accelerate import Accelerator

    # As the eval runner does: `accelerate launch` without CUDA must still form one gloo group, not N worlds.
    launched = int(os.environ.get("WORLD_SIZE", "1"))
    return Accelerator(cpu=launched > 1 and not torch.cuda.is_available())


def _check_resumable(saved: dict[str, Any], settings: TrainSettings, where: Path) -> None:
    """Refuse to continue a run directory that was trained with other defining settings."""
    want = json.loads(json.dumps(settings.fingerprint()))
    diff = sorted(k for k in set(want) | set(saved) if want.get(k) != saved.get(k))
    if diff:
        raise ValueError(f"{where} holds a run with other settings ({', '.join(diff)}); use another --out")


def load_base(settings: TrainSettings) -> TrainableAudioLM:
    """The wrapped base model, checked to be trainable (TrainableAudioLM, a prompt+answer template)."""
    return load_model(settings.model_settings(), require=["training"])  # type: ignore[return-value]


def train(settings: TrainSettings, lm: Any = None) -> dict[str, Any]:
    """Train (or resume, or skip when done), then evaluate, write the card and push; returns training.json."""
    settings.check()
    out = Path(settings.out)
    acc = _accelerator()
    if settings.push_to_hub or settings.results_repo:
        from finetune.hub import require_token

        require_token()  # fail now, not after hours of training
    done = out / TRAINING_JSON
    info = json.loads(done.read_text(encoding="utf-8")) if done.is_file() else None
    # A mismatching run directory fails here, before minutes of model loading.
    if info is not None:
        _check_resumable(info["settings_fingerprint"], settings, out)
    elif (ckpt := checkpoint.latest(out)) is not None:
        _check_resumable(checkpoint.read_state(ckpt)["fingerprint"], settings, out)
    data = None if info is not None else training_data(settings)  # a bad source fails before the model loads
    if lm is None:
        lm = load_base(settings)
    if data is None:
        lm.load_adapter(str(out / ADAPTER_DIR))
    else:
        info = _train_loop(settings, lm, acc, out, data)
    if acc.is_main_process:
        print(f"adapter: {out / ADAPTER_DIR}  (final training loss {info['final_loss']:.4f}, "
              f"validation accuracy {info['validation'].get('accuracy', float('nan')):.3f})")
    if not settings.skip_eval:
        info = _evaluate(settings, lm, out, info, acc)
    if acc.is_main_process and (settings.push_to_hub or settings.results_repo):
        from finetune import hub

        if settings.push_to_hub:
            print("pushed adapter:", hub.push_adapter(out, settings.push_to_hub, private=settings.hub_private,
                                                      dataset_repo=settings.dataset_repo))
        if settings.results_repo and (out / "eval" / "results.json").is_file():
            print("pushed results:", hub.push_results(out / "eval", settings.results_repo))
    acc.wait_for_everyone()
    return info


def training_data(settings: TrainSettings) -> tuple[RowRenderer, Any, tuple[str, ...]]:
    """(renderer, train/validation split, the training ids) from the generator's clip ids alone."""
    renderer = RowRenderer(settings.category, "train", settings.source, settings.data_dir)
    split = split_ids(renderer.ids(), val_fraction=settings.val_fraction, seed=settings.seed)
    train_ids = split.train
    if settings.train_limit is not None:
        train_ids = balanced_subset(split.train, settings.train_limit, seed=settings.seed)
    if not train_ids:
        raise ValueError(f"no training clips for {settings.category} from source {settings.source!r}")
    return renderer, split, train_ids


def _train_loop(settings: TrainSettings, lm: Any, acc: Any, out: Path,
                data: tuple[RowRenderer, Any, tuple[str, ...]]) -> dict[str, Any]:
    from accelerate.utils import set_seed

    started = time.time()
    rank, world = acc.process_index, acc.num_processes
    examples_per_step = settings.batch_size * settings.grad_accum
    renderer, split, train_ids = data
    per_epoch = steps_per_epoch(len(train_ids), examples_per_step)
    total_steps = per_epoch * settings.epochs
    if settings.max_steps is not None:
        total_steps = min(total_steps, settings.max_steps)

    # Seeded after the model is built (a tiny model seeds its own init) and before LoRA's random init.
    set_seed(settings.seed)
    peft_model, targets = attach_lora(lm, settings)
    model = lm.model
    checkpointed = _checkpointing(lm, settings.include_audio_tower, True) if settings.gradient_checkpointing else None
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=settings.lr, weight_decay=settings.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, _schedule(settings, total_steps))
    keep_logits = "logits_to_keep" in inspect.signature(model.forward).parameters

    fingerprint = json.loads(json.dumps(settings.fingerprint()))
    state: dict[str, Any] = {"step": 0, "seed": settings.seed, "fingerprint": fingerprint, "log": []}
    ckpt = checkpoint.latest(out)
    if ckpt is not None:
        _check_resumable(checkpoint.read_state(ckpt)["fingerprint"], settings, out)
        from peft import set_peft_model_state_dict

        weights, state = checkpoint.load(ckpt, optimizer=optimizer, scheduler=scheduler, rank=rank)
        set_peft_model_state_dict(peft_model, weights)
        if acc.is_main_process:
            print(f"resuming {out} from {ckpt.name} (step {state['step']} of {total_steps})")
    ddp_model = acc.prepare(model)
    model.train()

    augment = None
    if settings.augment:
        from finetune.augment import build_augmenter

        augment = build_augmenter(settings.category, settings.seed)
    variant = get_variant(settings.prompt)
    vocab = variant.vocabulary(settings.category)
    plan = plan_steps(train_ids, seed=settings.seed, examples_per_step=examples_per_step,
                      micro_batch=settings.batch_size, rank=rank, world_size=world,
                      start_step=state["step"], total_steps=total_steps)
    # Its own generator: iterating a DataLoader draws a worker seed, which from the global generator would
    # shift every later dropout mask by one draw in a resumed run (the original drew it at step 0).
    loader = torch.utils.data.DataLoader(StepRows(renderer, plan, augment), batch_size=None, shuffle=False,
                                         num_workers=settings.num_workers if plan else 0, collate_fn=_identity,
                                         generator=torch.Generator().manual_seed(settings.seed))
    bar = tqdm(total=total_steps, initial=state["step"], desc=f"LoRA {settings.scope} {settings.category}",
               unit="step", disable=not (settings.progress and acc.is_main_process), dynamic_ncols=True)
    step_loss = torch.zeros((), dtype=torch.float64)
    for mb, rows in loader:
        n_step = step_size(len(train_ids), mb.step, per_epoch, examples_per_step)
        prompts = [build_prompt(r, variant)[0] for r in rows]
        answers = [vocab.increase if r["label"] == "increase" else vocab.decrease for r in rows]
        inputs = lm.training_inputs(prompts, answers, end_of_turn=settings.end_of_turn)
        with nullcontext() if mb.last else acc.no_sync(ddp_model):
            losses = answer_losses(ddp_model, inputs, keep_logits)
            # DDP averages over processes: scaling by W / n_step makes the update the mean over the step's clips.
            acc.backward(losses.sum() * (mb.weight * world / n_step))
        step_loss += float(losses.detach().sum()) * mb.weight
        if not mb.last:
            continue
        grad_norm = torch.nn.utils.clip_grad_norm_(trainable, settings.max_grad_norm)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        total = acc.reduce(step_loss.to(acc.device), reduction="sum") if world > 1 else step_loss
        loss = float(total) / n_step
        step_loss = torch.zeros((), dtype=torch.float64)
        state["step"] = mb.step + 1
        state["log"].append({"step": state["step"], "epoch": mb.epoch, "loss": loss,
                             "lr": scheduler.get_last_lr()[0], "grad_norm": float(grad_norm)})
        bar.update(1)
        bar.set_postfix(loss=f"{loss:.4f}")
        if state["step"] % settings.save_every == 0 and state["step"] < total_steps:
            checkpoint.save(out, state["step"], adapter=adapter_state(peft_model), optimizer=optimizer,
                            scheduler=scheduler, state=state, rank=rank, is_main=acc.is_main_process,
                            barrier=acc.wait_for_everyone, keep=settings.keep_checkpoints)
    bar.close()
    if checkpointed is not None:
        _checkpointing(lm, settings.include_audio_tower, False)
    model.eval()

    val_ids = split.val[: settings.val_limit] if settings.val_limit is not None else split.val
    validation = evaluate_clips(lm, renderer, val_ids, settings.prompt, batch_size=settings.eval_batch_size,
                                end_of_turn=settings.end_of_turn, accelerator=acc) if val_ids else {}
    losses_logged = [r["loss"] for r in state["log"]]
    info: dict[str, Any] = {
        "status": "complete",
        "settings": {**dataclasses.asdict(settings), "model_args": redact(settings.model_args)},
        "settings_fingerprint": fingerprint,
        "base_model": {
            "registry_name": settings.model,
            "model_id": getattr(lm, "model_id", settings.model),
            "family": lm.family,
            "revision": lm.base_revision(),
            "dtype": str(lm.dtype).removeprefix("torch."),
            "params": sum(p.numel() for n, p in model.named_parameters() if "lora_" not in n),
        },
        "lora": {"scope": settings.scope, "include_audio_tower": settings.include_audio_tower,
                 "target_modules": targets, "n_target_modules": len(targets),
                 "trainable_params": sum(p.numel() for p in trainable)},
        "data": _data_info(settings, split, train_ids),
        "augmentation": _augment_info(settings),
        "steps": len(state["log"]), "total_steps": total_steps, "steps_per_epoch": per_epoch,
        "examples_per_step": examples_per_step, "world_size": world,
        "final_loss": losses_logged[-1] if losses_logged else float("nan"),
        "first_loss": losses_logged[0] if losses_logged else float("nan"),
        "validation": validation,
        "versions": _versions(),
        "train_seconds": round(time.time() - started, 1),
    }
    if acc.is_main_process:
        write_jsonl(out / "train_log.jsonl", state["log"])
        _save_adapter(peft_model, out / ADAPTER_DIR)
        atomic_write_text(out / TRAINING_JSON, json.dumps(info, indent=2, allow_nan=True) + "\n")
        shutil.rmtree(out / checkpoint.CHECKPOINTS, ignore_errors=True)  # the adapter supersedes them
    acc.wait_for_everyone()
    return info


def step_size(n_train: int, step: int, per_epoch: int, examples_per_step: int) -> int:
    """How many clips optimizer step `step` takes over all processes (the loss is their mean)."""
    return min(examples_per_step, n_train - (step % per_epoch) * examples_per_step)


def _identity(item: Any) -> Any:
    return item  # the rows stay numpy: the processor, not DataLoader's collate, makes tensors


def _save_adapter(peft_model: Any, path: Path) -> None:
    """PEFT's adapter_config.json + adapter_model.safetensors, written under a temporary name, then renamed."""
    tmp = path.with_name(f".{path.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    peft_model.save_pretrained(str(tmp), safe_serialization=True, save_embedding_layers=False)
    (tmp / "README.md").unlink(missing_ok=True)  # PEFT's template card; ours is written by finetune.card
    shutil.rmtree(path, ignore_errors=True)
    os.replace(tmp, path)


def _data_info(settings: TrainSettings, split: Any, train_ids: Sequence[str]) -> dict[str, Any]:
    from vocalgrad_dataset.generate import GENERATOR_VERSION

    return {
        "config": settings.category, "source": settings.source, "split": "train",
        "generator_version": GENERATOR_VERSION, "prompt_variant": settings.prompt,
        "n_split": len(split.train) + len(split.val), "n_train": len(train_ids), "n_val": len(split.val),
        "n_train_increase": sum(label_of(i) == "increase" for i in train_ids),
        "val_fraction": settings.val_fraction, "stratified_by": "label",
        "train_ids_sha256": grid.ids_sha256(train_ids), "val_ids_sha256": grid.ids_sha256(split.val),
    }


def _augment_info(settings: TrainSettings) -> dict[str, Any]:
    if not settings.augment:
        return {"enabled": False}
    from finetune.augment import describe

    return {"enabled": True, "library": "audiomentations", "transforms": describe(settings.category)}


def _versions() -> dict[str, str]:
    from importlib.metadata import version

    from harness.results import versions

    return {**versions(), **{p: version(p) for p in ("torch", "transformers", "peft", "accelerate")}}


def _evaluate(settings: TrainSettings, lm: Any, out: Path, info: dict[str, Any], acc: Any) -> dict[str, Any]:
    """The adapter (and optionally the base model) on the test split of every eval config, via the harness."""
    from finetune.report import write_matrix
    from harness.runner import EvalSettings, run_eval

    def run(dir_name: str, adapter: str | None) -> None:
        run_eval(derive(
            EvalSettings, settings.model_settings(), configs=settings.eval_configs, out=str(out / dir_name),
            split="test", source=settings.eval_source or settings.source,
            data_dir=settings.eval_data_dir or settings.data_dir, mode=settings.eval_mode, prompt=settings.prompt,
            limit=settings.eval_limit, adapter=adapter,
        ), model=lm)

    lm.model.eval()
    run("eval", str((out / ADAPTER_DIR).resolve()))
    if settings.eval_base:
        from peft.tuners.tuners_utils import BaseTunerLayer

        layers = [m for m in lm.model.modules() if isinstance(m, BaseTunerLayer)]
        for m in layers:  # the same weights with the adapter switched off: the untuned baseline
            m.enable_adapters(False)
        try:
            run("eval_base", None)
        finally:
            for m in layers:
                m.enable_adapters(True)
    if acc.is_main_process:
        rows = {f"{settings.category} ({settings.scope})": out / "eval"}
        if settings.eval_base:
            rows = {"base": out / "eval_base", **rows}
        info["eval"] = write_matrix(rows, out, title=f"{settings.model}: LoRA {settings.scope} on {settings.category}")
        from finetune.card import write_card

        write_card(out, info, dataset_repo=settings.dataset_repo)
        atomic_write_text(out / TRAINING_JSON, json.dumps(info, indent=2, allow_nan=True) + "\n")
    acc.wait_for_everyone()
    return info


# ---- command line -----------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    """Arguments of finetune/train.py (recipe flags default to SPEC §6)."""
    d = TrainSettings(model="", category="", scope="")
    p = argparse.ArgumentParser(prog="finetune/train.py", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    add_model_arguments(p, batch_size=None)
    add_source_arguments(p, what="train split")
    p.add_argument("--category", required=True, help="the VocalGrad config to train on, e.g. volume")
    p.add_argument("--scope", required=True, choices=SCOPES)
    p.add_argument("--include-audio-tower", action="store_true",
                   help="all_linear also adapts the audio encoder and projector (as the published runs did)")
    p.add_argument("--out", required=True, help="run directory (resumed if it exists)")
    p.add_argument("--prompt", default=d.prompt, help="prompt variant (SPEC §5)")
    g = p.add_argument_group("recipe (SPEC §6)")
    for name, typ, text in (
        ("lora_r", int, "LoRA rank"), ("lora_alpha", int, "LoRA alpha"), ("lora_dropout", float, "LoRA dropout"),
        ("lr", float, "AdamW learning rate"), ("weight_decay", float, "AdamW weight decay"),
        ("batch_size", int, "clips per forward"), ("grad_accum", int, "forwards per optimizer step"),
        ("epochs", int, "passes over the training clips"), ("max_grad_norm", float, "gradient-norm clip"),
        ("seed", int, "seed of LoRA init, split, order and dropout"),
        ("val_fraction", float, "share of each label held out"), ("warmup_steps", int, "linear warm-up steps"),
    ):
        g.add_argument("--" + name.replace("_", "-"), type=typ, default=getattr(d, name), help=text)
    g.add_argument("--lr-scheduler", choices=SCHEDULES, default=d.lr_scheduler)
    g.add_argument("--max-steps", type=int, default=None, help="stop after N optimizer steps")
    g.add_argument("--train-limit", type=int, default=None, help="a label-balanced subset of N training clips")
    g.add_argument("--augment", action="store_true", help="nuisance augmentation (finetune/augment.py)")
    g.add_argument("--no-end-of-turn", dest="end_of_turn", action="store_false",
                   help="train the answer word only, not the token closing the turn")
    m = p.add_argument_group("mechanics")
    m.add_argument("--save-every", type=int, default=d.save_every, help="checkpoint every N optimizer steps")
    m.add_argument("--keep-checkpoints", type=int, default=d.keep_checkpoints)
    m.add_argument("--num-workers", type=int, default=d.num_workers, help="processes rendering training clips")
    m.add_argument("--no-gradient-checkpointing", dest="gradient_checkpointing", action="store_false")
    m.add_argument("--val-limit", type=int, default=None, help="first N validation clips only")
    m.add_argument("--no-progress", dest="progress", action="store_false")
    e = p.add_argument_group("evaluation and publishing")
    e.add_argument("--skip-eval", action="store_true")
    e.add_argument("--eval-configs", type=configs_type, default=list(CONFIGS))
    e.add_argument("--eval-mode", choices=EVAL_MODES, default=d.eval_mode)
    e.add_argument("--eval-source", default=None, help="default: --source")
    e.add_argument("--eval-data-dir", default=None)
    e.add_argument("--eval-limit", type=int, default=None, help="first N test clips of each config")
    e.add_argument("--eval-batch-size", type=int, default=d.eval_batch_size)
    e.add_argument("--eval-base", action="store_true", help="also evaluate the base model (adapter off)")
    e.add_argument("--push-to-hub", default=None, metavar="REPO", help="model repo for adapter + card + eval results")
    e.add_argument("--hub-private", action="store_true")
    e.add_argument("--results-repo", default=None, metavar="REPO", help="dataset repo collecting evaluation runs")
    e.add_argument("--dataset-repo", default=d.dataset_repo, help="benchmark dataset id named in .eval_results")
    return p


def settings_from_argv(argv: Sequence[str] | None = None) -> TrainSettings:
    """TrainSettings from command-line arguments."""
    return settings_from_args(TrainSettings, build_parser().parse_args(argv))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point (`accelerate launch finetune/train.py ...` or `python -m finetune.train ...`)."""
    try:
        train(settings_from_argv(argv))
    except (ValueError, FileNotFoundError) as err:  # user errors: one line, not a traceback
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
