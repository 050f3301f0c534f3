"""Fused single-pass numba kernels for the per-sample categories and the PCM16 conversion.

Each does, sample by sample, exactly the float operations the published generator does with whole-array
numpy expressions (same dtypes, same order; no fast-math, so no fused multiply-add), in one pass instead
of one temporary array per operation. Imported lazily: numba loads only when audio is rendered.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True)
def pcm16_into(y, out):  # noqa: ANN001, ANN201 - numba kernel on numpy arrays  # pragma: no cover
    """out = int16(clip(y * 32768, -32768, 32767)) truncated toward zero; returns how many y are outside [-1, 1)."""
    clipped = 0
    for i in range(y.shape[0]):
        v = y[i] * 32768.0  # exact: a power of two
        if v < -32768.0:
            v = -32768.0
            clipped += 1
        elif v >= 32768.0:
            v = 32767.0
            clipped += 1
        elif v > 32767.0:
            v = 32767.0
        out[i] = np.int16(v)
    return clipped


@numba.njit(cache=True)
def wet_mix(dry, wet, onset, offset, start, values, end, out):  # noqa: ANN001, ANN201  # pragma: no cover
    """out = float32((1 - w) * dry + w * wet) in float64, w = start before onset, values[i - onset] over the
    speech span, end from offset on (echo's per-sample mix)."""
    for i in range(dry.shape[0]):
        if i < onset:
            w = start
        elif i < offset:
            w = values[i - onset]
        else:
            w = end
        out[i] = np.float32((1.0 - w) * np.float64(dry[i]) + w * np.float64(wet[i]))


@numba.njit(cache=True)
def add_noise(audio, draw, draw_rms, level, onset, offset, step, start, values, end, out):  # noqa: ANN001, ANN201  # pragma: no cover
    """out = audio + (draw / draw_rms) * (level * ratio) in float32, the ratio float32 per 50 ms step
    (start before onset, end from offset on), as the published background-noise script computes it."""
    for i in range(audio.shape[0]):
        if i < onset:
            r = np.float32(start)
        elif i < offset:
            r = np.float32(values[(i - onset) // step])
        else:
            r = np.float32(end)
        unit = np.float32(draw[i] / draw_rms)
        out[i] = np.float32(audio[i] + np.float32(unit * np.float32(level * r)))
