"""What the two alternative sources (SPEC §4: LoquaciousSet, Common Voice Spontaneous) share: their frozen
lists and the decode path to 16 kHz mono PCM16 the published materialisation used."""

from __future__ import annotations

import csv
import io
import warnings
from pathlib import Path
from typing import IO

import numpy as np
import soundfile as sf

from vocalgrad_dataset.sources.base import PCM, SourceClip, SourceError

ALTERNATE_DIR = Path(__file__).resolve().parent.parent / "data" / "selection" / "alternate_sources"
SAMPLE_RATE = 16000
SPLITS: tuple[str, ...] = ("test",)


def read_selection(path: Path) -> list[dict[str, str]]:
    """Rows of a frozen alternative-source list (CSV, UTF-8)."""
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def frozen_clip(row: dict[str, str], path: str) -> SourceClip:
    """A SourceClip with the list's recorded onset/offset.

    Rows whose onset could not be detected carry `onset_fallback = full_clip` and the recorded bounds
    0 .. clip duration, i.e. the whole clip is the span; they are used unchanged.
    """
    return SourceClip(
        source_item_id=row["test_item_id"],
        source_clip_id=row["clip_id"],
        speaker_id=row.get("speaker_id") or "",
        text=row.get("text") or row.get("prompt") or "",
        path=path,
        onset_sec=float(row["onset_sec"]),
        offset_sec=float(row["offset_sec"]),
    )


def check_split(name: str, split: str) -> None:
    """Alternative sources are test only."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r} for {name} (alternative sources are test only); valid: test")


def decode_16k(file: str | Path | IO[bytes], *, clip_name: str) -> PCM:
    """Decode any soundfile-readable audio (WAV, FLAC, MP3 with libsndfile >= 1.1) to 16 kHz mono PCM16.

    16-bit files already at 16 kHz are taken sample for sample. Anything else follows the published
    materialisation, `librosa.load(path, sr=16000, mono=True)` then `soundfile.write(..., "PCM_16")`:
    float32 read, channel mean, soxr_hq resampling, and libsndfile's own float-to-PCM16 conversion.
    """
    import librosa

    where = file if isinstance(file, str | Path) else "<bytes>"
    try:
        with sf.SoundFile(file) as f:
            rate, subtype, channels = int(f.samplerate), f.subtype, f.channels
            if rate == SAMPLE_RATE and subtype == "PCM_16" and channels == 1:
                return PCM(np.ascontiguousarray(f.read(dtype="int16")), SAMPLE_RATE)
            data = f.read(dtype="float32", always_2d=True)
    except (sf.LibsndfileError, RuntimeError, OSError) as exc:
        hint = ""
        if str(where).lower().endswith(".mp3"):
            hint = (f" (MP3 needs libsndfile >= 1.1; this one is {sf.__libsndfile_version__}: upgrade soundfile, or "
                    "convert with `ffmpeg -i X.mp3 -ac 1 -ar 16000 X.wav` and point the source at the WAV files)")
        raise SourceError(f"clip {clip_name}: cannot decode audio {where}: {exc}{hint}") from exc
    if data.shape[0] == 0:
        raise SourceError(f"clip {clip_name}: audio {where} holds no samples")
    if channels > 1:
        warnings.warn(f"clip {clip_name}: {where} has {channels} channels; mixed to mono", stacklevel=2)
    y = librosa.to_mono(data.T)
    if rate != SAMPLE_RATE:
        y = librosa.resample(y, orig_sr=rate, target_sr=SAMPLE_RATE, res_type="soxr_hq")
    # libsndfile's float -> PCM16 conversion, byte for byte what the published WAV files hold
    buf = io.BytesIO()
    sf.write(buf, y, SAMPLE_RATE, subtype="PCM_16", format="WAV")
    buf.seek(0)
    return PCM(sf.read(buf, dtype="int16")[0], SAMPLE_RATE, subtype)  # subtype: the card lists non-16-bit sources
