"""Which weights produced a number: a checkpoint's or adapter's folder and a sha256 over its weight files.

results.json `model_info` names the weights by content, not only by name: a local folder has no Hub commit,
and a folder or a Hub id can change under the same name. The digest is sha256sum's format over the weight
files (one "<sha256>  <file>" line per file, sorted by name) hashed once more, so it can be recomputed by
hand: `cd FOLDER && sha256sum *.safetensors | sha256sum` (names sorted as `ls` sorts them in the C locale).
A sharded checkpoint is named by its safetensors index instead (hashing 16 GB on every run would cost
minutes; the index lists every shard by name and size, so a changed shard set changes it).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from vocalgrad_dataset.fileio import file_sha256

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")
INDEX = "model.safetensors.index.json"
ADAPTER_FILES = ("adapter_model.safetensors", "adapter_model.bin")


def files_sha256(files: list[Path]) -> str:
    """sha256 of sha256sum's listing of `files` (sorted by name): `sha256sum FILES | sha256sum`."""
    listing = "".join(f"{file_sha256(f)}  {f.name}\n" for f in sorted(files, key=lambda f: f.name))
    return hashlib.sha256(listing.encode()).hexdigest()


def local_folder(where: str, revision: str | None = None, filename: str = "config.json") -> Path | None:
    """The folder holding a checkpoint: `where` itself when it is a folder, else the Hub cache's snapshot of
    (repo id, revision) when it holds `filename`; None when neither is on this machine."""
    path = Path(where).expanduser()
    if path.is_dir():
        return path.resolve()
    try:
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(where, filename, revision=revision)
    except Exception:  # noqa: BLE001 - an odd id or cache: the digest is then unknown, not an error
        return None
    return Path(found).parent if isinstance(found, str) else None


def weights_digest(folder: Path | None) -> dict[str, Any]:
    """{"weights_sha256", "weights_hashed"} of a checkpoint folder: its safetensors index when sharded, else
    every weight file in it (None, [] when the folder is unknown or holds none)."""
    if folder is None:
        return {"weights_sha256": None, "weights_hashed": []}
    index = folder / INDEX
    if index.is_file():
        return {"weights_sha256": files_sha256([index]), "weights_hashed": [INDEX]}
    files = [f for f in folder.iterdir() if f.is_file() and f.name.endswith(WEIGHT_SUFFIXES)]
    return {"weights_sha256": files_sha256(files) if files else None, "weights_hashed": sorted(f.name for f in files)}


def adapter_digest(adapter: str | None) -> dict[str, Any]:
    """{"adapter", "adapter_sha256"}: the adapter's absolute folder (or Hub id) and the sha256 of its weights
    file (as `sha256sum adapter_model.safetensors | sha256sum`, the format weights_digest uses)."""
    if adapter is None:
        return {"adapter": None, "adapter_sha256": None}
    for name in ADAPTER_FILES:
        folder = local_folder(adapter, filename=name)
        if folder is not None and (folder / name).is_file():
            shown = str(folder) if Path(adapter).expanduser().is_dir() else adapter
            return {"adapter": shown, "adapter_sha256": files_sha256([folder / name])}
    return {"adapter": adapter, "adapter_sha256": None}


def active_lora_adapters(model: Any) -> list[str]:
    """The adapter names the model's PEFT layers report active (sorted; [] without PEFT layers)."""
    try:
        from peft.tuners.tuners_utils import BaseTunerLayer
    except ImportError:
        return []
    active: set[str] = set()
    for module in model.modules():
        if isinstance(module, BaseTunerLayer) and not module.disable_adapters:
            active.update(module.active_adapters)
    return sorted(active)
