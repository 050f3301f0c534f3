"""The headphone screen of Woods, Siegel, Traer & McDermott (2017), "Headphone screening to facilitate
web-based auditory experiments", Attention, Perception & Psychophysics 79:2064-2072.

Each trial plays three 200 Hz pure tones of 1 s (100 ms raised-cosine ramps): one at the reference level, one
6 dB softer, and one at the reference level but with the right channel in antiphase (sign-flipped). Over
headphones the antiphase tone sounds as loud as the reference; over loudspeakers the two channels partly
cancel in the air and it sounds softest. The listener picks the softest tone; the paper's criterion is at
least 5 of 6 trials right (we keep that proportion, ceil(5n/6), for another trial count).
"""

from __future__ import annotations

import math
import random

import numpy as np

from vocalgrad_dataset import grid
from vocalgrad_dataset.generate import wav_bytes

TRIALS = 6  # Woods et al. 2017
TONE_HZ = 200.0
TONE_S = 1.0
RAMP_S = 0.1
GAP_S = 0.5  # silence between the tones
SOFT_DB = -6.0
LEVEL = 0.3  # peak amplitude of the reference tone (leaves headroom, comfortable at a set volume)
SR = 16_000
CHOICES = 3


def pass_mark(n_trials: int) -> int:
    """Trials right needed to pass: 5 of 6 in the paper, the same share (rounded up) for another count."""
    return math.ceil(5 * n_trials / 6)


def trials(seed: int, name: str, n: int = TRIALS) -> list[dict[str, int]]:
    """The annotator's trials: which tone (0-2) is soft and which is in antiphase, a fixed draw per name."""
    rng = random.Random(grid.seed_from(f"vocalgrad-headphone:{seed}:{name}"))
    out = []
    for _ in range(n):
        soft, anti = rng.sample(range(CHOICES), 2)
        out.append({"soft": soft, "antiphase": anti})
    return out


def trial_wav(trial: dict[str, int]) -> bytes:
    """One trial as stereo PCM16 WAV: three tones separated by silences."""
    t = np.arange(int(TONE_S * SR)) / SR
    ramp = np.ones_like(t)
    n_ramp = int(RAMP_S * SR)
    ramp[:n_ramp] = 0.5 - 0.5 * np.cos(np.pi * np.arange(n_ramp) / n_ramp)
    ramp[-n_ramp:] = ramp[:n_ramp][::-1]
    tone = LEVEL * ramp * np.sin(2 * np.pi * TONE_HZ * t)
    gap = np.zeros((int(GAP_S * SR), 2))
    parts = []
    for k in range(CHOICES):
        gain = 10 ** (SOFT_DB / 20) if k == trial["soft"] else 1.0
        right = -tone if k == trial["antiphase"] else tone
        parts += [np.stack([gain * tone, gain * right], axis=1), gap]
    pcm = np.round(np.concatenate(parts[:-1]) * 32767).astype(np.int16)
    return wav_bytes(pcm, SR)
