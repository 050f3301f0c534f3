"""Label-integrity oracle: recover each clip's direction from its audio with one signal measurement per category.

Every measurement compares the *end* of the speech span with its *start* (first vs last third, or
15 % for clarity), which suits all four curves: jump changes at the middle, quad_first_flat late,
quad_last_flat early, and each keeps its start value at t = 0 and its end value at t = 1.
The score is signed so that positive means "more of the attribute at the end" (= "increase").

The measurements target what each transform physically does to the waveform (SPEC §3), not the
perceived attribute; where the perceptual proxy is too weak (speed: natural speech-rate variation,
pitch: intonation), a structural cue of the transform is used instead and the docstring says so.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from vocalgrad_dataset.dsp.schedule import STEP_SEC
from vocalgrad_dataset.dsp.segments import CROSSFADE_SEC
from vocalgrad_dataset.grid import CURVES, TIERS, progress

Measure = Callable[[np.ndarray, int], float]  # (span audio as float64, sr) -> signed score


@dataclass(frozen=True)
class Oracle:
    """One category's measurement and what it measures."""

    category: str
    measure: Measure
    description: str


ORACLES: dict[str, Oracle] = {}


def _register(category: str, description: str) -> Callable[[Measure], Measure]:
    def deco(fn: Measure) -> Measure:
        ORACLES[category] = Oracle(category, fn, description)
        return fn

    return deco


# ---------------------------------------------------------------------------------------------- helpers


def _frames(x: np.ndarray, n: int, hop: int) -> np.ndarray:
    """Frames of n samples every hop (zero-padded up to one frame when x is shorter)."""
    if len(x) < n:
        x = np.pad(x, (0, n - len(x)))
    return sliding_window_view(x, n)[::hop]


def _power_spec(x: np.ndarray, sr: int, n: int, hop: int) -> tuple[np.ndarray, np.ndarray]:
    """Hann-windowed power spectrogram (frames x bins) and the bin frequencies."""
    spec = np.abs(np.fft.rfft(_frames(x, n, hop) * np.hanning(n), axis=-1)) ** 2
    return spec, np.fft.rfftfreq(n, 1.0 / sr)


def _frame_power(x: np.ndarray, n: int) -> np.ndarray:
    """Mean square per non-overlapping frame of n samples."""
    return np.mean(_frames(x, n, n) ** 2, axis=1)


def _ends(v: np.ndarray, frac: float = 1 / 3, w: np.ndarray | None = None) -> float:
    """(Weighted) mean of the last `frac` of v minus that of the first `frac`."""
    k = max(1, int(round(len(v) * frac)))
    if w is None:
        return float(np.mean(v[-k:]) - np.mean(v[:k]))
    w = w + 1e-20  # all-silent parts would otherwise have zero total weight
    return float(np.average(v[-k:], weights=w[-k:]) - np.average(v[:k], weights=w[:k]))


def _thirds(x: np.ndarray, frac: float = 1 / 3) -> tuple[np.ndarray, np.ndarray]:
    """The first and last `frac` of a signal."""
    k = max(1, int(len(x) * frac))
    return x[:k], x[-k:]


def _db(p: np.ndarray | float) -> np.ndarray:
    return 10.0 * np.log10(np.asarray(p) + 1e-12)


# ------------------------------------------------------------------------------------------ measurements


@_register("volume", "level trend: mean frame level (dB, 10 ms frames) of the last third minus the first")
def _volume(x: np.ndarray, sr: int) -> float:
    return _ends(_db(_frame_power(x, int(0.01 * sr))))


@_register(
    "distortion",
    "sample-and-hold staircase: share of repeated consecutive samples per 10 ms frame (energy-weighted), last vs first third",
)
def _distortion(x: np.ndarray, sr: int) -> float:
    # holding every N-th sample repeats it N-1 times: the repeat share is (N-1)/N whatever the source's
    # band; energy weighting keeps near-silent frames (where PCM16 values repeat anyway) from counting
    f = _frames(x, int(0.01 * sr), int(0.01 * sr))
    repeats = np.mean(np.diff(f, axis=1) == 0, axis=1)
    return _ends(repeats, w=np.mean(f**2, axis=1))


@_register(
    "roughness",
    "quantisation: log count of distinct sample values per 10 ms frame (energy-weighted), first vs last third",
)
def _roughness(x: np.ndarray, sr: int) -> float:
    # b-bit quantisation leaves at most 2^b - 1 levels per window (RMS matching only rescales them)
    f = np.sort(_frames(x, int(0.01 * sr), int(0.01 * sr)), axis=1)
    distinct = 1.0 + np.count_nonzero(np.diff(f, axis=1), axis=1)
    return -_ends(np.log(distinct), w=np.mean(f**2, axis=1))  # fewer levels = rougher


@_register(
    "noise",
    "noise floor: 20th-percentile frame power in the top quarter of the band (18-24 kHz at 48 kHz), last vs first third",
)
def _noise(x: np.ndarray, sr: int) -> float:
    # white noise fills every band equally while speech has little energy up there; the low percentile
    # picks the pauses / non-fricative frames, i.e. the floor rather than the speech
    spec, freqs = _power_spec(x, sr, 1024, 480)
    band = _db(spec[:, freqs >= 0.375 * sr].mean(axis=1))
    first, last = _thirds(band)
    return float(np.percentile(last, 20) - np.percentile(first, 20))


COMB_DELAYS_MS = (29.7, 37.1, 41.1, 43.7)  # the Schroeder combs of SPEC §3 (echo)


def _comb_contrast(y: np.ndarray, sr: int) -> float:
    """Whitened autocorrelation at the comb delays (and twice them) minus its local median: the reverb's fingerprint."""
    n = 1 << int(np.ceil(np.log2(2 * len(y))))
    power = np.abs(np.fft.rfft(y, n)) ** 2
    # whiten with a ~300 Hz moving average: removes the formant envelope, keeps the fine comb structure
    k = max(1, int(300.0 * n / sr))
    c = np.cumsum(np.r_[0.0, power])
    lo = np.clip(np.arange(len(power)) - k // 2, 0, len(power))
    hi = np.clip(np.arange(len(power)) + k - k // 2, 0, len(power))
    smooth = (c[hi] - c[lo]) / np.maximum(hi - lo, 1)
    ac = np.fft.irfft(power / (smooth + 1e-3 * smooth.max()), n)[: len(y)]
    ac = ac / (ac[0] + 1e-20)
    ring = int(round(0.00083 * sr))  # peaks are a few samples wide; compare with lags 0.13-0.83 ms away
    gap = max(2, int(round(0.00013 * sr)))
    vals = []
    for ms in COMB_DELAYS_MS:
        for mult in (1, 2):
            d = mult * int(round(ms * sr / 1000.0))
            if d + ring >= len(ac):
                continue
            neighbours = np.r_[ac[d - ring : d - gap], ac[d + gap + 1 : d + ring + 1]]
            vals.append(ac[d - 1 : d + 2].max() - np.median(neighbours))
    return float(np.mean(vals)) if vals else 0.0


@_register(
    "echo",
    "reverberance: whitened-autocorrelation peaks at the Schroeder comb delays, last third minus first third",
)
def _echo(x: np.ndarray, sr: int) -> float:
    # the wet signal is x * IR, whose autocorrelation has sharp peaks at the comb delays; speech has none there
    first, last = _thirds(x)
    return _comb_contrast(last, sr) - _comb_contrast(first, sr)


@_register(
    "clarity",
    "bandwidth: median log2 of the highest frequency within 60 dB of each loud frame's peak, last 15 % vs first 15 %",
)
def _clarity(x: np.ndarray, sr: int) -> float:
    # the low-pass zeroes everything above cutoff + 400 Hz whatever the phoneme, so the edge of the
    # occupied band tracks the cutoff; only the low-cutoff end is affected, hence short end windows
    n = 1 << int(round(np.log2(0.021 * sr)))
    spec, freqs = _power_spec(x, sr, n, max(1, int(0.01 * sr)))
    level = _db(spec)
    peak = level.max(axis=1)
    occupied = level > peak[:, None] - 60.0
    edge = np.log2(freqs[len(freqs) - 1 - np.argmax(occupied[:, ::-1], axis=1)] + 100.0)
    loud = peak > peak.max() - 30.0

    def part(sl: slice) -> float:
        e, keep = edge[sl], loud[sl]
        return float(np.median(e[keep] if keep.any() else e))

    k = max(1, int(len(edge) * 0.15))
    return part(slice(len(edge) - k, None)) - part(slice(0, k))


@_register(
    "vibration",
    "amplitude modulation: share of the log-envelope's modulation power in 8-25 Hz, last third minus first",
)
def _vibration(x: np.ndarray, sr: int) -> float:
    # the LFO reaches 20 Hz at full depth; speech's own envelope modulation lives mostly below 8 Hz
    hop = max(1, int(0.0025 * sr))
    env = 0.5 * np.log(np.mean(_frames(x, 2 * hop, hop) ** 2, axis=1) + 1e-9)
    fs = sr / hop

    def share(e: np.ndarray) -> float:
        spec = np.abs(np.fft.rfft(e - e.mean())) ** 2
        f = np.fft.rfftfreq(len(e), 1.0 / fs)
        return float(spec[(f >= 8.0) & (f <= 25.0)].sum() / max(spec[f > 0].sum(), 1e-20))

    first, last = _thirds(env)
    return share(last) - share(first)


def _log_ltas(x: np.ndarray, sr: int, fmin: float, fmax: float, per_st: int) -> np.ndarray:
    """Long-term average spectrum (dB) of the loud frames on a log-frequency grid (per_st points per semitone)."""
    spec, freqs = _power_spec(x, sr, 2048, 512)
    energy = spec.sum(axis=1)
    loud = energy > energy.max() * 10**-3.5
    ltas = spec[loud].mean(axis=0) if loud.any() else spec.mean(axis=0)
    grid = fmin * 2.0 ** (np.arange(int(12 * per_st * np.log2(fmax / fmin))) / (12 * per_st))
    return _db(np.interp(grid, freqs, ltas))


@_register(
    "pitch",
    "spectral transposition: log-frequency shift (semitones) of the long-term spectrum, last third vs first third",
)
def _pitch(x: np.ndarray, sr: int) -> float:
    # pitch_shift transposes the whole spectrum (f0, formants and the source's band edge; no formant
    # preservation), while intonation moves f0 alone: an f0 trend is swamped by declination on some
    # clips, the transposition of the long-term spectrum is not. On band-limited sources (the demo's
    # 8 kHz edge) the edge dominates the match.
    per_st, max_st = 4, 8
    first, last = _thirds(x)
    fmax = min(12000.0, 0.45 * sr)
    a, b = _log_ltas(first, sr, 80.0, fmax, per_st), _log_ltas(last, sr, 80.0, fmax, per_st)
    lags = np.arange(-max_st * per_st, max_st * per_st + 1)
    corr = np.empty(len(lags))
    for i, lag in enumerate(lags):
        u, w = (a[: len(a) - lag], b[lag:]) if lag >= 0 else (a[-lag:], b[: len(b) + lag])
        u, w = u - u.mean(), w - w.mean()
        corr[i] = np.dot(u, w) / np.sqrt(np.dot(u, u) * np.dot(w, w) + 1e-20)
    i = int(np.argmax(corr))
    frac = 0.0
    if 0 < i < len(corr) - 1:  # parabolic refinement: a continuous score, and no exact ties at lag 0
        den = corr[i - 1] - 2 * corr[i] + corr[i + 1]
        frac = 0.5 * (corr[i - 1] - corr[i + 1]) / den if den != 0 else 0.0
    return float((lags[i] + frac) / per_st)


@lru_cache(maxsize=1)
def _speed_deltas() -> tuple[float, ...]:
    """The speed tiers' d (rate 1 - d -> 1 + d), read from the category's published config."""
    from vocalgrad_dataset.categories import get_category  # deferred: keeps importing the oracle light

    cat = get_category("speed")
    return tuple(cat.tier_value(t) for t in TIERS)


def _join_positions(out_len: int, r0: float, r1: float, curve: str, step: int, fade: int) -> list[np.ndarray]:
    """Centres of the segment joins (output samples) that a rate schedule r0 -> r1 would produce.

    SPEC §2: the input span L is cut at round(k*L/n), n = ceil(L/step); chunk k becomes (L/n)/r_k
    samples and consecutive chunks overlap by `fade`. L is solved from the output length; both n
    that fit (rounding makes it ambiguous near a step boundary) are returned.
    """
    out = []
    # first guess from the mean stretch of a 100-step schedule; the exact n lies within a step or two
    dense = r0 + (r1 - r0) * progress(curve, np.linspace(0.0, 1.0, 100))
    n_guess = int(np.ceil(out_len / (step * np.mean(1.0 / dense) - fade)))
    for n in range(max(1, n_guess - 3), n_guess + 4):
        t = np.arange(n) / (n - 1) if n > 1 else np.ones(1)
        rates = r0 + (r1 - r0) * progress(curve, t)
        length = (out_len + fade * (n - 1)) / np.mean(1.0 / rates)
        if n - 1.01 < length / step <= n + 0.01:
            bounds = np.round(np.arange(n + 1) * length / n)
            out.append(np.cumsum(np.diff(bounds) / rates - fade)[:-1] + fade / 2)
    return out


@_register(
    "speed",
    "local time scale from segment joins: spectral dips at the joins matched to rising vs falling rate schedules",
)
def _speed(x: np.ndarray, sr: int) -> float:
    # Speech-rate proxies (envelope modulation, spectral flux) reach only ~80 % on the demo: natural
    # rate changes within an utterance are as large as the stretch. The stretch itself is visible in
    # the segment framework: every 50 ms input chunk lasts (50 ms)/rate in the output, and each 5 ms
    # crossfade between two phase-vocoder outputs with unrelated phases leaves a short dip in the
    # log spectrum. The measurement: how well the dips line up with the joins of the best
    # rising-rate schedule minus the best falling-rate one (grid curves and tier rates, SPEC §2-3).
    n, hop = 1 << int(round(np.log2(0.0053 * sr))), max(1, int(0.001 * sr))  # 256 and 48 at 48 kHz
    spec = np.log(np.abs(np.fft.rfft(_frames(x, n, hop) * np.hanning(n), axis=1)) ** 2 + 1e-9)
    g = max(1, int(round(0.003 * sr / hop)))
    dip = -np.mean(spec - 0.5 * (np.roll(spec, g, 0) + np.roll(spec, -g, 0)), axis=1)
    dip = (dip - np.median(dip)) / (np.std(dip) + 1e-12)
    step, fade = int(round(STEP_SEC * sr)), int(round(CROSSFADE_SEC * sr))
    best = {"up": -np.inf, "down": -np.inf}
    for d in _speed_deltas():
        for curve in CURVES:
            for direction, (r0, r1) in (("up", (1 - d, 1 + d)), ("down", (1 + d, 1 - d))):
                for joins in _join_positions(len(x), r0, r1, curve, step, fade):
                    idx = np.round((joins - n / 2) / hop).astype(int)
                    idx = idx[(idx >= 1) & (idx < len(dip) - 1)]
                    if len(idx):  # +-1 frame of tolerance for rounding in the cut positions
                        hit = np.maximum(np.maximum(dip[idx - 1], dip[idx]), dip[idx + 1])
                        best[direction] = max(best[direction], float(hit.mean()))
    if not np.isfinite(best["up"]) or not np.isfinite(best["down"]):
        return 0.0
    return best["up"] - best["down"]


# ------------------------------------------------------------------------------------------------- API


MIN_SPAN_SEC = 0.3  # the measurements compare the first and last part of the speech span


def predict(category: str, audio: np.ndarray, sr: int, onset: int, offset: int) -> tuple[str, float]:
    """Direction ("increase"/"decrease") and signed score (positive = increase) of one clip's speech span."""
    if category not in ORACLES:
        raise KeyError(f"no oracle for category {category!r} (known: {', '.join(ORACLES)})")
    x = np.asarray(audio)
    if x.ndim != 1:
        raise ValueError(f"expected mono audio, got shape {x.shape}")
    if np.issubdtype(x.dtype, np.integer):
        x = x / 32768.0  # PCM16 scale; the measurements are scale-free except for equality tests
    onset = int(min(max(onset, 0), len(x)))
    offset = int(min(max(offset, onset), len(x)))
    span = x[onset:offset].astype(np.float64)
    if len(span) < int(MIN_SPAN_SEC * sr):
        # Refused rather than guessed: a silent default answer would count as a real prediction.
        raise ValueError(f"speech span of {len(span) / sr:.3f} s is too short for the signal oracle (it compares "
                         f"the start and end of the span and needs at least {MIN_SPAN_SEC} s)")
    score = ORACLES[category].measure(span, sr)
    return ("increase" if score > 0 else "decrease"), float(score)


def _acc(hits: list[bool]) -> float | None:
    return float(np.mean(hits)) if hits else None


def evaluate_oracle(
    config: str, split: str, source: str = "demo", data_dir: str | Path | None = None
) -> dict[str, Any]:
    """Run `predict` over a config's generated rows: overall accuracy and by tier / category (/ curve)."""
    from vocalgrad_dataset.generate import iter_rows  # deferred: generation pulls in the sources

    by: dict[str, dict[str, list[bool]]] = {
        "tier": defaultdict(list),
        "category": defaultdict(list),
        "curve": defaultdict(list),
    }
    hits: list[bool] = []
    for row in iter_rows(config, split, source, data_dir):
        audio = row["audio"]
        sr = int(audio["sampling_rate"])
        onset, offset = int(round(row["onset_sec"] * sr)), int(round(row["offset_sec"] * sr))
        try:
            label, _ = predict(row["category"], audio["array"], sr, onset, offset)
        except ValueError as err:
            raise ValueError(f"{row['benchmark_clip_id']}: {err}") from None
        ok = label == row["label"]
        hits.append(ok)
        for key in by:
            by[key][row[key]].append(ok)
    return {
        "accuracy": _acc(hits),
        "n": len(hits),
        "by_tier": {t: _acc(by["tier"][t]) for t in TIERS},
        "by_category": {c: _acc(v) for c, v in by["category"].items()},
        "by_curve": {c: _acc(by["curve"][c]) for c in CURVES},
    }
