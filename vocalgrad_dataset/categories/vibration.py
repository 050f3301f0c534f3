"""Voice vibration: an amplitude LFO whose depth (0 -> A) and rate (0 -> 20 Hz) follow the same curve (up)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from vocalgrad_dataset.categories.base import Category, register
from vocalgrad_dataset.dsp.schedule import Schedule


def lfo_gain(depth: Schedule, rate_hz: tuple[float, float], phase0: float, sr: int, cache: dict | None = None) -> np.ndarray:
    """gain = 1 - depth * (0.5 * (1 + sin(phase))), all float64, as the published generator computes it.

    The LFO rate has its own envelope along the depth's curve, from `rate_hz[0]` where the depth is 0
    to `rate_hz[1]` at the tier's maximum depth. The phase is an exclusive running sum starting at
    `phase0`: sample n adds the steps of samples 0..n-1. The LFO term depends on the curve and direction
    only, so the three tiers share it through `cache` (kept while the clip is short).
    """
    rising = depth.start <= depth.end
    key = f"vibration:lfo:{depth.curve}:{rising}:{depth.onset}:{depth.offset}"
    lfo = None if cache is None else cache.get(key)
    if lfo is None:
        lo, hi = rate_hz
        rate = depth.rescaled(lo, hi) if rising else depth.rescaled(hi, lo)
        step = (2.0 * np.pi * rate.per_sample()) / sr
        phase = phase0 + np.cumsum(np.concatenate([np.zeros(1), step[:-1]]))
        lfo = 0.5 * (1.0 + np.sin(phase))
        if cache is not None and 8 * lfo.nbytes <= LFO_CACHE_BYTES:  # 8 curve/direction pairs
            cache[key] = lfo
    gain = depth.per_sample()
    gain *= lfo
    return np.subtract(1.0, gain, out=gain)


LFO_CACHE_BYTES = 256 * 2**20  # a 5 s clip's eight LFO terms take 14 MB


def _render(audio: np.ndarray, sr: int, schedules: Sequence[Schedule], fixed: dict) -> Iterator[np.ndarray]:
    cfg = CATEGORY.config
    rate_hz, phase0 = (float(cfg["lfo_hz_min"]), float(cfg["lfo_hz_max"])), float(cfg["lfo_phase_rad"])
    cache = fixed.get("clip_cache")
    for s in schedules:  # no RMS matching (SPEC §3)
        yield audio * lfo_gain(s, rate_hz, phase0, sr, cache).astype(np.float32)


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
        description="LFO depth 0 -> A and rate 0 -> 20 Hz along the same curve, per sample; no RMS matching",
    )
)
