"""The label-integrity oracle recovers each category's direction from the demo audio alone."""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np
import pytest

from vocalgrad_dataset.categories import CATEGORY_NAMES, get_category
from vocalgrad_dataset.generate import iter_clip_rows
from vocalgrad_dataset.grid import CURVES, DIRECTIONS, Condition
from vocalgrad_dataset.oracle import ORACLES, evaluate_oracle, predict
from vocalgrad_dataset.sources import get_source

SR = 48000


@cache
def high_rows(category: str) -> list[dict[str, Any]]:
    """High-tier rows (4 curves x 2 directions) of the 3 demo test clips: 24 rows, rendered once per category."""
    src = get_source("demo")
    conds = [Condition(c, "high", d) for c in CURVES for d in DIRECTIONS]
    cat = get_category(category)
    rows = []
    for clip in src.clips("test"):
        pcm = src.read(clip)
        rows += list(iter_clip_rows(cat, clip, pcm.samples, pcm.sample_rate, conds))
    return rows


def row_score(row: dict[str, Any]) -> float:
    """The oracle's signed score of one generated row."""
    sr = row["audio"]["sampling_rate"]
    onset, offset = round(row["onset_sec"] * sr), round(row["offset_sec"] * sr)
    return predict(row["category"], row["audio"]["array"], sr, onset, offset)[1]


def test_every_category_has_a_documented_oracle() -> None:
    assert set(ORACLES) == set(CATEGORY_NAMES)
    assert all(o.description for o in ORACLES.values())


@pytest.mark.parametrize("category", CATEGORY_NAMES)
def test_high_tier_accuracy(category: str) -> None:
    rows = high_rows(category)
    hits = [(row_score(r) > 0) == (r["label"] == "increase") for r in rows]
    assert len(rows) == 24
    assert np.mean(hits) >= 0.95, f"{category}: high-tier accuracy {np.mean(hits):.2f}"


@pytest.mark.parametrize("category", CATEGORY_NAMES)
def test_mirrored_pairs_get_opposite_scores(category: str) -> None:
    # up and down of the same clip and curve are time-mirrored schedules: the scores must disagree in sign
    scores = {(r["source_clip_id"], r["curve"], r["direction"]): row_score(r) for r in high_rows(category)}
    pairs = [(scores[(c, k, "up")], scores[(c, k, "down")]) for (c, k, d) in scores if d == "up"]
    opposite = [up > 0 > down for up, down in pairs]
    assert np.mean(opposite) >= 0.9, f"{category}: {pairs}"


def test_synthetic_volume_ramp_is_increase() -> None:
    t = np.arange(3 * SR) / SR
    gain = 10 ** (np.linspace(-12, 12, len(t)) / 20)  # +24 dB over the clip
    tone = (0.05 * gain * np.sin(2 * np.pi * 220 * t)).astype(np.float32)
    assert predict("volume", tone, SR, 0, len(tone))[0] == "increase"
    assert predict("volume", tone[::-1].copy(), SR, 0, len(tone))[0] == "decrease"


def test_synthetic_noise_ramp_is_increase() -> None:
    t = np.arange(3 * SR) / SR
    tone = 0.1 * np.sin(2 * np.pi * 300 * t)
    noise = np.random.default_rng(0).standard_normal(len(t)) * np.linspace(0.0, 0.02, len(t))
    assert predict("noise", (tone + noise).astype(np.float32), SR, 0, len(t))[0] == "increase"


def test_short_span_and_bad_input() -> None:
    with pytest.raises(ValueError, match=r"speech span of 0\.00\d s is too short .* at least 0\.3 s"):
        predict("volume", np.zeros(SR, np.float32), SR, 100, 200)  # refused, never a silent "decrease"
    with pytest.raises(KeyError, match="no oracle"):
        predict("loudness", np.zeros(SR, np.float32), SR, 0, SR)
    with pytest.raises(ValueError, match="mono"):
        predict("volume", np.zeros((2, SR), np.float32), SR, 0, SR)


def test_evaluate_oracle_report() -> None:
    report = evaluate_oracle("volume", "test", "demo")
    assert report["n"] == 72
    assert report["accuracy"] == 1.0
    assert set(report["by_tier"]) == {"low", "mid", "high"}
    assert report["by_category"] == {"volume": 1.0}
