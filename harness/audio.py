"""Audio handed to models: one mono float32 array at the rate a model (or feature) expects."""

from __future__ import annotations

import numpy as np

from harness.models.protocol import AudioClip


def mono_at(clip: AudioClip, sampling_rate: int) -> np.ndarray:
    """The clip as mono float32 at `sampling_rate` (soxr_hq, as librosa's default high-quality resampler)."""
    x = np.asarray(clip.array, dtype=np.float32)
    if x.ndim > 1:  # the protocol says mono; tolerate (channels, samples) by averaging
        x = x.mean(axis=0)
    if clip.sampling_rate != sampling_rate:
        import librosa

        x = librosa.resample(x, orig_sr=clip.sampling_rate, target_sr=sampling_rate, res_type="soxr_hq")
        x = x.astype(np.float32)
    return x
