"""Speaking speed: librosa time_stretch of the speech span, rate 1-d -> 1+d (up), n_fft 512, hop 128."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from vocalgrad_dataset.categories.base import Category, register
from vocalgrad_dataset.dsp.segments import render_segmented

if TYPE_CHECKING:
    from vocalgrad_dataset.dsp.stft import VocoderInput

N_FFT, HOP = 512, 128
JOBS_PER_BATCH = 32  # cache-sized batches: the vocoder is memory-bound


def stretch_windows(windows: Sequence[np.ndarray], jobs: Sequence[tuple[int, float]], n_fft: int = N_FFT, hop: int = HOP) -> list[np.ndarray]:
    """librosa.effects.time_stretch(window, rate) for every (window, rate) job, batched by window length.

    Each window's STFT is computed once and shared by every rate it is stretched at.
    """
    from vocalgrad_dataset.dsp.stft import (  # librosa, numba
        batched_window_jobs,
        istft_batch,
        phase_vocoder_batch,
        prepare_vocoder,
    )

    out: list[np.ndarray] = [np.zeros(0, np.float32)] * len(jobs)
    prep: VocoderInput | None = None
    prep_chunk = None
    for batch in batched_window_jobs(windows, jobs, n_fft, hop, JOBS_PER_BATCH):
        if batch.chunk != prep_chunk:  # the rate-independent half of the vocoder, once per window (chunk by chunk)
            prep, prep_chunk = prepare_vocoder(batch.spectra, batch.hop, batch.n_fft), batch.chunk
        stretched, n_out = phase_vocoder_batch(prep, batch.rows, batch.values)
        lengths = np.array([int(round(batch.length / r)) for r in batch.values], dtype=np.int64)
        for j, y in zip(batch.job_ids, istft_batch(stretched, n_out, lengths, batch.n_fft, batch.hop), strict=True):
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
