"""Speaking speed: librosa time_stretch of the speech span, rate 1-d -> 1+d (up), n_fft 512, hop 128."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from ..dsp import fft_sizes, istft_batch, phase_vocoder_batch, prepare_vocoder, stft_batch
from ..segments import render_segmented
from .base import Category, register

N_FFT, HOP = 512, 128
JOBS_PER_BATCH = 32  # cache-sized batches: the vocoder is memory-bound


def stretch_windows(windows: Sequence[np.ndarray], jobs: Sequence[tuple[int, float]], n_fft: int = N_FFT, hop: int = HOP) -> list[np.ndarray]:
    """librosa.effects.time_stretch(window, rate) for every (window, rate) job, batched by window length.

    Each window's STFT is computed once and shared by every rate it is stretched at.
    """
    by_length: dict[int, list[int]] = defaultdict(list)
    for j, (k, _) in enumerate(jobs):
        by_length[len(windows[k])].append(j)
    out: list[np.ndarray] = [np.zeros(0, np.float32)] * len(jobs)
    for length, job_ids in by_length.items():
        nf, hp = fft_sizes(length, n_fft, hop)
        keys = sorted({jobs[j][0] for j in job_ids})
        row_of = {k: r for r, k in enumerate(keys)}
        prep = prepare_vocoder(stft_batch(np.stack([windows[k] for k in keys]).astype(np.float32, copy=False), nf, hp), hp, nf)
        job_ids.sort(key=lambda j: jobs[j][1])  # similar rates share a batch: little padding to the longest
        for b in range(0, len(job_ids), JOBS_PER_BATCH):
            batch = job_ids[b : b + JOBS_PER_BATCH]
            rates = np.array([jobs[j][1] for j in batch], dtype=np.float64)
            rows = np.array([row_of[jobs[j][0]] for j in batch], dtype=np.int64)
            stretched, n_out = phase_vocoder_batch(prep, rows, rates)
            lengths = np.array([int(round(length / r)) for r in rates], dtype=np.int64)
            for j, y in zip(batch, istft_batch(stretched, n_out, lengths, nf, hp), strict=True):
                out[j] = y
    return out


def _render(audio: np.ndarray, sr: int, schedules: Sequence, fixed: dict) -> list[np.ndarray]:
    op = lambda windows, jobs, _sr: stretch_windows(windows, jobs)  # noqa: E731
    return render_segmented(audio, sr, schedules, op, stretched=True, equal_split=True, process_outside=False)


CATEGORY = register(
    Category(
        name="speed",
        attribute="speaking speed",
        release_name="speaking_speed",
        parameter="time_stretch_rate",
        tier_key="delta_rate",
        endpoints=lambda d, sr: (1.0 - d, 1.0 + d),
        render=_render,
        description="time-stretch of the speech span only; chunk bounds round(k*L/n); centres cut at a/rate..b/rate",
    )
)
