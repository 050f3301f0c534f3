"""Decode source audio to mono int16 with soundfile (never FFmpeg) and write PCM16 WAV atomically."""

from __future__ import annotations

import os
import tempfile
import warnings
from pathlib import Path

import numpy as np
import soundfile as sf

from .base import PCM, SourceError


def read_pcm(path: str | os.PathLike[str], *, clip_name: str, expected_rate: int | None = None) -> PCM:
    """Read a WAV/FLAC file as mono int16; errors are SourceError naming the clip and the file."""
    path = Path(path)
    if not path.is_file():
        raise SourceError(f"clip {clip_name}: audio file not found: {path}")
    try:
        with sf.SoundFile(str(path)) as f:
            rate = int(f.samplerate)
            if expected_rate is not None and rate != expected_rate:
                # Resampling would silently change the stimuli; the caller must fix the source instead.
                raise SourceError(
                    f"clip {clip_name}: {path} is {rate} Hz but this source requires {expected_rate} Hz"
                )
            data = f.read(dtype="int16", always_2d=True)
    except SourceError:
        raise
    except (sf.LibsndfileError, RuntimeError, OSError) as exc:
        raise SourceError(f"clip {clip_name}: cannot decode audio file {path}: {exc}") from exc
    if data.shape[0] == 0:
        raise SourceError(f"clip {clip_name}: audio file {path} holds no samples")
    if data.shape[1] == 1:
        return PCM(np.ascontiguousarray(data[:, 0]), rate)
    warnings.warn(
        f"clip {clip_name}: {path} has {data.shape[1]} channels; mixed to mono "
        "(mean in float64, rounded half-to-even to int16)",
        stacklevel=2,
    )
    # The mean of int16 values always lies in the int16 range, so rounding cannot overflow.
    mono = np.rint(data.astype(np.float64).mean(axis=1)).astype(np.int16)
    return PCM(mono, rate)


def write_wav_pcm16(path: str | os.PathLike[str], samples_int16: np.ndarray, sr: int) -> None:
    """Write mono int16 samples as a PCM16 WAV via a temp file in the same folder + os.replace."""
    samples = np.asarray(samples_int16)
    if samples.dtype != np.int16:
        # Refuse floats: an implicit scale/round here would hide a numerics decision from the caller.
        raise TypeError(f"write_wav_pcm16 expects int16 samples, got {samples.dtype}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        sf.write(tmp, samples, int(sr), subtype="PCM_16", format="WAV")
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; outputs are meant to be shared/committed
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
