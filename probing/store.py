"""Feature storage: float16 safetensors shards plus one JSON manifest per (split, config), read lazily.

Layout of an extraction directory:

    DIR/<split>/<config>/manifest.json          what was extracted, how, and which rows each shard holds
    DIR/<split>/<config>/shard-00000.safetensors {"<representation>/<layer>": (n_rows, dim) float16}

A shard is written (temporary name, fsync, rename) before the manifest that lists it is replaced the same
way, so a killed extraction leaves at most one unlisted shard, which the resumed run overwrites: no row is
lost or written twice. The manifest's `config_hash` pins everything that shapes the features; resuming
under different settings is refused.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from harness.results import atomic_write_bytes, atomic_write_text

FORMAT = "vocalgrad-probe-features/1"
MANIFEST = "manifest.json"
# Per-row facts kept beside the features (labels for probes, pairing keys for direction alignment).
ROW_FIELDS: tuple[str, ...] = (
    "benchmark_clip_id", "label", "direction", "curve", "tier", "source_item_id", "source_clip_id", "speaker_id",
    "claim", "congruent",  # lexical-conflict rows: the words' claim and whether it matches the label ("" elsewhere)
)


class StoreError(ValueError):
    """A manifest or shard is missing, corrupt or belongs to other settings; the message names the file."""


def config_hash(settings: Mapping[str, Any]) -> str:
    """sha256 (16 hex) of the settings that determine the features, key order ignored."""
    return hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode("utf-8")).hexdigest()[:16]


def _read_manifest(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise StoreError(f"{path}: not valid JSON ({err})") from None
    if data.get("format") != FORMAT:
        raise StoreError(f"{path}: format {data.get('format')!r}, expected {FORMAT!r}")
    for key in ("config_hash", "shards", "representations"):
        if key not in data:
            raise StoreError(f"{path}: missing field {key!r}")
    return data


class FeatureWriter:
    """Appends shards to one (split, config) folder and keeps its manifest current; resumes where it stopped."""

    def __init__(self, folder: str | Path, header: Mapping[str, Any]) -> None:
        self.folder = Path(folder)
        self.path = self.folder / MANIFEST
        if self.path.is_file():
            self.manifest = _read_manifest(self.path)
            if self.manifest["config_hash"] != header["config_hash"]:
                pinned = [k for k in header if k not in ("config_hash", "model_id")]
                diff = [f"{k}: {self.manifest.get(k)!r} before, {header[k]!r} now" for k in pinned
                        if json.dumps(self.manifest.get(k), sort_keys=True, default=str)
                        != json.dumps(header[k], sort_keys=True, default=str)]
                raise StoreError(
                    f"{self.path} was written by another extraction (config_hash {self.manifest['config_hash']}, "
                    f"now {header['config_hash']}: {'; '.join(diff) or 'settings differ'}); "
                    "use a new --out or delete that folder"
                )
        else:
            self.manifest = {"format": FORMAT, **header, "representations": {}, "shards": [], "errors": [],
                             "complete": False}

    @property
    def done_units(self) -> set[str]:
        """Keys of the source-clip units already stored."""
        return {u for s in self.manifest["shards"] for u in s["units"]}

    def write(self, units: Sequence[str], rows: Sequence[Mapping[str, Any]], features: Mapping[str, np.ndarray],
              errors: Iterable[Mapping[str, str]] = ()) -> Path:
        """Store one shard (features stacked in row order) and list it in the manifest."""
        from safetensors.numpy import save

        n = len(rows)
        reps = self.manifest["representations"]
        for key, arr in features.items():
            if arr.ndim != 2 or arr.shape[0] != n:
                raise StoreError(f"{self.folder}: feature {key!r} has shape {arr.shape}, expected ({n}, dim)")
            if key in reps and reps[key] != arr.shape[1]:
                raise StoreError(f"{self.folder}: feature {key!r} changed dimension {reps[key]} -> {arr.shape[1]}")
        if reps and n and set(features) != set(reps):
            missing = sorted(set(reps) ^ set(features))
            raise StoreError(f"{self.folder}: this shard's representations differ from earlier shards: {missing}")
        if n:
            reps.update({k: int(v.shape[1]) for k, v in features.items()})
        name = f"shard-{len(self.manifest['shards']):05d}.safetensors"
        if n:  # a shard whose every row failed holds no tensors; only its errors are recorded
            tensors = {k: np.ascontiguousarray(v, dtype=np.float16) for k, v in features.items()}
            for k, v in tensors.items():  # NaN/inf, or beyond float16's range: a probe would train on garbage
                bad = ~np.isfinite(v).all(axis=1)
                if bad.any():
                    raise StoreError(f"{self.folder}: feature {k!r} of clip {rows[int(np.argmax(bad))].get('benchmark_clip_id')} "
                                     "is NaN, infinite or outside float16's range; refused")
            atomic_write_bytes(self.folder / name, save(tensors, metadata={"rows": str(n)}))
        entry = {"file": name if n else None, "units": list(units), "n": n,
                 "rows": {f: [str(r.get(f, "")) for r in rows] for f in ROW_FIELDS}}
        self.manifest["shards"].append(entry)
        self.manifest["errors"].extend(dict(e) for e in errors)
        self._save()
        return self.folder / name

    def finish(self) -> None:
        """Mark the folder complete (every unit of the run stored)."""
        self.manifest["complete"] = True
        self._save()

    def _save(self) -> None:
        atomic_write_text(self.path, json.dumps(self.manifest, indent=1))


@dataclass
class RowTable:
    """Per-row facts of one (split, config), in storage order."""

    columns: dict[str, list[str]]

    def __len__(self) -> int:
        return len(self.columns["benchmark_clip_id"])

    def __getitem__(self, field: str) -> list[str]:
        return self.columns[field]

    @property
    def labels(self) -> np.ndarray:
        """1 for "increase", 0 for "decrease"."""
        return np.array([lab == "increase" for lab in self.columns["label"]], dtype=np.int64)


class FeatureSet:
    """One (split, config) folder, opened lazily: a representation is read only when asked for."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        path = self.folder / MANIFEST
        if not path.is_file():
            raise StoreError(f"no {MANIFEST} in {self.folder} (run python -m probing.extract first)")
        self.manifest = _read_manifest(path)
        self._shards = [s for s in self.manifest["shards"] if s["n"]]

    @property
    def representations(self) -> dict[str, int]:
        """Representation key -> feature dimension."""
        return dict(self.manifest["representations"])

    @property
    def rows(self) -> RowTable:
        """Row facts concatenated over shards."""
        # fields added later (claim, congruent) read as "" from extractions written before them
        return RowTable({f: [v for s in self._shards for v in s["rows"].get(f, [""] * s["n"])] for f in ROW_FIELDS})

    def load(self, key: str, dtype: Any = np.float32) -> np.ndarray:
        """(n_rows, dim) features of one representation, read shard by shard."""
        from safetensors import safe_open

        if key not in self.manifest["representations"]:
            raise KeyError(f"{self.folder}: no representation {key!r}; have {sorted(self.representations)}")
        parts = []
        for s in self._shards:
            file = self.folder / s["file"]
            if not file.is_file():
                raise StoreError(f"{file} is listed in {self.folder / MANIFEST} but missing")
            try:
                with safe_open(str(file), framework="numpy") as fh:
                    arr = fh.get_tensor(key)
            except Exception as err:  # SafetensorError (truncated, corrupt header) and friends
                raise StoreError(f"{file}: corrupt or truncated feature shard ({err}); delete it and its "
                                 "manifest entry, or re-extract") from None
            if arr.ndim != 2 or arr.shape != (s["n"], self.representations[key]):
                raise StoreError(f"{file}: {key!r} has shape {arr.shape}, the manifest says ({s['n']}, "
                                 f"{self.representations[key]})")
            bad = ~np.isfinite(arr).all(axis=1)
            if bad.any():
                clip = s["rows"]["benchmark_clip_id"][int(np.argmax(bad))]
                raise StoreError(f"{file}: {key!r} holds NaN or infinite features ({int(bad.sum())} row(s), first "
                                 f"clip {clip}); refused")
            parts.append(arr)
        if not parts:
            return np.zeros((0, self.representations[key]), dtype=dtype)
        return np.concatenate(parts).astype(dtype, copy=False)


class Extraction:
    """An extraction directory: DIR/<split>/<config>/ feature sets."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        if not self.root.is_dir():
            raise StoreError(f"extraction directory not found: {self.root}")

    def splits(self) -> list[str]:
        """Splits with at least one feature set."""
        return sorted(p.name for p in self.root.iterdir() if p.is_dir() and any(p.glob(f"*/{MANIFEST}")))

    def configs(self, split: str) -> list[str]:
        """Configs extracted for a split, in the paper's category order (unknown names last)."""
        from harness.data import CONFIGS

        names = [p.parent.name for p in (self.root / split).glob(f"*/{MANIFEST}")]
        return sorted(names, key=lambda c: (CONFIGS.index(c) if c in CONFIGS else len(CONFIGS), c))

    def open(self, split: str, config: str) -> FeatureSet:
        """The feature set of (split, config)."""
        return FeatureSet(self.root / split / config)
