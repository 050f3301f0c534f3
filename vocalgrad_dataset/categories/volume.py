"""Volume: gain -d -> +d dB (up) in hard 50 ms steps, no crossfade, on the raw integer scale in float64."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .base import Category, register


def _render(audio: np.ndarray, sr: int, schedules: Sequence, fixed: dict) -> list[np.ndarray]:
    raw = audio.astype(np.float64) * 32768.0  # exact: audio is PCM16 / 32768
    # returned on the float scale (dividing by a power of two is exact), so PCM16 output sees raw * gain
    return [raw * 10.0 ** (s.per_sample() / 20.0) / 32768.0 for s in schedules]


CATEGORY = register(
    Category(
        name="volume",
        attribute="volume",
        release_name="volume",
        parameter="gain_db",
        tier_key="delta_gain_db",
        endpoints=lambda d, sr: (-d, d),
        render=_render,
        description="stepped gain; before onset the start gain, from offset on the end gain",
    )
)
