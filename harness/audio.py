"""Audio handed to models: one mono float32 array at the rate a model (or feature) expects."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

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


class BadAudio(ValueError):
    """An input clip no model should hear: no samples, a NaN or infinite sample, or no sampling rate."""


def input_clip(row: Mapping[str, Any]) -> AudioClip:
    """A benchmark row's audio as an AudioClip, refused (naming the clip) when it is empty or not finite:
    broken input must be an error row, never a wrong answer counted against the model."""
    audio, where = row["audio"], f"clip {row.get('benchmark_clip_id')}"
    array = np.asarray(audio["array"], dtype=np.float32)
    rate = int(audio["sampling_rate"])
    if array.size == 0:
        raise BadAudio(f"{where}: audio has 0 samples")
    if rate <= 0:
        raise BadAudio(f"{where}: sampling rate {rate} Hz")
    bad = ~np.isfinite(array)
    if bad.any():
        kinds = " and ".join(k for k, m in (("NaN", np.isnan(array)), ("infinite", np.isinf(array))) if m.any())
        raise BadAudio(f"{where}: audio holds {int(bad.sum())} {kinds} samples of {array.size}")
    return AudioClip(array, rate)
