"""Voice pitch: librosa pitch_shift -d -> +d semitones (up), soxr_hq, scale False; outside the span unshifted."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import soxr

from vocalgrad_dataset.categories.base import Category, register
from vocalgrad_dataset.categories.speed import stretch_windows
from vocalgrad_dataset.dsp.segments import render_segmented

BINS_PER_OCTAVE = 12


def shift_windows(
    windows: Sequence[np.ndarray], jobs: Sequence[tuple[int, float]], sr: int
) -> list[np.ndarray]:
    """librosa.effects.pitch_shift for every (window, semitones) job: batched stretch, then soxr per rate.

    librosa resamples each stretched window with soxr_hq from sr / rate to sr. Windows that share a rate
    and a stretched length are resampled together as the channels of one soxr_hq resampler (soxr keeps
    each channel's state apart, so every channel gives the one-shot call's samples; one filter set-up per
    rate instead of one per window). Rates go in order with one resampler alive at a time: a long
    source's linear curve has a distinct rate per step, and keeping a resampler (~0.4 MB) per rate until
    the end made pitch's memory grow by ~160 bytes per source sample.
    """
    rates = [2.0 ** (-float(n) / BINS_PER_OCTAVE) for _, n in jobs]
    stretched = stretch_windows(windows, [(k, r) for (k, _), r in zip(jobs, rates, strict=True)])
    groups: dict[tuple[float, int], list[int]] = {}
    for j in sorted(range(len(jobs)), key=lambda j: rates[j]):
        groups.setdefault((rates[j], len(stretched[j])), []).append(j)
    out: list[np.ndarray] = [np.zeros(0, dtype=np.float32)] * len(jobs)
    for (rate, length), members in groups.items():
        orig_sr = float(sr) / rate
        # librosa.resample(..., res_type="soxr_hq", scale=False) then fix_length to the input length
        n_resampled = int(np.ceil(length * (float(sr) / orig_sr)))
        if orig_sr != sr:
            block = np.empty((length, len(members)), dtype=np.float32)
            for c, j in enumerate(members):
                block[:, c] = stretched[j]
            resampler = soxr.ResampleStream(orig_sr, sr, len(members), dtype="float32", quality="soxr_hq")
            resampled = resampler.resample_chunk(block, last=True)
            columns = [resampled[:, c] for c in range(len(members))]
        else:
            columns = [stretched[j] for j in members]
        for j, y in zip(members, columns, strict=True):
            stretched[j] = out[j]  # drops our reference to the stretched window
            out[j] = _fixed_length(y, n_resampled, len(windows[jobs[j][0]]))
    return out


def _fixed_length(y: np.ndarray, n_resampled: int, size: int) -> np.ndarray:
    """librosa's fix_length to `n_resampled` (resample's output length), then to the window's `size`: y's first
    min(len(y), n_resampled, size) samples, zero-padded to `size`, as a new float32 array (one copy)."""
    keep = min(len(y), n_resampled, size)
    fixed = np.empty(size, dtype=np.float32)
    fixed[:keep] = y[:keep]
    fixed[keep:] = 0.0
    return fixed


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
