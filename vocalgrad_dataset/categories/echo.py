"""Echo: a Schroeder reverb's wet signal mixed in with a continuous wet weight 0 -> w_max (up)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import lru_cache

import numpy as np

from vocalgrad_dataset.categories.base import Category, register
from vocalgrad_dataset.dsp import match_rms


def _delay(ms: float, sr: int) -> int:
    """Delay in samples: max(1, round(ms / 1000 * sr)), in the published operation order."""
    return max(1, int(round((ms / 1000.0) * sr)))


def _reverb_config() -> dict:
    return CATEGORY.config["schroeder_reverb"]


@lru_cache(maxsize=16)
def schroeder_ir(sr: int, room_scale: float) -> np.ndarray:
    """Impulse response (float32, 1.5 s) of 4 parallel feedback combs (averaged) into 2 series allpasses.

    Evaluated exactly like the published per-sample loop, vectorised: float64 arithmetic whose delay
    lines store float32, the combs summed in order and divided by 4, then the allpasses in series.
    """
    cfg = _reverb_config()
    n = max(1, int(round(float(cfg["ir_duration_sec"]) * sr)))
    comb_sum = np.zeros(n, dtype=np.float64)
    for ms, base in zip(cfg["comb_delays_ms"], cfg["comb_feedback_base"], strict=True):
        # driven by a unit impulse, a comb is non-zero only at multiples of its delay d:
        # out[k d] = feedback * float32(out[(k - 1) d]) (its delay line holds float32)
        d, feedback = _delay(ms, sr), float(base) * room_scale
        taps = np.empty((n - 1) // d + 1, dtype=np.float64)
        taps[0] = 1.0
        for k in range(1, len(taps)):
            taps[k] = feedback * float(np.float32(taps[k - 1]))
        comb = np.zeros(n, dtype=np.float64)
        comb[::d] = taps
        comb_sum += comb  # 0.0 + c0 + c1 + ...: the loop's left-to-right sum
    stage = comb_sum / len(cfg["comb_feedback_base"])
    for ms, base in zip(cfg["allpass_delays_ms"], cfg["allpass_feedback_base"], strict=True):
        g = float(base) * room_scale
        if abs(g) < 1e-8:
            continue
        stage = _allpass(stage, _delay(ms, sr), g)
    return stage.astype(np.float32)


def _allpass(x: np.ndarray, d: int, g: float) -> np.ndarray:
    """out[i] = -g x[i] + w[i - d], w[i] = float32(x[i] + g out[i]): one delay-length block at a time."""
    out = np.empty_like(x)
    line = np.zeros(d, dtype=np.float32)  # w of the previous block
    for a in range(0, len(x), d):
        xb = x[a : a + d]
        ob = (-g * xb) + line[: len(xb)]
        out[a : a + d] = ob
        line = (xb + g * ob).astype(np.float32)
    return out


def fft_convolve(x: np.ndarray, h: np.ndarray, x_spectrum: np.ndarray | None = None) -> np.ndarray:
    """x * h truncated to len(x): numpy real FFTs at the next power-of-two length (x's spectrum when known)."""
    n_fft = fft_length(len(x), len(h))
    spectrum = np.fft.rfft(x, n=n_fft) if x_spectrum is None else x_spectrum
    h_spectrum = np.fft.rfft(h, n=n_fft)
    # both operands named, as published: with a temporary right operand numpy computes the product in place
    # as h * x, and its SIMD complex64 multiply is not bitwise symmetric
    y = np.fft.irfft(spectrum * h_spectrum, n=n_fft)
    return y[: len(x)].astype(np.float32)


def fft_length(n_x: int, n_h: int) -> int:
    """The next power of two >= the full convolution's length."""
    return 1 << (n_x + n_h - 2).bit_length()


def _wet(audio: np.ndarray, sr: int, room: float, cache: dict) -> np.ndarray:
    """The tier's wet signal, RMS-matched to the dry clip; once per clip and room (the three tiers share
    the clip's spectrum while it is small)."""
    key = f"echo:wet:{room!r}"
    if key not in cache:
        ir = schroeder_ir(sr, room)
        spectrum = cache.get("echo:spectrum")
        n_fft = fft_length(len(audio), len(ir))
        if spectrum is None and 8 * (n_fft // 2 + 1) <= SPECTRUM_BYTES:
            spectrum = cache["echo:spectrum"] = np.fft.rfft(audio, n=n_fft)
        cache[key] = match_rms(_convolve_ir(audio, sr, room, spectrum), audio)
    return cache[key]


SPECTRUM_BYTES = 64 * 2**20  # keep spectra for reuse only below this (a 5 s clip's: 2 MB)


def _convolve_ir(audio: np.ndarray, sr: int, room: float, spectrum: np.ndarray | None) -> np.ndarray:
    """fft_convolve(audio, IR) with the IR's spectrum from a cache across clips (same FFT length)."""
    ir = schroeder_ir(sr, room)
    n_fft = fft_length(len(audio), len(ir))
    if 8 * (n_fft // 2 + 1) > SPECTRUM_BYTES:
        return fft_convolve(audio, ir, spectrum)
    x_spectrum = np.fft.rfft(audio, n=n_fft) if spectrum is None else spectrum
    h_spectrum = _ir_spectrum(sr, room, n_fft)
    return np.fft.irfft(x_spectrum * h_spectrum, n=n_fft)[: len(audio)].astype(np.float32)


@lru_cache(maxsize=12)
def _ir_spectrum(sr: int, room: float, n_fft: int) -> np.ndarray:
    """rfft of the room's IR at n_fft (the published script computes it per tier and source)."""
    return np.fft.rfft(schroeder_ir(sr, room), n=n_fft)


def _render(audio: np.ndarray, sr: int, schedules: Sequence, fixed: dict) -> Iterator[np.ndarray]:
    from vocalgrad_dataset.dsp.kernels import wet_mix

    wet = _wet(audio, sr, fixed["room_scale_max"], fixed.get("clip_cache", {}))
    for s in schedules:  # the mix (1 - w) * dry + w * wet in float64 per sample, cast once, in one pass
        out = np.empty(len(audio), dtype=np.float32)
        wet_mix(audio, wet, s.onset, s.offset, s.start, s.values, s.end, out)
        yield out


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
