"""What the runtime trainers share: the paper's two scopes, its LoRA task type, the checks of what these runs
support, and the registry from a wrapper (its spec's name) to its trainer.

The paper's scripts (ynklab/vocalgrad plic/kimi_finetune.py collect_lora_target_modules and its MiMo and
Step-Audio 2 twins) target `lm_head` alone, or every named torch.nn.Linear of the wrapped model (so, unlike
PEFT's "all-linear", the output heads too), with LoraConfig(task_type=CAUSAL_LM, r=8, lora_alpha=16,
lora_dropout=0.05, bias="none"); each trains one clip per forward on one device.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from finetune.settings import TrainSettings

TASK_TYPE = "CAUSAL_LM"
MODULES = {"kimi-audio": "kimi", "mimo-audio": "mimo", "step-audio-2-mini": "step"}  # spec name -> module here


class RuntimeTrainer:
    """One runtime's fine-tuning hooks: which linear layers a scope adapts, the paper's per-row loss."""

    name: str  # the wrapper spec's name (harness.models.external)
    input_require_grads: bool = False  # the paper called enable_input_require_grads (Kimi-Audio)
    excluded: tuple[str, ...] = ()  # module-name parts never adapted (e.g. an audio tokenizer)
    source: str = ""  # where the loss was read

    def lora_targets(self, model: torch.nn.Module, scope: str) -> list[str]:
        """`lm_head` alone, or every named torch.nn.Linear of `model` but the excluded ones (sorted)."""
        if scope == "lm_head":
            names = [n for n, m in model.named_modules() if n == "lm_head" and isinstance(m, torch.nn.Linear)]
        else:
            names = [n for n, m in model.named_modules()
                     if n and isinstance(m, torch.nn.Linear) and not any(x in n for x in self.excluded)]
        if not names:
            raise ValueError(f"{self.name}: scope {scope!r} selects no linear layer of the runtime's model")
        return sorted(names)

    def row_loss(self, lm: Any, model: torch.nn.Module, batch: dict[str, Any]) -> torch.Tensor:
        """() the paper's masked cross-entropy of one row (its encoding by the wrapper's `encode`)."""
        raise NotImplementedError

    def losses(self, lm: Any, model: torch.nn.Module, inputs: dict[str, Any]) -> torch.Tensor:
        """(B,) the rows' losses (the runtimes' forwards take one clip each)."""
        return torch.stack([self.row_loss(lm, model, batch) for batch in inputs["rows"]])

    def prepare(self, model: torch.nn.Module) -> None:
        """The paper's training switches after LoRA is attached: no KV cache, input gradients where it asked."""
        config = getattr(model, "config", None)
        if config is not None and hasattr(config, "use_cache"):
            config.use_cache = False
        if self.input_require_grads and callable(getattr(model, "enable_input_require_grads", None)):
            model.enable_input_require_grads()


def masked_mean_ce(logits: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over the masked positions ((1, T, V) logits, (1, T) labels and mask), denominator
    clamped at 1, as every one of the paper's loss functions computes it."""
    flat = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), reduction="none")
    weights = mask.reshape(-1).float()
    return (flat * weights).sum() / weights.sum().clamp(min=1.0)


def runtime_trainer(lm: Any) -> RuntimeTrainer | None:
    """The trainer of an external runtime wrapper (Kimi-Audio, MiMo-Audio, Step-Audio 2 mini); None otherwise."""
    name = getattr(getattr(lm, "spec", None), "name", None)
    if getattr(lm, "kind", None) != "external" or name not in MODULES:
        return None
    return importlib.import_module(f"finetune.runtimes.{MODULES[name]}").TRAINER


@dataclass(frozen=True)
class RuntimeLora:
    """How LoRA attaches to a runtime's model: the target module names, PEFT's task type, the switches."""

    targets: list[str]
    task_type: str
    prepare: Callable[[torch.nn.Module], None]


def check_settings(trainer: RuntimeTrainer, settings: TrainSettings) -> None:
    """ValueError for what the runtime runs do not support (the paper trained them by LoRA and cross-entropy,
    one device)."""
    if settings.method != "lora" or settings.objective != "ce":
        raise ValueError(f"{trainer.name}: --method {settings.method} --objective {settings.objective} is not "
                         "available through this runtime; it trains by --method lora --objective ce (the paper's)")
    if settings.include_audio_tower:
        raise ValueError(f"{trainer.name}: --include-audio-tower does not apply: the paper's all_linear scope of "
                         "this runtime already decides which modules adapt")
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise ValueError(f"{trainer.name} trains on one process (as the paper did); run it without accelerate launch")


def runtime_lora(lm: Any, settings: TrainSettings) -> RuntimeLora | None:
    """The paper's LoRA plan for a runtime wrapper (settings checked); None for the transformers families."""
    trainer = runtime_trainer(lm)
    if trainer is None:
        return None
    check_settings(trainer, settings)
    return RuntimeLora(trainer.lora_targets(lm.model, settings.scope), TASK_TYPE, trainer.prepare)


def runtime_losses(lm: Any) -> Callable[[torch.nn.Module, dict[str, Any], bool], torch.Tensor] | None:
    """The (model, inputs, keep_logits) -> (B,) losses of a runtime wrapper; None for the transformers families
    (their answer_losses applies)."""
    trainer = runtime_trainer(lm)
    if trainer is None:
        return None

    def losses(model: torch.nn.Module, inputs: dict[str, Any], keep_logits: bool = False) -> torch.Tensor:
        return trainer.losses(lm, model, inputs)

    return losses
