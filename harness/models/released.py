"""The repaired checkpoints VoxParadox released (IHP-Lab/AF3_PCLM_DPO, IHP-Lab/Qwen2-Audio_PCLM_DPO): refused with
one line saying what this harness supports and what to do, before any weight is read (never a traceback, never a
silent load as another family: transformers would drop the PCLM weights it does not know with only a warning).

AF3_PCLM_DPO keeps the original Audio Flamingo 3 code base's layout (config.json model_type `llava_llama`), which
no transformers class reads; Qwen2-Audio_PCLM_DPO carries its PCLM module in the authors' own format. Here, PCLM
and DPO repairs are LoRA + PCLM adapter folders written by `vocalgrad-finetune` and attached with `--adapter`.
"""

from __future__ import annotations

from pathlib import Path

from .protocol import ModelError

# The original AF3 code base's model_type (NVIDIA's llava-style layout), not transformers' audioflamingo3.
ORIGINAL_AF3_MODEL_TYPE = "llava_llama"
WHAT_TO_DO = ("this harness drives transformers checkpoints (audio-flamingo-3: model_type audioflamingo3; "
              "qwen2-audio) and reads PCLM / DPO repairs as vocalgrad-finetune adapter folders (--adapter DIR): "
              "evaluate the released checkpoint with the authors' code (github ihp-lab/VoxParadox), or repair the "
              "base model here (vocalgrad-finetune --method pclm, then dpo; docs/repairs.md) and pass --adapter")
RELEASED: dict[str, str] = {
    "ihp-lab/af3_pclm_dpo": "is the VoxParadox AF3 + PCLM + DPO release in the original Audio Flamingo 3 layout "
                            f"(config.json model_type {ORIGINAL_AF3_MODEL_TYPE!r}), which no transformers class reads",
    "ihp-lab/qwen2-audio_pclm_dpo": "is the VoxParadox Qwen2-Audio + PCLM + DPO release, its PCLM module in the "
                                    "authors' format (loading it as qwen2-audio would drop that module silently)",
}


def _key(model_id: str) -> str:
    """A Hub id, or a local snapshot folder named like one (…/AF3_PCLM_DPO), as the table's key."""
    text = str(model_id).strip().rstrip("/").lower()
    if text in RELEASED:
        return text
    name = Path(text).name.removeprefix("models--ihp-lab--")
    return next((k for k in RELEASED if k.split("/")[1] == name), text)


def refuse_released(model_id: str, model_type: str | None = None) -> None:
    """ModelError (one line) for a released repaired checkpoint, by its name or the original AF3 model_type."""
    why = RELEASED.get(_key(model_id))
    if why is None and model_type == ORIGINAL_AF3_MODEL_TYPE:
        why = (f"is a checkpoint in the original Audio Flamingo 3 layout (config.json model_type "
               f"{ORIGINAL_AF3_MODEL_TYPE!r}), which no transformers class reads")
    if why is not None:
        raise ModelError(f"{model_id} {why}; {WHAT_TO_DO}")
