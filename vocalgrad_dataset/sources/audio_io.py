"""Decode source audio to mono int16 with soundfile (never FFmpeg) and write PCM16 WAV atomically."""

from __future__ import annotations

import io
import os
import struct
import warnings
from pathlib import Path

import numpy as np
import soundfile as sf

from vocalgrad_dataset.fileio import atomic_path
from vocalgrad_dataset.sources.base import PCM, SourceError


def to_int16_grid(data: np.ndarray) -> np.ndarray:
    """Float samples in [-1, 1) (any channel count) to the int16 grid: rint(x * 32768), clipped.

    x * 32768 inverts the generator's own int16 -> float32 / 32768 read (SPEC §2), so a PCM16 file and the
    same samples stored as float or 24-bit land on the same integers; rint (half to even) is the nearest one.
    """
    return np.clip(np.rint(data * 32768.0), -32768, 32767).astype(np.int16)


_UNKNOWN_SIZES = (0, 0xFFFFFFFF)  # streamed WAVs that never went back to fill in the data size


def wav_shortfall(file: str | os.PathLike[str] | io.BytesIO) -> tuple[int, int] | None:
    """(frames the header declares, frames present) of a WAV whose data chunk was cut short, else None.

    libsndfile reads such a file as the shorter clip without a word, so a copy cut off mid-transfer would be
    scored as a different stimulus; not a WAV (FLAC, ...) or a size left unknown by a streaming writer: None.
    """
    if isinstance(file, io.BytesIO):
        head, size = file.getbuffer()[: 1 << 20].tobytes(), file.getbuffer().nbytes
    else:
        with open(file, "rb") as fh:
            head, size = fh.read(1 << 20), os.fstat(fh.fileno()).st_size
    if head[:4] != b"RIFF" or head[8:12] != b"WAVE":
        return None
    pos, align = 12, 1
    while pos + 8 <= len(head):
        chunk, length = head[pos : pos + 4], struct.unpack("<I", head[pos + 4 : pos + 8])[0]
        if chunk == b"fmt " and pos + 22 <= len(head):
            align = max(1, struct.unpack("<H", head[pos + 20 : pos + 22])[0])
        if chunk == b"data":
            present = size - pos - 8
            if length in _UNKNOWN_SIZES or present >= length:
                return None
            return length // align, max(0, present) // align
        pos += 8 + length + (length & 1)
    return None


def check_wav_complete(file: str | os.PathLike[str] | io.BytesIO, where: str) -> None:
    """SourceError naming `where` when `file` is a WAV cut short (see wav_shortfall)."""
    cut = wav_shortfall(file)
    if cut is not None:
        raise SourceError(f"{where}: truncated WAV: its header says {cut[0]:,} frames but only {cut[1]:,} are "
                          "present (a copy cut short?); copy it again")


def _decode(path: Path, clip_name: str, expected_rate: int | None) -> tuple[np.ndarray, int, str]:
    """(samples as frames x channels, rate, subtype): int16 for 16-bit PCM, else float64 in [-1, 1)."""
    try:
        with sf.SoundFile(str(path)) as f:
            rate, subtype = int(f.samplerate), str(f.subtype)
            if expected_rate is not None and rate != expected_rate:
                # Resampling would silently change the stimuli; the caller must fix the source instead.
                raise SourceError(
                    f"clip {clip_name}: {path} is {rate} Hz but this source requires {expected_rate} Hz"
                )
            # libsndfile reads float files as int16 *unscaled* (every sample -> -1, 0 or 1): never do that.
            data = f.read(dtype="int16" if subtype == "PCM_16" else "float64", always_2d=True)
    except SourceError:
        raise
    except (sf.LibsndfileError, RuntimeError, OSError) as exc:
        raise SourceError(f"clip {clip_name}: cannot decode audio file {path}: {exc}") from exc
    return data, rate, subtype


def _check_samples(data: np.ndarray, path: Path, clip_name: str, subtype: str) -> None:
    """Refuse an empty or non-finite clip; warn (at read_pcm's caller) about clipping and a channel mix."""
    if data.shape[0] == 0:
        raise SourceError(f"clip {clip_name}: audio file {path} holds no samples")
    if data.dtype != np.int16:
        if not np.isfinite(data).all():
            raise SourceError(f"clip {clip_name}: audio file {path} ({subtype}) holds NaN or infinite samples")
        peak = float(np.abs(data).max())
        if peak > 1.0:
            warnings.warn(f"clip {clip_name}: {path} ({subtype}) peaks at {peak:.3g} > 1.0; clipped to the int16 range",
                          stacklevel=3)
    if data.shape[1] > 1:
        warnings.warn(
            f"clip {clip_name}: {path} has {data.shape[1]} channels; mixed to mono "
            "(mean in float64, rounded half-to-even to int16)",
            stacklevel=3,
        )


def _mono_int16(data: np.ndarray) -> np.ndarray:
    """Frames x channels to mono int16: PCM16 mono as is, otherwise the channel mean on the int16 grid."""
    if data.dtype == np.int16:
        if data.shape[1] == 1:
            return np.ascontiguousarray(data[:, 0])
        # The mean of int16 values always lies in the int16 range, so rounding cannot overflow.
        return np.rint(data.astype(np.float64).mean(axis=1)).astype(np.int16)
    return to_int16_grid(data.mean(axis=1))


def read_pcm(path: str | os.PathLike[str], *, clip_name: str, expected_rate: int | None = None) -> PCM:
    """Read a WAV/FLAC file as mono int16; errors are SourceError naming the clip and the file.

    16-bit PCM is read sample for sample (bit-exact). Every other encoding (8-, 24-, 32-bit PCM, 32/64-bit
    float, ...) is decoded by libsndfile to float64 in [-1, 1) and put on the int16 grid by `to_int16_grid`;
    `PCM.source_format` then names the file's subtype so builds can report it.
    """
    path = Path(path)
    if not path.is_file():
        raise SourceError(f"clip {clip_name}: audio file not found: {path}")
    check_wav_complete(path, f"clip {clip_name}: {path}")
    data, rate, subtype = _decode(path, clip_name, expected_rate)
    _check_samples(data, path, clip_name, subtype)
    return PCM(_mono_int16(data), rate, subtype)


def write_wav_pcm16(path: str | os.PathLike[str], samples_int16: np.ndarray, sr: int) -> None:
    """Write mono int16 samples as a PCM16 WAV via a temp file in the same folder + os.replace."""
    samples = np.asarray(samples_int16)
    if samples.dtype != np.int16:
        # Refuse floats: an implicit scale/round here would hide a numerics decision from the caller.
        raise TypeError(f"write_wav_pcm16 expects int16 samples, got {samples.dtype}")
    with atomic_path(path) as tmp:
        sf.write(tmp, samples, int(sr), subtype="PCM_16", format="WAV")
