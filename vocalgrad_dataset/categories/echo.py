"""Echo: a Schroeder reverb's wet signal mixed in with a continuous wet weight 0 -> w_max (up)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np
from scipy.signal import fftconvolve, lfilter

from ..dsp import match_rms
from .base import Category, register

COMB_DELAYS_MS = (29.7, 37.1, 41.1, 43.7)
COMB_GAINS = (0.805, 0.827, 0.783, 0.764)
ALLPASS_DELAYS_MS = (5.0, 1.7)
ALLPASS_GAIN = 0.7
IR_SEC = 1.5


def _delay(ms: float, sr: int) -> int:
    return int(round(ms * sr / 1000.0))


@lru_cache(maxsize=16)
def schroeder_ir(sr: int, room_scale: float) -> np.ndarray:
    """Impulse response (float32, 1.5 s) of 4 parallel feedback combs (averaged) into 2 series allpasses.

    A comb y[n] = x[n] + g*y[n-D] driven by a unit impulse is g^k at n = kD, computed as a float32
    running product (the same roundings as the recursion); the allpasses run as IIR filters.
    """
    n = int(round(IR_SEC * sr))
    combs = np.zeros(n, dtype=np.float32)
    for ms, gain in zip(COMB_DELAYS_MS, COMB_GAINS, strict=True):
        d = _delay(ms, sr)
        taps = np.cumprod(np.full((n - 1) // d + 1, np.float32(gain * room_scale), dtype=np.float32))
        comb = np.zeros(n, dtype=np.float32)
        comb[0] = 1.0
        comb[d::d] = taps[: len(comb[d::d])]
        combs += comb
    ir = combs / np.float32(len(COMB_GAINS))
    g = np.float32(ALLPASS_GAIN * room_scale)
    for ms in ALLPASS_DELAYS_MS:
        d = _delay(ms, sr)
        b = np.zeros(d + 1, dtype=np.float32)
        a = np.zeros(d + 1, dtype=np.float32)
        b[0], b[d] = -g, 1.0  # y[n] = -g x[n] + x[n-D] + g y[n-D]
        a[0], a[d] = 1.0, -g
        ir = lfilter(b, a, ir).astype(np.float32)
    return ir


def _render(audio: np.ndarray, sr: int, schedules: Sequence, fixed: dict) -> list[np.ndarray]:
    ir = schroeder_ir(sr, fixed["room_scale_max"])
    wet = match_rms(fftconvolve(audio, ir)[: len(audio)].astype(np.float32), audio)
    out = []
    for s in schedules:
        w = s.per_sample().astype(np.float32)
        out.append((np.float32(1.0) - w) * audio + w * wet)
    return out


CATEGORY = register(
    Category(
        name="echo",
        attribute="echo",
        release_name="echo",
        parameter="wet_mix",
        tier_key="wet_mix_max",
        endpoints=lambda w_max, sr: (0.0, w_max),
        render=_render,
        continuous=True,
        fixed_keys=("room_scale_max",),
        description="wet = clip * Schroeder IR (room scale per tier), RMS-matched to the dry clip; w per sample",
    )
)
