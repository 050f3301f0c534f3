"""Row sources for the runner: on-the-fly generation, a Parquet build, the published release layout.

Every source yields the same row dicts (:class:`BenchRow`) and lists its work as :class:`SourceUnit`s
(the 24 rows of one source clip), so the runner can shard by source clip without decoding audio.
Audio is decoded with soundfile only: the eval path needs no FFmpeg.
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NotRequired, Protocol, TypedDict

import numpy as np
import soundfile as sf

from harness.mcq import normalize_mcq_row
from vocalgrad_dataset import grid
from vocalgrad_dataset.build import info as buildinfo
from vocalgrad_dataset.build.manifest import (
    MANIFEST_NAME,
    read_manifest,
    read_release_metadata,
    short_category,
)
from vocalgrad_dataset.categories import CATEGORIES, CATEGORY_NAMES
from vocalgrad_dataset.fileio import safe_join
from vocalgrad_dataset.generate import serves, unit_ids
from vocalgrad_dataset.sources import SourceError, check_wav_complete
from vocalgrad_dataset.tasks import config_spec, resolve

# Config names in the paper's Table 2 order (SPEC §3, §7), and the published release's long names.
CONFIGS: tuple[str, ...] = CATEGORY_NAMES
PUBLISHED_NAME: dict[str, str] = {c: CATEGORIES[c].release_name for c in CONFIGS}
CONFIG_OF_PUBLISHED: dict[str, str] = {v: k for k, v in PUBLISHED_NAME.items()}
PARQUET_COLUMNS = ("benchmark_clip_id", "audio")  # what the harness cannot do without in a Parquet build
CLAIM_ROW_KEYS = ("claim", "congruent", "template_id", "voice_id", "transcript")  # conflict configs' extra columns


class AudioDict(TypedDict):
    array: np.ndarray  # float32, mono
    sampling_rate: int


class BenchRow(TypedDict):
    """One benchmark clip as every row source yields it (keys of the generator's rows)."""

    audio: AudioDict
    benchmark_clip_id: str
    category: str  # config name ("speed"), whatever the source called it
    attribute: str
    prompt: str
    label: str  # "increase" / "decrease"
    direction: str
    curve: str
    tier: str
    source_item_id: str
    source_clip_id: str
    speaker_id: str
    onset_sec: float
    offset_sec: float
    duration_sec: float
    claim: NotRequired[str]  # conflict configs: increase | decrease | none
    congruent: NotRequired[bool | None]
    template_id: NotRequired[str]
    voice_id: NotRequired[str]
    transcript: NotRequired[str]


@dataclass(frozen=True)
class SourceUnit:
    """The rows of one source clip: the unit of sharding, resume and clustering."""

    key: str  # "{source_item_id}__{source_clip_id}"
    duration_sec: float  # seconds of audio in the unit, for length balancing
    clip_ids: tuple[str, ...]  # benchmark ids in dataset order


class RowSource(Protocol):
    """Where benchmark rows come from."""

    description: str

    def units(self, config: str) -> list[SourceUnit]:
        """All units of a config in dataset order (no audio decoded)."""
        ...

    def rows(self, config: str, units: Sequence[SourceUnit]) -> Iterator[BenchRow]:
        """The rows of the given units, decoded, in dataset order."""
        ...


def attribute_word(config: str) -> str:
    """The prompt attribute word of a config's category (SPEC §3 table)."""
    return config_spec(config).category.attribute


def unit_key(source_item_id: str, source_clip_id: str) -> str:
    """Key of the unit a row belongs to."""
    return f"{source_item_id}__{source_clip_id}"


def decode_audio(file: str | Path | io.BytesIO, where: str) -> AudioDict:
    """read_audio with a clear error naming `where` (the file and clip) for missing or undecodable audio."""
    try:
        check_wav_complete(file, where)
        return read_audio(file)
    except SourceError as err:
        raise ValueError(str(err)) from None
    except (sf.LibsndfileError, RuntimeError, OSError, TypeError) as err:  # TypeError: soundfile on garbage
        reason = str(err).rpartition(": ")[2] if isinstance(file, io.BytesIO) else str(err)  # not "<BytesIO at 0x..>"
        raise ValueError(f"{where}: audio cannot be decoded ({reason})") from None


def read_audio(file: str | Path | io.BytesIO) -> AudioDict:
    """Decode a file (or bytes) with soundfile to mono float32 (PCM16 / 32768, as SPEC §2 reads it)."""
    data, sr = sf.read(file, dtype="float32", always_2d=True)
    mono = data[:, 0] if data.shape[1] == 1 else data.mean(axis=1, dtype=np.float32)
    return {"array": np.ascontiguousarray(mono, dtype=np.float32), "sampling_rate": int(sr)}


def normalize_row(row: dict[str, Any], config: str) -> BenchRow:
    """Coerce a source's row to :class:`BenchRow` (config name, floats, ids parsed from the clip id)."""
    clip_id = str(row["benchmark_clip_id"])
    spec = config_spec(config)
    item, clip, cond = grid.parse_any_clip_id(clip_id)  # source-clip ids (yes/no, ternary) have no condition
    expected = spec.recipe.label(cond)
    label = row.get("label")
    label = spec.labels[label] if isinstance(label, int) else (label or expected)
    if label != expected:  # the id encodes the direction: a disagreeing label is corrupt data
        raise ValueError(f"{clip_id}: label {label!r} contradicts its direction {cond.direction if cond else 'none'!r}")
    none = grid.NO_CONDITION
    return {
        "audio": row["audio"],
        "benchmark_clip_id": clip_id,
        "category": config,
        "attribute": str(row.get("attribute") or attribute_word(config)),
        "prompt": str(row.get("prompt") or ""),
        "label": label,
        "direction": str(row.get("direction") or (cond.direction if cond else none)),
        "curve": str(row.get("curve") or (cond.curve if cond else none)),
        "tier": str(row.get("tier") or (cond.tier if cond else none)),
        "source_item_id": str(row.get("source_item_id") or item),
        "source_clip_id": str(row.get("source_clip_id") or clip),
        "speaker_id": str(row.get("speaker_id") or ""),
        "onset_sec": _float(row.get("onset_sec")),
        "offset_sec": _float(row.get("offset_sec")),
        "duration_sec": _float(row.get("duration_sec")),
        # lexical-conflict rows: what the carrier's words claim, whether that is the truth, which carrier
        **{k: row[k] for k in CLAIM_ROW_KEYS if k in row},
    }


def built_item_row(row: Mapping[str, Any], config: str, where: str) -> BenchRow:
    """An item as the item builder writes it (vocalgrad_dataset.voxparadox.export.item_row: PCM16 WAV bytes),
    as ParquetSource reads it back from a build: audio decoded, checked as its kind's row."""
    audio = decode_audio(io.BytesIO(row["audio"]["bytes"]), f"{where}: clip {row['benchmark_clip_id']}")
    # a build stores duration_sec as float32: the same value here, so the rows are a build's rows
    row = {**row, "audio": audio, "duration_sec": float(np.float32(row["duration_sec"]))}
    return normalize_mcq_row(row, config, where, kind=resolve(config).kind)  # type: ignore[return-value]


def _float(value: Any) -> float:
    return float(value) if value not in (None, "") else float("nan")


def _group_units(ids: Sequence[str], durations: Sequence[float]) -> list[SourceUnit]:
    """Units in order of first appearance from per-row ids and durations."""
    order: dict[str, tuple[list[str], list[float]]] = {}
    for cid, dur in zip(ids, durations, strict=True):
        item, clip, _ = grid.parse_any_clip_id(cid)
        ids_, durs = order.setdefault(unit_key(item, clip), ([], []))
        ids_.append(cid)
        durs.append(0.0 if np.isnan(dur) else dur)
    return [SourceUnit(k, float(sum(d)), tuple(i)) for k, (i, d) in order.items()]


class GeneratorSource:
    """Rows generated on the fly by vocalgrad_dataset.generate (no build step)."""

    def __init__(self, split: str, source: str = "vctk", data_dir: str | None = None) -> None:
        self.split, self.source, self.data_dir = split, source, data_dir
        self.description = f"generate:{source}"
        self._clips: dict[str, Any] | None = None

    def _source_clips(self) -> dict[str, Any]:
        if self._clips is None:
            from vocalgrad_dataset.generate import source_clips

            clips = source_clips(self.split, self.source, self.data_dir)
            self._clips = {unit_key(c.source_item_id, c.source_clip_id): c for c in clips}
        return self._clips

    def units(self, config: str) -> list[SourceUnit]:
        """A source clip's rows (24; 25 with the unmodified clip), weighted by the clip's duration (file header)."""
        self.check_config(config)
        spec = config_spec(config)
        units = []
        for key, c in self._source_clips().items():
            if not serves(c, spec):  # a carrier of another category's conflict config
                continue
            ids = unit_ids(spec, c.source_item_id, c.source_clip_id)
            units.append(SourceUnit(key, len(ids) * _clip_duration(c), tuple(ids)))
        return units

    def check_config(self, config: str) -> None:
        """Refuse a config whose rows need carriers of their own kind (a lexical-conflict config: the claims
        source's sentences that claim a direction) from a source without them, where every row would be
        neutral and every conflict metric empty."""
        spec = resolve(config).spec
        needs = getattr(spec, "default_source", None)
        if needs and self.source != needs:
            raise ValueError(f"config {config!r} needs the {needs} source (carrier sentences that claim a "
                             f"direction); --source {self.source} has none, so every row would be neutral: "
                             f"leave --source out or pass --source {needs}")

    def rows(self, config: str, units: Sequence[SourceUnit]) -> Iterator[BenchRow]:
        from vocalgrad_dataset.generate import iter_rows

        clips = [self._source_clips()[u.key] for u in units]
        if not clips:
            return
        wanted = {cid for u in units for cid in u.clip_ids}  # render only these conditions (limit, few-shot)
        for row in iter_rows(config, self.split, self.source, self.data_dir, clips=clips, ids=wanted):
            yield normalize_row(row, config)


class ItemSource:
    """VoxParadox-lite rows built in memory, deterministically, from the vendored bases (no build step): the
    items `vocalgrad-dataset build` writes (checked against their frozen sha256s), as ParquetSource reads
    them back from that build. An item is its own unit; items are built only when their rows are read, so a
    rank, a resumed run or `--limit` builds only its own."""

    UNIT_SEC = 1.0  # an item's weight for rank balancing (its duration is unknown until it is built)

    def __init__(self, split: str) -> None:
        self.split = split
        self.description = "items:voxparadox-lite"

    def units(self, config: str) -> list[SourceUnit]:
        from vocalgrad_dataset.voxparadox.export import config_item_ids

        return [SourceUnit(i, self.UNIT_SEC, (i,)) for i in config_item_ids(config, self.split)]

    def rows(self, config: str, units: Sequence[SourceUnit]) -> Iterator[BenchRow]:
        from vocalgrad_dataset.voxparadox.export import item_row, iter_config_items

        wanted = {cid for u in units for cid in u.clip_ids}
        if not wanted:
            return
        for item in iter_config_items(config, self.split, wanted):
            yield built_item_row(item_row(item, config), config, f"{config} {self.split} (built in memory)")


class ConfigSource:
    """The rows of any config without a build: the generator's per-clip rows (VocalGrad family) or the
    in-memory items (VoxParadox-lite), chosen by the resolved config's row builder (TaskConfig.rows)."""

    def __init__(self, split: str, source: str = "vctk", data_dir: str | None = None) -> None:
        self.generated = GeneratorSource(split, source, data_dir)
        self.items = ItemSource(split)
        self.split, self.source, self.data_dir = split, source, data_dir
        self.description = self.generated.description

    def _of(self, config: str) -> RowSource:
        return self.items if resolve(config).rows == "items" else self.generated

    def config_description(self, config: str) -> str:
        """Where one config's rows come from (the per-config record's `source`)."""
        return self._of(config).description

    def units(self, config: str) -> list[SourceUnit]:
        return self._of(config).units(config)

    def rows(self, config: str, units: Sequence[SourceUnit]) -> Iterator[BenchRow]:
        return self._of(config).rows(config, units)


def _clip_duration(clip: Any) -> float:
    """Duration of a source clip from its file header; its speech offset when the file is absent."""
    try:
        return float(sf.info(clip.path).duration)
    except (RuntimeError, OSError, TypeError):
        return float(clip.offset_sec or 1.0)


class ParquetSource:
    """A `vocalgrad-dataset build` folder (DIR/<config>/<split>-*.parquet), read with pyarrow.

    Read directly rather than through `datasets.load_dataset`, whose cache can serve an earlier build
    made under the same path; audio is decoded here with soundfile.
    """

    def __init__(self, path: str | Path, split: str) -> None:
        self.path, self.split = Path(path), split
        self.description = f"parquet:{self.path}"

    def _files(self, config: str) -> list[Path]:
        files = sorted((self.path / config).glob(f"{self.split}-*.parquet"))
        if not files:
            raise FileNotFoundError(f"no {self.split} shards of config {config!r} under {self.path} (expected {config}/{self.split}-*.parquet)")
        for f in files:
            if f.stat().st_size == 0:
                raise ValueError(f"{f}: empty file (0 bytes; a copy cut short?); rebuild it")
        return files

    def _columns(self, file: Path) -> list[str]:
        """The file's column names (a clear error for a file that is not Parquet, or lacks a needed column)."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            names = pq.read_schema(file).names
        except (pa.ArrowException, OSError) as err:
            raise ValueError(f"{file}: not a readable Parquet file ({err})") from None
        missing = [c for c in PARQUET_COLUMNS if c not in names]
        if missing:
            raise ValueError(f"{file}: no {' or '.join(repr(c) for c in missing)} column (a VocalGrad build has "
                             f"{', '.join(PARQUET_COLUMNS)}); is this a `vocalgrad-dataset build` output?")
        return names

    def units(self, config: str) -> list[SourceUnit]:
        import pyarrow.parquet as pq

        ids: list[str] = []
        durations: list[float] = []
        seen: dict[str, Path] = {}
        for file in self._files(config):
            names = self._columns(file)
            cols = ["benchmark_clip_id"] + [c for c in ("duration_sec", "category") if c in names]
            meta = pq.read_table(file, columns=cols).to_pydict()
            # MCQ shards (VoxParadox-lite) have no category column, and their config names no VocalGrad category
            other = buildinfo.foreign_category(meta["category"], config) if "category" in meta else None
            if other is not None:  # read as this config, its rows would be scored with this config's prompt
                raise ValueError(f"{file}: rows of config {other!r}, not {config!r} (a shard copied from another "
                                 "config?); rebuild it")
            for cid in meta["benchmark_clip_id"]:
                if cid is None or not str(cid).strip():
                    raise ValueError(f"{file}: a row without a benchmark_clip_id")
                if cid in seen:  # rows of two builds in one folder: it would be scored twice
                    where = "twice in" if seen[cid] == file else f"in {seen[cid]} and in"
                    raise ValueError(f"duplicated clip id {cid!r} ({where} {file}); rebuild into an empty "
                                     "folder or remove the stale shards")
                seen[cid] = file
            ids += meta["benchmark_clip_id"]
            durations += [_float(d) for d in meta.get("duration_sec", [None] * len(meta["benchmark_clip_id"]))]
        # after the id scan, so rows of two builds in one folder are named as such first
        missing = buildinfo.missing_shards(self.path / config, self.split, self._files(config))
        if missing:  # a deleted shard would silently shrink the run (n-samples original counts what is left)
            raise ValueError(f"{self.path / config}: {len(missing)} of its {self.split} shards missing "
                             f"({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''}); rebuild it with "
                             "`vocalgrad-dataset build` into the same --out")
        self._check_manifest(config, ids)
        if resolve(config).rows == "items":  # an item is its own unit: MCQ ids carry no source clip
            return [SourceUnit(i, 0.0 if np.isnan(d) else d, (i,)) for i, d in zip(ids, durations, strict=True)]
        return _group_units(ids, durations)

    def _check_manifest(self, config: str, ids: Sequence[str]) -> None:
        """Refuse when the build's manifest.csv lists clips of this config that no shard of this split holds."""
        path = self.path / MANIFEST_NAME
        if not path.is_file():
            return
        listed = {h.benchmark_clip_id for h in read_manifest(path) if short_category(h.category) == config}
        lost = listed - set(ids)
        if lost:  # rows of the config's other splits are not lost
            lost -= {cid for f in (self.path / config).glob("*.parquet") if not f.name.startswith(f"{self.split}-")
                     for cid in _clip_ids(f)}
        if lost:
            raise ValueError(f"{path} lists {len(lost)} clip(s) of {config!r} that no shard under "
                             f"{self.path / config} holds (first: {min(lost)}); a shard was deleted? rebuild it")

    def rows(self, config: str, units: Sequence[SourceUnit]) -> Iterator[BenchRow]:
        import pyarrow.parquet as pq

        wanted = {cid for u in units for cid in u.clip_ids}
        mcq = resolve(config).rows == "items"  # items carry their own question and options
        for file in self._files(config):
            self._columns(file)
            for batch in pq.ParquetFile(file).iter_batches(batch_size=64):
                for row in batch.to_pylist():
                    cid = row["benchmark_clip_id"]
                    if cid not in wanted:
                        continue
                    audio = row["audio"] or {}
                    data = io.BytesIO(audio["bytes"]) if audio.get("bytes") else audio.get("path")
                    if data is None:
                        raise ValueError(f"{file}: clip {cid}: its audio has neither bytes nor a path")
                    if not isinstance(data, io.BytesIO):
                        data = self.path / config / data
                    decoded = decode_audio(data, f"{file}: clip {cid}")
                    if mcq:
                        yield normalize_mcq_row({**row, "audio": decoded}, config, str(file),  # type: ignore[misc]
                                                kind=resolve(config).kind)
                    else:
                        yield normalize_row({**row, "audio": decoded}, config)  # label ints map in normalize_row


def _clip_ids(file: Path) -> list[str]:
    import pyarrow.parquet as pq

    return [str(c) for c in pq.read_table(file, columns=["benchmark_clip_id"]).column(0).to_pylist()]


class ReleaseSource:
    """The published release layout: `metadata.csv` (file_name, category, benchmark_clip_id, ...) + audio/."""

    def __init__(self, path: str | Path, split: str) -> None:
        self.path, self.split = Path(path), split
        self.description = f"release:{self.path}"
        self._meta: list[dict[str, str]] | None = None

    def _rows_of(self, config: str) -> list[dict[str, str]]:
        if self._meta is None:
            self._meta = read_release_metadata(self.path)
        name = PUBLISHED_NAME.get(config, config)  # the release holds the nine direction configs only
        rows = [
            r
            for r in self._meta
            if r["category"] in (name, config) and r.get("split", self.split) in (self.split, "")
        ]
        seen: dict[str, str] = {}
        for r in rows:
            cid = r["benchmark_clip_id"]
            if cid in seen:
                raise ValueError(f"{self.path / 'metadata.csv'}: duplicated clip id {cid!r} (lines {seen[cid]} "
                                 f"and {r['_line']})")
            seen[cid] = r["_line"]
        return rows

    def units(self, config: str) -> list[SourceUnit]:
        rows = self._rows_of(config)
        return _group_units([r["benchmark_clip_id"] for r in rows], [_float(r.get("duration_sec")) for r in rows])

    def rows(self, config: str, units: Sequence[SourceUnit]) -> Iterator[BenchRow]:
        wanted = {cid for u in units for cid in u.clip_ids}
        for r in self._rows_of(config):
            cid = r["benchmark_clip_id"]
            if cid in wanted:
                where = f"{self.path / 'metadata.csv'}: clip {cid}"
                path = safe_join(self.path, r["file_name"], where=where, hint="")  # never a file outside the release
                audio = decode_audio(path, f"{path}: clip {cid}")
                yield normalize_row({**r, "audio": audio}, config)


def open_source(
    split: str = "test", source: str = "vctk", data_dir: str | None = None, dataset: str | None = None
) -> RowSource:
    """A built dataset when `dataset` is given (release layout if it has metadata.csv), else generation."""
    if dataset is None:  # every config without a build: generated clips or in-memory items
        return ConfigSource(split, source, data_dir)
    path = Path(dataset)
    if not path.is_dir():
        raise FileNotFoundError(f"dataset directory not found: {path}")
    if (path / "metadata.csv").is_file():
        return ReleaseSource(path, split)
    return ParquetSource(path, split)
