"""Voice clarity: STFT low-pass with an 800 Hz raised-cosine transition; cutoff F_min -> sr/2 (up)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from vocalgrad_dataset.categories.base import Category, register
from vocalgrad_dataset.dsp import match_rms, rms
from vocalgrad_dataset.dsp.segments import render_segmented

N_FFT, HOP = 512, 128
TRANSITION_HZ = 800.0
JOBS_PER_BATCH = 16  # cache-sized batches: the ISTFT is memory-bound


def lowpass_gain(freqs: np.ndarray, cutoff: float) -> np.ndarray:
    """float32 mask: 1 up to cutoff - 400 Hz, 0 from cutoff + 400 Hz, a raised cosine strictly in between.

    Evaluated as published: the band position (f - lower) / (upper - lower) in float64, cast once.
    """
    lower = max(0.0, cutoff - TRANSITION_HZ / 2.0)
    upper = cutoff + TRANSITION_HZ / 2.0
    mask = np.ones_like(freqs, dtype=np.float32)
    mask[freqs >= upper] = 0.0
    band = (freqs > lower) & (freqs < upper)
    mask[band] = 0.5 * (1.0 + np.cos(np.pi * ((freqs[band] - lower) / (upper - lower))))
    return mask


def lowpass_windows(
    windows: Sequence[np.ndarray], jobs: Sequence[tuple[int, float]], sr: int
) -> list[np.ndarray]:
    """Low-pass every (window, cutoff) job: one STFT per window, one batched ISTFT per window length."""
    from vocalgrad_dataset.dsp.stft import (  # numba loads only when rendering
        batched_window_jobs,
        fft_frequencies,
        istft_batch,
    )

    out: list[np.ndarray] = [np.zeros(0, np.float32)] * len(jobs)
    gains: dict[tuple[int, float], np.ndarray] = {}  # a cutoff recurs across windows and conditions
    window_rms: dict[int, float] = {}  # a window is the RMS reference of every job on it
    for batch in batched_window_jobs(windows, jobs, N_FFT, HOP, JOBS_PER_BATCH):
        freqs = fft_frequencies(sr, batch.n_fft)
        for c in batch.values:
            if (batch.n_fft, c) not in gains:
                gains[(batch.n_fft, c)] = lowpass_gain(freqs, c)
        masks = np.stack([gains[(batch.n_fft, c)] for c in batch.values])
        filtered = batch.spectra[batch.rows] * masks[:, None, :]
        n = len(batch.job_ids)
        n_frames = np.full(n, batch.spectra.shape[1], dtype=np.int64)
        ys = istft_batch(filtered, n_frames, np.full(n, batch.length, dtype=np.int64), batch.n_fft, batch.hop)
        for j, y in zip(batch.job_ids, ys, strict=True):
            k = jobs[j][0]
            if k not in window_rms:
                window_rms[k] = rms(windows[k])
            out[j] = match_rms(y, windows[k], reference_rms=window_rms[k])
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
