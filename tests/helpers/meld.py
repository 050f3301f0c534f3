"""A MELD-*shaped* fixture built from our vendored real speech (the demo clips): the official MELD CSV columns and
file naming with seven emotion labels. It is NOT MELD: the labels are assigned to read speech, not acted
emotions; only the layout is MELD's, so the loader and the classify kind can be tested offline."""

from __future__ import annotations

import csv
from pathlib import Path

from harness.meld import MELD_EMOTIONS
from tests.helpers.sources import demo_speech, fit_length
from vocalgrad_dataset.sources.audio_io import write_wav_pcm16

# items per label: imbalanced (neutral dominates, as in MELD) so prevalence-dependent expectations differ
COUNTS = {"anger": 4, "disgust": 3, "fear": 3, "joy": 5, "neutral": 12, "sadness": 4, "surprise": 5}
MELD_HEADER = ["Sr No.", "Utterance", "Speaker", "Emotion", "Sentiment", "Dialogue_ID", "Utterance_ID", "Season",
               "Episode", "StartTime", "EndTime"]
RATE = 16000


def build_meld_shaped(root: Path, counts: dict[str, int] | None = None, *, suffix: str = ".wav") -> Path:
    """root/MELD-shaped: test_sent_emo.csv + output_repeated_splits_test/dia{D}_utt{U}.wav (1 s of demo speech
    at 16 kHz each), and items.csv (columns wav, emotion, utt) for the `--columns` path. Returns the folder."""
    counts = counts or COUNTS
    folder = root / "MELD-shaped"
    media = folder / "output_repeated_splits_test"
    media.mkdir(parents=True, exist_ok=True)
    speech = [x[::3] for x in demo_speech()]  # 48 kHz -> 16 kHz by decimation (fine for a layout fixture)
    rows, items = [], []
    n = 0
    for label in MELD_EMOTIONS:
        for _ in range(counts.get(label, 0)):
            dia, utt = n // 4, n % 4
            stem = f"dia{dia}_utt{utt}"
            if suffix == ".wav":
                write_wav_pcm16(media / f"{stem}.wav", fit_length(speech[n % len(speech)], RATE), RATE)
            rows.append([n + 1, f"fixture clip {n} (not MELD)", "fixture", label.capitalize(), "neutral", dia, utt,
                         1, 1, "00:00:00,000", "00:00:01,000"])
            items.append([f"output_repeated_splits_test/{stem}{suffix}", label, stem])
            n += 1
    with open(folder / "test_sent_emo.csv", "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(MELD_HEADER)
        w.writerows(rows)
    with open(folder / "items.csv", "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["wav", "emotion", "utt"])
        w.writerows(items)
    return folder
