"""The column schema every VocalGrad config shares."""

from __future__ import annotations

from typing import Any

import datasets

from .grid import CLAIM_FORMATS, FORMAT_LABELS

STRING_COLUMNS = (
    "benchmark_clip_id", "category", "attribute", "prompt", "direction", "curve", "tier", "parameter",
    "param_fixed", "source_item_id", "source_clip_id", "speaker_id", "source_text",
)  # fmt: skip
FLOAT_COLUMNS = ("param_start", "param_end", "onset_sec", "offset_sec", "duration_sec", "clipped_ratio")
# The lexical-conflict configs add what the carrier's words claim and whether that matches the label.
CLAIM_FEATURES = {
    "claim": datasets.Value("string"),  # increase | decrease | none
    "congruent": datasets.Value("bool"),  # claim == label; null on neutral rows
    "template_id": datasets.Value("string"),
    "voice_id": datasets.Value("string"),
    "transcript": datasets.Value("string"),
}


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
            **(CLAIM_FEATURES if fmt in CLAIM_FORMATS else {}),
        }
    )


def encode_row(row: dict[str, Any], features: datasets.Features) -> dict[str, Any]:
    """Arrow-ready row without datasets' audio encoder (the WAV bytes are already there; no FFmpeg)."""
    out = {k: row[k] for k in features}
    out["label"] = features["label"].str2int(row["label"])
    return out
