"""PCM-hash manifests of a dataset folder, and clip-by-clip verification of a folder against one.

A manifest is a CSV with one row per clip, the columns of the published generator's reference
(`tests/data/published_generator/pcm_sha256.csv`): category (short config name: "speed", "pitch-ternary"),
benchmark_clip_id, sample_rate, n_samples, pcm_sha256 (sha256 of the int16 little-endian samples, no
header). Rows are sorted (categories in the paper's order, then clip ids), so two folders holding the
same audio give byte-identical manifests, and the manifest's own sha256 identifies the audio of a build.
Written as `DIR/manifest.csv`, it is what `harness eval` records as the dataset's `manifest_sha256`.

Two folder layouts are read, as the harness reads them (harness/data.py):
- a `vocalgrad-dataset build` folder: `DIR/<config>/*.parquet` with `benchmark_clip_id` and `audio`
  (WAV bytes, or a path relative to the config folder); every split is included;
- the published release layout: `DIR/metadata.csv` (file_name, category, benchmark_clip_id, ...) and the
  audio files it lists inside DIR (category: the published long name, mapped to the short one).

A manifest may carry lossless copies of some clips beside it, `audio/<category>/<benchmark_clip_id>.flac`
(or .wav), as the published-generator fixture does: `verify` then measures the largest PCM difference of
a clip whose hash differs. A folder given as the manifest has audio for every clip.
"""

from __future__ import annotations

import csv
import hashlib
import io
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import soundfile as sf

from vocalgrad_dataset.categories import CATEGORY_NAMES
from vocalgrad_dataset.fileio import PathOutsideError, atomic_write_text, ragged_row, safe_join
from vocalgrad_dataset.tasks import config_spec

MANIFEST_COLUMNS = ("category", "benchmark_clip_id", "sample_rate", "n_samples", "pcm_sha256")
MANIFEST_NAME = "manifest.csv"  # in harness.results.MANIFEST_FILES: results.json records its sha256
RELEASE_METADATA = "metadata.csv"  # the published release layout's listing of its clips
RELEASE_COLUMNS = ("file_name", "category", "benchmark_clip_id")  # what a release's metadata.csv must have
AUDIO_SUFFIXES = (".flac", ".wav")  # lossless copies beside a manifest
_SHA256_RE = re.compile(r"[0-9a-f]{64}")


class ManifestError(ValueError):
    """A manifest or dataset folder that cannot be read; the message names the file, line or clip."""


@dataclass(frozen=True)
class ClipHash:
    """One manifest row: which clip, its rate and length, and the sha256 of its int16 samples."""

    category: str
    benchmark_clip_id: str
    sample_rate: int
    n_samples: int
    pcm_sha256: str

    @property
    def key(self) -> tuple[str, str]:
        return (self.category, self.benchmark_clip_id)


@dataclass(frozen=True)
class ClipAudio:
    """Where a clip's audio lies: a row of a Parquet file (by clip id) or an audio file of its own."""

    file: Path
    parquet_clip_id: str | None = None  # set for a Parquet row; None for a WAV/FLAC file


@dataclass(frozen=True)
class DatasetClip:
    """A clip found in a dataset folder: its manifest row and where to read its audio again."""

    hash: ClipHash
    audio: ClipAudio


@dataclass(frozen=True)
class ClipDifference:
    """A clip present on both sides whose audio differs."""

    category: str
    benchmark_clip_id: str
    what: str  # "length 123 != 456", "sample rate 16000 != 48000" or "pcm hash differs"
    max_difference: int | None  # largest |sample difference| in PCM16 steps; None when one side has no audio

    def describe(self) -> str:
        if self.max_difference is not None:
            return f"{self.what}, max difference {self.max_difference} PCM16 step(s)"
        return f"{self.what} (no audio on the manifest side to measure it)" if self.what == "pcm hash differs" else self.what


@dataclass
class VerifyReport:
    """What `verify` found, clip by clip."""

    dataset: str
    manifest: str
    n_dataset: int
    n_manifest: int
    missing: list[tuple[str, str]] = field(default_factory=list)  # in the manifest, not in the folder
    extra: list[tuple[str, str]] = field(default_factory=list)  # in the folder, not in the manifest
    different: list[ClipDifference] = field(default_factory=list)

    @property
    def identical(self) -> bool:
        return not (self.missing or self.extra or self.different)

    @property
    def max_difference(self) -> int | None:
        """The largest PCM difference over the measured differing clips (0 when identical)."""
        measured = [d.max_difference for d in self.different if d.max_difference is not None]
        return max(measured) if measured else (0 if self.identical else None)

    def summary(self) -> dict[str, object]:
        """The counts as one JSON-ready dict (the last line `vocalgrad-dataset verify` prints)."""
        return {
            "dataset": self.dataset, "manifest": self.manifest, "clips": self.n_dataset,
            "manifest_clips": self.n_manifest, "missing": len(self.missing), "extra": len(self.extra),
            "different": len(self.different),
            "different_unmeasured": sum(d.max_difference is None for d in self.different),
            "max_difference": self.max_difference, "identical": self.identical,
        }  # fmt: skip


def pcm_sha256(samples: np.ndarray) -> str:
    """sha256 of int16 little-endian samples (no header), the manifest's hash."""
    return hashlib.sha256(np.ascontiguousarray(samples, dtype="<i2").tobytes()).hexdigest()


def decode_pcm16(data: Path | io.BytesIO, where: str) -> tuple[np.ndarray, int]:
    """A mono 16-bit PCM clip's int16 samples and rate; anything else is a ManifestError naming `where`.

    Only PCM16 is accepted: the manifest hashes stored samples, and every VocalGrad clip is PCM16.
    """
    try:
        with sf.SoundFile(data if isinstance(data, io.BytesIO) else str(data)) as f:
            if f.subtype != "PCM_16" or f.channels != 1:
                raise ManifestError(f"{where}: audio is {f.channels}-channel {f.subtype}, not mono 16-bit PCM "
                                    "(a VocalGrad clip is mono PCM16)")
            return f.read(dtype="int16"), int(f.samplerate)
    except ManifestError:
        raise
    except (sf.LibsndfileError, RuntimeError, OSError, TypeError) as err:
        reason = str(err).rpartition(": ")[2] if isinstance(data, io.BytesIO) else str(err)
        raise ManifestError(f"{where}: audio cannot be decoded ({reason})") from None


def short_category(name: str) -> str:
    """Our config name for a published long name ("speaking_speed" -> "speed"); unknown names unchanged."""
    try:
        return config_spec(name).name
    except (KeyError, ValueError):
        return name


def sort_key(key: tuple[str, str]) -> tuple[int, str, str]:
    """Manifest order: the nine categories in the paper's order, other configs after them, then clip ids."""
    category, clip = key
    rank = CATEGORY_NAMES.index(category) if category in CATEGORY_NAMES else len(CATEGORY_NAMES)
    return (rank, category, clip)


def dataset_layout(path: Path) -> str:
    """"release" (metadata.csv) or "parquet" (DIR/<config>/*.parquet), as the harness decides; else an error."""
    if not path.is_dir():
        raise ManifestError(f"dataset folder not found: {path}")
    if (path / RELEASE_METADATA).is_file():
        return "release"
    if parquet_files(path):
        return "parquet"
    raise ManifestError(f"{path}: neither a release folder (metadata.csv) nor a `vocalgrad-dataset build` folder "
                        "(<config>/*.parquet)")


def parquet_files(path: Path) -> list[Path]:
    """Every Parquet file of a build folder (not hidden ones: temporaries of a killed writer)."""
    return sorted(p for p in path.glob("*/*.parquet") if not p.name.startswith(".") and not p.parent.name.startswith("."))


def _parquet_clips(path: Path) -> Iterator[tuple[str, str, np.ndarray, int, ClipAudio]]:
    """(category, clip id, samples, rate, where) of every row of a build folder."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    for file in parquet_files(path):
        category = file.parent.name
        try:
            names = pq.read_schema(file).names
            missing = [c for c in ("benchmark_clip_id", "audio") if c not in names]
            if missing:
                raise ManifestError(f"{file}: no {' or '.join(repr(c) for c in missing)} column; is this a "
                                    "`vocalgrad-dataset build` output?")
            batches = pq.ParquetFile(file).iter_batches(batch_size=64, columns=["benchmark_clip_id", "audio"])
            for batch in batches:
                for row in batch.to_pylist():
                    cid = row["benchmark_clip_id"]
                    if cid is None or not str(cid).strip():
                        raise ManifestError(f"{file}: a row without a benchmark_clip_id")
                    samples, sr = _decode_parquet_audio(file, cid, row["audio"])
                    yield category, str(cid), samples, sr, ClipAudio(file, str(cid))
        except (pa.ArrowException, OSError) as err:
            raise ManifestError(f"{file}: not a readable Parquet file ({err})") from None


def _decode_parquet_audio(file: Path, cid: str, audio: dict | None) -> tuple[np.ndarray, int]:
    """A Parquet row's audio: its WAV bytes, or the file its path names inside the config folder."""
    where = f"{file}: clip {cid}"
    audio = audio or {}
    if audio.get("bytes"):
        return decode_pcm16(io.BytesIO(audio["bytes"]), where)
    if not audio.get("path"):
        raise ManifestError(f"{where}: its audio has neither bytes nor a path")
    try:
        target = safe_join(file.parent, audio["path"], where=where, hint="")
    except PathOutsideError as err:
        raise ManifestError(str(err)) from None
    return decode_pcm16(target, f"{target}: clip {cid}")


def _csv_rows(path: Path, columns: Sequence[str], what: str) -> Iterator[tuple[int, dict[str, str]]]:
    """(line number, row) of a UTF-8 CSV file that must have `columns`; one ManifestError line for a bad file.

    `what` names the kind of file in the missing-column message ("a manifest", "a release's metadata.csv").
    A generator, so an error about a row (raised by the caller) comes before one about a later line.
    """
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            reader = csv.DictReader(fh)
            missing = [c for c in columns if c not in (reader.fieldnames or [])]
            if missing:
                raise ManifestError(f"{path}: no {', '.join(repr(c) for c in missing)} column "
                                    f"({what} has {', '.join(columns)})")
            for r in reader:
                if ragged_row(r):  # a missing trailing field (split, say) must not default silently
                    raise ManifestError(f"{path} line {reader.line_num}: {ragged_row(r)}")
                yield reader.line_num, r
    except UnicodeDecodeError as err:
        raise ManifestError(f"{path}: not UTF-8 text ({err})") from None
    except csv.Error as err:
        raise ManifestError(f"{path}: malformed CSV ({err})") from None


def read_release_metadata(path: str | Path) -> list[dict[str, str]]:
    """A release folder's metadata.csv rows, each with its line number under "_line"; one line for a bad file.

    The one reader of the published release layout: `harness.data.ReleaseSource` and the manifests use it.
    """
    meta = Path(path) / RELEASE_METADATA
    return [{**r, "_line": str(line)} for line, r in _csv_rows(meta, RELEASE_COLUMNS, "a release's metadata.csv")]


def _release_clips(path: Path) -> Iterator[tuple[str, str, np.ndarray, int, ClipAudio]]:
    """(category, clip id, samples, rate, where) of every clip a release's metadata.csv lists."""
    meta = path / RELEASE_METADATA
    for r in read_release_metadata(path):
        where = f"{meta} line {r['_line']}"
        cid = (r.get("benchmark_clip_id") or "").strip()
        category = short_category((r.get("category") or "").strip())
        if not cid or not category:
            raise ManifestError(f"{where}: empty benchmark_clip_id or category")
        try:
            file = safe_join(path, r.get("file_name") or "", where=where, hint="")  # never a file outside the release
        except PathOutsideError as err:
            raise ManifestError(str(err)) from None
        if not file.is_file():
            raise ManifestError(f"{where}: clip {cid}: listed file {file} does not exist")
        samples, sr = decode_pcm16(file, f"{file}: clip {cid}")
        yield category, cid, samples, sr, ClipAudio(file)


def scan_dataset(path: str | Path) -> list[DatasetClip]:
    """Every clip of a build or release folder, hashed, in manifest order; duplicates are an error."""
    root = Path(path)
    clips = _release_clips(root) if dataset_layout(root) == "release" else _parquet_clips(root)
    found: dict[tuple[str, str], DatasetClip] = {}
    for category, cid, samples, sr, audio in clips:
        entry = DatasetClip(ClipHash(category, cid, sr, len(samples), pcm_sha256(samples)), audio)
        if entry.hash.key in found:
            raise ManifestError(f"{root}: clip {category}/{cid} appears twice ({found[entry.hash.key].audio.file} and "
                                f"{audio.file}); a folder must hold each clip once")
        found[entry.hash.key] = entry
    return [found[k] for k in sorted(found, key=sort_key)]


def manifest_text(rows: Iterable[ClipHash]) -> str:
    """The manifest CSV (header + sorted rows, "\\n" line ends): equal audio gives equal bytes."""
    lines = [",".join(MANIFEST_COLUMNS)]
    for h in sorted(rows, key=lambda h: sort_key(h.key)):
        lines.append(f"{h.category},{h.benchmark_clip_id},{h.sample_rate},{h.n_samples},{h.pcm_sha256}")
    return "\n".join(lines) + "\n"


def manifest_sha256(rows: Iterable[ClipHash]) -> str:
    """sha256 of the manifest's bytes: what harness eval records as `manifest_sha256` for DIR/manifest.csv."""
    return hashlib.sha256(manifest_text(rows).encode("utf-8")).hexdigest()


def write_manifest(dataset: str | Path, out: str | Path | None = None) -> tuple[Path, list[ClipHash]]:
    """Hash every clip of a folder and write its manifest (default DIR/manifest.csv) atomically."""
    rows = [c.hash for c in scan_dataset(dataset)]
    target = Path(out) if out is not None else Path(dataset) / MANIFEST_NAME
    atomic_write_text(target, manifest_text(rows))
    return target, rows


def read_manifest(path: str | Path) -> list[ClipHash]:
    """A manifest CSV's rows; a missing column, bad number, bad hash or duplicate is one line naming it."""
    path = Path(path)
    if not path.is_file():
        raise ManifestError(f"manifest not found: {path}" if not path.exists() else f"manifest {path} is not a file")
    rows: dict[tuple[str, str], tuple[ClipHash, int]] = {}
    for line, r in _csv_rows(path, MANIFEST_COLUMNS, "a manifest"):
        h = _manifest_row(r, f"{path} line {line}")
        if h.key in rows:
            raise ManifestError(f"{path} line {line}: clip {h.category}/{h.benchmark_clip_id} is already on "
                                f"line {rows[h.key][1]}")
        rows[h.key] = (h, line)
    return [h for h, _ in rows.values()]


def _manifest_row(r: dict[str, str | None], where: str) -> ClipHash:
    values = {c: (r.get(c) or "").strip() for c in MANIFEST_COLUMNS}
    for c in ("category", "benchmark_clip_id"):
        if not values[c]:
            raise ManifestError(f"{where}: empty {c}")
    numbers = {}
    for c in ("sample_rate", "n_samples"):
        try:
            numbers[c] = int(values[c])
        except ValueError:
            raise ManifestError(f"{where}: {c} {values[c]!r} is not an integer") from None
        if numbers[c] < (1 if c == "sample_rate" else 0):
            raise ManifestError(f"{where}: {c} {values[c]!r} out of range")
    if not _SHA256_RE.fullmatch(values["pcm_sha256"]):
        raise ManifestError(f"{where}: pcm_sha256 {values['pcm_sha256']!r} is not 64 lowercase hex digits")
    return ClipHash(values["category"], values["benchmark_clip_id"], numbers["sample_rate"], numbers["n_samples"],
                    values["pcm_sha256"])


def manifest_copy(manifest: Path, h: ClipHash) -> Path | None:
    """The lossless copy of a clip beside a manifest (audio/<category>/<clip id>.flac|.wav), if there is one."""
    for suffix in AUDIO_SUFFIXES:
        file = manifest.parent / "audio" / h.category / f"{h.benchmark_clip_id}{suffix}"
        if file.is_file():
            return file
    return None


def read_clip_audio(clips: Sequence[DatasetClip]) -> dict[tuple[str, str], np.ndarray]:
    """The int16 samples of some clips of a scanned folder, each Parquet file read once."""
    import pyarrow.parquet as pq

    out: dict[tuple[str, str], np.ndarray] = {}
    by_file: dict[Path, dict[str, DatasetClip]] = defaultdict(dict)
    for c in clips:
        if c.audio.parquet_clip_id is None:
            out[c.hash.key] = decode_pcm16(c.audio.file, f"{c.audio.file}: clip {c.hash.benchmark_clip_id}")[0]
        else:
            by_file[c.audio.file][c.audio.parquet_clip_id] = c
    for file, wanted in by_file.items():
        for batch in pq.ParquetFile(file).iter_batches(batch_size=64, columns=["benchmark_clip_id", "audio"]):
            for row in batch.to_pylist():
                c = wanted.get(row["benchmark_clip_id"])
                if c is not None:
                    out[c.hash.key] = _decode_parquet_audio(file, c.hash.benchmark_clip_id, row["audio"])[0]
    return out


def max_pcm_difference(a: np.ndarray, b: np.ndarray) -> int:
    """Largest |a - b| in PCM16 steps (equal lengths)."""
    return int(np.abs(a.astype(np.int32) - b.astype(np.int32)).max()) if len(a) else 0


def _reference_clips(
    manifest: Path,
) -> tuple[dict[tuple[str, str], ClipHash], dict[tuple[str, str], DatasetClip] | None]:
    """The manifest side's rows by key, and its clips with audio when the manifest is a folder (else None)."""
    if manifest.is_dir():
        folder = {c.hash.key: c for c in scan_dataset(manifest)}
        return {k: c.hash for k, c in folder.items()}, folder
    return {h.key: h for h in read_manifest(manifest)}, None


def _header_differences(ours: dict[tuple[str, str], DatasetClip], theirs: dict[tuple[str, str], ClipHash],
                        report: VerifyReport) -> list[tuple[str, str]]:
    """Record the shared clips whose rate or length differs; return those that differ in PCM hash alone."""
    differing: list[tuple[str, str]] = []
    for key in sorted(set(ours) & set(theirs), key=sort_key):
        a, b = ours[key].hash, theirs[key]
        if a.sample_rate != b.sample_rate:
            report.different.append(ClipDifference(*key, f"sample rate {a.sample_rate} != {b.sample_rate}", None))
        elif a.n_samples != b.n_samples:
            report.different.append(ClipDifference(*key, f"length {a.n_samples} != {b.n_samples} samples", None))
        elif a.pcm_sha256 != b.pcm_sha256:
            differing.append(key)
    return differing


def _reference_audio(manifest: Path, theirs: dict[tuple[str, str], ClipHash],
                     theirs_folder: dict[tuple[str, str], DatasetClip] | None,
                     keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], np.ndarray]:
    """The manifest side's samples of those clips that have audio there (its folder, or lossless copies)."""
    if theirs_folder is not None:
        return read_clip_audio([theirs_folder[k] for k in keys])
    other = {}
    for k in keys:
        copy = manifest_copy(manifest, theirs[k])
        if copy is not None:
            other[k] = decode_pcm16(copy, f"{copy}: clip {k[1]}")[0]
    return other


def verify(dataset: str | Path, manifest: str | Path) -> VerifyReport:
    """Compare a folder with a manifest (a manifest CSV, or another folder) clip by clip.

    A clip is different when its rate, length or PCM hash differs; where audio exists on both sides (the
    manifest's lossless copies, or a folder given as the manifest) its largest sample difference is measured.
    """
    dataset, manifest = Path(dataset), Path(manifest)
    ours = {c.hash.key: c for c in scan_dataset(dataset)}
    theirs, theirs_folder = _reference_clips(manifest)
    report = VerifyReport(str(dataset), str(manifest), len(ours), len(theirs))
    report.missing = sorted(set(theirs) - set(ours), key=sort_key)
    report.extra = sorted(set(ours) - set(theirs), key=sort_key)
    differing = _header_differences(ours, theirs, report)
    # measure the max difference of same-length clips whose hash differs, where the other side has audio
    other = _reference_audio(manifest, theirs, theirs_folder, differing)
    mine = read_clip_audio([ours[k] for k in differing if k in other])
    for k in differing:
        diff = None
        if k in other:
            if len(other[k]) != len(mine[k]):  # a lossless copy that does not match its own manifest row
                raise ManifestError(f"{manifest_copy(manifest, theirs[k])}: {len(other[k])} samples, but the manifest "
                                    f"says {theirs[k].n_samples}")
            diff = max_pcm_difference(mine[k], other[k])
        report.different.append(ClipDifference(*k, "pcm hash differs", diff))
    report.different.sort(key=lambda d: sort_key((d.category, d.benchmark_clip_id)))
    return report


def report_lines(report: VerifyReport, limit: int = 20) -> list[str]:
    """Human-readable lines: the counts, then up to `limit` clips of each kind."""
    head = (f"{report.dataset}: {report.n_dataset} clips; manifest {report.manifest}: {report.n_manifest} clips; "
            f"missing {len(report.missing)}, extra {len(report.extra)}, different {len(report.different)}")
    lines = [head]
    for what, keys in (("missing", report.missing), ("extra", report.extra)):
        lines += [f"  {what}: {c}/{cid}" for c, cid in keys[:limit]]
        if len(keys) > limit:
            lines.append(f"  ... {len(keys) - limit} more {what}")
    lines += [f"  different: {d.category}/{d.benchmark_clip_id}: {d.describe()}" for d in report.different[:limit]]
    if len(report.different) > limit:
        lines.append(f"  ... {len(report.different) - limit} more different")
    if report.identical:
        lines.append("identical: every clip's PCM equals the manifest's")
    else:
        unmeasured = sum(d.max_difference is None for d in report.different)
        worst = report.max_difference
        lines.append("DIFFERENT" + (f"; max PCM difference {worst} step(s) over the measured clips" if worst is not None else "")
                     + (f"; {unmeasured} differing clip(s) without audio on both sides" if unmeasured else ""))
    return lines
