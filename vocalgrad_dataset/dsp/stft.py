"""Batched STFT / phase vocoder / ISTFT for the segment categories (speed, pitch, clarity).

The batched routines reproduce librosa's `stft`, `phase_vocoder` and `istft` operation by operation
(same dtypes, same accumulation order) for many windows at once, so that one source clip's 24
conditions cost a handful of array operations instead of ~1,200 librosa calls. The few librosa helpers
they need (hann window, its sum-square envelope, bin frequencies) are numpy copies of the same
operations, so rendering never imports librosa and scipy.signal (~2 s of start-up per process);
tests/test_transforms.py checks them against librosa. Imported lazily by the categories' render
functions: numba loads only when audio is rendered.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numba
import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from vocalgrad_dataset.dsp import fft_sizes


@lru_cache(maxsize=64)
def hann_window(n_fft: int) -> np.ndarray:
    """librosa.filters.get_window("hann", n, fftbins=True), i.e. scipy's periodic hann, computed the same way:
    the symmetric general cosine 0.5 + 0.5 cos(x) over linspace(-pi, pi, n + 1), last point dropped."""
    if n_fft <= 1:
        return np.ones(n_fft, dtype=np.float64)
    fac = np.linspace(-np.pi, np.pi, n_fft + 1, dtype=np.float64)
    w = np.zeros(n_fft + 1, dtype=np.float64)
    for k, a in enumerate(np.asarray([0.5, 0.5])):
        w += a * np.cos(k * fac)
    return w[:-1]


@lru_cache(maxsize=256)
def window_sumsquare(n_frames: int, n_fft: int, hop: int) -> np.ndarray:
    """librosa.filters.window_sumsquare(window="hann", win_length=n_fft, dtype=float32): the squared float64
    window added frame by frame into a float32 envelope."""
    n = n_fft + hop * (n_frames - 1)
    x = np.zeros(n, dtype=np.float32)
    win_sq = hann_window(n_fft) ** 2
    for i in range(n_frames):
        start = i * hop
        x[start : min(n, start + n_fft)] += win_sq[: max(0, min(n_fft, n - start))]
    return x


def fft_frequencies(sr: float, n_fft: int) -> np.ndarray:
    """librosa.fft_frequencies: the real FFT's bin centre frequencies."""
    return np.fft.rfftfreq(n=n_fft, d=1.0 / sr)


def stft_batch(windows: np.ndarray, n_fft: int, hop: int) -> np.ndarray:
    """librosa.stft(center=True, pad_mode='constant', window='hann') of each row, frames first: (B, L) -> (B, T, F)."""
    windows = windows.astype(np.float32, copy=False)
    padded = np.pad(windows, ((0, 0), (n_fft // 2, n_fft // 2)))
    frames = sliding_window_view(padded, n_fft, axis=-1)[:, ::hop]  # (B, T, n_fft)
    # float64 like librosa: the phase vocoder amplifies input rounding in low-magnitude bins, so the
    # analysis stays exact and the speed-ups go elsewhere
    return np.fft.rfft(frames * hann_window(n_fft), axis=-1).astype(np.complex64)


def n_stretched_frames(n_frames: int, rate: float) -> int:
    """len(np.arange(0, n_frames, rate)): the phase vocoder's output frame count."""
    return len(np.arange(0, n_frames, rate, dtype=np.float64))


@dataclass(frozen=True)
class VocoderInput:
    """Per-window quantities of librosa.phase_vocoder that do not depend on the rate (computed once)."""

    mags: np.ndarray  # (W, T + 2, F) float32 magnitudes, two zero frames appended as librosa pads
    advance: np.ndarray  # (W, T + 1, F) float64 phase advance per frame pair: phi + wrapped deviation
    phase0: np.ndarray  # (W, F) float32 phase of the first frame
    n_frames: int


@numba.njit(cache=True)
def _atan2f_into(z, out):  # noqa: ANN001, ANN201 - numba kernel on numpy arrays  # pragma: no cover
    """out = atan2f(z.imag, z.real) per complex64 value: single precision, the C library's atan2f."""
    for i in range(z.shape[0]):
        out[i] = np.arctan2(z[i].imag, z[i].real)


def angle32(z: np.ndarray) -> np.ndarray:
    """np.angle of complex64 values, computed the same way on every x86-64 CPU.

    numpy's float32 arctan2 switches to an AVX-512 (SVML) kernel whose last bits differ from the C
    library's in ~40 % of values; the published outputs were made on a CPU without AVX-512, so the
    C library's atan2f reproduces them bit for bit anywhere. A plain njit loop rather than a
    numba.vectorize ufunc: building the ufunc costs ~0.7 s of CPU at import even from numba's cache.
    """
    flat = np.ascontiguousarray(z, dtype=np.complex64).reshape(-1)
    out = np.empty(flat.shape[0], dtype=np.float32)
    _atan2f_into(flat, out)
    return out.reshape(z.shape)


def prepare_vocoder(spec: np.ndarray, hop: int, n_fft: int) -> VocoderInput:
    """Rate-independent part of the phase vocoder for (W, T, F) spectra."""
    n_win, n_in, n_bins = spec.shape
    padded = np.concatenate([spec, np.zeros((n_win, 2, n_bins), dtype=spec.dtype)], axis=1)
    phi_advance = hop * fft_frequencies(2 * np.pi, n_fft)
    angles = angle32(padded)  # float32, as librosa's np.angle of complex64 columns
    advance = angles[:, 1:] - angles[:, :-1] - phi_advance
    advance -= 2.0 * np.pi * np.round(advance / (2.0 * np.pi))
    advance += phi_advance
    return VocoderInput(np.abs(padded), advance, angles[:, 0].copy(), n_in)


@numba.njit(cache=True)
def _vocode(mags, advance, phase0, rows, rates, n_out, out):  # noqa: ANN001 - numba kernel on numpy arrays  # pragma: no cover
    """librosa.phase_vocoder's loop, fused: per output frame t the frame index and weight of t * rate,
    the float64 magnitude interpolation, the phasor (single-precision cos/sin times the float64 magnitude,
    rounded once to complex64) and the float32 phase accumulator (float64 add, rounded to float32)."""
    n_bins = mags.shape[2]
    acc = np.empty(n_bins, dtype=np.float32)
    for j in range(rows.shape[0]):
        w = rows[j]
        acc[:] = phase0[w]
        for t in range(n_out[j]):
            step = t * rates[j]
            f = int(step)
            alpha = step - np.floor(step)  # np.mod(step, 1.0) for step >= 0, exactly
            beta = 1.0 - alpha
            for k in range(n_bins):
                mag = beta * np.float64(mags[w, f, k]) + alpha * np.float64(mags[w, f + 1, k])
                ph = acc[k]
                out[j, t, k] = complex(np.float32(np.float64(np.cos(ph)) * mag), np.float32(np.float64(np.sin(ph)) * mag))
                acc[k] = np.float32(np.float64(ph) + advance[w, f, k])


def phase_vocoder_batch(prep: VocoderInput, rows: np.ndarray, rates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """librosa.phase_vocoder of window `rows[j]` at `rates[j]` for each job: (J, T_max, F) complex64 and T_out.

    One fused pass per job with librosa's exact roundings (bit-identical to librosa.phase_vocoder on a CPU
    without AVX-512, and on any CPU to the published outputs).
    """
    n_out = np.array([n_stretched_frames(prep.n_frames, r) for r in rates], dtype=np.int64)
    out = np.zeros((len(rows), int(n_out.max()), prep.mags.shape[-1]), dtype=np.complex64)
    _vocode(prep.mags, prep.advance, prep.phase0, rows.astype(np.int64), rates.astype(np.float64), n_out, out)
    return out, n_out


@numba.njit(cache=True)
def _overlap_add(frames, window, n_frames, hop, out):  # noqa: ANN001 - numba kernel on numpy arrays  # pragma: no cover
    """librosa's ISTFT overlap-add: each float32 frame times the float64 window, added in frame order into
    the float32 buffer (the addition in float64, rounded once)."""
    n_fft = frames.shape[2]
    for j in range(frames.shape[0]):
        for t in range(n_frames[j]):
            s = t * hop
            for i in range(n_fft):
                out[j, s + i] = np.float32(np.float64(out[j, s + i]) + np.float64(frames[j, t, i]) * window[i])


def istft_batch(spec: np.ndarray, n_frames_in: np.ndarray, lengths: np.ndarray, n_fft: int, hop: int) -> list[np.ndarray]:
    """librosa.istft(length=...) of each (T, F) row (centred hann) with its own frame count and output length."""
    padded_lengths = lengths + 2 * (n_fft // 2)
    n_frames = np.minimum(n_frames_in, np.ceil(padded_lengths / hop).astype(np.int64))
    t_max = int(n_frames.max())
    frames = np.fft.irfft(spec[:, :t_max], n=n_fft, axis=-1)  # (J, T, n_fft) float32
    n_rows = spec.shape[0]
    buf = np.zeros((n_rows, n_fft + hop * (t_max - 1)), dtype=np.float32)
    _overlap_add(frames, hann_window(n_fft), n_frames.astype(np.int64), hop, buf)
    start = n_fft // 2
    outputs: list[np.ndarray] = [np.zeros(0, np.float32)] * n_rows
    groups: dict[tuple[int, int], list[int]] = {}
    for row in range(n_rows):
        groups.setdefault((int(lengths[row]), int(n_frames[row])), []).append(row)
    for (length, nf), rows in groups.items():
        y = np.zeros((len(rows), length), dtype=np.float32)
        avail = min(length, n_fft + hop * (nf - 1) - start)
        y[:, :avail] = buf[rows, start : start + avail]
        y /= _window_sumsquare_trimmed(nf, n_fft, hop, length)
        for r, yr in zip(rows, y, strict=True):
            outputs[r] = yr
    return outputs


_TINY32 = np.finfo(np.float32).tiny  # librosa.util.tiny of float32


@lru_cache(maxsize=4096)
def _window_sumsquare_trimmed(n_frames: int, n_fft: int, hop: int, length: int) -> np.ndarray:
    """librosa's normalising envelope with near-zero entries set to 1 (librosa leaves those samples as they are)."""
    wss = window_sumsquare(n_frames, n_fft, hop)[n_fft // 2 :]
    wss = wss[:length] if len(wss) >= length else np.pad(wss, (0, length - len(wss)))  # librosa.util.fix_length
    return np.where(wss > _TINY32, wss, np.float32(1.0)).astype(np.float32)


@dataclass(frozen=True)
class JobBatch:
    """Jobs whose windows share a length: their windows' spectra, and each job's row into them."""

    length: int
    n_fft: int
    hop: int
    spectra: np.ndarray  # (W, T, F) complex64, one row per distinct window of this chunk
    job_ids: list[int]  # indices into the caller's job list
    rows: np.ndarray  # spectra row of each job
    values: np.ndarray  # each job's parameter value (float64)
    chunk: tuple[int, int] = (0, 0)  # (window length, chunk number): batches of one chunk share `spectra`


WINDOWS_PER_CHUNK = 128  # spectra of at most this many windows at a time (bounded memory for long sources)


def batched_window_jobs(
    windows: Sequence[np.ndarray], jobs: Sequence[tuple[int, float]], n_fft: int, hop: int, batch_size: int
) -> Iterator[JobBatch]:
    """Group (window, value) jobs by window length, then by chunks of at most WINDOWS_PER_CHUNK windows; each
    window is transformed once, its chunk's jobs come sorted by value in cache-sized batches (similar values
    batch together, e.g. similar stretch lengths). Every window's result is its own (rows are independent)."""
    by_length: dict[int, list[int]] = defaultdict(list)
    for j, (k, _) in enumerate(jobs):
        by_length[len(windows[k])].append(j)
    for length, job_ids in by_length.items():
        nf, hp = fft_sizes(length, n_fft, hop)
        keys = sorted({jobs[j][0] for j in job_ids})
        for c, first in enumerate(range(0, len(keys), WINDOWS_PER_CHUNK)):
            chunk_keys = keys[first : first + WINDOWS_PER_CHUNK]
            row_of = {k: r for r, k in enumerate(chunk_keys)}
            spectra = stft_batch(np.stack([windows[k] for k in chunk_keys]), nf, hp)
            chunk_jobs = sorted((j for j in job_ids if jobs[j][0] in row_of), key=lambda j: jobs[j][1])
            for b in range(0, len(chunk_jobs), batch_size):
                batch = chunk_jobs[b : b + batch_size]
                rows = np.array([row_of[jobs[j][0]] for j in batch], dtype=np.int64)
                values = np.array([jobs[j][1] for j in batch], dtype=np.float64)
                yield JobBatch(length, nf, hp, spectra, batch, rows, values, (length, c))
