"""Checks on weight files and adapters before they load: a one-line error naming the file, not a traceback.

- `check_safetensors`: a `.safetensors` file whose size is not what its own header says (a copy cut short,
  a download interrupted) is refused by name; safetensors' format is an 8-byte little-endian header length,
  the JSON header, then the tensors, the last of which ends at the largest `data_offsets` end.
- `check_adapter_family`: a LoRA adapter trained on another model family is refused by name. What the
  adapter was trained on is read from our own record first (`training.json` beside a vocalgrad-finetune
  `adapter/`: base_model.family), then from PEFT's `adapter_config.json` (`base_model_name_or_path`:
  a `tiny-<family>` test model, or a checkpoint whose config.json `model_type` names the family).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .base import ModelError

MAX_HEADER = 100 << 20  # safetensors refuses headers over 100 MB too


def check_safetensors(file: Path) -> None:
    """Raise ModelError naming `file` when it is shorter or longer than its header says (truncated, padded)."""
    size = file.stat().st_size
    try:
        with open(file, "rb") as fh:
            (length,) = struct.unpack("<Q", fh.read(8))
            if not 0 < length <= min(MAX_HEADER, size - 8):
                raise ValueError(f"header length {length}")
            header = json.loads(fh.read(length))
    except (struct.error, ValueError, UnicodeDecodeError) as err:
        raise ModelError(f"{file}: not a safetensors file or truncated ({err}); copy or download it again") from None
    ends = [int(v["data_offsets"][1]) for k, v in header.items() if k != "__metadata__" and isinstance(v, dict)]
    want = 8 + length + max(ends, default=0)
    if size != want:
        raise ModelError(f"{file}: {size:,} bytes but its header describes {want:,} (truncated or damaged); "
                         "copy or download it again")


def check_weight_files(folder: Path | None) -> None:
    """check_safetensors on every `.safetensors` file of a local checkpoint or adapter folder (None: skipped)."""
    if folder is not None and folder.is_dir():
        for file in sorted(folder.glob("*.safetensors")):
            check_safetensors(file)


def adapter_config(folder: Path) -> dict[str, Any]:
    """PEFT's adapter_config.json of a local adapter folder; a truncated or non-JSON file is named."""
    file = folder / "adapter_config.json"
    try:
        config = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise ModelError(f"{file}: not readable JSON ({' '.join(str(err).split())}); the adapter folder is "
                         "damaged, save or download it again") from None
    if not isinstance(config, dict):
        raise ModelError(f"{file}: not a JSON object")
    return config


def recorded_family(folder: Path) -> str | None:
    """The family vocalgrad-finetune recorded for the adapter in `folder` (training.json beside it), or None."""
    record = folder.parent / "training.json"
    try:
        family = json.loads(record.read_text(encoding="utf-8"))["base_model"]["family"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return family if isinstance(family, str) else None


def base_family(base: str, family_of_checkpoint: Callable[[str], str | None]) -> str | None:
    """The family of an adapter's base_model_name_or_path: a tiny test model's own name, else what the
    checkpoint's config.json says (None when it cannot be read here, e.g. offline and not cached)."""
    if base.startswith("tiny-"):
        return base.removeprefix("tiny-")
    try:
        return family_of_checkpoint(base)
    except Exception:  # noqa: BLE001 - unknown here is no evidence of a mismatch: the record decides then
        return None


def check_adapter_family(adapter: str, family: str, model_ids: tuple[str, ...],
                         family_of_checkpoint: Callable[[str], str | None]) -> None:
    """Refuse, by name, a local LoRA adapter trained on another family than `family` (module docstring);
    `model_ids`: the names the loaded model goes by (a base naming one of them matches)."""
    folder = Path(adapter).expanduser()
    if not (folder / "adapter_config.json").is_file():
        return  # a Hub adapter id: PEFT reads it; nothing local to check
    config = adapter_config(folder)
    trained = recorded_family(folder)
    where = str(folder.parent / "training.json")
    base = config.get("base_model_name_or_path")
    if trained is None and isinstance(base, str) and base and base not in model_ids:
        trained = base_family(base, family_of_checkpoint)
        where = f"{folder / 'adapter_config.json'} base_model_name_or_path {base!r}"
    if trained is not None and trained != family:
        raise ModelError(f"adapter {folder} was trained on a {trained} model ({where}), not on {family}: "
                         f"a LoRA adapter only fits the family it was trained on; use a {trained} model or "
                         f"an adapter trained on {family}")
    check_weight_files(folder)
