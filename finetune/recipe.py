"""A run's recipe as declared data: its stages, what each trains, on which data, at which learning rate and for how
long (finetune/recipes/*.yaml, or a user's YAML file given to --recipe), loaded into typed dataclasses.

    --method lora                  one stage "lora" by --objective (no file: SPEC §6's recipe)
    --method pclm                  finetune/recipes/pclm.yaml: stage 1 the mixer, stage 2 the LLM
    --recipe pclm+dpo              finetune/recipes/pclm_dpo.yaml (also --method pclm --objective dpo): VoxParadox's
                                   three stages, DPO on its own data set against the stage-2 model
    --recipe PATH.yaml             any file of the same shape (e.g. other data per stage, other lengths)

Learning rates: every stage's rate is the file's, overridden by the flag the stage names (`lr_flag`: --pclm-lr,
--dpo-lr, --lr); finetune.settings refuses a flag that no stage of the run reads.

Nothing here imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

import yaml

RECIPE_DIR = Path(__file__).with_name("recipes")
BUILTIN = {"pclm+dpo": "pclm_dpo.yaml", "pclm": "pclm.yaml"}
OBJECTIVES = ("ce", "dpo")
TRAINS = ("mixer", "llm")
LLM_MODES = ("full", "lora")
DATA_SETS = ("train", "dpo")  # the run's declared sets: --category (and --mix-weights), --dpo-category
LR_FLAGS = ("lr", "pclm_lr", "dpo_lr")
SPEC_LORA_LR = 2e-4  # SPEC §6's LoRA rate: --method lora's default


class TrainSettings(Protocol):
    """The settings a recipe reads (finetune.settings.TrainSettings has them; not imported: it imports this)."""

    recipe: str | None
    method: str
    objective: str
    lr: float | None
    pclm_lr: float | None
    dpo_lr: float | None
    pclm_stage1_steps: int | None
    pclm_stage2_steps: int | None


@dataclass(frozen=True)
class DataDecl:
    """A stage's training data: one of the run's declared sets, or configs of its own with mixing weights."""

    use: str | None = None  # "train" or "dpo"; None: the configs below
    configs: tuple[str, ...] = ()
    weights: tuple[float, ...] = ()  # one per config (default all 1.0): each config's share of an epoch, see mixture

    def describe(self) -> str:
        """A short text for records ("train", "dpo" or "volume x1, pitch x2")."""
        return self.use or ", ".join(f"{c} x{w:g}" for c, w in zip(self.configs, self.weights, strict=True))


@dataclass(frozen=True)
class StageDecl:
    """One stage: its objective, what it trains, its data, learning rate and length."""

    name: str
    objective: str
    trains: tuple[str, ...]
    data: DataDecl
    lr: float
    lr_flag: str | None = None  # the command-line flag (a TrainSettings field) that overrides lr
    epochs: int | None = None  # None: --epochs
    steps: int | None = None  # wins over epochs

    @property
    def trains_mixer(self) -> bool:
        return "mixer" in self.trains

    @property
    def trains_llm(self) -> bool:
        return "llm" in self.trains


@dataclass(frozen=True)
class Recipe:
    """A run's stages in order, its method (lora or pclm), how its LLM stages train (full or lora) and what the
    paper does, in words."""

    name: str
    method: str
    llm: str
    stages: tuple[StageDecl, ...]
    paper: str = ""
    source: str = ""  # the file it was read from ("" for --method lora's built-in one)

    @property
    def has_dpo(self) -> bool:
        return any(s.objective == "dpo" for s in self.stages)


def _where(source: str, what: str) -> str:
    return f"{source}: {what}"


def _data_decl(raw: Any, source: str, stage: str) -> DataDecl:
    if isinstance(raw, str):
        if raw not in DATA_SETS:
            raise ValueError(_where(source, f"stage {stage}: data {raw!r} is not one of {DATA_SETS} or a mapping"))
        return DataDecl(use=raw)
    if not isinstance(raw, dict) or not raw.get("configs"):
        raise ValueError(_where(source, f"stage {stage}: data needs `configs: [...]` (or train / dpo)"))
    configs = tuple(str(c) for c in raw["configs"])
    weights = tuple(float(w) for w in raw.get("weights") or [1.0] * len(configs))
    if len(weights) != len(configs) or not all(w > 0 for w in weights):
        raise ValueError(_where(source, f"stage {stage}: weights must be one positive number per config"))
    return DataDecl(None, configs, weights)


def _length(raw: dict[str, Any], key: str, source: str, stage: str) -> int | None:
    value = raw.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or value < 1:
        raise ValueError(_where(source, f"stage {stage}: {key} must be an integer >= 1, got {value!r}"))
    return value


def _stage(raw: Any, source: str, index: int) -> StageDecl:
    """One stage of a recipe file, checked (ValueError naming the file and the stage)."""
    if not isinstance(raw, dict) or "name" not in raw:
        raise ValueError(_where(source, f"stage {index + 1} is not a mapping with a name"))
    name = str(raw["name"])
    objective, trains = raw.get("objective", "ce"), tuple(raw.get("trains") or ())
    if objective not in OBJECTIVES or not trains or not set(trains) <= set(TRAINS):
        raise ValueError(_where(source, f"stage {name}: objective must be one of {OBJECTIVES} and trains a "
                                        f"non-empty subset of {TRAINS}"))
    flag = raw.get("lr_flag")
    if flag is not None and flag not in LR_FLAGS:
        raise ValueError(_where(source, f"stage {name}: lr_flag {flag!r} is not one of {LR_FLAGS}"))
    try:
        lr = float(raw["lr"])
    except (KeyError, TypeError, ValueError):
        raise ValueError(_where(source, f"stage {name}: lr (a number) is required")) from None
    return StageDecl(name, objective, trains, _data_decl(raw.get("data", "train"), source, name), lr, flag,
                     _length(raw, "epochs", source, name), _length(raw, "steps", source, name))


def parse_recipe(raw: Any, source: str) -> Recipe:
    """A recipe from a parsed YAML document (ValueError naming `source` when it is not one)."""
    if not isinstance(raw, dict) or not isinstance(raw.get("stages"), list) or not raw["stages"]:
        raise ValueError(_where(source, "not a recipe (a mapping with a non-empty `stages` list)"))
    method, llm = raw.get("method", "pclm"), raw.get("llm", "lora")
    if method not in ("lora", "pclm") or llm not in LLM_MODES:
        raise ValueError(_where(source, f"method must be lora or pclm and llm one of {LLM_MODES}"))
    stages = tuple(_stage(s, source, i) for i, s in enumerate(raw["stages"]))
    if len({s.name for s in stages}) != len(stages):
        raise ValueError(_where(source, "stage names must be distinct"))
    if method == "lora" and any(s.trains_mixer for s in stages):
        raise ValueError(_where(source, "a stage trains the mixer but the method is lora"))
    return Recipe(str(raw.get("name") or Path(source).stem), method, llm, stages, str(raw.get("paper") or ""), source)


def recipe_path(name: str) -> Path:
    """The file of a built-in recipe name, or `name` itself as a path to a YAML file."""
    if name in BUILTIN:
        return RECIPE_DIR / BUILTIN[name]
    path = Path(name).expanduser()
    if path.suffix not in (".yaml", ".yml") or not path.is_file():
        raise ValueError(f"unknown recipe {name!r}; expected one of {tuple(BUILTIN)} or a recipe .yaml file")
    return path


def load_recipe(name: str) -> Recipe:
    """A built-in recipe by name, or a recipe YAML file."""
    path = recipe_path(name)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise ValueError(f"{path}: not valid YAML ({str(err).splitlines()[0]})") from None
    return parse_recipe(raw, str(path))


def lora_recipe(objective: str) -> Recipe:
    """--method lora: one stage training the LLM's LoRA (or the whole LLM) by the objective, at --lr (--dpo-lr
    for DPO when given)."""
    flag = "dpo_lr" if objective == "dpo" else "lr"
    stage = StageDecl(name="lora", objective=objective, trains=("llm",), data=DataDecl(use="dpo" if objective == "dpo"
                      else "train"), lr=SPEC_LORA_LR, lr_flag=flag)
    return Recipe("lora", "lora", "lora", (stage,), "SPEC §6: LoRA at 2e-4")


def run_recipe(settings: TrainSettings) -> Recipe:
    """The recipe a run follows (its --recipe, else its --method and --objective), learning-rate flags applied."""
    if settings.recipe is not None:
        recipe = load_recipe(settings.recipe)
    elif settings.method == "pclm":
        recipe = load_recipe("pclm+dpo" if settings.objective == "dpo" else "pclm")
    else:
        recipe = lora_recipe(settings.objective)
    return replace(recipe, stages=tuple(_with_flags(s, settings) for s in recipe.stages))


def _with_flags(stage: StageDecl, settings: TrainSettings) -> StageDecl:
    """A stage with its learning-rate flag and the --pclm-stage{1,2}-steps lengths applied."""
    lr = stage.lr
    if stage.lr_flag == "dpo_lr" and settings.dpo_lr is None and settings.lr is not None:
        lr = settings.lr  # --method lora --objective dpo: --lr is the one stage's rate when --dpo-lr is not given
    if stage.lr_flag is not None and getattr(settings, stage.lr_flag) is not None:
        lr = getattr(settings, stage.lr_flag)
    steps = {"pclm-stage1": settings.pclm_stage1_steps, "pclm-stage2": settings.pclm_stage2_steps}.get(stage.name)
    return replace(stage, lr=lr, steps=stage.steps if steps is None else steps)


def flags_read(recipe: Recipe) -> set[str]:
    """The learning-rate flags some stage of the recipe reads (--lr also by a --method lora DPO stage)."""
    flags = {s.lr_flag for s in recipe.stages if s.lr_flag}
    if recipe.method == "lora" and "dpo_lr" in flags:  # its DPO stage falls back to --lr (_with_flags)
        flags.add("lr")
    return flags
