"""The official source: VCTK 0.80 (untrimmed 48 kHz WAV) with the frozen test/train selections."""

from __future__ import annotations

import csv
import os
import warnings
from pathlib import Path
from typing import Any

from vocalgrad_dataset.fileio import file_sha256
from vocalgrad_dataset.sources.audio_io import read_pcm
from vocalgrad_dataset.sources.base import PCM, SourceClip, SourceError

SELECTION_DIR = Path(__file__).resolve().parent.parent / "data" / "selection"
SPLIT_FILES: dict[str, tuple[str, str]] = {
    "test": ("test_source_clips_100.csv", "test_item_id"),
    "train": ("train_source_clips_500.csv", "train_item_id"),
}
LAYOUT_DIRS: dict[str, str] = {"0.80": "wav48", "0.92": "wav48_silence_trimmed"}
VCTK_URL = "https://datashare.ed.ac.uk/bitstream/handle/10283/2651/VCTK-Corpus.zip"
SAMPLE_RATE = 48000
HOW_TO_GET = (
    "VocalGrad needs the VCTK 0.80 'VCTK-Corpus' release (untrimmed 48 kHz WAV: wav48/pXXX/pXXX_NNN.wav) "
    "from Edinburgh DataShare, https://datashare.ed.ac.uk/handle/10283/2651 ; unzip it and pass its "
    "VCTK-Corpus folder as data_dir (or let download_vctk fetch it)."
)


def _find_root(root: Path) -> Path:
    """The folder that holds wav48*/: root itself or its VCTK-Corpus child (the zip's top folder)."""
    for cand in (root, root / "VCTK-Corpus"):
        if any((cand / d).is_dir() for d in LAYOUT_DIRS.values()):
            return cand
    return root


class VCTKSource:
    """VCTK clips listed in the frozen selection CSVs, read at 48 kHz."""

    name = "vctk"

    def __init__(self, root: Path | str | None, *, layout: str = "auto") -> None:
        if root is None:
            raise SourceError(f"vctk source: no VCTK directory given. {HOW_TO_GET}")
        given = Path(root).expanduser()
        if not given.is_dir():
            raise SourceError(f"vctk source: directory {given} does not exist. {HOW_TO_GET}")
        self.root = _find_root(given).resolve()
        if layout == "auto":
            found = [k for k, d in LAYOUT_DIRS.items() if (self.root / d).is_dir()]
            if not found:
                raise SourceError(
                    f"vctk source: {self.root} has neither wav48/ nor wav48_silence_trimmed/. {HOW_TO_GET}"
                )
            layout = found[0]  # "0.80" wins when both exist: it is the official one
        elif layout not in LAYOUT_DIRS:
            raise ValueError(f"unknown VCTK layout {layout!r}; valid: auto, {', '.join(LAYOUT_DIRS)}")
        audio_dir = self.root / LAYOUT_DIRS[layout]
        if not audio_dir.is_dir():
            raise SourceError(f"vctk source: directory {audio_dir} does not exist. {HOW_TO_GET}")
        self.layout = layout
        if layout == "0.92":
            warnings.warn(
                f"vctk source at {self.root}: VCTK 0.92 is silence-trimmed; onsets are re-detected and "
                "results are NOT comparable with the published benchmark (non-official source)",
                stacklevel=2,
            )

    def _path(self, audio_path: str) -> Path:
        """Map a frozen 'data/original/VCTK-Corpus/wav48/...' path into this corpus copy."""
        rel = Path(audio_path.split("VCTK-Corpus/", 1)[1])
        if self.layout == "0.92":
            rel = Path(LAYOUT_DIRS["0.92"], *rel.parts[1:-1], f"{rel.stem}_mic1.flac")
        return self.root / rel

    def clips(self, split: str) -> list[SourceClip]:
        """The frozen clips of a split in CSV order, with frozen onsets (None for 0.92: re-detect)."""
        if split not in SPLIT_FILES:
            raise ValueError(f"unknown split {split!r} for vctk; valid: {', '.join(SPLIT_FILES)}")
        fname, id_col = SPLIT_FILES[split]
        with open(SELECTION_DIR / fname, newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
        frozen = self.layout == "0.80"
        return [
            SourceClip(
                source_item_id=r[id_col],
                source_clip_id=r["clip_id"],
                speaker_id=r["speaker_id"],
                text=r["text"],
                path=str(self._path(r["audio_path"])),
                onset_sec=float(r["onset_sec"]) if frozen else None,
                offset_sec=float(r["offset_sec"]) if frozen else None,
            )
            for r in rows
        ]

    def read(self, clip: SourceClip) -> PCM:
        """Decode one clip; anything but 48 kHz is rejected (SourceError naming clip and rates)."""
        return read_pcm(clip.path, clip_name=clip.source_clip_id, expected_rate=SAMPLE_RATE)


def download_vctk(dl_manager: Any, *, expected_sha256: str | None = None) -> Path:
    """Fetch VCTK 0.80 with a datasets DownloadManager, verify its sha256, unpack; returns the VCTK-Corpus root.

    DataShare publishes no checksum for this ~11 GB zip: pass `expected_sha256` (or set
    VOCALGRAD_VCTK_SHA256) to pin one; otherwise the computed digest is recorded beside the archive on the
    first download and every later use is checked against it.
    """
    archive = Path(dl_manager.download(VCTK_URL))
    digest = file_sha256(archive)
    expected = expected_sha256 or os.environ.get("VOCALGRAD_VCTK_SHA256")
    record = archive.with_name(archive.name + ".sha256")
    if expected is None and record.is_file():
        expected = record.read_text().split()[0]
    if expected is not None and digest != expected:
        raise SourceError(f"vctk download {archive}: sha256 {digest} does not match the expected {expected}; delete it and retry")
    if not record.is_file():
        record.write_text(f"{digest}  {VCTK_URL}\n")
    return _find_root(Path(dl_manager.extract(str(archive))))
