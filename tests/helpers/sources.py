"""Helpers that build small source-corpus trees on disk (VCTK-shaped, folder-shaped) from real demo speech."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import soundfile as sf

from vocalgrad_dataset.sources.audio_io import read_pcm, write_wav_pcm16
from vocalgrad_dataset.sources.demo import DEMO_DIR
from vocalgrad_dataset.sources.vctk import SELECTION_DIR, SPLIT_FILES

SPEAKER_FILES = {"test": "test_speakers_50.csv", "train": "train_speakers_57.csv"}


def demo_speech() -> list[np.ndarray]:
    """The 8 vendored 48 kHz demo clips as int16 arrays, in manifest order."""
    with open(DEMO_DIR / "manifest.tsv", newline="", encoding="utf-8") as f:
        files = [r["file"] for r in csv.DictReader(f, delimiter="\t")]
    return [read_pcm(DEMO_DIR / name, clip_name=name, expected_rate=48000).samples for name in files]


def frozen_rows(split: str, n: int) -> list[dict[str, str]]:
    """The first n rows of the frozen selection CSV of a split."""
    with open(SELECTION_DIR / SPLIT_FILES[split][0], newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))[:n]


def fit_length(x: np.ndarray, n: int) -> np.ndarray:
    """Trim or zero-pad x to exactly n samples."""
    return x[:n] if len(x) >= n else np.concatenate([x, np.zeros(n - len(x), dtype=x.dtype)])


def build_vctk_tree(
    root: Path, n_clips: int = 4, split: str = "test", layout: str = "0.80"
) -> list[tuple[str, str]]:
    """Make a VCTK-shaped tree for the first n frozen clips of a split; returns (item id, clip id) pairs.

    Each file holds real speech (a demo clip, trimmed/padded to the frozen duration) at 48 kHz.
    layout "0.80" writes wav48/pXXX/pXXX_NNN.wav; "0.92" writes wav48_silence_trimmed/.../*_mic1.flac.
    """
    speech = demo_speech()
    id_col = SPLIT_FILES[split][1]
    rows = frozen_rows(split, n_clips)
    out: list[tuple[str, str]] = []
    for i, r in enumerate(rows):
        spk, clip = r["speaker_id"], r["clip_id"]
        samples = fit_length(speech[i % len(speech)], int(round(float(r["audio_duration_sec"]) * 48000)))
        if layout == "0.80":
            write_wav_pcm16(root / "wav48" / spk / f"{clip}.wav", samples, 48000)
        else:
            path = root / "wav48_silence_trimmed" / spk / f"{clip}_mic1.flac"
            path.parent.mkdir(parents=True, exist_ok=True)
            sf.write(str(path), samples, 48000, subtype="PCM_16", format="FLAC")
        txt = root / "txt" / spk / f"{clip}.txt"
        txt.parent.mkdir(parents=True, exist_ok=True)
        txt.write_text(r["text"] + "\n", encoding="utf-8")
        out.append((r[id_col], clip))
    with open(SELECTION_DIR / SPEAKER_FILES[split], newline="", encoding="utf-8") as f:
        speakers = list(csv.DictReader(f))
    lines = ["ID  AGE  GENDER  ACCENTS  REGION"]
    lines += [
        f"{s['speaker_id'][1:]}  {s['age']}  {s['gender']}  {s['accent_raw']}  {s['region']}"
        for s in speakers
    ]
    (root / "speaker-info.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


def vctk_wav_path(root: Path, clip_id: str) -> Path:
    """Where the 0.80 tree keeps a clip's WAV."""
    return root / "wav48" / clip_id.split("_")[0] / f"{clip_id}.wav"


def build_folder(
    root: Path, rates: tuple[int, ...] = (16000, 48000), with_split: bool = True
) -> list[dict[str, str]]:
    """A folder source (one demo clip per rate, WAV/FLAC alternating, plus metadata.csv); returns the CSV rows.

    Lower rates keep every k-th sample of a 48 kHz clip: aliasing does not matter to loader tests.
    """
    speech = demo_speech()
    rows: list[dict[str, str]] = []
    for i, sr in enumerate(rates):
        x = speech[i][:: 48000 // sr] if 48000 % sr == 0 else speech[i]
        name = f"utt{i:02d}.{'flac' if i % 2 else 'wav'}"
        sf.write(str(root / name), x, sr, subtype="PCM_16")
        row = {"file_name": name, "speaker_id": f"s{i % 2}", "transcript": f"utterance {i}"}
        if with_split:
            row["split"] = "test" if i % 2 == 0 else "train"
        rows.append(row)
    with open(root / "metadata.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return rows
