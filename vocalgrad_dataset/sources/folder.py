"""A user folder of WAV/FLAC files described by a CSV (Hugging Face audiofolder-style `file_name`)."""

from __future__ import annotations

import csv
import io
import math
from collections import defaultdict
from pathlib import Path

from vocalgrad_dataset.fileio import PathOutsideError, ragged_row, safe_join
from vocalgrad_dataset.sources.audio_io import read_pcm
from vocalgrad_dataset.sources.base import PCM, SourceClip, SourceError

DEFAULT_SPEAKER = "spk"  # used when the CSV has no speaker_id column or the cell is empty


def _opt_float(value: str | None, *, what: str, where: str) -> float | None:
    """Parse an optional non-negative, finite float cell ('' or missing -> None)."""
    if value is None or value.strip() == "":
        return None
    try:
        x = float(value)
    except ValueError as exc:
        raise SourceError(f"{where}: {what} {value!r} is not a number") from exc
    if not math.isfinite(x) or x < 0:
        raise SourceError(f"{where}: {what} {value!r} must be a finite number of seconds >= 0")
    return x


def _check_id(value: str, *, what: str, where: str) -> str:
    """Ids become parts of clip ids and file names downstream: refuse separators, '..', '__' and blanks."""
    bad = (
        value != value.strip() or value.startswith(".") or any(c in value for c in "/\\") or ".." in value
        or "__" in value or any(ord(c) < 32 or ord(c) == 127 for c in value)
    )
    if bad:
        raise SourceError(
            f"folder source: {where}: {what} {value!r} is not a valid id (no path separators, '..', leading dot, "
            "control characters, surrounding blanks or '__', which separates the fields of a clip id)"
        )
    return value


def read_metadata(csv_path: Path) -> tuple[list[str], list[dict[str, str]]]:
    """Columns and rows of a metadata CSV; unreadable, non-UTF-8 or empty files are SourceErrors naming it."""
    try:
        raw = csv_path.read_bytes()
    except OSError as exc:
        raise SourceError(f"folder source: cannot read {csv_path}: {exc.strerror or exc}") from exc
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise SourceError(
            f"folder source: {csv_path} line {line} is not UTF-8 (byte {raw[exc.start]:#04x}); save it as UTF-8"
        ) from exc
    if not text.strip():
        raise SourceError(f"folder source: {csv_path} is empty (needs a header with a file_name column and one row per file)")
    try:
        reader = csv.DictReader(io.StringIO(text, newline=""))
        rows = []
        for r in reader:
            if ragged_row(r):  # a shifted value would land in the wrong column
                raise SourceError(f"folder source: {csv_path} line {reader.line_num}: {ragged_row(r)}")
            rows.append(r)
    except csv.Error as exc:
        raise SourceError(f"folder source: {csv_path} line {reader.line_num}: malformed CSV: {exc}") from exc
    return list(reader.fieldnames or []), rows


def _open_listing(directory: Path, metadata: str) -> tuple[Path, list[dict[str, str]]]:
    """The metadata CSV's path and rows; a missing folder or CSV, no file_name column or no row is refused."""
    if not directory.is_dir():
        raise SourceError(f"folder source: directory {directory} does not exist")
    csv_path = directory / metadata
    if not csv_path.is_file():
        raise SourceError(f"folder source: metadata CSV {csv_path} not found (needs a file_name column)")
    columns, rows = read_metadata(csv_path)
    if "file_name" not in columns:
        raise SourceError(f"folder source: {csv_path} has no 'file_name' column (columns: {columns})")
    if not rows:
        raise SourceError(f"folder source: {csv_path} lists no files (only a header)")
    return csv_path, rows


def _span(r: dict[str, str], where: str) -> tuple[float | None, float | None]:
    """(onset_sec, offset_sec) of a row: both or neither, onset before offset."""
    onset = _opt_float(r.get("onset_sec"), what="onset_sec", where=where)
    offset = _opt_float(r.get("offset_sec"), what="offset_sec", where=where)
    if (onset is None) != (offset is None):
        raise SourceError(f"folder source: {where}: give both onset_sec and offset_sec or neither")
    if onset is not None and offset is not None and not onset < offset:
        raise SourceError(f"folder source: {where}: onset_sec {onset:g} must be before offset_sec {offset:g}")
    return onset, offset


class _ListingReader:
    """Turns metadata rows into SourceClips, refusing a file or a source_item_id listed twice.

    Default item ids number each speaker's files in the order rows are given (file-name order, across all
    splits), so they are unique.
    """

    def __init__(self, directory: Path, csv_path: Path, allow_outside: bool) -> None:
        self.directory, self.csv_path, self.allow_outside = directory, csv_path, allow_outside
        self.k_of_speaker: dict[str, int] = defaultdict(int)
        self.item_ids: set[str] = set()
        self.line_of_file: dict[Path, int] = {}

    def _file(self, r: dict[str, str], line: int, where: str) -> tuple[Path, Path]:
        """(the listed path, the file it resolves to): inside the folder unless allow_outside, existing, listed once."""
        try:
            path = safe_join(self.directory, r["file_name"] or "", where=where, allow_outside=self.allow_outside)
        except PathOutsideError as exc:
            raise SourceError(f"folder source: {exc}") from exc
        if not path.is_file():
            raise SourceError(f"folder source: {where}: listed file {path} does not exist")
        real = path.resolve()
        if real in self.line_of_file:
            raise SourceError(f"folder source: {where}: {r['file_name']!r} is the file already listed on line "
                              f"{self.line_of_file[real]} (each file may be listed once)")
        self.line_of_file[real] = line
        return path, real

    def _ids(self, r: dict[str, str], path: Path, where: str) -> tuple[str, str, str]:
        """(speaker_id, source_item_id, source clip id from the file name), each a valid id, the item id new."""
        speaker = _check_id((r.get("speaker_id") or "").strip() or DEFAULT_SPEAKER, what="speaker_id", where=where)
        self.k_of_speaker[speaker] += 1
        item_id = (r.get("source_item_id") or "").strip() or f"{speaker}_{self.k_of_speaker[speaker]:02d}"
        _check_id(item_id, what="source_item_id", where=where)
        clip_id = _check_id(path.stem, what="file name stem", where=where)
        if item_id in self.item_ids:
            raise SourceError(f"folder source: {where}: duplicate source_item_id {item_id!r}")
        self.item_ids.add(item_id)
        return speaker, item_id, clip_id

    def clip(self, line: int, r: dict[str, str]) -> tuple[str, SourceClip]:
        """(split, clip) of the row on CSV line `line`."""
        where = f"{self.csv_path} line {line}"
        path, real = self._file(r, line, where)
        speaker, item_id, clip_id = self._ids(r, path, where)
        onset, offset = _span(r, where)
        split = (r.get("split") or "").strip() or "test"
        return split, SourceClip(
            source_item_id=item_id,
            source_clip_id=clip_id,
            speaker_id=speaker,
            text=(r.get("text") or r.get("transcript") or "").strip(),
            path=str(real),
            onset_sec=onset,
            offset_sec=offset,
        )


class FolderSource:
    """Any-rate audio files listed in a metadata CSV; output keeps each file's own rate.

    Only files inside the folder are read: absolute names or names climbing out with `..` are refused
    unless `allow_outside`.
    """

    name = "folder"

    def __init__(self, directory: Path | str, metadata: str = "metadata.csv", *, allow_outside: bool = False) -> None:
        self.directory = Path(directory).expanduser()
        csv_path, rows = _open_listing(self.directory, metadata)
        self._clips: dict[str, list[SourceClip]] = defaultdict(list)
        listing = _ListingReader(self.directory, csv_path, allow_outside)
        for line, r in sorted(enumerate(rows, start=2), key=lambda lr: lr[1]["file_name"] or ""):
            split, clip = listing.clip(line, r)
            self._clips[split].append(clip)

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
