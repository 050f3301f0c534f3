"""The straightforward generator: one librosa call per window per condition, as the published code did.

It renders through the same segment framework as the package (so both sides implement the same SPEC)
but without batching or sharing work across conditions. Used as the baseline in benchmarks and as the
reference the fast paths are tested against.
"""

from __future__ import annotations

from collections.abc import Sequence

import librosa
import numpy as np

from vocalgrad_dataset.categories import CATEGORIES
from vocalgrad_dataset.categories.clarity import lowpass_gain
from vocalgrad_dataset.dsp import fft_sizes, match_rms
from vocalgrad_dataset.schedule import Schedule
from vocalgrad_dataset.segments import per_window, render_segmented


def time_stretch(window: np.ndarray, rate: float, sr: int) -> np.ndarray:
    """librosa.effects.time_stretch at n_fft 512, hop 128 (short windows: SPEC's short-chunk rule)."""
    n_fft, hop = fft_sizes(len(window), 512, 128)
    return librosa.effects.time_stretch(window, rate=rate, n_fft=n_fft, hop_length=hop)


def pitch_shift(window: np.ndarray, semitones: float, sr: int) -> np.ndarray:
    """librosa.effects.pitch_shift with the published settings."""
    n_fft, hop = fft_sizes(len(window), 512, 128)
    return librosa.effects.pitch_shift(
        window, sr=sr, n_steps=semitones, bins_per_octave=12, res_type="soxr_hq", scale=False, n_fft=n_fft, hop_length=hop
    )


def lowpass(window: np.ndarray, cutoff: float, sr: int) -> np.ndarray:
    """librosa.stft -> raised-cosine mask -> librosa.istft, RMS-matched to the window."""
    n_fft, hop = fft_sizes(len(window), 512, 128)
    spec = librosa.stft(window, n_fft=n_fft, hop_length=hop, window="hann", center=True)
    mask = lowpass_gain(librosa.fft_frequencies(sr=sr, n_fft=n_fft), cutoff).astype(np.float32)
    y = librosa.istft(spec * mask[:, None], n_fft=n_fft, hop_length=hop, window="hann", center=True, length=len(window))
    return match_rms(y, window)


BASELINE_OPS = {"speed": time_stretch, "pitch": pitch_shift, "clarity": lowpass}


def render_baseline(category: str, audio: np.ndarray, sr: int, schedules: Sequence[Schedule], fixed: dict) -> list[np.ndarray]:
    """Each condition on its own, each window through its own librosa call."""
    if category not in BASELINE_OPS:
        return [CATEGORIES[category].render(audio, sr, [s], {**fixed, "seeds": [seed]})[0] for s, seed in zip(schedules, fixed["seeds"], strict=True)]
    op = per_window(BASELINE_OPS[category])
    kwargs = {
        "speed": {"stretched": True, "equal_split": True, "process_outside": False},
        "pitch": {"process_outside": False},
        "clarity": {},
    }[category]
    return [render_segmented(audio, sr, [s], op, **kwargs)[0] for s in schedules]
