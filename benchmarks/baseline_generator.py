"""The published generator's algorithm, structured as its scripts run: the baseline our speed is measured against.

Per source clip, the published `main` loops over tier x curve x direction and calls `process_one`, which
decodes the source again (PCM16 -> float32 / 32768, as (samples, channels)), processes it, computes the
clipped ratio and encodes PCM16. Speed, pitch, distortion, roughness and clarity make one call per 150 ms
context window (librosa for speed / pitch / clarity, so every window is resampled on its own for pitch);
volume applies one scalar gain per 50 ms step in float64; echo builds each room's impulse response once
per run (a cache) and convolves the source once per tier and source, then mixes per condition.
`render_source` follows that loop; `render_condition` renders one condition the same way.

It is written from the published generator's description alone and imports nothing from this
repository (numpy, librosa and the published JSON configs only), so it is an independent
reference: the tests compare the package's fast paths with it, and both with the published hashes.

    render_condition("clarity", pcm16, 48000, 0.41, 3.46, "p226_01__p226_106__linear__low__up") -> int16
    render_source("echo", pcm16, 48000, 0.41, 3.46, "p226_01", "p226_106") -> [(clip id, int16), ...]
"""

from __future__ import annotations

import hashlib
import json
import math
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

import librosa
import numpy as np

CONFIG_DIR = Path(__file__).resolve().parents[1] / "vocalgrad_dataset" / "data" / "configs"
CONFIG_FILES = {
    "speed": "speaking_speed", "pitch": "voice_pitch", "volume": "volume", "distortion": "audio_distortion",
    "roughness": "audio_roughness", "noise": "background_noise", "echo": "echo", "clarity": "voice_clarity",
    "vibration": "voice_vibration",
}  # fmt: skip


@cache
def load_config(category: str) -> dict[str, Any]:
    """The published parameter file of a category."""
    return json.loads((CONFIG_DIR / f"{CONFIG_FILES[category]}_benchmark.json").read_text())


def progress(k: int, n: int, mode: str, jump_at: float) -> float:
    """Progress of step k of n along a curve (t = k / (n - 1), t = 1 when n <= 1)."""
    t = k / (n - 1) if n > 1 else 1.0
    if mode == "linear":
        return t
    if mode == "quad_first_flat":
        return t * t
    if mode == "quad_last_flat":
        return 1.0 - (1.0 - t) * (1.0 - t)
    if mode == "jump":
        return 0.0 if t < jump_at else 1.0
    raise ValueError(f"unknown curve {mode!r}")


def envelope(n: int, onset: int, offset: int, start: float, end: float, mode: str, jump_at: float) -> np.ndarray:
    """Per-sample float64 envelope: start before onset, the curve over the span, end from offset on."""
    env = np.full(n, start, dtype=np.float64)
    t = np.linspace(0.0, 1.0, offset - onset)
    p = {"linear": t, "quad_first_flat": t * t, "quad_last_flat": 1.0 - (1.0 - t) * (1.0 - t)}.get(mode)
    if p is None:
        p = np.where(t < jump_at, 0.0, 1.0)
    env[onset:offset] = start + (end - start) * p
    env[offset:] = end
    return env


def rms(x: np.ndarray) -> float:
    """float32 squares, float64 mean."""
    return float(np.sqrt(np.mean(np.square(x), dtype=np.float64))) if x.size else 0.0


def match_rms(reference: np.ndarray, y: np.ndarray) -> np.ndarray:
    """y (float32) scaled to the reference's RMS by a Python-float ratio (float32 multiply)."""
    r_ref, r_y = rms(reference), rms(y)
    return y if r_ref <= 0.0 or r_y <= 0.0 else y * (r_ref / r_y)


def crossfade(acc: np.ndarray, seg: np.ndarray, fade: int) -> np.ndarray:
    """Append seg to acc, overlapping `fade` samples with a float32 linear fade."""
    if acc.size == 0:
        return seg.copy()
    f = min(fade, len(acc), len(seg))
    if seg.size == 0 or f <= 0:
        return acc if seg.size == 0 else np.concatenate([acc, seg])
    out_ramp = np.linspace(1.0, 0.0, f, dtype=np.float32)
    return np.concatenate([acc[:-f], acc[-f:] * out_ramp + seg[:f] * (1.0 - out_ramp), seg[f:]])


def fft_kwargs(length: int, base: dict[str, Any]) -> dict[str, Any]:
    """Shrink n_fft (and win_length) to a window shorter than it; the hop changes only if it no longer fits."""
    kw = dict(base)
    if length <= 0:
        return kw
    if kw["n_fft"] > length:
        kw["n_fft"] = max(32, length)
    if "win_length" in kw:
        kw["win_length"] = min(kw["win_length"], kw["n_fft"])
        if kw["win_length"] > length:
            kw["win_length"] = max(32, min(length, kw["n_fft"]))
    if kw["hop_length"] >= kw.get("win_length", kw["n_fft"]):
        kw["hop_length"] = max(1, kw.get("win_length", kw["n_fft"]) // 4)
    return kw


# ---- window operations (one call per context window) ----


def stretch(w: np.ndarray, rate: float, sr: int, cfg: dict) -> np.ndarray:
    return np.asarray(librosa.effects.time_stretch(w, rate=rate, **fft_kwargs(len(w), cfg["time_stretch_kwargs"])), np.float32)


def shift(w: np.ndarray, steps: float, sr: int, cfg: dict) -> np.ndarray:
    kw = fft_kwargs(len(w), cfg["pitch_shift_kwargs"])
    return np.asarray(librosa.effects.pitch_shift(w, sr=sr, n_steps=steps, **kw), np.float32)


def hold(w: np.ndarray, rate: float, sr: int, cfg: dict) -> np.ndarray:
    eff = max(1000, min(sr, int(round(rate))))
    if eff == sr:
        held = w.copy()
    else:
        h = max(1, int(round(sr / eff)))
        held = np.repeat(w[::h], h)[: len(w)]
    return match_rms(w, np.asarray(held, np.float32))


def quantise(w: np.ndarray, bits: float, sr: int, cfg: dict) -> np.ndarray:
    top = 2 ** (max(2, int(round(bits))) - 1) - 1
    return match_rms(w, np.asarray(np.round(np.clip(w, -1.0, 1.0) * top) / top, np.float32))


def lowpass(w: np.ndarray, cutoff: float, sr: int, cfg: dict) -> np.ndarray:
    kw = fft_kwargs(len(w), cfg["stft_kwargs"])
    spec = librosa.stft(y=w, **kw)
    freqs = librosa.fft_frequencies(sr=sr, n_fft=kw["n_fft"])
    width = float(cfg["filter_profile"]["transition_hz"])
    lo, hi = max(0.0, cutoff - width / 2.0), cutoff + width / 2.0
    mask = np.ones_like(freqs, dtype=np.float32)
    mask[freqs >= hi] = 0.0
    band = (freqs > lo) & (freqs < hi)
    mask[band] = 0.5 * (1.0 + np.cos(np.pi * ((freqs[band] - lo) / (hi - lo))))
    y = librosa.istft(spec * mask[:, None], length=len(w), **kw)
    return match_rms(w, np.asarray(y, np.float32))


WINDOW_OPS = {"speed": stretch, "pitch": shift, "distortion": hold, "roughness": quantise, "clarity": lowpass}


def segmented(category: str, x: np.ndarray, sr: int, onset: int, offset: int, start: float, end: float, mode: str) -> np.ndarray:
    """Steps of 50 ms with +-50 ms context, each through its own op call, joined by 5 ms crossfades."""
    cfg = load_config(category)
    op = WINDOW_OPS[category]
    speech = x[onset:offset]
    step = max(1, int(round(sr * cfg["step_duration_sec"])))
    ctx = int(round(sr * cfg["context_duration_sec"]))
    fade = int(round(sr * cfg["crossfade_duration_sec"]))
    n = max(1, math.ceil(len(speech) / step))
    out = np.array([], dtype=np.float32)
    for k in range(n):
        if category == "speed":
            a, b = round(k * len(speech) / n), round((k + 1) * len(speech) / n)
        else:
            a, b = k * step, min((k + 1) * step, len(speech))
        if b <= a:
            continue
        c0, c1 = max(0, a - ctx), min(len(speech), b + ctx)
        value = start + (end - start) * progress(k, n, mode, cfg["jump_at"])
        y = op(speech[c0:c1], value, sr, cfg)
        if category == "speed":  # the stretched centre: offsets scale by 1 / rate, never empty
            i0 = max(0, min(len(y), int((a - c0) / value)))
            i1 = max(i0, min(len(y), int((b - c0) / value)))
            if i1 == i0 and len(y):
                i0 = max(0, min(len(y) - 1, i0))
                i1 = min(len(y), i0 + 1)
            centre = y[i0:i1]
        else:
            centre = y[a - c0 : b - c0]
        out = crossfade(out, centre, fade)
    if category in ("speed", "pitch"):  # only the speech span changes
        return np.concatenate([x[:onset], out, x[offset:]])
    pre, post = op(x[:onset], start, sr, cfg), op(x[offset:], end, sr, cfg)
    return np.concatenate([pre, out, post])


@lru_cache(maxsize=8)
def schroeder_ir(sr: int, room: float) -> np.ndarray:
    """The reverb IR from a unit impulse, one sample at a time (float32 delay lines); cached per room as published."""
    rc = load_config("echo")["schroeder_reverb"]
    n = max(1, int(round(rc["ir_duration_sec"] * sr)))
    delay = lambda ms: max(1, int(round((ms / 1000.0) * sr)))  # noqa: E731
    combs = [[np.zeros(delay(ms), np.float32), 0, float(g) * room] for ms, g in zip(rc["comb_delays_ms"], rc["comb_feedback_base"], strict=True)]
    alls = [[np.zeros(delay(ms), np.float32), 0, float(g) * room] for ms, g in zip(rc["allpass_delays_ms"], rc["allpass_feedback_base"], strict=True)]
    out = np.zeros(n, np.float32)
    for i in range(n):
        x = 1.0 if i == 0 else 0.0
        acc = 0.0
        for c in combs:
            v = x + c[2] * float(c[0][c[1]])
            c[0][c[1]] = v
            c[1] = (c[1] + 1) % len(c[0])
            acc += v
        s = acc / len(combs)
        for a in alls:
            if abs(a[2]) < 1e-8:
                continue
            o = -a[2] * s + float(a[0][a[1]])
            a[0][a[1]] = s + a[2] * o
            a[1] = (a[1] + 1) % len(a[0])
            s = o
        out[i] = s
    return out


def clipped_ratio(y: np.ndarray, lo: float = -1.0, hi: float = 1.0) -> float:
    """Fraction of samples outside [lo, hi] (computed per clip by the published scripts)."""
    return float(np.mean((y < lo) | (y > hi)))


def reverbed(x: np.ndarray, sr: int, tier: str) -> np.ndarray:
    """The tier's wet signal of a source (float32, RMS-matched to it): computed once per source and tier."""
    ir = schroeder_ir(sr, float(load_config("echo")["tiers"][tier]["room_scale_max"]))
    full = len(x) + len(ir) - 1
    n_fft = 1 << (full - 1).bit_length()
    wet = np.asarray(np.fft.irfft(np.fft.rfft(x, n=n_fft) * np.fft.rfft(ir, n=n_fft), n=n_fft)[: len(x)], np.float32)
    return match_rms(x, wet)


def echo(x: np.ndarray, wet: np.ndarray, onset: int, offset: int, tier: str, up: bool, mode: str) -> np.ndarray:
    """Dry/wet mix with a per-sample float64 weight, on (samples, 1) columns as published."""
    cfg = load_config("echo")
    w_max = float(cfg["tiers"][tier]["wet_mix_max"])
    w = envelope(len(x), onset, offset, 0.0 if up else w_max, w_max if up else 0.0, mode, cfg["jump_at"])[:, None]
    y = np.asarray((1.0 - w) * x[:, None] + w * wet[:, None], np.float32)
    _ = float(np.min(w)), float(np.max(w))  # the published manifest's min/max wet mix
    return y[:, 0]


def vibration(x: np.ndarray, sr: int, onset: int, offset: int, tier: str, up: bool, mode: str) -> np.ndarray:
    cfg = load_config("vibration")
    a = float(cfg["tiers"][tier]["depth_max"])
    lo, hi = float(cfg["lfo_hz_min"]), float(cfg["lfo_hz_max"])
    depth = envelope(len(x), onset, offset, 0.0 if up else a, a if up else 0.0, mode, cfg["jump_at"])
    rate = envelope(len(x), onset, offset, lo if up else hi, hi if up else lo, mode, cfg["jump_at"])
    step = (2.0 * np.pi * rate) / sr
    phase = float(cfg["lfo_phase_rad"]) + np.cumsum(np.concatenate([[0.0], step[:-1]]))
    y = np.asarray(x * (1.0 - depth * (0.5 * (1.0 + np.sin(phase)))).astype(np.float32), np.float32)
    _ = float(np.min(depth)), float(np.max(depth)), float(np.min(rate)), float(np.max(rate))  # manifest columns
    return y


def noise(x: np.ndarray, sr: int, onset: int, offset: int, tier: str, up: bool, mode: str, clip_id: str) -> np.ndarray:
    cfg = load_config("noise")
    r_max = float(cfg["tiers"][tier]["noise_ratio_max"])
    col = x[:, None]  # (samples, channels) as the published scripts hold audio
    _ = col.copy()  # the published function starts from a copy of the input
    speech = col[onset:offset]
    level = np.maximum(np.sqrt(np.mean(speech * speech, axis=0)), 1e-6).astype(np.float32)
    seed = int.from_bytes(hashlib.sha256(f"{cfg['global_seed']}:{clip_id}".encode()).digest()[:8], "big")
    raw = np.random.default_rng(seed).standard_normal(size=col.shape).astype(np.float32)
    unit = raw / np.maximum(np.sqrt(np.mean(raw * raw, axis=0)), 1e-6).astype(np.float32)
    start, end = (0.0, r_max) if up else (r_max, 0.0)
    env = np.zeros(len(x), dtype=np.float32)
    env[:onset], env[offset:] = start, end
    step = max(1, int(round(sr * cfg["step_duration_sec"])))
    n = max(1, math.ceil((offset - onset) / step))
    for k in range(n):
        env[onset + k * step : min(onset + (k + 1) * step, offset)] = start + (end - start) * progress(k, n, mode, cfg["jump_at"])
    return (col + unit * (level * env[:, None]))[:, 0]


def volume(pcm: np.ndarray, sr: int, onset: int, offset: int, tier: str, up: bool, mode: str) -> np.ndarray:
    """Gain on the raw integer scale in float64, one scalar 10 ** (dB / 20) per 50 ms step; int16 out."""
    cfg = load_config("volume")
    d = float(cfg["tiers"][tier]["delta_gain_db"])
    g0, g1 = (-d, d) if up else (d, -d)
    raw = pcm.astype(np.float64)[:, None]
    out = np.zeros_like(raw)
    out[:onset] = raw[:onset] * 10.0 ** (g0 / 20.0)
    out[offset:] = raw[offset:] * 10.0 ** (g1 / 20.0)
    step = max(1, int(round(sr * cfg["step_duration_sec"])))
    n = max(1, math.ceil(max(1, offset - onset) / step))
    for k in range(n):
        a, b = onset + k * step, min(onset + (k + 1) * step, offset)
        out[a:b] = raw[a:b] * 10.0 ** ((g0 + (g1 - g0) * progress(k, n, mode, cfg["jump_at"])) / 20.0)
    clipped_ratio(out, -32768.0, 32767.0)
    return np.clip(out.flatten(), -32768.0, 32767.0).astype(np.int16)


def endpoints(category: str, tier: str, up: bool, sr: int) -> tuple[float, float]:
    """(start, end) of a stepped category's parameter for a tier and direction."""
    t = load_config(category)["tiers"][tier]
    less, more = {
        "speed": lambda: (1.0 - t["delta_rate"], 1.0 + t["delta_rate"]),
        "pitch": lambda: (-float(t["delta_steps"]), float(t["delta_steps"])),
        "distortion": lambda: (sr, int(t["effective_sr_min"])),
        "roughness": lambda: (16, int(t["bit_depth_min"])),
        "clarity": lambda: (float(t["cutoff_min_hz"]), sr / 2.0),
    }[category]()
    return (less, more) if up else (more, less)


def span(n: int, sr: int, onset_sec: float, offset_sec: float) -> tuple[int, int]:
    """Onset/offset seconds to samples, clamped to the clip."""
    return max(0, min(n, int(round(onset_sec * sr)))), max(0, min(n, int(round(offset_sec * sr))))


def render_decoded(
    category: str, pcm: np.ndarray, sr: int, onset: int, offset: int, clip_id: str, echo_source: tuple[np.ndarray, np.ndarray] | None = None
) -> np.ndarray:
    """One condition from the int16 samples, as `process_one` does after reading the file: decode, render,
    clipped ratio, PCM16 (echo: from the source's decoded audio and its tier's wet signal when given)."""
    curve, tier, direction = clip_id.split("__")[2:]
    mode, up = load_config(category)["curves"][curve]["mode"], direction == "up"
    if category == "volume":
        return volume(pcm, sr, onset, offset, tier, up, mode)
    if category == "echo":
        x, wet = echo_source if echo_source is not None else (pcm.astype(np.float32) / 32768.0,) * 2
        y = echo(x, reverbed(x, sr, tier) if echo_source is None else wet, onset, offset, tier, up, mode)
        return encode(y, buffered=False)
    x = (pcm.astype(np.float32) / 32768.0)[:, None][:, 0]  # decoded as (samples, channels), channel 0
    if category == "vibration":
        y = vibration(x, sr, onset, offset, tier, up, mode)
    elif category == "noise":
        return encode(noise(x, sr, onset, offset, tier, up, mode, clip_id), buffered=False)
    else:
        y = segmented(category, x, sr, onset, offset, *endpoints(category, tier, up, sr), mode)
    return encode(y)


def encode(y: np.ndarray, *, buffered: bool = True) -> np.ndarray:
    """The clipped ratio and PCM16 by clip and truncation; `buffered`: first copied into the (samples,
    channels) output buffer the per-channel scripts assemble (echo and noise encode their result directly)."""
    out = y[:, None]
    if buffered:
        out = np.zeros((len(y), 1), dtype=np.float32)
        out[:, 0] = y
    clipped_ratio(out)
    return np.clip(out * 32768.0, -32768.0, 32767.0).astype(np.int16)[:, 0]


def render_condition(category: str, pcm: np.ndarray, sr: int, onset_sec: float, offset_sec: float, clip_id: str) -> np.ndarray:
    """One benchmark clip (int16) of a mono PCM16 source, given its id `item__clip__curve__tier__direction`."""
    onset, offset = span(len(pcm), sr, onset_sec, offset_sec)
    return render_decoded(category, pcm, sr, onset, offset, clip_id)


def render_source(category: str, pcm: np.ndarray, sr: int, onset_sec: float, offset_sec: float, item: str, clip: str) -> list[tuple[str, np.ndarray]]:
    """All 24 clips of one source in the published loop order (tier, curve, direction), as its `main` makes
    them: per condition from the int16 samples, except echo's per-source decode and per-tier wet signals."""
    cfg = load_config(category)
    onset, offset = span(len(pcm), sr, onset_sec, offset_sec)
    x = pcm.astype(np.float32) / 32768.0 if category == "echo" else None
    out = []
    for tier in cfg["tiers"]:
        source = (x, reverbed(x, sr, tier)) if x is not None else None
        for curve in cfg["curves"]:
            for direction in ("up", "down"):
                cid = f"{item}__{clip}__{curve}__{tier}__{direction}"
                out.append((cid, render_decoded(category, pcm, sr, onset, offset, cid, source)))
    return out
