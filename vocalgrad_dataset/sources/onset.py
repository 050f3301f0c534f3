"""Speech onset/offset detection and seconds-to-samples conversion exactly as SPEC §1."""

from __future__ import annotations

import math

import numpy as np

from vocalgrad_dataset.sources.base import SourceError

FRAME_SEC = 0.01  # 10 ms frames with a 10 ms hop
NOISE_SEC = 0.2  # noise floor = median RMS of the frames within the first 200 ms
MIN_RUN_FRAMES = 10  # a speech run must last >= 100 ms
STEP_SEC = 0.05  # stepped categories cut the span into 50 ms steps (SPEC §2)


def detect_onset_offset(samples: np.ndarray, sr: int, *, clip_name: str) -> tuple[float, float]:
    """Onset and offset of speech in seconds (SPEC §1); SourceError naming the clip when none is found."""
    x = np.asarray(samples)
    # Integer input is PCM16 (the sources' contract); float input is already on the [-1, 1) scale.
    scale = 32768.0 if np.issubdtype(x.dtype, np.integer) else 1.0
    x = x.astype(np.float64) / scale
    if x.ndim == 2:
        x = x.mean(axis=1)  # (samples, channels) -> mono mean
    n = x.shape[0]
    y = np.empty_like(x)
    if n:
        y[0] = x[0]
        y[1:] = x[1:] - 0.97 * x[:-1]
    frame = max(1, int(round(FRAME_SEC * sr)))
    n_frames = n // frame  # partial tail frame dropped
    if n_frames == 0:
        raise SourceError(f"clip {clip_name}: too short for onset detection ({n} samples at {sr} Hz)")
    rms = np.sqrt(np.mean(y[: n_frames * frame].reshape(n_frames, frame) ** 2, axis=1))
    # the frames that fit in the first 200 ms, counted as the published detector does (20 at common rates)
    head = max(1, int(round(NOISE_SEC * sr)))
    noise_frames = max(1, min(n_frames, math.ceil(max(1, head - frame + 1) / frame)))
    floor = float(np.median(rms[:noise_frames]))
    threshold = max(1.8 * floor, 0.003 * float(rms.max()), 5e-5)
    active = rms >= threshold
    # Runs of consecutive active frames: starts where the padded diff rises, ends where it falls.
    edges = np.diff(np.concatenate(([0], active.astype(np.int8), [0])))
    starts = np.flatnonzero(edges == 1)
    ends = np.flatnonzero(edges == -1)  # exclusive frame index
    kept = (ends - starts) >= MIN_RUN_FRAMES
    if not kept.any():
        raise SourceError(
            f"clip {clip_name}: no speech detected (no run of >= {MIN_RUN_FRAMES} active frames)"
        )
    onset = int(starts[kept][0]) * frame
    offset = min(int(ends[kept][-1] - 1) * frame + frame, n)
    return onset / sr, offset / sr


PAST_END_SEC = 0.01  # an offset up to one 10 ms detection frame past the end is rounding (clamped, SPEC §1)


def span_samples(
    onset_sec: float, offset_sec: float, sr: int, n: int, *, clip_name: str = "<unnamed clip>"
) -> tuple[int, int]:
    """Speech span [onset, offset) in samples: round(t·sr) clamped to [0, n]; rejects spans under one step and
    an offset past the end of the clip (a wrong clip or wrong metadata: cut silently, the span would be another)."""
    if int(round(offset_sec * sr)) > n + int(round(PAST_END_SEC * sr)):
        raise SourceError(f"clip {clip_name}: offset_sec {offset_sec:.3f} is past the end of the clip "
                          f"({n / sr:.3f} s); fix the onset/offset in its metadata")
    onset = min(max(int(round(onset_sec * sr)), 0), n)
    offset = min(max(int(round(offset_sec * sr)), 0), n)
    step = int(round(STEP_SEC * sr))
    if offset - onset < step:
        raise SourceError(
            f"clip {clip_name}: speech span shorter than one 50 ms step "
            f"({offset - onset} samples from {onset_sec:.3f}s to {offset_sec:.3f}s, step {step})"
        )
    return onset, offset
