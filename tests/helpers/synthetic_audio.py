"""Synthetic clips for the model tests (a tone plus seeded noise: deterministic, distinct per seed)."""

from __future__ import annotations

import numpy as np

from harness.models.protocol import AudioClip


def tone_clip(seconds: float, seed: int, sr: int = 16000) -> AudioClip:
    """A (200 + 100 * seed) Hz tone with a little seeded white noise, mono float32."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * sr)) / sr
    x = 0.3 * np.sin(2 * np.pi * (200 + 100 * seed) * t) + 0.05 * rng.standard_normal(t.size)
    return AudioClip(x.astype(np.float32), sr)
