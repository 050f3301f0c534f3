"""Voice clarity: STFT low-pass with an 800 Hz raised-cosine transition; cutoff F_min -> sr/2 (up)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import librosa
import numpy as np

from ..dsp import fft_sizes, istft_batch, match_rms, stft_batch
from ..segments import render_segmented
from .base import Category, register

N_FFT, HOP = 512, 128
TRANSITION_HZ = 800.0
JOBS_PER_BATCH = 16  # cache-sized batches: the ISTFT is memory-bound


def lowpass_gain(freqs: np.ndarray, cutoff: float) -> np.ndarray:
    """1 below cutoff - 400 Hz, 0 above cutoff + 400 Hz, a raised cosine in between (float64)."""
    lo = cutoff - TRANSITION_HZ / 2
    ramp = 0.5 * (1.0 + np.cos(np.pi * np.clip((freqs - lo) / TRANSITION_HZ, 0.0, 1.0)))
    return np.where(freqs <= lo, 1.0, np.where(freqs >= lo + TRANSITION_HZ, 0.0, ramp))


def lowpass_windows(windows: Sequence[np.ndarray], jobs: Sequence[tuple[int, float]], sr: int) -> list[np.ndarray]:
    """Low-pass every (window, cutoff) job: one STFT per window, one batched ISTFT per window length."""
    by_length: dict[int, list[int]] = defaultdict(list)
    for j, (k, _) in enumerate(jobs):
        by_length[len(windows[k])].append(j)
    out: list[np.ndarray] = [np.zeros(0, np.float32)] * len(jobs)
    for length, job_ids in by_length.items():
        nf, hp = fft_sizes(length, N_FFT, HOP)
        keys = sorted({jobs[j][0] for j in job_ids})
        row_of = {k: r for r, k in enumerate(keys)}
        specs = stft_batch(np.stack([windows[k] for k in keys]).astype(np.float32, copy=False), nf, hp)
        freqs = librosa.fft_frequencies(sr=sr, n_fft=nf)
        for b in range(0, len(job_ids), JOBS_PER_BATCH):
            batch = job_ids[b : b + JOBS_PER_BATCH]
            masks = np.stack([lowpass_gain(freqs, jobs[j][1]) for j in batch]).astype(np.float32)
            filtered = specs[[row_of[jobs[j][0]] for j in batch]] * masks[:, None, :]
            n_frames = np.full(len(batch), specs.shape[1], dtype=np.int64)
            ys = istft_batch(filtered, n_frames, np.full(len(batch), length, dtype=np.int64), nf, hp)
            for j, y in zip(batch, ys, strict=True):
                out[j] = match_rms(y, windows[jobs[j][0]])
    return out


CATEGORY = register(
    Category(
        name="clarity",
        attribute="voice clarity",
        release_name="voice_clarity",
        parameter="cutoff_hz",
        tier_key="cutoff_min_hz",
        endpoints=lambda f_min, sr: (f_min, sr / 2.0),  # up = clearer = higher cutoff
        render=lambda audio, sr, schedules, fixed: render_segmented(audio, sr, schedules, lowpass_windows),
        description="STFT low-pass per 50 ms step with context, RMS-matched per window; cutoff linear in Hz",
    )
)
