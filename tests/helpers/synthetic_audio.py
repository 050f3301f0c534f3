"""Synthetic clips for the model tests (a tone plus seeded noise: deterministic, distinct per seed) and the
three prompts the wrapper tests batch."""

from __future__ import annotations

import numpy as np

from harness.models.protocol import AudioClip, Prompt


def tone_clip(seconds: float, seed: int, sr: int = 16000) -> AudioClip:
    """A (200 + 100 * seed) Hz tone with a little seeded white noise, mono float32."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * sr)) / sr
    x = 0.3 * np.sin(2 * np.pi * (200 + 100 * seed) * t) + 0.05 * rng.standard_normal(t.size)
    return AudioClip(x.astype(np.float32), sr)


QUESTION = 'Does the volume increase or decrease over time?\n\nAnswer with only one word: "increase" or "decrease".'
# Different lengths, deliberately not sorted, one at 48 kHz (resampled by the wrapper).
PROMPTS = [
    Prompt((QUESTION, tone_clip(1.0, 0)), clip_id="a"),
    Prompt((QUESTION, tone_clip(2.53, 1, sr=48000)), clip_id="b"),
    Prompt((QUESTION, tone_clip(0.71, 2)), clip_id="c"),
]
