"""The column schema every VocalGrad config shares."""

from __future__ import annotations

from typing import Any

import datasets

from .grid import FORMAT_LABELS

STRING_COLUMNS = (
    "benchmark_clip_id", "category", "attribute", "prompt", "direction", "curve", "tier", "parameter",
    "param_fixed", "source_item_id", "source_clip_id", "speaker_id", "source_text",
)  # fmt: skip
FLOAT_COLUMNS = ("param_start", "param_end", "onset_sec", "offset_sec", "duration_sec", "clipped_ratio")


def vocalgrad_features(fmt: str = "direction") -> datasets.Features:
    """Features of a VocalGrad row: the standard Audio column (source rate, PCM16 WAV) plus metadata.

    The `label` ClassLabel follows the problem format: decrease/increase, no/yes, or
    decrease/increase/constant (yes/no and ternary configs add the unmodified source clips).
    """
    return datasets.Features(
        {
            "audio": datasets.Audio(),
            **{c: datasets.Value("string") for c in STRING_COLUMNS[:7]},
            "label": datasets.ClassLabel(names=list(FORMAT_LABELS[fmt])),
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
