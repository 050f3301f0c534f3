"""Fused single-pass numba kernels for the per-sample categories and the PCM16 conversion.

Each does, sample by sample, exactly the float operations the published generator does with whole-array
numpy expressions (same dtypes, same order; no fast-math, so no fused multiply-add), in one pass instead
of one temporary array per operation. Imported lazily: numba loads only when audio is rendered.
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic
from numba.np.random._constants import fi_double as _FI_DOUBLE
from numba.np.random._constants import ki_double as _KI_DOUBLE
from numba.np.random._constants import wi_double as _WI_DOUBLE
from numba.np.random._constants import ziggurat_nor_inv_r as _ZIGGURAT_NOR_INV_R
from numba.np.random._constants import ziggurat_nor_r as _ZIGGURAT_NOR_R


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


PAIRWISE_BLOCK = 128  # numpy's PW_BLOCKSIZE: runs up to this long are summed in 8 lanes


@numba.njit(cache=True)
def _square_sum_run(draw, lo, n):  # noqa: ANN001, ANN201  # pragma: no cover
    """numpy's pairwise_sum leaf for float32: 8 lanes, then the lanes in a tree, then the tail in order."""
    if n < 8:
        total = np.float32(0.0)
        for i in range(lo, lo + n):
            f = np.float32(draw[i])
            total += f * f
        return total
    f0, f1, f2, f3 = (
        np.float32(draw[lo]),
        np.float32(draw[lo + 1]),
        np.float32(draw[lo + 2]),
        np.float32(draw[lo + 3]),
    )
    f4, f5, f6, f7 = (
        np.float32(draw[lo + 4]),
        np.float32(draw[lo + 5]),
        np.float32(draw[lo + 6]),
        np.float32(draw[lo + 7]),
    )
    r0, r1, r2, r3, r4, r5, r6, r7 = f0 * f0, f1 * f1, f2 * f2, f3 * f3, f4 * f4, f5 * f5, f6 * f6, f7 * f7
    i = lo + 8
    stop = lo + n - n % 8
    while i < stop:
        f0, f1, f2, f3 = (
            np.float32(draw[i]),
            np.float32(draw[i + 1]),
            np.float32(draw[i + 2]),
            np.float32(draw[i + 3]),
        )
        f4, f5, f6, f7 = (
            np.float32(draw[i + 4]),
            np.float32(draw[i + 5]),
            np.float32(draw[i + 6]),
            np.float32(draw[i + 7]),
        )
        r0 += f0 * f0
        r1 += f1 * f1
        r2 += f2 * f2
        r3 += f3 * f3
        r4 += f4 * f4
        r5 += f5 * f5
        r6 += f6 * f6
        r7 += f7 * f7
        i += 8
    total = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < lo + n:
        f = np.float32(draw[i])
        total += f * f
        i += 1
    return total


@numba.njit(cache=True)
def float32_square_sum(draw):  # noqa: ANN001, ANN201  # pragma: no cover
    """sum of float32(draw) ** 2 in float32, in numpy's pairwise order (runs of <= 128 in 8 lanes, longer
    ones halved at a multiple of 8 and the halves added): what np.mean(x * x) sums, bit for bit.

    The recursion is unrolled onto an explicit stack (numba's on-disk cache crashes on recursive kernels).
    """
    n = draw.shape[0]
    if n <= PAIRWISE_BLOCK:
        return _square_sum_run(draw, 0, n)
    starts, counts = np.empty(64, np.int64), np.empty(64, np.int64)
    # per pending range: stage 1 = its left half is being summed, 2 = its right half (left sum kept)
    left_sums, stages = np.empty(64, np.float32), np.empty(64, np.int64)
    top, starts[0], counts[0] = 0, 0, n
    while True:
        count = counts[top]
        if count > PAIRWISE_BLOCK:
            half = count // 2
            half -= half % 8
            stages[top] = 1
            top += 1
            starts[top], counts[top] = starts[top - 1], half
            continue
        value = _square_sum_run(draw, starts[top], count)
        top -= 1
        while top >= 0 and stages[top] == 2:  # both halves done: add them, hand the sum up
            value = left_sums[top] + value
            top -= 1
        if top < 0:
            return value
        half = counts[top] // 2
        half -= half % 8
        left_sums[top], stages[top] = value, 2
        top += 1
        starts[top], counts[top] = starts[top - 1] + half, counts[top - 1] - half


@numba.njit(cache=True)
def _add_scaled(audio, draw, rms, gain, lo, hi, out):  # noqa: ANN001, ANN201  # pragma: no cover
    """out[lo:hi] = audio + float32(float32(draw) / rms) * gain, all float32 (a loop numba vectorises)."""
    for i in range(lo, hi):
        out[i] = np.float32(audio[i] + np.float32(np.float32(np.float32(draw[i]) / rms) * gain))


@numba.njit(cache=True)
def add_noise(audio, draw, level, onset, offset, step, start, values, end, out):  # noqa: ANN001, ANN201  # pragma: no cover
    """out = audio + (noise / noise_rms) * (level * ratio) in float32, as the published background-noise
    script computes it: noise = float32(draw) (numpy's float64 standard_normal draw cast), noise_rms its
    float32 RMS over the whole clip floored at 1e-6, the ratio float32 per 50 ms step (start before onset,
    end from offset on). One pass for the RMS, one for the output; no temporaries."""
    n = audio.shape[0]
    if n == 0:
        return
    mean_square = np.float32(np.float64(float32_square_sum(draw)) / n)  # np.mean: float32 sum / intp count
    rms = max(np.float32(np.sqrt(mean_square)), np.float32(1e-6))
    span_start = min(max(onset, 0), n)
    span_end = min(max(offset, span_start), n)
    _add_scaled(audio, draw, rms, np.float32(level * np.float32(start)), 0, span_start, out)
    for lo in range(span_start, span_end, step):
        ratio = np.float32(values[(lo - onset) // step])
        _add_scaled(audio, draw, rms, np.float32(level * ratio), lo, min(lo + step, span_end), out)
    _add_scaled(audio, draw, rms, np.float32(level * np.float32(end)), span_end, n, out)


# numpy's Generator(PCG64).standard_normal, bit for bit, with the bit generator inlined: numpy calls the
# PCG64 step through a function pointer per sample, which is most of the background-noise category's time.
# The ziggurat tables are numpy's, as numba ports them for its own np.random.Generator support.
PCG64_MULTIPLIER_HIGH = np.uint64(2549297995355413924)  # PCG_DEFAULT_MULTIPLIER_128 (pcg64.h)
PCG64_MULTIPLIER_LOW = np.uint64(4865540595714422341)
_LOW_52_BITS = np.uint64(0x000FFFFFFFFFFFFF)


@intrinsic
def _mul_high_64(typingctx, a, b):  # noqa: ANN001, ANN202, ARG001 - numba intrinsic  # pragma: no cover
    """The high 64 bits of the 128-bit product of two uint64 (one mul instruction)."""
    signature = types.uint64(types.uint64, types.uint64)

    def codegen(context, builder, sig, args):  # noqa: ANN001, ANN202, ARG001
        wide = ir.IntType(128)
        product = builder.mul(builder.zext(args[0], wide), builder.zext(args[1], wide))
        return builder.trunc(builder.lshr(product, ir.Constant(wide, 64)), ir.IntType(64))

    return signature, codegen


@numba.njit(cache=True, inline="always")
def _pcg64_next(state):  # noqa: ANN001, ANN202  # pragma: no cover
    """numpy's pcg64 next64: step the 128-bit LCG (state = [high, low, inc high, inc low]), then XSL-RR."""
    high, low = state[0], state[1]
    new_high = (
        _mul_high_64(low, PCG64_MULTIPLIER_LOW) + low * PCG64_MULTIPLIER_HIGH + high * PCG64_MULTIPLIER_LOW
    )
    new_low = low * PCG64_MULTIPLIER_LOW
    added = new_low + state[3]
    new_high = new_high + state[2] + (np.uint64(1) if added < new_low else np.uint64(0))
    state[0], state[1] = new_high, added
    value = new_high ^ added
    rot = new_high >> np.uint64(58)
    return (value >> rot) | (value << ((np.uint64(64) - rot) & np.uint64(63)))


@numba.njit(cache=True, inline="always")
def _pcg64_double(state):  # noqa: ANN001, ANN202  # pragma: no cover
    """numpy's next_double: the top 53 bits over 2 ** 53."""
    return np.float64(_pcg64_next(state) >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@numba.njit(cache=True)
def standard_normal_float32_into(state, out):  # noqa: ANN001, ANN201  # pragma: no cover
    """out[i] = float32(numpy's random_standard_normal) for the PCG64 `state` (advanced in place): what
    Generator(PCG64(seed)).standard_normal(len(out)).astype(np.float32) gives (the ziggurat of
    numpy/random/src/distributions/distributions.c, rare tail and wedge paths included)."""
    for i in range(out.shape[0]):
        while True:
            r = _pcg64_next(state)
            idx = r & np.uint64(0xFF)
            r >>= np.uint64(8)
            rabs = (r >> np.uint64(1)) & _LOW_52_BITS
            x = np.float64(rabs) * _WI_DOUBLE[idx]
            if r & np.uint64(1):
                x = -x
            if rabs < _KI_DOUBLE[idx]:
                break
            if idx == 0:
                while True:
                    xx = -_ZIGGURAT_NOR_INV_R * np.log1p(-_pcg64_double(state))
                    yy = -np.log1p(-_pcg64_double(state))
                    if yy + yy > xx * xx:
                        x = (
                            -(_ZIGGURAT_NOR_R + xx)
                            if (rabs >> np.uint64(8)) & np.uint64(1)
                            else _ZIGGURAT_NOR_R + xx
                        )
                        break
                break
            if (_FI_DOUBLE[idx - 1] - _FI_DOUBLE[idx]) * _pcg64_double(state) + _FI_DOUBLE[idx] < np.exp(
                -0.5 * x * x
            ):
                break
        out[i] = np.float32(x)


def pcg64_state(seed: int) -> np.ndarray:
    """[state high, state low, increment high, increment low] of np.random.default_rng(seed)'s PCG64."""
    pcg = np.random.PCG64(seed).state["state"]
    mask = (1 << 64) - 1
    return np.array(
        [pcg["state"] >> 64, pcg["state"] & mask, pcg["inc"] >> 64, pcg["inc"] & mask], dtype=np.uint64
    )
