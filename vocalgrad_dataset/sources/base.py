"""What every source corpus provides: a list of clips per split and a way to read one as PCM."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np


class SourceError(ValueError):
    """A source clip that cannot be used; the message always names the clip or file."""


@dataclass(frozen=True)
class SourceClip:
    """One source recording and where its speech starts and ends."""

    source_item_id: str  # e.g. "p226_01" (selection slot), used in the clip id
    source_clip_id: str  # e.g. "p226_106" (corpus utterance), used in the clip id
    speaker_id: str
    text: str
    path: str  # file to read (absolute once resolved)
    onset_sec: float | None = None  # frozen value; None -> detect (SPEC §1)
    offset_sec: float | None = None


@dataclass(frozen=True)
class PCM:
    """A decoded mono clip: int16 samples (the published numerics start from these) and the rate."""

    samples: np.ndarray  # int16, mono
    sample_rate: int
    source_format: str = "PCM_16"  # the file's libsndfile subtype; anything else was scaled to the int16 grid

    @property
    def float32(self) -> np.ndarray:
        """PCM16 as float32 / 32768, the scale every category but volume works on."""
        return self.samples.astype(np.float32) / np.float32(32768.0)


class Source(Protocol):
    """A corpus VocalGrad can be generated from."""

    name: str

    def clips(self, split: str) -> list[SourceClip]:
        """The selected source clips of a split, in canonical order."""
        ...

    def read(self, clip: SourceClip) -> PCM:
        """Decode one clip to mono int16 at its own rate (raises SourceError naming the clip)."""
        ...

