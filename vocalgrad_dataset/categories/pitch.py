"""Voice pitch: librosa pitch_shift -d -> +d semitones (up), soxr_hq, scale False; outside the span unshifted."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import soxr

from ..segments import render_segmented
from .base import Category, register
from .speed import stretch_windows

BINS_PER_OCTAVE = 12


def shift_windows(
    windows: Sequence[np.ndarray], jobs: Sequence[tuple[int, float]], sr: int
) -> list[np.ndarray]:
    """librosa.effects.pitch_shift for every (window, semitones) job: batched stretch, then soxr per job.

    librosa resamples each stretched window with soxr_hq from sr / rate to sr; the resampler is set up
    once per distinct rate and reset between the windows that share it (a reset stream gives the same
    samples as a one-shot call, and costs less than a new setup).
    """
    rates = [2.0 ** (-float(n) / BINS_PER_OCTAVE) for _, n in jobs]
    stretched = stretch_windows(windows, [(k, r) for (k, _), r in zip(jobs, rates, strict=True)])
    out: list[np.ndarray] = [np.zeros(0, dtype=np.float32)] * len(jobs)
    # Jobs sharing a rate back to back, so one resampler is alive at a time: a long source's linear
    # curve has a distinct rate per step, and keeping each rate's soxr_hq resampler (~0.4 MB) until the
    # end made pitch's memory grow by ~160 bytes per source sample.
    stream, stream_sr = None, None
    for j in sorted(range(len(jobs)), key=lambda j: rates[j]):
        k, y = jobs[j][0], stretched[j]
        stretched[j] = out[j]  # drops our reference to the stretched window once it is resampled
        orig_sr = float(sr) / rates[j]
        # librosa.resample(..., res_type="soxr_hq", scale=False) then fix_length to the input length
        n_resampled = int(np.ceil(len(y) * (float(sr) / orig_sr)))
        if orig_sr != sr:
            if stream is None or stream_sr != orig_sr:
                stream, stream_sr = (
                    soxr.ResampleStream(orig_sr, sr, 1, dtype="float32", quality="soxr_hq"),
                    orig_sr,
                )
            else:
                stream.clear()
            y = stream.resample_chunk(np.ascontiguousarray(y, dtype=np.float32), last=True)
        out[j] = _fix_length(_fix_length(y, n_resampled), len(windows[k])).astype(np.float32, copy=False)
    return out


def _fix_length(y: np.ndarray, size: int) -> np.ndarray:
    return y[:size] if len(y) >= size else np.pad(y, (0, size - len(y)))


CATEGORY = register(
    Category(
        name="pitch",
        attribute="voice pitch",
        release_name="voice_pitch",
        parameter="semitones",
        tier_key="delta_steps",
        endpoints=lambda d, sr: (-d, d),
        render=lambda audio, sr, schedules, fixed: render_segmented(
            audio, sr, schedules, shift_windows, process_outside=False
        ),
        description="pitch shift per 50 ms step with +-50 ms context; audio outside the speech span unshifted",
    )
)
