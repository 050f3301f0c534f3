"""Vendor the 8 real demo clips (16 kHz) into vocalgrad_dataset/data/demo/ at 48 kHz PCM16 (deterministic)."""

from __future__ import annotations

import argparse
import csv
import shutil
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from vocalgrad_dataset.sources.audio_io import write_wav_pcm16  # noqa: E402

DEFAULT_SRC = REPO.parent / "shared" / "assets" / "speech"
DEFAULT_DST = REPO / "vocalgrad_dataset" / "data" / "demo"
TARGET_SR = 48000
TEST_SPEAKERS = ("arctic_male", "arctic_female", "an4_speaker")  # train = librivox_m (speaker-disjoint)
LICENCE_FILES = ("COPYING.cmu_arctic", "COPYRIGHT.pocketsphinx-testdata")
COLUMNS = ("file", "source_item_id", "source_clip_id", "speaker_id", "split", "text", "origin", "licence")
README = """# Demo source clips (not VCTK; no official numbers)

Eight short real read-English recordings, vendored by `scripts/vendor_demo.py` from
CMU ARCTIC (arctic_a0007, arctic_a0009), a LibriVox reading and CMU AN4 (both via the Debian package
pocketsphinx-testdata). Licences: `COPYING.cmu_arctic`, `COPYRIGHT.pocketsphinx-testdata`; per-file
origin and licence are in `manifest.tsv`.

The originals are 16 kHz; they were resampled to 48 kHz with soxr (quality VHQ, float64, rounded
half-to-even to PCM16). **Nothing above 8 kHz exists in these clips.** Categories that act on high
frequencies (distortion, clarity) therefore behave differently than on VCTK. This source is for demos and
tests only and produces no official VocalGrad numbers.

Splits are speaker-disjoint: train = librivox_m (5 clips); test = arctic_male, arctic_female,
an4_speaker (1 clip each). Onsets/offsets are not frozen: they are detected (SPEC §1) when used.
"""


def resample_pcm16(samples: np.ndarray, sr: int) -> np.ndarray:
    """16-bit PCM at sr -> 16-bit PCM at 48 kHz (soxr VHQ in float64, no dither, half-to-even rounding)."""
    x = samples.astype(np.float64) / 32768.0
    # Float in/out keeps soxr's int16 output dither (random) out of the vendored bytes.
    y = soxr.resample(x, sr, TARGET_SR, quality="VHQ")
    return np.clip(np.rint(y * 32768.0), -32768, 32767).astype(np.int16)


def vendor(src: Path, dst: Path) -> list[dict[str, str]]:
    """Write the 48 kHz clips, licence files, manifest and README into dst; returns the manifest rows."""
    with open(src / "manifest.tsv", newline="", encoding="utf-8") as f:
        rows_in = sorted(csv.DictReader(f, delimiter="\t"), key=lambda r: r["file"])
    dst.mkdir(parents=True, exist_ok=True)
    counter: dict[str, int] = defaultdict(int)
    rows: list[dict[str, str]] = []
    for r in rows_in:
        data, sr = sf.read(str(src / r["file"]), dtype="int16", always_2d=True)
        if data.shape[1] != 1:
            raise ValueError(f"{r['file']}: expected mono, got {data.shape[1]} channels")
        write_wav_pcm16(dst / r["file"], resample_pcm16(data[:, 0], sr), TARGET_SR)
        spk = r["speaker"]
        counter[spk] += 1
        licence = r["licence"]
        if "pocketsphinx-testdata" in r["origin"] and "COPYRIGHT" not in licence:
            # Every row names the licence file that travels with it, not just the first one of a kind.
            licence = "public domain recording; package BSD-2, see COPYRIGHT.pocketsphinx-testdata"
        rows.append(
            {
                "file": r["file"],
                "source_item_id": f"{spk}_{counter[spk]:02d}",
                "source_clip_id": Path(r["file"]).stem,
                "speaker_id": spk,
                "split": "test" if spk in TEST_SPEAKERS else "train",
                "text": r["transcript"],
                "origin": r["origin"],
                "licence": licence,
            }
        )
    rows.sort(key=lambda r: (r["split"] != "test", r["source_item_id"]))
    with open(dst / "manifest.tsv", "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, delimiter="\t", lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    for name in LICENCE_FILES:
        shutil.copyfile(src / name, dst / name)
    (dst / "README.md").write_text(README, encoding="utf-8")
    return rows


def main(argv: list[str] | None = None) -> int:
    """CLI entry point."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument(
        "--src", type=Path, default=DEFAULT_SRC, help="folder with the 16 kHz clips + manifest.tsv"
    )
    ap.add_argument("--dst", type=Path, default=DEFAULT_DST)
    args = ap.parse_args(argv)
    for r in vendor(args.src, args.dst):
        print(f"{r['split']:5s} {r['source_item_id']:16s} {r['file']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
