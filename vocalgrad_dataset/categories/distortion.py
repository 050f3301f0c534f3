"""Audio distortion: sample-and-hold "downsampling" without anti-alias filter, RMS-matched per window."""

from __future__ import annotations

import numpy as np

from vocalgrad_dataset.categories.base import Category, register
from vocalgrad_dataset.dsp import match_rms
from vocalgrad_dataset.dsp.segments import per_window, render_segmented

MIN_EFFECTIVE_SR = 1000.0


def effective_rate(value: float, sr: int) -> float:
    """The effective rate actually used: rounded to an integer, then clamped to [1000, sr].

    The published generator rounds the rate before deriving the hold length (13714.29 Hz -> 13714 ->
    hold 4, not 3); the clamp makes 18 kHz a no-op at 16 kHz.
    """
    return float(min(max(int(round(value)), int(MIN_EFFECTIVE_SR)), sr))


def hold_length(value: float, sr: int) -> int:
    """Samples each held value lasts: max(1, round(sr / eff)); 1 means the window passes unchanged."""
    return max(1, int(round(sr / effective_rate(value, sr))))


def sample_and_hold(window: np.ndarray, value: float, sr: int) -> np.ndarray:
    """Hold every `round(sr / eff)`-th sample; the window's RMS is matched to its input."""
    hold = hold_length(value, sr)
    if hold == 1:
        return match_rms(window.copy(), window)
    held = window[(np.arange(len(window)) // hold) * hold]
    return match_rms(held, window)


CATEGORY = register(
    Category(
        name="distortion",
        attribute="audio distortion",
        release_name="audio_distortion",
        parameter="effective_sr_hz",
        tier_key="effective_sr_min",
        endpoints=lambda f_min, sr: (float(sr), f_min),  # up = more distortion = lower effective rate
        render=lambda audio, sr, schedules, fixed: render_segmented(audio, sr, schedules, per_window(sample_and_hold)),
        applied=effective_rate,
        description="sample-and-hold per 50 ms step with context; pre-onset at the start rate, post-offset at the end rate",
    )
)
