"""A user folder of WAV/FLAC files described by a CSV (Hugging Face audiofolder-style `file_name`)."""

from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path

from .audio_io import read_pcm
from .base import PCM, SourceClip, SourceError

DEFAULT_SPEAKER = "spk"  # used when the CSV has no speaker_id column or the cell is empty


def _opt_float(value: str | None, *, what: str, where: str) -> float | None:
    """Parse an optional float cell ('' or missing -> None)."""
    if value is None or value.strip() == "":
        return None
    try:
        return float(value)
    except ValueError as exc:
        raise SourceError(f"{where}: {what} {value!r} is not a number") from exc


class FolderSource:
    """Any-rate audio files listed in a metadata CSV; output keeps each file's own rate."""

    name = "folder"

    def __init__(self, directory: Path | str, metadata: str = "metadata.csv") -> None:
        self.directory = Path(directory).expanduser()
        if not self.directory.is_dir():
            raise SourceError(f"folder source: directory {self.directory} does not exist")
        csv_path = self.directory / metadata
        if not csv_path.is_file():
            raise SourceError(f"folder source: metadata CSV {csv_path} not found (needs a file_name column)")
        with open(csv_path, newline="", encoding="utf-8-sig") as f:
            reader = csv.DictReader(f)
            columns = reader.fieldnames or []
            rows = list(reader)
        if "file_name" not in columns:
            raise SourceError(f"folder source: {csv_path} has no 'file_name' column (columns: {columns})")
        self._clips: dict[str, list[SourceClip]] = defaultdict(list)
        k_of_speaker: dict[str, int] = defaultdict(int)
        seen: set[str] = set()
        # Default item ids number each speaker's files in file-name order, across all splits (unique ids).
        for line, r in sorted(enumerate(rows, start=2), key=lambda lr: lr[1]["file_name"]):
            where = f"{csv_path} line {line}"
            path = self.directory / r["file_name"]
            if not path.is_file():
                raise SourceError(f"folder source: {where}: listed file {path} does not exist")
            speaker = (r.get("speaker_id") or "").strip() or DEFAULT_SPEAKER
            k_of_speaker[speaker] += 1
            item_id = (r.get("source_item_id") or "").strip() or f"{speaker}_{k_of_speaker[speaker]:02d}"
            clip_id = path.stem
            if "__" in item_id or "__" in clip_id:
                # "__" separates the fields of a benchmark clip id; it would make ids unparseable.
                raise SourceError(
                    f"folder source: {where}: ids may not contain '__' ({item_id!r}, {clip_id!r})"
                )
            if item_id in seen:
                raise SourceError(f"folder source: {where}: duplicate source_item_id {item_id!r}")
            seen.add(item_id)
            onset = _opt_float(r.get("onset_sec"), what="onset_sec", where=where)
            offset = _opt_float(r.get("offset_sec"), what="offset_sec", where=where)
            if (onset is None) != (offset is None):
                raise SourceError(f"folder source: {where}: give both onset_sec and offset_sec or neither")
            split = (r.get("split") or "").strip() or "test"
            self._clips[split].append(
                SourceClip(
                    source_item_id=item_id,
                    source_clip_id=clip_id,
                    speaker_id=speaker,
                    text=(r.get("text") or r.get("transcript") or "").strip(),
                    path=str(path.resolve()),
                    onset_sec=onset,
                    offset_sec=offset,
                )
            )

    def clips(self, split: str) -> list[SourceClip]:
        """The clips of a split, ordered by file name."""
        if split not in self._clips:
            raise ValueError(
                f"unknown split {split!r} for folder {self.directory}; valid: {', '.join(sorted(self._clips))}"
            )
        return list(self._clips[split])

    def read(self, clip: SourceClip) -> PCM:
        """Decode one file at its own sample rate."""
        return read_pcm(clip.path, clip_name=clip.source_clip_id)
