"""LoquaciousSet `clean` test (SPEC §4): the frozen 100 clips (50 F / 50 M), streamed with `datasets`.

Rows are picked by the frozen `source_row_index` of the `test` split and checked against the frozen clip id
(`ID` column), so an upstream reordering fails loudly instead of silently changing the stimuli. The
audio (`wav` column) is decoded with soundfile; files at 16 kHz PCM16 are used sample for sample.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from vocalgrad_dataset.sources.alternate import (
    ALTERNATE_DIR,
    SPLITS,
    check_split,
    decode_16k,
    frozen_clip,
    read_selection,
)
from vocalgrad_dataset.sources.base import PCM, SourceClip, SourceError

SELECTION = ALTERNATE_DIR / "loquaciousset" / "test_source_clips_100.csv"
REPO_ID = "speechbrain/LoquaciousSet"
CONFIG = "clean"
SPLIT = "test"
ID_COLUMN, AUDIO_COLUMN = "ID", "wav"


def open_test_split(data_dir: str | Path | None) -> Any:
    """The `clean` test split as an IterableDataset: the Hub repo, a local copy of it (a folder with its
    README.md), or Parquet file(s) with the same columns."""
    import datasets

    if data_dir is None:
        ds = datasets.load_dataset(REPO_ID, CONFIG, split=SPLIT, streaming=True)
    else:
        path = Path(data_dir)
        if path.is_dir() and (path / "README.md").is_file():
            ds = datasets.load_dataset(str(path), CONFIG, split=SPLIT, streaming=True)
        else:
            files = [str(path)] if path.is_file() else sorted(str(f) for f in path.rglob("*.parquet"))
            if not files:
                raise SourceError(f"loquacious source: no Parquet files under {path}")
            ds = datasets.load_dataset("parquet", data_files={SPLIT: files}, split=SPLIT, streaming=True)
    if ds.features is not None and isinstance(ds.features.get(AUDIO_COLUMN), datasets.Audio):
        ds = ds.cast_column(AUDIO_COLUMN, datasets.Audio(decode=False))  # bytes: soundfile decodes, not FFmpeg
    return ds


class LoquaciousSource:
    """The frozen LoquaciousSet list; audio is fetched on the first read (one pass over the split)."""

    name = "loquacious"
    splits = SPLITS

    def __init__(self, data_dir: Path | str | None = None, *, selection: Path = SELECTION) -> None:
        if data_dir is not None and not Path(data_dir).expanduser().exists():
            raise SourceError(f"loquacious source: {data_dir} does not exist (a local copy of {REPO_ID} or Parquet files)")
        self.data_dir = None if data_dir is None else Path(data_dir).expanduser()
        self.origin = str(self.data_dir or f"hf://datasets/{REPO_ID}")
        self._rows = read_selection(selection)
        self._audio: dict[int, dict[str, Any]] | None = None

    def clips(self, split: str) -> list[SourceClip]:
        """The frozen clips in list order; `path` records the corpus row they come from."""
        check_split(self.name, split)
        return [frozen_clip(r, f"{self.origin}#{r['source_row_index']}") for r in self._rows]

    def _fetch(self) -> dict[int, dict[str, Any]]:
        """Audio of every listed row, in one streaming pass that stops after the last one."""
        if self._audio is None:
            wanted = {int(r["source_row_index"]): r["clip_id"] for r in self._rows}
            found: dict[int, dict[str, Any]] = {}
            for index, row in enumerate(open_test_split(self.data_dir)):
                if index not in wanted:
                    continue
                if str(row[ID_COLUMN]) != wanted[index]:
                    raise SourceError(
                        f"clip {wanted[index]}: row {index} of {self.origin} ({CONFIG}/{SPLIT}) is "
                        f"{row[ID_COLUMN]!r}; the upstream split changed, the frozen selection no longer applies"
                    )
                found[index] = row[AUDIO_COLUMN]
                if len(found) == len(wanted):
                    break
            missing = sorted(set(wanted) - set(found))
            if missing:
                raise SourceError(
                    f"clip {wanted[missing[0]]}: row {missing[0]} not found in {self.origin} ({CONFIG}/{SPLIT}; "
                    f"{len(missing)} listed rows missing)"
                )
            self._audio = found
        return self._audio

    def read(self, clip: SourceClip) -> PCM:
        """Decode one listed row's audio to 16 kHz mono PCM16."""
        index = int(clip.path.rpartition("#")[2])
        audio = self._fetch()[index]
        data = audio.get("bytes") if isinstance(audio, dict) else None
        if data:
            return decode_16k(io.BytesIO(data), clip_name=clip.source_clip_id)
        path = audio.get("path") if isinstance(audio, dict) else audio
        if not path:
            raise SourceError(f"clip {clip.source_clip_id}: row {index} of {self.origin} has no audio")
        return decode_16k(path, clip_name=clip.source_clip_id)
