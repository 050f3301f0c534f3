"""The beep ablation source (SPEC §4): 10 pure sine tones at 48 kHz, synthesised exactly as published.

Each clip is 0.75 s of silence, 2.10 s of 0.65·sin(2πft) with t counted from the onset (no fade), and
0.75 s of silence, for f = 700, 850, ..., 2050 Hz; onset 0.75 s, offset 2.85 s. PCM16 is
round(clip(x, −1, 1)·32767) (half to even), as the published generator wrote its WAV files.
"""

from __future__ import annotations

import numpy as np

from vocalgrad_dataset.sources.base import PCM, SourceClip, SourceError

SAMPLE_RATE = 48000
ONSET_SEC = 0.75
TONE_SEC = 2.10
TAIL_SEC = 0.75
AMPLITUDE = 0.65
FREQUENCIES_HZ: tuple[int, ...] = tuple(range(700, 2051, 150))  # 10 tones, beep_01 .. beep_10
SPLITS: tuple[str, ...] = ("test",)


def beep_samples(frequency_hz: float, sr: int = SAMPLE_RATE) -> np.ndarray:
    """One beep source clip as int16 samples (silence, tone, silence)."""
    onset, tone, tail = (int(round(s * sr)) for s in (ONSET_SEC, TONE_SEC, TAIL_SEC))
    audio = np.zeros(onset + tone + tail, dtype=np.float64)
    t = np.arange(tone, dtype=np.float64) / sr
    audio[onset : onset + tone] = AMPLITUDE * np.sin(2.0 * np.pi * frequency_hz * t)
    return np.round(np.clip(audio, -1.0, 1.0) * 32767.0).astype(np.int16)


def beep_item_id(index: int) -> str:
    """beep_01 .. beep_10 (1-based): both the item and the clip id of a beep source."""
    return f"beep_{index:02d}"


class BeepSource:
    """The 10 synthetic beeps (test split only); nothing is read from disk."""

    name = "beep"
    splits = SPLITS

    def clips(self, split: str) -> list[SourceClip]:
        """The 10 beeps in frequency order, with their exact onset/offset."""
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r} for beep (the beep ablation is test only); valid: test")
        offset = ONSET_SEC + int(round(TONE_SEC * SAMPLE_RATE)) / SAMPLE_RATE
        return [
            SourceClip(
                source_item_id=beep_item_id(i),
                source_clip_id=beep_item_id(i),
                speaker_id="beep",
                text=f"synthetic machine beep clip {i:02d}",
                path=f"beep:{f}Hz",
                onset_sec=ONSET_SEC,
                offset_sec=offset,
            )
            for i, f in enumerate(FREQUENCIES_HZ, start=1)
        ]

    def read(self, clip: SourceClip) -> PCM:
        """Synthesise one beep."""
        names = {beep_item_id(i): f for i, f in enumerate(FREQUENCIES_HZ, start=1)}
        if clip.source_item_id not in names:
            raise SourceError(f"clip {clip.source_clip_id}: not a beep source clip (valid: beep_01 .. beep_10)")
        return PCM(beep_samples(names[clip.source_item_id]), SAMPLE_RATE)
