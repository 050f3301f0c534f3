"""Voice vibration: an amplitude LFO whose depth (0 -> A) and rate (0 -> 20 Hz) rise together (up)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .base import Category, register

LFO_MAX_HZ = 20.0


def lfo_gain(depth: np.ndarray, depth_max: float, sr: int) -> np.ndarray:
    """gain = 1 - depth * (1 + sin(phase)) / 2 with phase = cumsum(2*pi*rate/sr), all float64.

    The rate moves with the depth: 0 Hz at depth 0, 20 Hz at the tier's maximum depth.
    """
    rate = LFO_MAX_HZ * (depth / depth_max)
    phase = np.cumsum(2.0 * np.pi * rate / sr)
    return 1.0 - depth * (1.0 + np.sin(phase)) / 2.0


def _render(audio: np.ndarray, sr: int, schedules: Sequence, fixed: dict) -> list[np.ndarray]:
    # no RMS matching (SPEC §3)
    return [audio * lfo_gain(s.per_sample(), fixed["depth_max"], sr).astype(np.float32) for s in schedules]


CATEGORY = register(
    Category(
        name="vibration",
        attribute="voice vibration",
        release_name="voice_vibration",
        parameter="lfo_depth",
        tier_key="depth_max",
        endpoints=lambda depth_max, sr: (0.0, depth_max),
        render=_render,
        continuous=True,
        fixed_keys=("depth_max",),
        description="LFO depth 0 -> A with its rate 0 -> 20 Hz, per sample; no RMS matching",
    )
)
