"""The embedded demo source: 8 real 16 kHz clips vendored at 48 kHz (not VCTK; no official numbers)."""

from __future__ import annotations

import csv
from pathlib import Path

from vocalgrad_dataset.sources.audio_io import read_pcm
from vocalgrad_dataset.sources.base import PCM, SourceClip, SourceError

DEMO_DIR = Path(__file__).resolve().parent.parent / "data" / "demo"
SAMPLE_RATE = 48000


class DemoSource:
    """Clips listed in data/demo/manifest.tsv; onsets are None, so the caller detects them (SPEC §1)."""

    name = "demo"

    def __init__(self, directory: Path | str = DEMO_DIR) -> None:
        self.directory = Path(directory)
        manifest = self.directory / "manifest.tsv"
        if not manifest.is_file():
            raise SourceError(f"demo source: manifest {manifest} not found (run scripts/vendor_demo.py)")
        with open(manifest, newline="", encoding="utf-8") as f:
            self._rows = list(csv.DictReader(f, delimiter="\t"))
        self.splits = tuple(sorted({r["split"] for r in self._rows}))

    def clips(self, split: str) -> list[SourceClip]:
        """The demo clips of a split in manifest order."""
        if split not in self.splits:
            raise ValueError(f"unknown split {split!r} for demo; valid: {', '.join(self.splits)}")
        return [
            SourceClip(
                source_item_id=r["source_item_id"],
                source_clip_id=r["source_clip_id"],
                speaker_id=r["speaker_id"],
                text=r["text"],
                path=str((self.directory / r["file"]).resolve()),
            )
            for r in self._rows
            if r["split"] == split
        ]

    def read(self, clip: SourceClip) -> PCM:
        """Decode one vendored clip (48 kHz PCM16)."""
        return read_pcm(clip.path, clip_name=clip.source_clip_id, expected_rate=SAMPLE_RATE)
