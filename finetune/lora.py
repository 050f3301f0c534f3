"""The LoRA adapter through PEFT: which linear layers a scope targets, injecting them, their tensors, saving
them, and activation checkpointing of the part that trains."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from finetune.runtimes import runtime_lora
from harness.models.protocol import TrainableAudioLM

if TYPE_CHECKING:
    from peft import PeftModel

    from finetune.settings import TrainSettings

AUDIO_SIDE_EXCLUDED = re.compile(r"vision|visual|image")  # --include-audio-tower adapts no vision module


DEFAULT = "default"  # ours, when the model has no built-in adapter of that name
APART = "vocalgrad"  # ours when "default" is a built-in adapter's (Granite Speech's LLM LoRA)
OURS_ATTR = "vocalgrad_adapter"  # set on the model by attach_lora: the name of the adapter we train


def _tuner_layers(model: torch.nn.Module) -> list[tuple[str, torch.nn.Module]]:
    from peft.tuners.tuners_utils import BaseTunerLayer

    return [(n, m) for n, m in model.named_modules() if isinstance(m, BaseTunerLayer)]


def builtin_adapters(model: torch.nn.Module) -> set[str]:
    """Names of the adapters the checkpoint itself carries (Phi-4-multimodal's speech LoRA, Granite Speech's
    LLM LoRA), found in its PEFT layers before ours is attached."""
    ours = getattr(model, OURS_ATTR, None)
    return {a for _, m in _tuner_layers(model) for a in getattr(m, "lora_A", {}) if a != ours}


def linear_names(model: torch.nn.Module) -> list[str]:
    """Dotted names of every torch.nn.Linear in `model`; a built-in PEFT layer that wraps a Linear counts as
    that Linear (by its own name), the modules inside it (base_layer, lora_A/B.*) do not."""
    inside = [n + "." for n, m in _tuner_layers(model)
              if isinstance(getattr(m, "base_layer", None), torch.nn.Linear)]
    names = [n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)
             and not any(n.startswith(p) for p in inside)]
    order = {n: i for i, (n, _) in enumerate(model.named_modules())}
    return sorted(names + [p[:-1] for p in inside], key=order.__getitem__)


def _scope_names(lm: TrainableAudioLM, linear: list[str], scope: str, include_audio_tower: bool) -> list[str]:
    head, decoder = lm.lm_head_path, lm.decoder_path
    if scope == "lm_head":
        if include_audio_tower:
            raise ValueError("--include-audio-tower goes with --scope all_linear")
        return [n for n in linear if n == head]
    names = [n for n in linear if n.startswith(decoder + ".")]
    if include_audio_tower:
        # Everything outside the decoder and the head that serves audio (encoder, projector); not vision.
        names += [n for n in linear if n != head and not n.startswith(decoder + ".")
                  and not AUDIO_SIDE_EXCLUDED.search(n)]
    return names


def _target_pattern(lm: TrainableAudioLM, names: list[str], scope: str) -> str:
    if scope == "lm_head":
        return f"^{re.escape(lm.lm_head_path)}$"
    decoder = lm.decoder_path
    # The decoder by its path; audio-side modules by their top two levels (e.g. model.audio_tower).
    prefixes = sorted({decoder if n.startswith(decoder + ".") else ".".join(n.split(".")[:2]) for n in names})
    leaves = sorted({n.rsplit(".", 1)[-1] for n in names})
    return "^(?:" + "|".join(map(re.escape, prefixes)) + r")\.(?:.*\.)?(?:" + "|".join(map(re.escape, leaves)) + ")$"


def lora_targets(lm: TrainableAudioLM, scope: str, include_audio_tower: bool = False) -> tuple[str, list[str]]:
    """(PEFT target regex, the module names it selects) for a scope on a wrapped transformers model."""
    linear = linear_names(lm.model)
    names = _scope_names(lm, linear, scope, include_audio_tower)
    if not names:
        raise ValueError(f"{lm.name}: scope {scope!r} selects no linear layer "
                         f"(decoder {lm.decoder_path!r}, head {lm.lm_head_path!r})")
    pattern = _target_pattern(lm, names, scope)
    selected = [n for n in linear if re.fullmatch(pattern, n)]
    if sorted(selected) != sorted(names):  # the regex is what PEFT gets: it must select exactly these
        extra = sorted(set(selected) - set(names))[:3]
        raise RuntimeError(f"LoRA target pattern selects other modules too, e.g. {extra}")
    return pattern, sorted(names)


def attach_lora(lm: TrainableAudioLM, settings: TrainSettings) -> tuple[PeftModel, list[str]]:
    """Inject trainable LoRA layers into lm.model in place; returns (the PeftModel handle, targeted modules)."""
    from peft import LoraConfig, get_peft_model

    # Kimi-Audio, MiMo-Audio, Step-Audio 2 (their own runtimes): the paper's scopes and task type
    runtime = runtime_lora(lm, settings)
    targets, names = ((runtime.targets, runtime.targets) if runtime is not None
                      else lora_targets(lm, settings.scope, settings.include_audio_tower))
    builtin = builtin_adapters(lm.model)
    ours = APART if DEFAULT in builtin else DEFAULT  # named apart from the checkpoint's own adapters
    # What each built-in PEFT layer had switched on: PEFT activates only the new adapter, so it is restored.
    active = {id(m): list(m.active_adapters) for _, m in _tuner_layers(lm.model)}
    config = LoraConfig(
        r=settings.lora_r,
        lora_alpha=settings.lora_alpha,
        lora_dropout=settings.lora_dropout,
        target_modules=targets,
        bias="none",
        revision=lm.base_revision(),
        task_type=runtime.task_type if runtime is not None else None,
    )
    peft_model = get_peft_model(lm.model, config, adapter_name=ours)
    # Set after creation: PEFT would overwrite it from the model's own (possibly empty) name_or_path.
    peft_model.peft_config[ours].base_model_name_or_path = lm.model_id
    setattr(lm.model, OURS_ATTR, ours)
    for _, m in _tuner_layers(lm.model):  # theirs stay active beside ours (frozen); ours where it was injected
        m._active_adapter = active.get(id(m), []) + ([ours] if ours in m.lora_A else [])
    for n, p in lm.model.named_parameters():
        if "lora_" in n:
            p.requires_grad_(is_ours(n, ours))
    wrapped = sorted(n for n, m in _tuner_layers(lm.model)
                     if ours in m.lora_A and isinstance(getattr(m, "base_layer", None), torch.nn.Linear))
    if wrapped != names:
        raise RuntimeError(f"PEFT wrapped {len(wrapped)} modules with adapter {ours!r}, expected {len(names)}")
    if runtime is not None:
        runtime.prepare(lm.model)
    return peft_model, names


def is_ours(param_name: str, ours: str) -> bool:
    """Whether a LoRA parameter (`...lora_A.<adapter>.weight`) belongs to adapter `ours`."""
    return re.search(rf"\.lora_[A-Za-z_]+\.{re.escape(ours)}(?:\.|$)", param_name) is not None


def our_lora_names(model: torch.nn.Module) -> list[str]:
    """Parameter names of the LoRA we train (not a built-in adapter's)."""
    ours = getattr(model, OURS_ATTR, DEFAULT)
    return [n for n, _ in model.named_parameters() if "lora_" in n and is_ours(n, ours)]


def _ours(peft_model: PeftModel) -> str:
    return getattr(peft_model.get_base_model(), OURS_ATTR, DEFAULT)


def trainable_parameters(model: torch.nn.Module) -> list[torch.nn.Parameter]:
    """The parameters the optimizer updates (the LoRA matrices once attach_lora has run)."""
    return [p for p in model.parameters() if p.requires_grad]


def base_parameter_count(model: torch.nn.Module) -> int:
    """Parameters of the base model, without the LoRA matrices and a PCLM's additions (`pclm.*`)."""
    return sum(p.numel() for n, p in model.named_parameters() if "lora_" not in n and not n.startswith("pclm."))


def set_activation_checkpointing(lm: TrainableAudioLM, whole: bool, on: bool) -> torch.nn.Module | None:
    """Switch activation checkpointing of the decoder (the whole model when the audio tower trains too);
    returns the module switched, or None when it does not support checkpointing.

    Only the trained part: checkpointing the whole model would also make the frozen encoder's outputs
    require grad, so every step would run (and recompute) a backward through it for nothing.
    Non-reentrant checkpointing works with frozen inputs and replays dropout with the saved RNG state.
    """
    module = lm.model if whole else lm.model.get_submodule(lm.decoder_path)
    if not getattr(module, "supports_gradient_checkpointing", False):
        return None
    # activation_checkpointing_* in current transformers; gradient_checkpointing_* (its deprecated alias) before.
    if on and hasattr(module, "activation_checkpointing_enable"):
        module.activation_checkpointing_enable({"use_reentrant": False})
    elif on:
        module.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    else:
        (getattr(module, "activation_checkpointing_disable", None) or module.gradient_checkpointing_disable)()
    return module


def adapter_state(peft_model: PeftModel) -> dict[str, torch.Tensor]:
    """The trainable adapter tensors only (no base weights, no embedding copies)."""
    from peft import get_peft_model_state_dict

    return get_peft_model_state_dict(peft_model, adapter_name=_ours(peft_model), save_embedding_layers=False)


def load_adapter_state(peft_model: PeftModel, weights: dict[str, torch.Tensor]) -> None:
    """Put adapter tensors saved by adapter_state (a checkpoint's) back into the model."""
    from peft import set_peft_model_state_dict

    set_peft_model_state_dict(peft_model, weights, adapter_name=_ours(peft_model))


@contextmanager
def adapters_disabled(model: torch.nn.Module) -> Iterator[None]:
    """The same weights with our LoRA switched off (the untuned baseline), switched back on after; built-in
    adapters stay active. A model without attach_lora's mark (e.g. one loaded with an adapter) has every LoRA
    layer switched off."""
    ours = getattr(model, OURS_ATTR, None)
    layers = [m for _, m in _tuner_layers(model)]
    if ours is None:
        for m in layers:
            m.enable_adapters(False)
        try:
            yield
        finally:
            for m in layers:
                m.enable_adapters(True)
        return
    saved = [(m, m._active_adapter) for m in layers]
    for m, was in saved:
        m._active_adapter = [a for a in ([was] if isinstance(was, str) else was) if a != ours]
    try:
        yield
    finally:
        for m, was in saved:
            m._active_adapter = was


def save_adapter(peft_model: PeftModel, path: Path, extra: Callable[[Path], None] | None = None) -> None:
    """PEFT's adapter_config.json + adapter_model.safetensors (and what `extra` writes into the folder, e.g.
    the PCLM), written under a temporary name, then renamed."""
    tmp = path.with_name(f".{path.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    ours = _ours(peft_model)
    peft_model.save_pretrained(str(tmp), safe_serialization=True, save_embedding_layers=False,
                               selected_adapters=[ours])  # ours only, never a built-in adapter
    if ours != DEFAULT:  # PEFT writes a non-default adapter into a subfolder: the folder holds it at the top
        for f in (tmp / ours).iterdir():
            os.replace(f, tmp / f.name)
        (tmp / ours).rmdir()
    (tmp / "README.md").unlink(missing_ok=True)  # PEFT's template card; ours is written by finetune.card
    if extra is not None:
        extra(tmp)
    shutil.rmtree(path, ignore_errors=True)
    os.replace(tmp, path)
