"""Published reference results (SPEC §7), shipped unchanged as package data in harness/data/."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from functools import cache
from importlib.resources import files

from harness.data import CONFIG_OF_PUBLISHED, CONFIGS

# Display names in Table 2 order; keys are the model stems of the published result files.
MODEL_DISPLAY: dict[str, str] = {
    "gemini-3-flash": "Gemini 3 Flash",
    "kimi-audio": "Kimi-Audio",
    "mimo-audio": "MiMo-Audio",
    "step-audio-2-mini": "Step-Audio 2 mini",
    "audioflamingo3": "Audio Flamingo 3",
}
# Registry names (and the per-family checkpoint entries' default ids) -> the published result-file stems.
PUBLISHED_STEM: dict[str, str] = {
    "gemini-3-flash": "gemini-3-flash", "kimi-audio": "kimi-audio", "mimo-audio": "mimo-audio",
    "step-audio-2-mini": "step-audio-2-mini", "audio-flamingo-3": "audioflamingo3",
}  # fmt: skip
# The human row of Table 2 exists only in the paper (SPEC §7), in percent.
HUMAN_TABLE2: dict[str, float] = dict(
    zip(CONFIGS, (95.3, 84.7, 100.0, 86.0, 99.3, 100.0, 94.7, 90.7, 99.3), strict=True)
)


@dataclass(frozen=True)
class ReferenceRow:
    """One published (variant, category, model) result from reference_metrics_main.csv."""

    variant: str  # "default" or "beep_audio-ref"
    config: str
    model: str  # file stem, e.g. "kimi-audio"
    accuracy: float  # all-clip, as a fraction
    n_parsed: int
    n_unparsed: int
    n_correct: int
    n_ambiguous: int
    n_error: int
    increase_ratio: float  # among parsed


def _text(name: str) -> str:
    return files("harness").joinpath("data", name).read_text(encoding="utf-8")


@cache
def main_rows() -> tuple[ReferenceRow, ...]:
    """The default-prompt (2,400 clips) and beep (240 clips) rows of the published results."""
    out = []
    for rec in csv.reader(line for line in io.StringIO(_text("reference_metrics_main.csv")) if not line.startswith("#")):
        if not rec:
            continue
        variant, category, model, acc, parsed, unparsed, correct, amb, err, inc = rec
        out.append(ReferenceRow(
            variant, CONFIG_OF_PUBLISHED[category], model.split("(")[0], float(acc), int(parsed),
            int(unparsed), int(correct), int(amb), int(err), float(inc),
        ))
    return tuple(out)


@cache
def camera_ready_rows() -> tuple[dict[str, str], ...]:
    """Every row of camera_ready_direction_metrics.csv (one per published prediction file), as strings."""
    return tuple(csv.DictReader(io.StringIO(_text("camera_ready_direction_metrics.csv"))))


def published_stem(model: str) -> str | None:
    """The published result-file stem of a registry model name (None for models the paper did not run).

    An exact mapping, not a substring match: "audio-flamingo-3" is the paper's "audioflamingo3", while a
    fine-tuned "kimi-audio-lora" is not the published Kimi-Audio.
    """
    return PUBLISHED_STEM.get(model)


def reference(config: str, model: str, variant: str = "default") -> ReferenceRow | None:
    """The published row for a config and model stem, if any."""
    for r in main_rows():
        if (r.variant, r.config, r.model) == (variant, config, model):
            return r
    return None


def table2() -> dict[str, dict[str, float]]:
    """Table 2 (accuracy %, all clips): display name -> {config: %, "avg": %}, humans first.

    Model rows are recomputed from the published counts; they round to the paper's numbers.
    """
    table: dict[str, dict[str, float]] = {"Human": dict(HUMAN_TABLE2)}
    for stem, display in MODEL_DISPLAY.items():
        row = {c: 100.0 * r.accuracy for c in CONFIGS if (r := reference(c, stem)) is not None}
        table[display] = row
    for row in table.values():
        row["avg"] = sum(row[c] for c in CONFIGS) / len(CONFIGS)
    return table
