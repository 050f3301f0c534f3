"""The straightforward generator, as the published code worked: for each of the 24 conditions, read the
source again, rebuild what it needs (the reverb IR too), and call librosa once per window.

It renders through the same segment framework as the package (so both sides implement the same SPEC)
but without batching or sharing work across conditions. Used as the baseline in benchmarks and as the
reference the fast paths are tested against.
"""

from __future__ import annotations

from collections.abc import Sequence

import librosa
import numpy as np

from vocalgrad_dataset.categories import CATEGORIES, noise_seed
from vocalgrad_dataset.categories.clarity import lowpass_gain
from vocalgrad_dataset.categories.echo import schroeder_ir
from vocalgrad_dataset.dsp import fft_sizes, match_rms, to_pcm16
from vocalgrad_dataset.generate import speech_span
from vocalgrad_dataset.grid import clip_id, conditions
from vocalgrad_dataset.schedule import Schedule
from vocalgrad_dataset.segments import per_window, render_segmented
from vocalgrad_dataset.sources import Source, SourceClip


def time_stretch(window: np.ndarray, rate: float, sr: int) -> np.ndarray:
    """librosa.effects.time_stretch at n_fft 512, hop 128 (short windows: SPEC's short-chunk rule)."""
    n_fft, hop = fft_sizes(len(window), 512, 128)
    return librosa.effects.time_stretch(window, rate=rate, n_fft=n_fft, hop_length=hop)


def pitch_shift(window: np.ndarray, semitones: float, sr: int) -> np.ndarray:
    """librosa.effects.pitch_shift with the published settings."""
    n_fft, hop = fft_sizes(len(window), 512, 128)
    return librosa.effects.pitch_shift(
        window, sr=sr, n_steps=semitones, bins_per_octave=12, res_type="soxr_hq", scale=False, n_fft=n_fft, hop_length=hop
    )


def lowpass(window: np.ndarray, cutoff: float, sr: int) -> np.ndarray:
    """librosa.stft -> raised-cosine mask -> librosa.istft, RMS-matched to the window."""
    n_fft, hop = fft_sizes(len(window), 512, 128)
    spec = librosa.stft(window, n_fft=n_fft, hop_length=hop, window="hann", center=True)
    mask = lowpass_gain(librosa.fft_frequencies(sr=sr, n_fft=n_fft), cutoff).astype(np.float32)
    y = librosa.istft(spec * mask[:, None], n_fft=n_fft, hop_length=hop, window="hann", center=True, length=len(window))
    return match_rms(y, window)


BASELINE_OPS = {"speed": time_stretch, "pitch": pitch_shift, "clarity": lowpass}


def render_baseline(category: str, audio: np.ndarray, sr: int, schedules: Sequence[Schedule], fixed: dict) -> list[np.ndarray]:
    """Each condition on its own, each window through its own librosa call."""
    if category not in BASELINE_OPS:
        return [CATEGORIES[category].render(audio, sr, [s], {**fixed, "seeds": [seed]})[0] for s, seed in zip(schedules, fixed["seeds"], strict=True)]
    op = per_window(BASELINE_OPS[category])
    kwargs = {
        "speed": {"stretched": True, "equal_split": True, "process_outside": False},
        "pitch": {"process_outside": False},
        "clarity": {},
    }[category]
    return [render_segmented(audio, sr, [s], op, **kwargs)[0] for s in schedules]


def baseline_clip(category: str, source: Source, clip: SourceClip) -> list[np.ndarray]:
    """All 24 conditions of a clip the straightforward way; returns float audio (PCM16 / 32768) per condition."""
    cat = CATEGORIES[category]
    out = []
    for cond in conditions():
        pcm = source.read(clip)  # re-read per condition
        onset, offset = speech_span(clip, pcm.samples, pcm.sample_rate)
        audio, sr = pcm.float32, pcm.sample_rate
        sched = cat.schedule(cond, onset, offset, len(audio), sr)
        fixed = {**cat.fixed(cond.tier), "seeds": [noise_seed(clip_id(clip.source_item_id, clip.source_clip_id, cond))]}
        if category == "echo":
            schroeder_ir.cache_clear()  # rebuilt for every clip, as published
        y = render_baseline(category, audio, sr, [sched], fixed)[0]
        out.append(to_pcm16(y)[0].astype(np.float32) / np.float32(32768.0))
    return out
