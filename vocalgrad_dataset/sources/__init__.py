"""Source corpora for VocalGrad: VCTK (official), the embedded demo clips, or a user folder."""

from __future__ import annotations

import difflib
import importlib
from pathlib import Path

from .audio_io import read_pcm, write_wav_pcm16
from .base import PCM, Source, SourceClip, SourceError
from .demo import DemoSource
from .folder import FolderSource
from .onset import detect_onset_offset, span_samples
from .vctk import VCTKSource, download_vctk

SOURCE_NAMES: tuple[str, ...] = ("vctk", "demo", "folder")

__all__ = [
    "PCM",
    "SOURCE_NAMES",
    "DemoSource",
    "FolderSource",
    "Source",
    "SourceClip",
    "SourceError",
    "VCTKSource",
    "detect_onset_offset",
    "download_vctk",
    "get_source",
    "read_pcm",
    "span_samples",
    "write_wav_pcm16",
]


def get_source(name: str, data_dir: Path | str | None = None) -> Source:
    """Build a source by name: vctk (data_dir = VCTK-Corpus root), demo, folder (data_dir required),
    or "package.module:Factory" for a source of one's own."""
    if name == "vctk":
        return VCTKSource(data_dir)
    if name == "demo":
        if data_dir is not None:
            raise ValueError("the demo source is embedded and takes no data_dir")
        return DemoSource()
    if name == "folder":
        if data_dir is None:
            raise SourceError("the folder source needs data_dir: a folder with audio files and metadata.csv")
        return FolderSource(data_dir)
    if ":" in name:
        # "package.module:Factory" plugs in a user's own Source (called with data_dir when one is given)
        module, _, attr = name.partition(":")
        factory = getattr(importlib.import_module(module), attr)
        return factory(data_dir) if data_dir is not None else factory()
    close = difflib.get_close_matches(name, SOURCE_NAMES, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise ValueError(f"unknown source {name!r} (valid: {', '.join(SOURCE_NAMES)}){hint}")
