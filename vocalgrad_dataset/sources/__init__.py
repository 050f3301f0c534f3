"""Source corpora for VocalGrad: VCTK (official), the embedded demo clips, a user folder, the beep ablation,
the two alternative corpora of SPEC §4 (LoquaciousSet, Common Voice Spontaneous; test only, 16 kHz) and the
synthetic carriers that claim a direction (claims; the lexical-conflict configs)."""

from __future__ import annotations

import difflib
import importlib
from pathlib import Path

from vocalgrad_dataset.plugins import entry_point_objects
from vocalgrad_dataset.sources.audio_io import check_wav_complete, read_pcm, write_wav_pcm16
from vocalgrad_dataset.sources.base import PCM, Source, SourceClip, SourceError
from vocalgrad_dataset.sources.beep import BeepSource
from vocalgrad_dataset.sources.claims import CarrierClip, ClaimsSource
from vocalgrad_dataset.sources.commonvoice import CommonVoiceSpontaneousSource
from vocalgrad_dataset.sources.demo import DemoSource
from vocalgrad_dataset.sources.folder import FolderSource
from vocalgrad_dataset.sources.loquacious import LoquaciousSource
from vocalgrad_dataset.sources.onset import detect_onset_offset, span_samples
from vocalgrad_dataset.sources.vctk import VCTKSource, download_vctk

SOURCE_NAMES: tuple[str, ...] = ("vctk", "demo", "folder", "beep", "loquacious", "commonvoice-spontaneous", "claims")

__all__ = [
    "PCM",
    "SOURCE_NAMES",
    "BeepSource",
    "CarrierClip",
    "ClaimsSource",
    "CommonVoiceSpontaneousSource",
    "DemoSource",
    "FolderSource",
    "LoquaciousSource",
    "Source",
    "SourceClip",
    "SourceError",
    "check_wav_complete",
    "VCTKSource",
    "detect_onset_offset",
    "download_vctk",
    "get_source",
    "read_pcm",
    "span_samples",
    "write_wav_pcm16",
]


def get_source(name: str, data_dir: Path | str | None = None, *, allow_outside_paths: bool = False) -> Source:
    """Build a source by name: vctk (data_dir = VCTK-Corpus root), demo, claims, folder (data_dir required), beep,
    loquacious (data_dir: a local copy or Parquet files; default: stream the Hub), commonvoice-spontaneous
    (data_dir: the unpacked download), or "package.module:Factory" for a source of one's own.

    allow_outside_paths lets a folder source read files its metadata.csv lists outside its directory."""
    if name == "vctk":
        return VCTKSource(data_dir)
    if name in ("demo", "beep", "claims"):
        if data_dir is not None:
            raise ValueError(f"the {name} source is embedded and takes no data_dir")
        return {"demo": DemoSource, "beep": BeepSource, "claims": ClaimsSource}[name]()
    if name == "loquacious":
        return LoquaciousSource(data_dir)
    if name == "commonvoice-spontaneous":
        return CommonVoiceSpontaneousSource(data_dir)
    if name == "folder":
        if data_dir is None:
            raise SourceError("the folder source needs data_dir: a folder with audio files and metadata.csv")
        return FolderSource(data_dir, allow_outside=allow_outside_paths)
    if ":" in name:
        # "package.module:Factory" plugs in a user's own Source (called with data_dir when one is given)
        module, _, attr = name.partition(":")
        factory = getattr(importlib.import_module(module), attr)
        return factory(data_dir) if data_dir is not None else factory()
    plugins = dict(entry_point_objects("vocalgrad.sources"))  # sources installed packages declare
    if name in plugins:
        factory = plugins[name]
        return factory(data_dir) if data_dir is not None else factory()
    known = [*SOURCE_NAMES, *plugins]
    close = difflib.get_close_matches(name, known, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise ValueError(f"unknown source {name!r} (valid: {', '.join(known)}){hint}")
