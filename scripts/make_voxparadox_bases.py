"""Regenerate the vendored VoxParadox-lite base utterances (vocalgrad_dataset/data/voxparadox/).

Not part of any build: `vocalgrad-dataset build --config voxparadox-<task>` reads the vendored WAVs and
never calls a synthesiser. This script synthesises every (voice, script) pair with espeak-ng (voice variant
and pitch), trims leading/trailing silence, resamples to 16 kHz PCM16 and writes bases.tsv with the
sha256 of each file. `--verify` adds the Whisper tiny.en transcript of each file (harness whisper-tiny-en),
its word error rate and whether it equals the script after normalisation (asr_ok); a pair that fails is said
again at the next, slower rate, and a pair that fails at every rate is dropped (the vendored set is the
verified one: run with --verify).

    .venv/bin/python scripts/make_voxparadox_bases.py --verify
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

from vocalgrad_dataset.fileio import atomic_write_text  # noqa: E402
from vocalgrad_dataset.voxparadox import (  # noqa: E402
    BASES_DIR,
    BASES_TSV,
    SCRIPTS,
    SR,
    VOICES,
    Script,
    Voice,
    normalize_text,
    word_error_rate,
)

RATES_WPM = (165, 140)  # a pair Whisper mishears at the first rate is said again, slower


def synthesise(variant: str, pitch: int, text: str, rate: int = RATES_WPM[0]) -> np.ndarray:
    """espeak-ng -> float32 mono at 16 kHz, silence trimmed (argument list, no shell)."""
    with tempfile.TemporaryDirectory() as tmp:
        wav = Path(tmp) / "s.wav"
        subprocess.run([shutil.which("espeak-ng") or "espeak-ng", "-v", f"en-us+{variant}", "-p", str(pitch),
                        "-s", str(rate), "-w", str(wav), text], check=True, capture_output=True)
        x, sr = sf.read(wav, dtype="float32")
    y = soxr.resample(x, sr, SR, quality="soxr_hq").astype(np.float32)
    frame = SR // 100
    energy = np.array([np.sqrt(np.mean(y[i:i + frame] ** 2)) for i in range(0, len(y) - frame, frame)])
    voiced = np.nonzero(energy > 0.02 * energy.max())[0]
    start, end = max(0, (voiced[0] - 5) * frame), min(len(y), (voiced[-1] + 6) * frame)
    y = y[start:end]
    return (0.5 * y / np.max(np.abs(y))).astype(np.float32)


def encode(y: np.ndarray) -> bytes:
    buf = io.BytesIO()
    sf.write(buf, y, SR, subtype="PCM_16", format="WAV")
    return buf.getvalue()


FIELDS = ("id", "voice", "script", "text", "rate_wpm", "sha256", "duration_sec", "asr", "wer", "asr_ok")


def previous_rows(split: str) -> dict[str, dict[str, str]]:
    """The vendored rows of the voices of the other split than `split` (none for "all")."""
    if split == "all" or not BASES_TSV.is_file():
        return {}
    voice_split = {v.id: v.split for v in VOICES}
    with open(BASES_TSV, newline="", encoding="utf-8") as f:
        return {r["id"]: r for r in csv.DictReader(f, delimiter="\t") if voice_split.get(r["voice"]) not in (None, split)}


def load_whisper(batch: int) -> object:
    from harness.models.whisper_ct2 import WhisperTinyEn

    return WhisperTinyEn(batch_size=batch)


def verify(model: object, todo: list[tuple[Voice, Script]], rows: dict[str, dict[str, str]],
           audio: dict[str, bytes], rate: int) -> list[tuple[Voice, Script]]:
    """Whisper transcripts, WER and asr_ok into `rows`; the pairs whose transcript differs from the script."""
    from harness.models.protocol import AudioClip

    ids = [f"{v.id}__{s.id}" for v, s in todo]
    clips = [AudioClip(sf.read(io.BytesIO(audio[b]), dtype="float32")[0], SR) for b in ids]
    failed = []
    for bid, text, pair in zip(ids, model.transcribe(clips), todo, strict=True):  # type: ignore[attr-defined]
        r = rows[bid]
        r["asr"] = re.sub(r"\s+", " ", str(text)).strip()
        r["wer"] = f"{word_error_rate(r['asr'], r['text']):.3f}"
        ok = normalize_text(r["asr"]) == normalize_text(r["text"])
        r["asr_ok"] = "1" if ok else "0"
        print(f"{'ok ' if ok else 'BAD'} {bid} @{rate}: {r['asr']!r}", file=sys.stderr, flush=True)
        failed += [] if ok else [pair]
    return failed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--verify", action="store_true", help="add Whisper tiny.en transcripts; drop what fails")
    ap.add_argument("--rates", default=",".join(map(str, RATES_WPM)),
                    help="espeak-ng rates (words/min) tried in turn until Whisper verifies a pair")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--split", choices=("all", "test", "train"), default="all", help="only this split's voices")
    args = ap.parse_args()
    rates = [int(r) for r in args.rates.split(",")]
    BASES_DIR.mkdir(parents=True, exist_ok=True)
    pairs = [(voice, script) for voice in VOICES for script in SCRIPTS
             # a voice says its split's scripts; a gender claim is always the other sex
             if script.split == voice.split and not (script.task == "gender" and script.label == voice.sex)]
    todo = [(v, s) for v, s in pairs if args.split in ("all", v.split)]
    rows: dict[str, dict[str, str]] = {}
    audio: dict[str, bytes] = {}
    model = None
    for rate in rates:
        for voice, script in todo:
            bid = f"{voice.id}__{script.id}"
            y = synthesise(voice.variant, voice.pitch, script.text, rate)
            audio[bid] = encode(y)
            rows[bid] = {"id": bid, "voice": voice.id, "script": script.id, "text": script.text, "rate_wpm": str(rate),
                         "sha256": hashlib.sha256(audio[bid]).hexdigest(), "duration_sec": f"{len(y) / SR:.3f}",
                         "asr": "", "wer": "", "asr_ok": ""}
        if not args.verify:
            break
        model = model or load_whisper(args.batch)
        todo = verify(model, todo, rows, audio, rate)
        if not todo:
            break
    if args.verify:  # pairs Whisper never heard right are dropped (the builders skip combinations without them)
        for voice, script in todo:
            bid = f"{voice.id}__{script.id}"
            print(f"dropped {bid}: {rows[bid]['asr']!r}", file=sys.stderr)
            rows.pop(bid)
            audio.pop(bid)
    rows = {**previous_rows(args.split), **rows}  # --split: the other split's vendored rows and files are kept
    for stale in BASES_DIR.glob("*.wav"):
        if stale.stem not in rows:
            stale.unlink()
    for bid, data in audio.items():
        (BASES_DIR / f"{bid}.wav").write_bytes(data)
    kept = [rows[f"{v.id}__{s.id}"] for v, s in pairs if f"{v.id}__{s.id}" in rows]
    lines = ["\t".join(FIELDS), *("\t".join(r.get(k, "") for k in FIELDS) for r in kept)]
    atomic_write_text(BASES_TSV, "\n".join(lines) + "\n")
    total = sum(len(b) for b in audio.values())
    print(f"{len(kept)} base utterances ({len(todo)} dropped), {total / 1e6:.1f} MB", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
