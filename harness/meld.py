"""MELD in its official layout as classification items (the paper's Table 22, appendix C.13).

The official release (MELD.Raw) has `train_sent_emo.csv`, `dev_sent_emo.csv`, `test_sent_emo.csv` (columns
`Sr No.`, `Utterance`, `Speaker`, `Emotion`, `Sentiment`, `Dialogue_ID`, `Utterance_ID`, ...) and one video per
utterance, `dia{Dialogue_ID}_utt{Utterance_ID}.mp4` (test: `output_repeated_splits_test/`). Audio is looked up
anywhere under the folder by that stem: an extracted `.wav` / `.flac` / `.ogg` first (decoded by our reader),
else the `.mp4`, whose audio FFmpeg extracts (mono, 16 kHz PCM16) when it is on PATH; without FFmpeg a video
is a one-line error saying how to extract it. Labels are the seven emotions, lower-cased.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from harness.data import AudioDict, decode_audio

MELD_COLUMNS = ("Emotion", "Dialogue_ID", "Utterance_ID")
MELD_EMOTIONS = ("anger", "disgust", "fear", "joy", "neutral", "sadness", "surprise")
MELD_TASK = "meld"
AUDIO_SUFFIXES = (".wav", ".flac", ".ogg")
VIDEO_SUFFIXES = (".mp4", ".mkv", ".avi")
EXTRACT_RATE = 16000


def meld_csv(root: Path, split: str) -> Path | None:
    """The split's `<split>_sent_emo.csv` under root (searched recursively), or None."""
    if not root.is_dir():
        return None
    hits = sorted(root.rglob(f"{split}_sent_emo.csv"))
    return hits[0] if hits else None


def is_meld_layout(root: Path) -> bool:
    """True when root is a folder holding a MELD `*_sent_emo.csv`."""
    return root.is_dir() and any(root.rglob("*_sent_emo.csv"))


def meld_items(root: Path, split: str) -> list[tuple[str, int, dict[str, Any]]]:
    """(where, row number, row) per utterance of the split's CSV, each with `id` (dia{D}_utt{U}), `task` (meld)
    and `audio` (the file's path relative to root); a missing column or audio file names the CSV row."""
    import csv

    file = meld_csv(root, split)
    if file is None:
        raise ValueError(f"{root}: no {split}_sent_emo.csv (the MELD layout has train_/dev_/test_sent_emo.csv)")
    by_stem: dict[str, Path] = {}
    for path in sorted(root.rglob("dia*_utt*.*")):
        if path.suffix.lower() in AUDIO_SUFFIXES + VIDEO_SUFFIXES:
            # an extracted audio file wins over the video of the same utterance
            old = by_stem.get(path.stem)
            if old is None or (old.suffix.lower() in VIDEO_SUFFIXES and path.suffix.lower() in AUDIO_SUFFIXES):
                by_stem[path.stem] = path
    out: list[tuple[str, int, dict[str, Any]]] = []
    with open(file, newline="", encoding="utf-8-sig") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in MELD_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"{file}: no column {', '.join(missing)} (a MELD CSV has {', '.join(MELD_COLUMNS)})")
        for i, row in enumerate(reader):
            stem = f"dia{row['Dialogue_ID'].strip()}_utt{row['Utterance_ID'].strip()}"
            audio = by_stem.get(stem)
            if audio is None:
                raise ValueError(f"{file}: row {i + 2}: no audio {stem}.wav (or .mp4) under {root}")
            out.append((str(file), i, {**row, "id": stem, "task": MELD_TASK, "audio": str(audio.relative_to(root))}))
    return out


def video_audio(path: Path, where: str, ffmpeg: str | None = None) -> AudioDict:
    """The audio track of a video, extracted by FFmpeg (argument list, no shell) to mono 16 kHz PCM16 and read
    by our reader; without FFmpeg a one-line error with the command that extracts it."""
    ffmpeg = ffmpeg or shutil.which("ffmpeg")
    if ffmpeg is None:
        raise ValueError(f"{where}: {path.name} is a video; install FFmpeg, or extract its audio first: "
                         f"ffmpeg -i {path} -vn -ac 1 -ar {EXTRACT_RATE} {path.with_suffix('.wav')}")
    with tempfile.TemporaryDirectory(prefix="vocalgrad-meld-") as tmp:
        wav = Path(tmp) / f"{path.stem}.wav"
        done = subprocess.run([ffmpeg, "-nostdin", "-loglevel", "error", "-i", str(path), "-vn", "-ac", "1",
                               "-ar", str(EXTRACT_RATE), "-c:a", "pcm_s16le", str(wav)],
                              capture_output=True, text=True, check=False)
        if done.returncode != 0 or not wav.is_file():
            reason = " ".join((done.stderr or "no output").split())[:200]
            raise ValueError(f"{where}: FFmpeg could not extract the audio of {path} ({reason})")
        return decode_audio(wav, where)
