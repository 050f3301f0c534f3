"""Audio roughness: uniform symmetric quantisation to b bits, RMS-matched per window."""

from __future__ import annotations

import numpy as np

from vocalgrad_dataset.categories.base import Category, register
from vocalgrad_dataset.dsp import match_rms
from vocalgrad_dataset.dsp.segments import per_window, render_segmented


def bit_depth(value: float, sr: int = 0) -> float:
    """b = int(round(value)): the bit depth actually used."""
    return float(int(round(value)))


def quantise(window: np.ndarray, value: float, sr: int) -> np.ndarray:
    """round(clip(x, -1, 1) * (2^(b-1) - 1)) / (2^(b-1) - 1) in float32, then RMS-matched to the input."""
    levels = np.float32(2 ** (int(bit_depth(value)) - 1) - 1)
    q = np.round(np.clip(window, -1.0, 1.0) * levels) / levels
    return match_rms(q, window)


CATEGORY = register(
    Category(
        name="roughness",
        attribute="audio roughness",
        release_name="audio_roughness",
        parameter="bit_depth",
        tier_key="bit_depth_min",
        endpoints=lambda b_min, sr: (16.0, b_min),  # up = rougher = fewer bits
        render=lambda audio, sr, schedules, fixed: render_segmented(audio, sr, schedules, per_window(quantise)),
        applied=bit_depth,
        description="quantisation per 50 ms step with context; pre-onset at the start depth, post-offset at the end depth",
    )
)
