"""The build-settings record kept beside each config of a Parquet build (`DIR/<config>/build_settings.json`).

It says what produced the shards (generator version, source, clips per shard, the clip list of every split),
so a rebuild into the same folder with other settings is refused instead of mixing two builds, and it
says which source files were not 16-bit PCM (read and scaled to the int16 grid) for the data card.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from vocalgrad_dataset.fileio import atomic_write_text
from vocalgrad_dataset.sources import SourceClip

RECORD_NAME = "build_settings.json"
RECORD_SCHEMA = 1
SHARD_RE = re.compile(r"(?P<split>[A-Za-z0-9_]+)-(?P<index>\d{5})-of-(?P<count>\d{5})\.parquet")
FORMATS_KEY = b"vocalgrad_source_formats"  # Parquet key-value metadata: {source_clip_id: subtype}, non-PCM_16 only
SETTING_KEYS = ("generator_version", "source", "clips_per_shard")  # a change in any of these is another build


class BuildMismatchError(ValueError):
    """A build folder already holds a config built with other settings (or files of unknown origin)."""


def clip_list_sha256(clips: Sequence[SourceClip]) -> str:
    """Fingerprint of a split's clip list: ids and speech bounds in order (not paths: a moved corpus is the same)."""
    text = "\n".join(f"{c.source_item_id}\t{c.source_clip_id}\t{c.onset_sec!r}\t{c.offset_sec!r}" for c in clips)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def split_entry(clips: Sequence[SourceClip], shards: int) -> dict[str, Any]:
    """The record of one split: how many clips and shards, and the clip-list fingerprint."""
    return {"clips": len(clips), "shards": shards, "clip_list_sha256": clip_list_sha256(clips)}


def read_record(config_dir: Path) -> dict[str, Any] | None:
    """The record of a config folder, None when there is none; an unreadable one is a BuildMismatchError."""
    path = config_dir / RECORD_NAME
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BuildMismatchError(f"{path}: unreadable build record ({exc}); rebuild with --overwrite") from exc
    if not isinstance(record, dict) or not isinstance(record.get("splits"), dict):
        raise BuildMismatchError(f"{path}: not a VocalGrad build record; rebuild with --overwrite")
    return record


def write_record(config_dir: Path, record: Mapping[str, Any]) -> None:
    """Write a config's record atomically."""
    atomic_write_text(config_dir / RECORD_NAME, json.dumps(dict(record), indent=1, sort_keys=True) + "\n")


def shard_files(config_dir: Path) -> list[Path]:
    """Every Parquet file in a config folder (ours or not)."""
    return sorted(config_dir.glob("*.parquet")) if config_dir.is_dir() else []


def expected_names(splits: Mapping[str, Mapping[str, Any]]) -> set[str]:
    """The shard file names a record's splits account for."""
    return {f"{s}-{i:05d}-of-{e['shards']:05d}.parquet" for s, e in splits.items() for i in range(int(e["shards"]))}


def missing_shards(config_dir: Path, split: str, files: Sequence[Path]) -> list[str]:
    """Names of a split's shards that should be there but are not: the count comes from the build record
    (or, without one, from the "-of-N" of the names present); files not named like our shards count nothing."""
    record = read_record(config_dir)
    entry = (record or {}).get("splits", {}).get(split)
    counts = {int(m["count"]) for f in files if (m := SHARD_RE.fullmatch(f.name)) and m["split"] == split}
    if isinstance(entry, dict) and isinstance(entry.get("shards"), int):
        counts.add(entry["shards"])
    # two numberings (two builds mixed) leave some of each missing: also an incomplete set
    expected = set().union(*(expected_names({split: {"shards": n}}) for n in counts))
    return sorted(expected - {f.name for f in files})


def foreign_category(values: Sequence[Any], config: str) -> str | None:
    """The first `category` value of a shard's rows that is not `config`'s category (a shard of another config
    copied under this config's name), None when every row belongs."""
    from vocalgrad_dataset.tasks import config_spec

    want = config_spec(config).category.name
    for v in values:
        if v is None:
            continue
        try:
            got = config_spec(str(v)).category.name  # accepts our names and the published long ones
        except (KeyError, ValueError):
            return str(v)
        if got != want:
            return str(v)
    return None


def check_shard_config(path: Path, config: str) -> None:
    """BuildMismatchError when an existing shard holds rows of another config (read: its `category` column)."""
    try:
        names = pq.read_schema(path).names
        values = pq.read_table(path, columns=["category"]).column(0).to_pylist() if "category" in names else []
    except (OSError, ValueError) as exc:  # pyarrow's errors derive from these
        raise BuildMismatchError(f"{path}: unreadable shard ({exc}); delete it and rerun to rebuild it") from exc
    other = foreign_category(values, config)
    if other is not None:
        raise BuildMismatchError(f"{path} holds rows of config {other!r}, not {config!r} (a shard copied from "
                                 "another config?); delete it and rerun to rebuild it")


def merge_record(config_dir: Path, wanted: Mapping[str, Any]) -> dict[str, Any]:
    """The record after this build: the existing one plus the wanted splits; BuildMismatchError when they clash.

    Clashes: another generator version, source or clips per shard; a split built from another clip list;
    Parquet files no record accounts for (a build from before records, or someone else's files).
    """
    old = read_record(config_dir)
    files = shard_files(config_dir)
    where = config_dir
    if old is None:
        if files:
            raise BuildMismatchError(
                f"{where} already holds {len(files)} Parquet file(s) but no {RECORD_NAME} (an older or foreign build); "
                "pass --overwrite to replace them, or choose another --out"
            )
        return {**wanted, "complete": False}
    diffs = [f"{k} {old.get(k)!r} -> {wanted[k]!r}" for k in SETTING_KEYS if old.get(k) != wanted[k]]
    for split, entry in wanted["splits"].items():
        prev = old["splits"].get(split)
        if prev is not None and prev.get("clip_list_sha256") != entry["clip_list_sha256"]:
            diffs.append(f"{split} clip list ({prev.get('clips')} clips -> {entry['clips']} clips, other ids or onsets)")
    if diffs:
        raise BuildMismatchError(
            f"{where} was built with other settings ({'; '.join(diffs)}): its shards would mix with this build's. "
            "Pass --overwrite to replace that config, or choose another --out"
        )
    splits = {**old["splits"], **wanted["splits"]}
    foreign = sorted(f.name for f in files if f.name not in expected_names(splits))
    if foreign:
        raise BuildMismatchError(
            f"{where} holds Parquet files its {RECORD_NAME} does not account for ({', '.join(foreign[:3])}"
            f"{', ...' if len(foreign) > 3 else ''}); pass --overwrite to replace that config, or choose another --out"
        )
    return {**old, **wanted, "splits": splits, "complete": False}


def remove_config_outputs(config_dir: Path) -> list[Path]:
    """--overwrite: delete our shard files and record of one config (nothing else in the folder); returns them."""
    gone = [f for f in shard_files(config_dir) if SHARD_RE.fullmatch(f.name)]
    rec = config_dir / RECORD_NAME
    if rec.is_file():
        gone.append(rec)
    for f in gone:
        f.unlink(missing_ok=True)
    return gone


def shard_source_formats(path: Path) -> dict[str, str]:
    """{source clip id: libsndfile subtype} of a shard's clips that were not 16-bit PCM (from its metadata)."""
    # the file's key-value metadata: a shard written in one piece has it from its schema, one written in row
    # groups gets it at the end (export.write_shard), where the stored Arrow schema no longer changes
    meta = pq.read_metadata(path).metadata or {}
    raw = meta.get(FORMATS_KEY)
    return json.loads(raw) if raw else {}


def source_formats(config_dir: Path) -> dict[str, str]:
    """The non-16-bit source clips of every shard of a config (survives resumed builds: read from the shards)."""
    out: dict[str, str] = {}
    for f in shard_files(config_dir):
        if SHARD_RE.fullmatch(f.name):
            out.update(shard_source_formats(f))
    return dict(sorted(out.items()))


def build_section(out_dir: Path) -> str:
    """Markdown for the data card (ends with a blank line; "" without records): each config's build settings and
    any source files that were not 16-bit."""
    lines = []
    non16: dict[str, str] = {}
    for config_dir in sorted(p for p in Path(out_dir).iterdir() if p.is_dir()):
        try:
            rec = read_record(config_dir)
        except BuildMismatchError:
            rec = None
        if rec is None:
            continue
        splits = ", ".join(f"{s} {e['clips']} clips / {e['shards']} shards" for s, e in sorted(rec["splits"].items()))
        state = "" if rec.get("complete") else " (incomplete)"
        lines.append(f"- `{config_dir.name}`: source `{rec['source']}`, generator {rec['generator_version']}, "
                     f"{rec['clips_per_shard']} clips per shard; {splits}{state}")
        non16.update(rec.get("source_formats") or {})
    if not lines:
        return ""
    text = "## Build settings\n\n" + "\n".join(lines) + f"\n\nRecorded in `<config>/{RECORD_NAME}`.\n"
    if non16:
        by_format: dict[str, list[str]] = {}
        for clip, fmt in sorted(non16.items()):
            by_format.setdefault(fmt, []).append(clip)
        listed = "; ".join(f"{fmt}: {len(c)} ({', '.join(c[:5])}{', ...' if len(c) > 5 else ''})"
                           for fmt, c in sorted(by_format.items()))
        text += ("\n**Source audio not 16-bit PCM** (decoded and put on the 16-bit grid before processing: "
                 f"rint(x·32768) for folder files, the published 16 kHz conversion for the alternative sources): {listed}.\n")
    return text + "\n"
