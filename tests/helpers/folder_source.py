"""A folder source of synthetic tone bursts and the volume build over it (shared by the dataset fault tests
and the CLI signal tests)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import soundfile as sf

from vocalgrad_dataset.build.export import build

SR = 16000


def speechlike(n: int = SR, seed: int = 0) -> np.ndarray:
    """An int16 test signal: a 1 s tone burst with a little noise, loud enough to survive every tier."""
    rng = np.random.default_rng(seed)
    t = np.arange(n) / SR
    x = 0.4 * np.sin(2 * np.pi * (220 + 60 * seed) * t) + 0.01 * rng.standard_normal(n)
    return np.clip(np.round(x * 32767), -32768, 32767).astype(np.int16)


def write_csv(root: Path, rows: list[dict[str, str]]) -> None:
    """Write a folder source's metadata.csv."""
    with open(root / "metadata.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def read_csv(root: Path) -> list[dict[str, str]]:
    """Read a folder source's metadata.csv."""
    with open(root / "metadata.csv", newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def tiny_folder(root: Path, subtype: str = "PCM_16", n: int = 2) -> Path:
    """A folder source of n one-second clips with given onsets; samples stored in `subtype` (same values)."""
    root.mkdir(parents=True, exist_ok=True)
    rows = []
    for i in range(n):
        x = speechlike(seed=i)
        name = f"utt{i}.wav"
        if subtype in ("FLOAT", "DOUBLE"):
            sf.write(str(root / name), x.astype(np.float64) / 32768.0, SR, subtype=subtype)
        else:
            sf.write(str(root / name), x, SR, subtype=subtype)
        rows.append({"file_name": name, "speaker_id": f"s{i}", "onset_sec": "0.1", "offset_sec": "0.9"})
    write_csv(root, rows)
    return root


def fbuild(data: Path, out: Path, **kw) -> dict:
    """Build the volume config (the cheapest category) from a folder source."""
    kw.setdefault("progress", False)
    return build("volume", ["test"], out, source="folder", data_dir=str(data), **kw)
