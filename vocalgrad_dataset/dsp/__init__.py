"""Numerics shared by the categories: RMS and its matching, PCM16 output, the short-window FFT rule.

numpy only, so that importing the categories (their metadata, the CLI, the harness) stays instant; the
batched STFT / phase vocoder / ISTFT with their numba kernels live in `vocalgrad_dataset.dsp.stft`.
"""

from __future__ import annotations

import numpy as np


def rms(x: np.ndarray) -> float:
    """Root mean square as published: squares in float32, mean accumulated in float64 (0.0 when empty)."""
    if x.size == 0:
        return 0.0
    return float(np.sqrt(np.mean(np.square(x), dtype=np.float64)))


def match_rms(y: np.ndarray, reference: np.ndarray, *, reference_rms: float | None = None) -> np.ndarray:
    """Scale float32 y to the RMS of reference: the ratio rounded to float32, one float32 multiply.

    Skipped (y returned as float32) when either RMS is 0. `reference_rms`, when given, is rms(reference)
    computed once by a caller that matches many outputs to the same reference.
    """
    y = y.astype(np.float32, copy=False)
    r_ref, r_y = (rms(reference) if reference_rms is None else reference_rms), rms(y)
    if r_ref <= 0.0 or r_y <= 0.0:
        return y
    return y * np.float32(r_ref / r_y)


def to_pcm16(y: np.ndarray) -> tuple[np.ndarray, float]:
    """Float audio in [-1, 1) to int16 by clip and truncation toward zero; returns (pcm, clipped fraction)."""
    if y.size == 0:
        return np.zeros(0, dtype=np.int16), 0.0
    from vocalgrad_dataset.dsp.kernels import pcm16_into  # numba: loaded when audio is rendered

    pcm = np.empty(len(y), dtype=np.int16)
    clipped = pcm16_into(np.ascontiguousarray(y), pcm)  # one pass: scale, clip, truncate, count
    return pcm, clipped / y.size


def fft_sizes(length: int, n_fft: int, hop: int) -> tuple[int, int]:
    """The published short-window rule: a window shorter than n_fft uses n_fft = max(32, length); the hop
    stays unless it is >= that n_fft, then it becomes n_fft // 4 (so a 300-sample window keeps hop 128)."""
    if n_fft > length:
        n_fft = max(32, length)
    if hop >= n_fft:
        hop = max(1, n_fft // 4)
    return n_fft, hop
