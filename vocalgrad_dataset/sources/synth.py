"""Offline speech synthesis for the vendored carriers (regeneration only: no build ever imports this module).

Two engines from Debian packages, both run as subprocesses with argument lists (never a shell):
`espeak-ng` (formant synthesis; voice variants +f1..+f5 / +m1..+m7, rate in words per minute, pitch 0-99,
SSML with `ssml=True`) and `flite` (CMU's diphone/cluster voices slt, rms, awb, kal16; more natural than
espeak, rate as a duration stretch, pitch as the F0 target mean in Hz). `apt-get install -y espeak-ng flite`.

The small API the carrier and VoxParadox-lite builders share:
    audio, sr = synthesise(text, voice, rate=..., pitch=...)   # float32 mono at the engine's rate
    pcm = carrier_pcm16(audio, sr)                             # 48 kHz, silence-padded, peak-normalised int16
    write_wav_pcm16(path, pcm, 48000)                          # (sources.audio_io) atomic PCM16 WAV
"""

from __future__ import annotations

import io
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import soundfile as sf

TARGET_SR = 48000
LEAD_SEC = 0.3  # silence before the speech (> the onset detector's 200 ms noise-floor window, SPEC §1)
TAIL_SEC = 0.2  # and after it
PEAK = 0.12  # peak after normalisation: the volume category's +18 dB high tier stays below full scale
ENGINES: tuple[str, ...] = ("espeak-ng", "flite")


class SynthError(RuntimeError):
    """The synthesiser is missing or failed; the message names the engine, the voice and the text."""


@dataclass(frozen=True)
class Voice:
    """One synthetic speaker: an engine's voice name plus the rate/pitch settings that make it distinct."""

    id: str  # stable id used in carrier ids, e.g. "flite-slt"
    engine: str  # "espeak-ng" or "flite"
    name: str  # espeak-ng voice ("en-us+f2") or flite voice ("slt")
    sex: str  # "female" or "male"
    rate: float | None = None  # espeak-ng: words per minute; flite: duration stretch (1.0 = default)
    pitch: float | None = None  # espeak-ng: 0-99; flite: F0 target mean in Hz
    extra: tuple[str, ...] = field(default=())  # further engine arguments


def engine_available(engine: str) -> bool:
    """Whether the engine's executable is on PATH."""
    return shutil.which(engine) is not None


def _espeak_args(text: str, voice: str, rate: float | None, pitch: float | None, ssml: bool) -> list[str]:
    args = ["espeak-ng", "-v", voice, "--stdout"]
    if rate is not None:
        args += ["-s", str(int(round(rate)))]
    if pitch is not None:
        args += ["-p", str(int(round(pitch)))]
    if ssml:
        args.append("-m")
    return [*args, "--", text]


def _flite_args(text: str, voice: str, rate: float | None, pitch: float | None, out: str, ssml: bool) -> list[str]:
    args = ["flite", "-voice", voice]
    if rate is not None:
        args += ["--setf", f"duration_stretch={rate:g}"]
    if pitch is not None:
        args += ["--setf", f"int_f0_target_mean={pitch:g}"]
    if ssml:
        args.append("-ssml")
    return [*args, "-t", text, "-o", out]


def synthesise(text: str, voice: str | Voice, *, engine: str = "espeak-ng", rate: float | None = None,
               pitch: float | None = None, ssml: bool = False, timeout: float = 60.0) -> tuple[np.ndarray, int]:
    """Speak `text` offline; returns (float32 mono in [-1, 1), sample rate). A Voice supplies its own settings."""
    if isinstance(voice, Voice):
        engine, name = voice.engine, voice.name
        rate = voice.rate if rate is None else rate
        pitch = voice.pitch if pitch is None else pitch
    else:
        name = voice
    if engine not in ENGINES:
        raise SynthError(f"unknown engine {engine!r} (valid: {', '.join(ENGINES)})")
    if not engine_available(engine):
        raise SynthError(f"{engine} is not installed (apt-get install -y {engine})")
    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "out.wav")
        args = (_espeak_args(text, name, rate, pitch, ssml) if engine == "espeak-ng"
                else _flite_args(text, name, rate, pitch, out, ssml))
        proc = subprocess.run(args, capture_output=True, timeout=timeout, check=False)
        if proc.returncode != 0:
            raise SynthError(f"{engine} voice {name!r} failed on {text!r}: {proc.stderr.decode(errors='replace')[:200]}")
        # espeak-ng's --stdout WAV header carries a streaming length (0x7ffff...): read it with soundfile
        data = proc.stdout if engine == "espeak-ng" else Path(out).read_bytes()
    try:
        audio, sr = sf.read(io.BytesIO(data), dtype="float32", always_2d=True)
    except (sf.LibsndfileError, RuntimeError) as err:
        raise SynthError(f"{engine} voice {name!r} wrote no readable WAV for {text!r}: {err}") from None
    if audio.shape[0] == 0:
        raise SynthError(f"{engine} voice {name!r} produced no samples for {text!r}")
    return np.ascontiguousarray(audio.mean(axis=1), dtype=np.float32), int(sr)


def trim_silence(audio: np.ndarray, sr: int, relative: float = 0.003, margin_sec: float = 0.03) -> np.ndarray:
    """Cut the engines' uneven leading and trailing quiet (below `relative` x the peak), keeping `margin_sec`."""
    loud = np.flatnonzero(np.abs(audio) >= relative * float(np.abs(audio).max(initial=0.0)))
    if not loud.size:
        return audio[:0]
    margin = int(round(margin_sec * sr))
    return audio[max(0, loud[0] - margin) : loud[-1] + 1 + margin]


def to_rate(audio: np.ndarray, sr: int, target: int = TARGET_SR) -> np.ndarray:
    """Resample float audio with soxr VHQ in float64 (as the demo clips were), float32 out."""
    if sr == target:
        return np.asarray(audio, dtype=np.float32)
    import soxr

    return soxr.resample(np.asarray(audio, dtype=np.float64), sr, target, quality="VHQ").astype(np.float32)


def pad_silence(audio: np.ndarray, sr: int, lead_sec: float = LEAD_SEC, tail_sec: float = TAIL_SEC) -> np.ndarray:
    """Digital silence before and after the audio."""
    lead, tail = np.zeros(int(round(lead_sec * sr)), np.float32), np.zeros(int(round(tail_sec * sr)), np.float32)
    return np.concatenate([lead, np.asarray(audio, dtype=np.float32), tail])


def to_pcm16(audio: np.ndarray, peak: float | None = PEAK) -> np.ndarray:
    """Float audio to int16 (rint, clipped), first scaled so its peak is `peak` (None keeps the level)."""
    x = np.asarray(audio, dtype=np.float64)
    top = float(np.abs(x).max()) if x.size else 0.0
    if peak is not None and top > 0:
        x = x * (peak / top)
    return np.clip(np.rint(x * 32768.0), -32768, 32767).astype(np.int16)


def carrier_pcm16(audio: np.ndarray, sr: int, *, target: int = TARGET_SR, lead_sec: float = LEAD_SEC,
                  tail_sec: float = TAIL_SEC, peak: float | None = PEAK) -> np.ndarray:
    """A synthesised utterance as a vendored carrier: trimmed, resampled to 48 kHz, padded, peak-set, PCM16."""
    speech = trim_silence(audio, sr)
    if speech.size == 0:
        raise SynthError("the synthesised audio is silent")
    return to_pcm16(pad_silence(to_rate(speech, sr, target), target, lead_sec, tail_sec), peak)


# The carriers' voices: 4 train and 2 held-out test voices, both sexes in each split, two engines.
TRAIN_VOICES: tuple[Voice, ...] = (
    Voice("flite-slt", "flite", "slt", "female"),
    Voice("flite-rms", "flite", "rms", "male"),
    Voice("espeak-us-f2", "espeak-ng", "en-us+f2", "female", rate=160, pitch=55),
    Voice("espeak-us-m3", "espeak-ng", "en-us+m3", "male", rate=160, pitch=40),
)
TEST_VOICES: tuple[Voice, ...] = (
    Voice("flite-awb", "flite", "awb", "male"),
    Voice("espeak-us-f4", "espeak-ng", "en-us+f4", "female", rate=155, pitch=60),
)
# Held-out fallbacks per sex, tried in this order when a test voice's carrier fails the checks of
# scripts/vendor_claims.py (Whisper mishears it, or the signal oracle misreads its manipulated rows); still no
# train voice in test.
TEST_FALLBACK_VOICES: tuple[Voice, ...] = (
    Voice("espeak-us-f3", "espeak-ng", "en-us+f3", "female", rate=145, pitch=45),
    Voice("flite-kal16", "flite", "kal16", "male"),
    Voice("espeak-us-f5", "espeak-ng", "en-us+f5", "female", rate=150, pitch=50),
    Voice("espeak-us-m5", "espeak-ng", "en-us+m5", "male", rate=150, pitch=35),
)
SLOWER = {"espeak-ng": 0.85, "flite": 1.18}  # the retry setting when Whisper mishears: words spoken slower


def slower(voice: Voice) -> Voice:
    """The same voice speaking about 15 % slower (espeak-ng: fewer words per minute; flite: a longer stretch)."""
    from dataclasses import replace

    if voice.engine == "espeak-ng":
        return replace(voice, rate=(voice.rate or 175) * SLOWER["espeak-ng"])
    return replace(voice, rate=(voice.rate or 1.0) * SLOWER["flite"])


def voice_settings(voice: Voice) -> str:
    """The engine settings of a voice as one short string for manifests (e.g. "en-us+f2 rate=160 pitch=55")."""
    parts = [voice.name]
    parts += [f"rate={voice.rate:g}"] if voice.rate is not None else []
    parts += [f"pitch={voice.pitch:g}"] if voice.pitch is not None else []
    return " ".join(parts)


def contour_trends(samples: np.ndarray, sr: int, onset: int, offset: int) -> tuple[float, float]:
    """(RMS change in dB, F0 change in semitones) across the speech span: the least-squares line's rise from
    span start to end, over 50 ms frames (RMS: frames within 30 dB of the loudest; F0: pYIN's voiced frames)."""
    import librosa

    x = np.asarray(samples, dtype=np.float32)[onset:offset]
    if x.dtype != np.float32 or np.abs(x).max() > 1.0:
        x = x / np.float32(32768.0)
    frame = int(round(0.05 * sr))
    n = len(x) // frame
    rms_db = 20 * np.log10(np.sqrt(np.mean(x[: n * frame].reshape(n, frame) ** 2, axis=1)) + 1e-9)
    keep = rms_db >= rms_db.max() - 30
    t = (np.arange(n) + 0.5) / max(n, 1)
    rms_change = float(np.polyfit(t[keep], rms_db[keep], 1)[0]) if keep.sum() >= 3 else 0.0
    y = librosa.resample(x, orig_sr=sr, target_sr=16000, res_type="soxr_hq")
    # a quarter-semitone grid keeps pYIN's Viterbi small (the trend needs no finer resolution)
    f0, voiced, _ = librosa.pyin(y, fmin=60, fmax=400, sr=16000, frame_length=1024, hop_length=320,
                                 resolution=0.25)
    ok = voiced & np.isfinite(f0)
    if ok.sum() < 3:
        return rms_change, 0.0
    st = 12 * np.log2(f0[ok] / np.median(f0[ok]))
    tf = np.flatnonzero(ok) / max(len(f0) - 1, 1)
    return rms_change, float(np.polyfit(tf, st, 1)[0])


RMS_FLAG_DB = 6.0  # half the span of the volume category's low tier (-6 -> +6 dB)
F0_FLAG_ST = 1.0  # half the span of the pitch category's low tier (-1 -> +1 semitone)


def trend_flag(rms_change_db: float, f0_change_st: float) -> str:
    """Which own trends a carrier has ("rms-up", "f0-down", both joined by "+", or "none")."""
    flags = []
    if abs(rms_change_db) >= RMS_FLAG_DB:
        flags.append("rms-up" if rms_change_db > 0 else "rms-down")
    if abs(f0_change_st) >= F0_FLAG_ST:
        flags.append("f0-up" if f0_change_st > 0 else "f0-down")
    return "+".join(flags) or "none"
