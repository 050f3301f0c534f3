"""training.json: what a finished run trained (settings, base model, LoRA targets, data, steps, validation,
versions), read back by a rerun that goes straight to evaluation and by the card and the Hub push."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from finetune.data import StepCounts, TrainingData, label_of
from finetune.items import SOURCE_NAME
from finetune.settings import TRAINING_JSON, TrainSettings
from harness.models.protocol import TrainableAudioLM
from harness.settings import settings_record
from vocalgrad_dataset import grid
from vocalgrad_dataset.fileio import atomic_write_text


def read_training_record(out: Path) -> dict[str, Any] | None:
    """The record of a finished run in `out`, or None when it has not finished."""
    path = out / TRAINING_JSON
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def write_training_record(out: Path, info: Mapping[str, Any]) -> None:
    """Write (or rewrite, once evaluated) the run's training.json."""
    atomic_write_text(out / TRAINING_JSON, json.dumps(info, indent=2, allow_nan=True) + "\n")


def _one_set(data: TrainingData) -> dict[str, Any]:
    """One config's clips (counts and SPEC §2 id-set hashes) and where they come from."""
    from vocalgrad_dataset.generate import GENERATOR_VERSION

    split, train_ids = data.split, data.train_ids
    shared = {
        "config": data.renderer.config, "n_split": len(split.train) + len(split.val), "n_train": len(train_ids),
        "n_val": len(split.val), "train_ids_sha256": grid.ids_sha256(train_ids),
        "val_ids_sha256": grid.ids_sha256(split.val),
    }  # fmt: skip
    if getattr(data.renderer, "kind", None):  # a dataset mapped onto a kind (finetune.mapped)
        return {**shared, "source": data.renderer.source_name, "kind": data.renderer.kind,
                "held_out_by": "sha256(seed, id) < val_fraction, per item"}
    if data.renderer.source_name == SOURCE_NAME:  # multiple-choice items (finetune.items)
        from vocalgrad_dataset.voxparadox import BUILDER_VERSION

        return {**shared, "source": SOURCE_NAME, "builder_version": BUILDER_VERSION,
                "held_out_by": "sha256(seed, id) < val_fraction, per item"}
    return {**shared, "source": data.renderer.source_name, "generator_version": GENERATOR_VERSION,
            "n_train_increase": sum(label_of(i, data.renderer.spec.recipe) == "increase" for i in train_ids),
            "stratified_by": "label"}


def set_info(data: TrainingData) -> dict[str, Any]:
    """A data set's record: one config's (_one_set), or a mixture's configs, each with its weight and clips
    per epoch (validation: every config's held-out share)."""
    if not data.parts:
        return _one_set(data)
    return {"config": data.renderer.config, "n_train": len(data.train_ids), "n_val": len(data.split.val),
            "mixture": [{**_one_set(part), "weight": weight,
                         "per_epoch": sum(i.startswith(config + "::") for i in data.train_ids)}
                        for config, weight, part in data.parts]}


def data_info(settings: TrainSettings, data: TrainingData) -> dict[str, Any]:
    """Which clips trained and validated (counts and SPEC §2 id-set hashes; a mixture's per config)."""
    return {**set_info(data), "split": "train", "prompt_variant": settings.prompt,
            "val_fraction": settings.val_fraction}


def augment_info(settings: TrainSettings) -> dict[str, Any]:
    """Whether clips were augmented, and with which transforms."""
    if not settings.augment:
        return {"enabled": False}
    from finetune.augment import describe

    return {"enabled": True, "library": "audiomentations", "transforms": describe(settings.category)}


def versions() -> dict[str, str]:
    """The harness' recorded versions plus the training stack's."""
    from importlib.metadata import version

    from harness.results import versions as harness_versions

    return {**harness_versions(), **{p: version(p) for p in ("torch", "transformers", "peft", "accelerate")}}


def base_model_info(settings: TrainSettings, lm: TrainableAudioLM, base_params: int) -> dict[str, Any]:
    """The weights the adapter applies to."""
    return {
        "registry_name": settings.model,
        "model_id": lm.model_id,
        "family": lm.family,
        "revision": lm.base_revision(),
        "dtype": str(lm.dtype).removeprefix("torch."),
        "params": base_params,
    }


def training_record(settings: TrainSettings, lm: TrainableAudioLM, data: TrainingData, steps: StepCounts, *,
                    base_params: int, targets: Sequence[str], trainable_params: int, log: Sequence[Mapping[str, Any]],
                    world_size: int, validation: Mapping[str, float], seconds: float,
                    pclm: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """training.json of a run that has just finished its last optimizer step."""
    losses = [r["loss"] for r in log]
    dpo_losses = [r["loss"] for r in log if r.get("objective") == "dpo"]
    return {
        "status": "complete",
        "settings": settings_record(settings),
        "settings_fingerprint": settings.fingerprint(),
        "base_model": base_model_info(settings, lm, base_params),
        "lora": {"scope": settings.scope, "include_audio_tower": settings.include_audio_tower,
                 "target_modules": list(targets), "n_target_modules": len(targets),
                 "trainable_params": trainable_params},
        "data": data_info(settings, data),
        "augmentation": augment_info(settings),
        "method": settings.method, "objective": settings.objective, "recipe": settings.recipe,
        "pclm": dict(pclm) if pclm is not None else None,
        "dpo": ({"beta": settings.dpo_beta, "rejected": settings.dpo_rejected,
                 # after PCLM stage 2 the reference is the stage-2 model (its snapshot), not the LoRA-off model
                 "reference": (pclm or {}).get("dpo_reference") or "the same model with its LoRA switched off",
                 "first_dpo_loss": dpo_losses[0] if dpo_losses else float("nan")}
                if settings.objective == "dpo" else None),
        "steps": len(log), "total_steps": steps.total, "steps_per_epoch": steps.per_epoch,
        "examples_per_step": steps.examples_per_step, "world_size": world_size,
        "final_loss": losses[-1] if losses else float("nan"),
        "first_loss": losses[0] if losses else float("nan"),
        "validation": dict(validation),
        "versions": versions(),
        "train_seconds": round(seconds, 1),
    }
