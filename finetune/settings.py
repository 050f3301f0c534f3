"""What a fine-tuning run is: one TrainSettings (the shared model and source settings plus SPEC §6's recipe),
its resume fingerprint, the run directory's file names, and the `vocalgrad-finetune` command line.

Nothing here imports torch: `vocalgrad-finetune --help` and a refused setting answer at once.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.data import CONFIGS
from harness.kinds import task_kind
from harness.prompts import get_variant
from harness.redact import public
from harness.settings import (
    ModelSettings,
    SourceSettings,
    add_model_arguments,
    add_source_arguments,
    configs_type,
    derive,
    parse_configs,
    settings_from_args,
)
from vocalgrad_dataset.cli.info import add_version_argument
from vocalgrad_dataset.generate import resolve_source
from vocalgrad_dataset.tasks import is_vocalgrad, resolve

SCOPES = ("lm_head", "all_linear")
METHODS = ("lora", "pclm")  # pclm: VoxParadox's prompt-conditioned layer mixer, then the LLM (finetune/pclm.py)
OBJECTIVES = ("ce", "dpo")
# --recipe: a built-in name (finetune/recipes/*.yaml, with the paper's rates) or a recipe YAML file (finetune.recipe)
LR_FLAGS = ("lr", "pclm_lr", "dpo_lr")
DPO_REJECTED = ("random", "adversarial", "claim")
SCHEDULES = ("constant", "linear", "cosine")
EVAL_MODES = ("generate", "choices")
# The run directory: OUT/adapter (PEFT files + card), OUT/training.json (the record), OUT/train_log.jsonl,
# OUT/checkpoints while training, OUT/eval and OUT/eval_base (harness runs).
ADAPTER_DIR = "adapter"
TRAINING_JSON = "training.json"
TRAIN_LOG = "train_log.jsonl"
EVAL_DIR = "eval"  # the adapter's harness run
EVAL_BASE_DIR = "eval_base"  # the base model's (--eval-base)
EVAL_ITEMS_DIR = "eval_items"  # the test items of multiple-choice item configs (voxparadox-<task>), built once
POSITIVE = ("batch_size", "grad_accum", "epochs", "save_every", "keep_checkpoints", "lora_r")
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")  # a Hub repo id (org/name), for --prompt-encoder


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
    source: str | None = _defines(None)  # None: the config's own (claims for -conflict configs), else vctk
    data_dir: str | None = _defines(None)
    category: str = _defines()  # one config or several, comma-separated ("volume,pitch")
    mix_weights: list[float] | None = _defines(None)  # one per --category config: its share of an epoch
    dpo_category: str | None = _defines(None)  # DPO's own data set (default: the training configs)
    val_category: str | None = _defines(None)  # validation: these configs' held-out share (default: the training's)
    init_adapter: str | None = _defines(None)  # start from this trained adapter (DPO's reference, too)
    # a foreign dataset (folder, file or Hub id) read as --kind's rows, its columns mapped by --columns (harness')
    dataset: str | None = _defines(None)
    kind: str | None = _defines(None)
    columns: str | None = _defines(None)
    scope: str = _defines()
    out: str = ""
    include_audio_tower: bool = _defines(False)
    prompt: str = _defines("default")
    # SPEC §6 recipe
    lora_r: int = _defines(8)
    lora_alpha: int = _defines(16)
    lora_dropout: float = _defines(0.05)
    lr: float | None = _defines(None)  # None: SPEC §6's 2e-4 under --method lora; refused where no stage reads it
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
    # repair method and objective (README "Repair methods")
    method: str = _defines("lora")
    objective: str = _defines("ce")
    recipe: str | None = _defines(None)
    dpo_beta: float = _defines(0.1)
    dpo_rejected: str | None = _defines(None)  # None: the paper's (random wrong option; claim on conflict rows)
    pclm_taps: list[int] | None = _defines(None)  # default: the paper's {5, 15, 25, 30} mapped onto the encoder
    pclm_hidden: int = _defines(256)
    pclm_stage1_steps: int | None = _defines(None)  # default: the recipe's stage length (an epoch of its data)
    pclm_stage2_steps: int | None = _defines(None)
    pclm_lr: float | None = _defines(None)  # both PCLM stages (None: the recipe's, the paper's 5e-5)
    dpo_lr: float | None = _defines(None)  # every DPO stage (None: the recipe's, the paper's 5e-7; --lr for LoRA)
    prompt_encoder: str | None = _defines(None)  # a BERT-style encoder (dir or Hub id); None: the LM's embeddings
    # the LLM stages train every LLM weight (the LM head included) instead of LoRA; None: the recipe's (pclm+dpo:
    # full when the device holds it)
    full_finetune: bool | None = _defines(None)
    # mechanics (do not change the result)
    save_every: int = 50
    keep_checkpoints: int = 2
    num_workers: int = 2
    gradient_checkpointing: bool = True
    val_limit: int | None = None
    progress: bool = True
    verbose: bool = False  # the libraries' own bars, info logs and FutureWarnings too
    # after training
    skip_eval: bool = False
    eval_configs: list[str] | None = None  # None: the nine (+ a conflict config itself), or an item config alone
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

    @property
    def examples_per_step(self) -> int:
        """Clips per optimizer step over all processes (SPEC §6: 1 x 16)."""
        return self.batch_size * self.grad_accum

    @property
    def categories(self) -> list[str]:
        """The training configs (--category, comma-separated)."""
        return parse_configs(self.category)

    @property
    def dpo_categories(self) -> list[str]:
        """DPO's configs: --dpo-category, else the training configs."""
        return parse_configs(self.dpo_category) if self.dpo_category else self.categories

    @property
    def publishes(self) -> bool:
        """Whether the run ends with a Hub push (of the adapter, the evaluation run, or both)."""
        return bool(self.push_to_hub or self.results_repo)

    def fingerprint(self) -> dict[str, Any]:
        """The fields that define the adapter, as JSON stores them (a resumed run must agree on all of them)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.metadata.get("defines")}
        # secrets change no weight and stay out of files
        return json.loads(json.dumps({**out, "model_args": public(self.model_args)}))

    def model_settings(self) -> ModelSettings:
        """The base model to load: these settings' model, scoring `eval_batch_size` prompts per call."""
        return derive(ModelSettings, self, batch_size=self.eval_batch_size)

    def check(self) -> None:
        """Raise ValueError for settings that cannot work, before any model is loaded."""
        if self.augment and len(self.categories) > 1:
            raise ValueError("--augment takes one --category config (its transforms depend on the attribute)")
        check_sets = self._check_mapped if self.kind or self.dataset or self.columns else self._check_data
        check_sets()  # a mapped --dataset's tasks, or the declared configs
        self.dpo_rejected = self.dpo_rejected or default_rejected(self.dpo_categories, self.kind)
        if not self.scope:  # the paper's stage 2 and DPO fine-tune the LLM: every linear layer
            if self.recipe is None:
                raise ValueError("--scope is required (lm_head or all_linear) unless --recipe is given")
            self.scope = "all_linear"
        for name, value, allowed in (("scope", self.scope, SCOPES), ("lr scheduler", self.lr_scheduler, SCHEDULES),
                                     ("eval mode", self.eval_mode, EVAL_MODES)):
            if value not in allowed:
                raise ValueError(f"unknown {name} {value!r}; expected one of {allowed}")
        for name in POSITIVE:
            if getattr(self, name) < 1:
                raise ValueError(f"{name.replace('_', '-')} must be >= 1, got {getattr(self, name)}")
        self._check_method()
        if self.max_steps is not None and self.max_steps < 1:
            raise ValueError(f"max-steps must be >= 1, got {self.max_steps}")
        self._check_run()

    def _check_run(self) -> None:
        if not self.out:
            raise ValueError("--out is required")
        if "adapter" in self.model_args or self.adapter is not None:
            raise ValueError("training starts from the base model or --init-adapter DIR; an adapter (--adapter, "
                             "--model-arg adapter=) is for evaluation")
        if self.init_adapter is not None:
            self.init_adapter = str(init_adapter_dir(self.init_adapter))

    def _check_mapped(self) -> None:
        """A foreign --dataset read as --kind's rows (--columns): --category (and the DPO and validation sets) name
        its tasks, checked against it when it is read; it is evaluated on its own test split."""
        if not (self.kind and self.dataset):
            raise ValueError("a mapped training set needs --dataset PATH_OR_REPO and --kind K (and --columns "
                             "field=col,... unless the layout needs none)")
        if self.source is not None or self.data_dir is not None or self.augment:
            raise ValueError(f"--dataset {self.dataset} is read as --kind {self.kind}: --source, --data-dir and "
                             "--augment do not apply")
        self.eval_configs = self.eval_configs or self.categories

    def _check_data(self) -> None:
        """The training, DPO and eval configs (resolved; the source too for one generator config: recorded and
        fingerprinted so). A multiple-choice item config (voxparadox-<task>) is built from its vendored items: no
        --source, and its evaluation builds its test items too, so it is not mixed with the generator's configs."""
        self.category = ",".join(resolve(c) for c in self.categories)
        self.dpo_category = ",".join(resolve(c) for c in self.dpo_categories) if self.dpo_category else None
        self.val_category = ",".join(map(resolve, parse_configs(self.val_category))) if self.val_category else None
        configs = self.categories
        every = list(dict.fromkeys([*configs, *self.dpo_categories, *parse_configs(self.val_category or self.category)]))
        for config in every:
            self._check_config(config)
        generated = [c for c in every if is_vocalgrad(c)]
        if not generated and (self.source is not None or self.data_dir is not None):
            raise ValueError(f"{self.category} is built from its vendored items: --source and --data-dir do not apply")
        if len(generated) == 1:
            self.source = resolve_source(generated[0], self.source)  # recorded and fingerprinted resolved
        if self.mix_weights is not None and (len(self.mix_weights) != len(configs)
                                             or not all(w > 0 for w in self.mix_weights)):
            raise ValueError(f"--mix-weights needs one positive weight per --category config ({len(configs)}), "
                             f"got {self.mix_weights}")
        self.eval_configs = [resolve(c) for c in (self.eval_configs or default_eval_configs(configs))]
        items = [c for c in self.eval_configs if not is_vocalgrad(c)]
        if items and len(items) != len(self.eval_configs):
            raise ValueError(f"--eval-configs mixes built-item configs ({', '.join(items)}) with the generator's: "
                             "evaluate them in separate runs")

    def _check_method(self) -> None:
        """--recipe resolves to its method and objective; the method's knobs must fit it."""
        if self.recipe is not None:
            from finetune.recipe import load_recipe

            recipe = load_recipe(self.recipe)  # a built-in name or a file (ValueError naming it)
            self.method, self.objective = recipe.method, "dpo" if recipe.has_dpo else "ce"
        for name, value, allowed in (("method", self.method, METHODS), ("objective", self.objective, OBJECTIVES),
                                     ("dpo-rejected", self.dpo_rejected, DPO_REJECTED)):
            if value not in allowed:
                raise ValueError(f"unknown {name} {value!r}; expected one of {allowed}")
        if not self.dpo_beta > 0:
            raise ValueError(f"dpo-beta must be > 0, got {self.dpo_beta}")
        self._check_pclm()
        self._check_lrs()

    def _check_lrs(self) -> None:
        """Every learning-rate flag is read by some stage of the run, or refused (never silently unused)."""
        from finetune.recipe import flags_read, run_recipe

        recipe = run_recipe(self)
        read = flags_read(recipe)
        for name in LR_FLAGS:
            value, flag = getattr(self, name), "--" + name.replace("_", "-")
            if value is None:
                continue
            if name not in read:
                used = ", ".join(f"{s.name} at {s.lr:g}" + (f" (--{s.lr_flag.replace('_', '-')})" if s.lr_flag else "")
                                 for s in recipe.stages)
                raise ValueError(f"{flag} is read by no stage of this run (recipe {recipe.name}: {used})")
            if not value > 0:
                raise ValueError(f"{flag.lstrip('-')} must be > 0, got {value}")
        if self.method == "lora" and None not in (self.lr, self.dpo_lr) and self.lr != self.dpo_lr:
            raise ValueError(f"--lr {self.lr:g} and --dpo-lr {self.dpo_lr:g} both name the rate of the one DPO "
                             "stage of --method lora; give one")
        if self.dpo_category and not recipe.has_dpo:
            raise ValueError("--dpo-category is DPO's data set: it goes with --objective dpo or a recipe with DPO")
        for config in (c for stage in recipe.stages for c in stage.data.configs if not self.kind):  # a file's own
            self._check_config(resolve(config))

    def _check_config(self, config: str) -> None:
        """A training config the prompt variant can ask (its vocabulary, or the kind's fixed question)."""
        if is_vocalgrad(config):
            get_variant(self.prompt).vocabulary(config)
        else:
            task_kind(config).accepts(get_variant(self.prompt).name, config)

    def _check_pclm(self) -> None:
        if self.method != "pclm" and (self.pclm_taps or self.pclm_stage1_steps is not None or self.prompt_encoder
                                      or self.pclm_stage2_steps is not None):
            raise ValueError("--pclm-taps, --pclm-stage1-steps, --pclm-stage2-steps and --prompt-encoder go with "
                             "--method pclm")
        for name in ("pclm_stage1_steps", "pclm_stage2_steps"):
            if (value := getattr(self, name)) is not None and value < 0:
                raise ValueError(f"{name.replace('_', '-')} must be >= 0, got {value}")
        if self.method == "pclm" and self.include_audio_tower:
            raise ValueError("--include-audio-tower does not go with --method pclm: the encoder and the final "
                             "projector stay frozen (the mixer copies the projector)")
        if self.pclm_hidden < 1:
            raise ValueError(f"pclm-hidden must be >= 1, got {self.pclm_hidden}")
        encoder = self.prompt_encoder
        if encoder and not (Path(encoder).expanduser().is_dir() or HUB_ID.fullmatch(encoder)):
            raise ValueError(f"--prompt-encoder {encoder}: neither a checkpoint directory nor a Hub id (org/name)")


def default_eval_configs(configs: Sequence[str]) -> list[str]:
    """The nine categories plus the lexical-conflict configs trained on; only the item configs when every
    training config is one (their evaluation builds their own test items)."""
    generated = [c for c in configs if is_vocalgrad(c)]
    if not generated:
        return list(configs)
    return [*CONFIGS, *(c for c in generated if task_kind(c).claims)]  # words that claim a direction: CF / ALA


def init_adapter_dir(path: str) -> Path:
    """The adapter folder of --init-adapter (a vocalgrad-finetune run folder or its adapter/ folder)."""
    folder = Path(path).expanduser()
    for candidate in (folder, folder / ADAPTER_DIR):
        if (candidate / "adapter_config.json").is_file():
            return candidate
    raise ValueError(f"--init-adapter {path}: no adapter_config.json there (nor in its {ADAPTER_DIR}/ folder)")


def default_rejected(configs: Sequence[str], kind: str | None = None) -> str:
    """The paper's DPO rejected answer: a random wrong option of an MCQ item (not its adversarial label) or of a
    mapped dataset's row; on VocalGrad configs the transcript's claim of an incongruent conflict row, else the
    opposite direction."""
    return "claim" if kind is None and all(is_vocalgrad(c) for c in configs) else "random"


def check_resumable(saved: dict[str, Any], settings: TrainSettings, where: Path) -> None:
    """Refuse to continue a run directory whose saved fingerprint differs from these settings'."""
    want = settings.fingerprint()
    diff = sorted(k for k in set(want) | set(saved) if want.get(k) != saved.get(k))
    if diff:
        raise ValueError(f"{where} holds a run with other settings ({', '.join(diff)}); use another --out")


# ---- command line -----------------------------------------------------------------------------------------
PROG = "vocalgrad-finetune"
DESCRIPTION = ("LoRA fine-tuning on one VocalGrad category (SPEC §6) -- or VoxParadox's PCLM and DPO repairs --\n"
               "then evaluation on all nine categories and an optional Hub push.")
EPILOG = "\n\n".join(textwrap.fill(paragraph, 96) for paragraph in (
    f"Run it as `{PROG} ...` or `python -m finetune.train ...` (one process), or on several processes as "
    "`accelerate launch finetune/train.py ...` (or `accelerate launch -m finetune.train ...`).",
    "Recipe defaults are SPEC §6 exactly: 16 clips per optimizer step on any number of processes, 10\u00a0% of the "
    "train split held out, stratified by label. Scopes: `lm_head` adapts only the text head; `all_linear` every "
    "linear layer of the language model (PEFT's \"all-linear\" convention, so not the head). Loss: cross-entropy "
    "on the answer word's tokens and the end-of-turn token only.",
    "A rerun with the same --out resumes from the newest checkpoint (optimizer, scheduler and RNG included) and "
    "ends with the same adapter as an uninterrupted run; a finished run goes straight to what is left "
    "(evaluation, card, push).",
))


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the epilog's paragraphs and ends every option's help with its default, unless it is a flag, a
    required option, or its help already says what the default is."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.required or action.nargs == 0 or "default" in text or action.default is argparse.SUPPRESS:
            return text
        return f"{text} (default: %(default)s)"


RECIPE_FLAGS = (
    ("lora_r", int, "LoRA rank"), ("lora_alpha", int, "LoRA alpha"), ("lora_dropout", float, "LoRA dropout"),
    ("lr", float, "AdamW learning rate of --method lora, SPEC §6's; refused where no stage reads it "
                  "(default: 0.0002)"),
    ("weight_decay", float, "AdamW weight decay"),
    ("batch_size", int, "clips per forward"), ("grad_accum", int, "forwards per optimizer step"),
    ("epochs", int, "passes over the training clips"), ("max_grad_norm", float, "gradient-norm clip"),
    ("seed", int, "seed of LoRA init, split, order and dropout"),
    ("val_fraction", float, "share of each label held out"), ("warmup_steps", int, "linear warm-up steps"),
)


def _add_run_arguments(p: argparse.ArgumentParser, d: TrainSettings) -> None:
    p.add_argument("--category", required=True,
                   help="the config(s) to train on, comma-separated as --configs takes them, e.g. volume, "
                        "volume,pitch, volume-conflict or voxparadox-pitch (VoxParadox-lite items, multiple choice)")
    p.add_argument("--mix-weights", type=_floats_type, default=None,
                   help="one weight per --category config: each epoch takes round(weight x its training clips) of "
                        "it (repeated or subsampled, seeded; default: 1 each)")
    p.add_argument("--dpo-category", default=None,
                   help="DPO's own data set, config(s) as --category (default: the training configs)")
    p.add_argument("--val-category", default=None,
                   help="validate on the held-out share (--val-fraction) of these configs' train splits, configs as "
                        "--category (default: the training configs', never trained on)")
    p.add_argument("--dataset", default=None, metavar="PATH_OR_REPO",
                   help="train on a foreign dataset (folder, file or Hub id; its train split, evaluated on its test "
                        "split) read as --kind's rows, --category naming its tasks (default: the generator's configs)")
    p.add_argument("--kind", default=None, metavar="KIND",
                   help="the task kind --dataset is read as (as `harness eval --kind`), e.g. mcq (default: none)")
    p.add_argument("--columns", default=None, metavar="FIELD=COLUMN,...",
                   help="which --dataset column holds each of the kind's fields (as `harness eval --columns`)")
    p.add_argument("--init-adapter", default=None, metavar="DIR",
                   help="start from this trained adapter (a run folder or its adapter/; LoRA, PCLM and fine-tuned "
                        "LM weights), which is also DPO's reference (default: the base model)")
    p.add_argument("--scope", default=None, choices=SCOPES,
                   help="lm_head: the text head only; all_linear: every linear layer of the language model "
                        "(required, but with --recipe, whose LLM stages fine-tune all_linear)")
    p.add_argument("--include-audio-tower", action="store_true",
                   help="all_linear also adapts the audio encoder and projector (as the published runs did)")
    p.add_argument("--out", required=True, help="run directory (resumed if it exists)")
    p.add_argument("--prompt", default=d.prompt, help="prompt variant (SPEC §5)")


def _add_recipe_arguments(p: argparse.ArgumentParser, d: TrainSettings) -> None:
    g = p.add_argument_group("recipe (SPEC §6)")
    for name, typ, text in RECIPE_FLAGS:
        g.add_argument("--" + name.replace("_", "-"), type=typ, default=getattr(d, name), help=text)
    g.add_argument("--lr-scheduler", choices=SCHEDULES, default=d.lr_scheduler, help="learning-rate schedule")
    g.add_argument("--max-steps", type=int, default=None,
                   help="stop after N optimizer steps (default: every step of every epoch)")
    g.add_argument("--train-limit", type=int, default=None,
                   help="a label-balanced subset of N training clips (default: all of them)")
    g.add_argument("--augment", action="store_true", help="nuisance augmentation (finetune/augment.py)")
    g.add_argument("--no-end-of-turn", dest="end_of_turn", action="store_false",
                   help="train the answer word only, not the token closing the turn")


def _floats_type(text: str) -> list[float]:
    """--mix-weights 2,1: comma-separated numbers."""
    try:
        return [float(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None


def _taps_type(text: str) -> list[int]:
    """--pclm-taps 5,15,25,30: encoder layers (1-based) tapped besides the final one."""
    try:
        return [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated layer numbers, got {text!r}") from None


def _add_method_arguments(p: argparse.ArgumentParser, d: TrainSettings) -> None:
    g = p.add_argument_group("repair method and objective (README \"Repair methods\")")
    g.add_argument("--method", choices=METHODS, default=d.method,
                   help="lora: LoRA on the --scope; pclm: VoxParadox's prompt-conditioned layer mixer (stage 1, the "
                        "mixer only), then the LLM with the mixer frozen (stage 2; finetune/recipes/pclm.yaml)")
    g.add_argument("--objective", choices=OBJECTIVES, default=d.objective,
                   help="ce: cross-entropy on the true answer; dpo: prefer the true answer to a wrong one "
                        "(reference: the model as DPO begins: the base model, the --init-adapter, or under "
                        "--method pclm the stage-2 model)")
    g.add_argument("--recipe", default=None, metavar="NAME|FILE",
                   help="pclm+dpo (= --method pclm --objective dpo): VoxParadox's three stages as declared in "
                        "finetune/recipes/pclm_dpo.yaml -- stage 1 the mixer (LLM frozen), stage 2 the LLM (full "
                        "fine-tuning, the LM head included, when the device holds it), then DPO on --dpo-category "
                        "against the stage-2 model; or a recipe YAML file of the same shape (default: none)")
    g.add_argument("--dpo-beta", type=float, default=d.dpo_beta, help="DPO's beta")
    g.add_argument("--rejected", "--dpo-rejected", dest="dpo_rejected", choices=DPO_REJECTED, default=None,
                   help="DPO's rejected answer: random (a wrong option drawn per row), adversarial (a "
                        "multiple-choice item's adversarial label) or claim (an incongruent conflict row's claim); "
                        "adversarial and claim fall back to a random wrong option where a row has none (default: "
                        "VoxParadox's: random for voxparadox-<task> items, claim on VocalGrad configs, i.e. a random "
                        "wrong answer -- the opposite direction of a binary task -- but the claim on incongruent "
                        "conflict rows)")
    g.add_argument("--pclm-taps", type=_taps_type, default=None,
                   help="encoder layers tapped besides the final one, e.g. 5,15,25,30 (default: the paper's "
                        "{5, 15, 25, 30} of 32 layers mapped proportionally onto the model's encoder)")
    g.add_argument("--pclm-hidden", type=int, default=d.pclm_hidden, help="hidden width of the mixer's MLP")
    g.add_argument("--pclm-stage1-steps", type=int, default=None,
                   help="optimizer steps of PCLM stage 1 (mixer only, LLM frozen; default: the recipe's, one epoch "
                        "of its data, at most --max-steps)")
    g.add_argument("--pclm-stage2-steps", type=int, default=None,
                   help="optimizer steps of PCLM stage 2 (the LLM by cross-entropy; default: the recipe's, one "
                        "epoch of its data, at most --max-steps)")
    g.add_argument("--pclm-lr", type=float, default=None,
                   help="learning rate of both PCLM stages (default: the recipe's, VoxParadox's 5e-5)")
    g.add_argument("--dpo-lr", type=float, default=None,
                   help="learning rate of every DPO stage (default: the recipe's, VoxParadox's 5e-7; under "
                        "--method lora --objective dpo: --lr's)")
    g.add_argument("--full-finetune", action=argparse.BooleanOptionalAction, default=None,
                   help="the LLM stages fine-tune every LLM weight, the LM head included (not the input "
                        "embeddings), instead of LoRA (default: the recipe's; pclm+dpo: full when the device "
                        "holds it, else LoRA recorded as not the paper's protocol)")
    g.add_argument("--prompt-encoder", default=None, metavar="DIR|HUB_ID",
                   help="a BERT-style encoder (checkpoint directory or Hub id) reading the user's prompt text "
                        "only, mean-pooled, for the mixer's weights, as the paper does (default: the frozen LM's "
                        "input embeddings mean-pooled over the prompt's text tokens; not the paper's protocol)")


def _add_mechanics_arguments(p: argparse.ArgumentParser, d: TrainSettings) -> None:
    m = p.add_argument_group("mechanics (the adapter does not depend on these)")
    m.add_argument("--save-every", type=int, default=d.save_every, help="checkpoint every N optimizer steps")
    m.add_argument("--keep-checkpoints", type=int, default=d.keep_checkpoints, help="newest checkpoints kept")
    m.add_argument("--num-workers", type=int, default=d.num_workers, help="processes rendering training clips")
    m.add_argument("--no-gradient-checkpointing", dest="gradient_checkpointing", action="store_false",
                   help="keep the trained part's activations instead of recomputing them in the backward pass")
    m.add_argument("--val-limit", type=int, default=None,
                   help="first N validation clips only (default: all of them)")
    m.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    m.add_argument("--verbose", action="store_true",
                   help="also show transformers'/accelerate's/datasets' own progress bars, logs and FutureWarnings")


def _add_eval_arguments(p: argparse.ArgumentParser, d: TrainSettings) -> None:
    e = p.add_argument_group("evaluation and publishing")
    e.add_argument("--skip-eval", action="store_true", help="stop after training (no evaluation, no card)")
    e.add_argument("--eval-configs", type=configs_type, default=None,
                   help="configs evaluated on their test split (default: all nine, and a -conflict --category "
                        "itself; for a voxparadox-<task> --category, that config alone)")
    e.add_argument("--eval-mode", choices=EVAL_MODES, default=d.eval_mode, help="the harness' scoring mode")
    e.add_argument("--eval-source", default=None, help="generator source of the test clips (default: --source)")
    e.add_argument("--eval-data-dir", default=None, help="corpus root for --eval-source (default: --data-dir)")
    e.add_argument("--eval-limit", type=int, default=None,
                   help="evaluate a sample of N test clips per config, stratified over source clip, tier, curve "
                        "and direction like `harness eval --limit`; of voxparadox-<task> items, the first N in "
                        "build order (default: all of them)")
    e.add_argument("--eval-batch-size", type=int, default=d.eval_batch_size,
                   help="prompts per model call when scoring (validation and evaluation)")
    e.add_argument("--eval-base", action="store_true", help="also evaluate the base model (adapter off)")
    e.add_argument("--push-to-hub", default=None, metavar="REPO",
                   help="model repo for adapter + card + eval results (default: no push)")
    e.add_argument("--hub-private", action="store_true", help="create the --push-to-hub model repo private")
    e.add_argument("--results-repo", default=None, metavar="REPO",
                   help="dataset repo collecting evaluation runs (default: no push)")
    e.add_argument("--dataset-repo", default=d.dataset_repo, help="benchmark dataset id named in .eval_results")


def build_parser() -> argparse.ArgumentParser:
    """The `vocalgrad-finetune` arguments (recipe flags default to SPEC §6)."""
    d = TrainSettings(model="", category="", scope="")
    p = argparse.ArgumentParser(prog=PROG, description=DESCRIPTION, epilog=EPILOG, formatter_class=HelpFormatter)
    add_version_argument(p)
    add_model_arguments(p, batch_size=None, adapter=False)
    add_source_arguments(p, what="train split (default: the config's own source; vctk for the nine categories)",
                         default=None)
    _add_run_arguments(p, d)
    _add_recipe_arguments(p, d)
    _add_method_arguments(p, d)
    _add_mechanics_arguments(p, d)
    _add_eval_arguments(p, d)
    return p


def settings_from_argv(argv: Sequence[str] | None = None) -> TrainSettings:
    """TrainSettings from command-line arguments."""
    return settings_from_args(TrainSettings, build_parser().parse_args(argv))
