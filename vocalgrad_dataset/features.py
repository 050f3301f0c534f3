"""The column schema every VocalGrad config shares."""

from __future__ import annotations

from typing import Any

import datasets

from .grid import LABELS

STRING_COLUMNS = (
    "benchmark_clip_id", "category", "attribute", "prompt", "direction", "curve", "tier", "parameter",
    "param_fixed", "source_item_id", "source_clip_id", "speaker_id", "source_text",
)  # fmt: skip
FLOAT_COLUMNS = ("param_start", "param_end", "onset_sec", "offset_sec", "duration_sec", "clipped_ratio")


def vocalgrad_features() -> datasets.Features:
    """Features of a VocalGrad row: the standard Audio column (source rate, PCM16 WAV) plus metadata."""
    return datasets.Features(
        {
            "audio": datasets.Audio(),
            **{c: datasets.Value("string") for c in STRING_COLUMNS[:7]},
            "label": datasets.ClassLabel(names=list(LABELS)),
            **{c: datasets.Value("string") for c in STRING_COLUMNS[7:]},
            **{c: datasets.Value("float64") for c in FLOAT_COLUMNS},
            "generator_version": datasets.Value("string"),
        }
    )


def encode_row(row: dict[str, Any], features: datasets.Features) -> dict[str, Any]:
    """Arrow-ready row without datasets' audio encoder (the WAV bytes are already there; no FFmpeg)."""
    out = {k: row[k] for k in features}
    out["label"] = features["label"].str2int(row["label"])
    return out
