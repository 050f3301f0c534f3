"""Background noise: seeded white Gaussian noise scaled by the speech-span RMS times a stepped ratio."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..dsp import rms
from .base import Category, register

RMS_FLOOR = 1e-6


def unit_noise(n: int, seed: int) -> np.ndarray:
    """White Gaussian noise with unit RMS over the whole clip: drawn in float64, cast to float32."""
    draw = np.random.default_rng(seed).standard_normal(n)
    r = rms(draw)
    return (draw / r if r > 0 else draw).astype(np.float32)


def _render(audio: np.ndarray, sr: int, schedules: Sequence, fixed: dict) -> list[np.ndarray]:
    out = []
    for s, seed in zip(schedules, fixed["seeds"], strict=True):
        level = max(rms(audio[s.onset : s.offset]), RMS_FLOOR)
        envelope = (level * s.per_sample()).astype(np.float32)
        out.append(audio + unit_noise(len(audio), seed) * envelope)
    return out


CATEGORY = register(
    Category(
        name="noise",
        attribute="background noise",
        release_name="background_noise",
        parameter="noise_ratio",
        tier_key="noise_ratio_max",
        endpoints=lambda r_max, sr: (0.0, r_max),
        render=_render,
        description="noise ratio stepped every 50 ms; seed per clip from sha256('42:{clip_id}')",
    )
)
