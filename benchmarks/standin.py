"""Stand-in sources for speed measurements: the frozen VCTK selection's count, lengths and onsets,
filled with the real demo speech (VCTK itself is not reachable here)."""

from __future__ import annotations

import csv

import numpy as np

from vocalgrad_dataset.sources import PCM, SourceClip, get_source
from vocalgrad_dataset.sources.vctk import SELECTION_DIR, SPLIT_FILES


def _rows(split: str) -> list[dict[str, str]]:
    with open(SELECTION_DIR / SPLIT_FILES[split][0], newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


class StandInSource:
    """Clips of the frozen list (ids, durations, onsets) whose audio is demo speech tiled to length."""

    name = "standin"

    def __init__(self) -> None:
        demo = get_source("demo")
        self._speech = [demo.read(c).samples for s in ("test", "train") for c in demo.clips(s)]
        self._durations = {r["clip_id"]: float(r["audio_duration_sec"]) for s in SPLIT_FILES for r in _rows(s)}

    def clips(self, split: str) -> list[SourceClip]:
        id_col = SPLIT_FILES[split][1]
        rows = _rows(split)
        return [
            SourceClip(r[id_col], r["clip_id"], r["speaker_id"], r["text"], r["clip_id"], float(r["onset_sec"]), float(r["offset_sec"]))
            for r in rows
        ]

    def read(self, clip: SourceClip) -> PCM:
        n = int(round(self._durations[clip.source_clip_id] * 48000))
        speech = self._speech[sum(map(ord, clip.source_clip_id)) % len(self._speech)]
        return PCM(np.resize(speech, n).astype(np.int16), 48000)
