"""Common Voice Spontaneous Speech 4.0 (SPEC §4): the frozen 100 test clips (20 each of cdo, cgg, kbd, qxp,
shi), read from a local download and decoded to 16 kHz mono."""

from __future__ import annotations

from pathlib import Path

from vocalgrad_dataset.sources.alternate import (
    ALTERNATE_DIR,
    SPLITS,
    check_split,
    decode_16k,
    frozen_clip,
    read_selection,
)
from vocalgrad_dataset.sources.base import PCM, SourceClip, SourceError

SELECTION = ALTERNATE_DIR / "commonvoice_spontaneous" / "test_source_clips_100.csv"
HOW_TO_GET = (
    "download the five Common Voice Spontaneous Speech 4.0 corpora (sps-corpus-4.0-2026-06-12-{cdo,cgg,kbd,qxp,shi}) "
    "from the Mozilla Data Collective, unpack them side by side and pass their parent folder as data_dir"
)


def corpus_relative(source_audio_path: str) -> Path:
    """The part of a recorded path from the `sps-corpus-*` folder on (how the download unpacks)."""
    parts = Path(source_audio_path).parts
    start = next((i for i, p in enumerate(parts) if p.startswith("sps-corpus-")), None)
    if start is None:
        raise SourceError(f"frozen path {source_audio_path!r} has no sps-corpus-* folder")
    return Path(*parts[start:])


class CommonVoiceSpontaneousSource:
    """The frozen Common Voice Spontaneous list; data_dir is only needed to read audio (ids need none)."""

    name = "commonvoice-spontaneous"
    splits = SPLITS

    def __init__(self, data_dir: Path | str | None = None, *, selection: Path = SELECTION) -> None:
        self.root = None if data_dir is None else Path(data_dir).expanduser()
        if self.root is not None and not self.root.is_dir():
            raise SourceError(f"commonvoice-spontaneous source: directory {self.root} does not exist; {HOW_TO_GET}")
        self._rows = read_selection(selection)

    def _path(self, row: dict[str, str]) -> str:
        rel = corpus_relative(row["source_audio_path"])
        if self.root is None:
            return str(rel)
        for base in (self.root, self.root / "CommonVoice-Spontaneous"):
            if (base / rel).is_file():
                return str((base / rel).resolve())
        return str(self.root / rel)

    def clips(self, split: str) -> list[SourceClip]:
        """The 100 frozen clips in list order, with the recorded speech bounds."""
        check_split(self.name, split)
        return [frozen_clip(r, self._path(r)) for r in self._rows]

    def read(self, clip: SourceClip) -> PCM:
        """Decode the listed MP3 to 16 kHz mono PCM16 (SourceError naming the clip and file)."""
        if self.root is None:
            raise SourceError(f"clip {clip.source_clip_id}: commonvoice-spontaneous needs data_dir; {HOW_TO_GET}")
        if not Path(clip.path).is_file():
            raise SourceError(f"clip {clip.source_clip_id}: audio file not found: {clip.path}; {HOW_TO_GET}")
        return decode_16k(clip.path, clip_name=clip.source_clip_id)
