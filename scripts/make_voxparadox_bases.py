"""Regenerate the vendored VoxParadox-lite base utterances (vocalgrad_dataset/data/voxparadox/).

Not part of any build: `vocalgrad-dataset build --config voxparadox-<task>` reads the vendored WAVs and
never calls a synthesiser. This script synthesises every (voice, script) pair with espeak-ng (voice variant
and pitch), trims leading/trailing silence, resamples to 16 kHz PCM16 and writes bases.tsv with the
sha256 of each file. `--verify` adds the Whisper tiny.en transcript of each file (harness whisper-tiny-en)
and whether it equals the script after normalisation.

    .venv/bin/python scripts/make_voxparadox_bases.py [--verify]
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from vocalgrad_dataset.voxparadox import BASES_DIR, BASES_TSV, SCRIPTS, SR, VOICES, normalize_text  # noqa: E402

RATE_WPM = 185


def synthesise(variant: str, pitch: int, text: str) -> np.ndarray:
    """espeak-ng -> float32 mono at 16 kHz, silence trimmed (argument list, no shell)."""
    with tempfile.TemporaryDirectory() as tmp:
        wav = Path(tmp) / "s.wav"
        subprocess.run([shutil.which("espeak-ng") or "espeak-ng", "-v", f"en-us+{variant}", "-p", str(pitch),
                        "-s", str(RATE_WPM), "-w", str(wav), text], check=True, capture_output=True)
        x, sr = sf.read(wav, dtype="float32")
    y = soxr.resample(x, sr, SR, quality="soxr_hq").astype(np.float32)
    frame = SR // 100
    energy = np.array([np.sqrt(np.mean(y[i:i + frame] ** 2)) for i in range(0, len(y) - frame, frame)])
    voiced = np.nonzero(energy > 0.02 * energy.max())[0]
    start, end = max(0, (voiced[0] - 5) * frame), min(len(y), (voiced[-1] + 6) * frame)
    y = y[start:end]
    return (0.5 * y / np.max(np.abs(y))).astype(np.float32)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--verify", action="store_true", help="add Whisper tiny.en transcripts")
    args = ap.parse_args()
    BASES_DIR.mkdir(parents=True, exist_ok=True)
    rows = []
    for voice in VOICES:
        for script in SCRIPTS:
            if script.split != voice.split or (script.task == "gender" and script.label == voice.sex):
                continue  # a voice says its split's scripts; a gender claim is always the other sex
            bid = f"{voice.id}__{script.id}"
            y = synthesise(voice.variant, voice.pitch, script.text)
            buf = io.BytesIO()
            sf.write(buf, y, SR, subtype="PCM_16", format="WAV")
            data = buf.getvalue()
            (BASES_DIR / f"{bid}.wav").write_bytes(data)
            rows.append({"id": bid, "voice": voice.id, "script": script.id, "text": script.text,
                         "sha256": hashlib.sha256(data).hexdigest(), "duration_sec": f"{len(y) / SR:.3f}", "asr": ""})
    if args.verify:
        from harness.models.protocol import AudioClip, Prompt
        from harness.models.whisper_ct2 import WhisperTinyEn

        model = WhisperTinyEn()
        for r in rows:
            audio, sr = sf.read(BASES_DIR / f"{r['id']}.wav", dtype="float32")
            (text,) = model.generate([Prompt((AudioClip(audio, sr),), clip_id=r["id"])], max_new_tokens=64)
            r["asr"] = re.sub(r"\s+", " ", str(text)).strip()
            ok = normalize_text(r["asr"]) == normalize_text(r["text"])
            print(f"{'ok ' if ok else 'BAD'} {r['id']}: {r['asr']!r}", file=sys.stderr)
    with open(BASES_TSV, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]), delimiter="\t", lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    total = sum((BASES_DIR / f"{r['id']}.wav").stat().st_size for r in rows)
    print(f"{len(rows)} base utterances, {total / 1e6:.1f} MB", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
