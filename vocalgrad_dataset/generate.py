"""From source clips to benchmark rows: decode once, render a clip's conditions together, emit rows.

What a config's rows are is its recipe (vocalgrad_dataset.grid.Recipe, declared in its YAML file and resolved
by vocalgrad_dataset.tasks): the 24 augmented conditions of each source clip, the unmodified source clip,
the claims carriers of the config's category, or those played backwards; and the label each row carries.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import struct
import sys
import warnings
from collections.abc import Container, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from vocalgrad_dataset.categories import Category
from vocalgrad_dataset.categories.distortion import hold_length
from vocalgrad_dataset.dsp import to_pcm16
from vocalgrad_dataset.grid import (
    NO_CONDITION,
    OPPOSITE,
    TIERS,
    Condition,
    clip_id,
    conditions,
    iter_ids,
    source_clip_id,
)
from vocalgrad_dataset.sources import (
    Source,
    SourceClip,
    SourceError,
    detect_onset_offset,
    get_source,
    span_samples,
)
from vocalgrad_dataset.sources.vctk import SELECTION_DIR, SPLIT_FILES
from vocalgrad_dataset.tasks import ConfigSpec, config_spec, expand_specs

GENERATOR_VERSION = "1.0.0"
SPLITS: tuple[str, ...] = ("test", "train")
BEEP_PROMPT_VARIANT = "audio_ref"  # the published beep table was measured with this prompt (SPEC §4)


def resolve_source(config: str, source: str | None, specs: Sequence[ConfigSpec] | None = None) -> str:
    """The source a config is generated from: its bound source (beep), else `source`, else the config's
    default (claims for conflict configs), else vctk. `specs`: the config's already resolved specs."""
    specs = expand_specs(config) if specs is None else specs
    bound = {s.source for s in specs} - {None}
    if not bound:
        return source or next((s.default_source for s in specs if s.default_source), "vctk")
    (only,) = bound
    if source not in (None, only):
        raise ValueError(f"config {config!r} is generated from the {only} source only, not {source!r}")
    return only


def default_source(configs: Iterable[str]) -> str:
    """The source a set of configs is generated from when none is named: their bound or default one (beep,
    claims), else vctk; one line when they disagree."""
    names = {resolve_source(c, None) for c in configs}
    if len(names) > 1:
        raise ValueError(f"these configs come from different sources ({', '.join(sorted(names))}): "
                         "run them separately or name one with --source")
    return names.pop() if names else "vctk"


def source_splits(src: Source) -> tuple[str, ...]:
    """Splits a source offers (test and train unless it says otherwise)."""
    return tuple(getattr(src, "splits", SPLITS))


def frozen_items(split: str) -> list[tuple[str, str]]:
    """(source_item_id, source_clip_id) of the frozen VCTK selection, read without the corpus."""
    if split not in SPLIT_FILES:
        raise ValueError(f"unknown split {split!r}; valid: {', '.join(SPLIT_FILES)}")
    fname, id_col = SPLIT_FILES[split]
    with open(SELECTION_DIR / fname, newline="", encoding="utf-8") as f:
        return [(r[id_col], r["clip_id"]) for r in csv.DictReader(f)]


def source_items(split: str, source: str = "vctk", data_dir: str | Path | None = None) -> list[tuple[str, str]]:
    """(item, clip) pairs of a split without decoding audio (vctk: from the frozen list, no corpus needed)."""
    if source == "vctk":
        return frozen_items(split)
    return [(c.source_item_id, c.source_clip_id) for c in source_clips(split, source, data_dir)]


def unit_ids(spec: ConfigSpec, source_item_id: str, source_clip_id_: str) -> list[str]:
    """Clip ids one source clip contributes to a config, in row order (24, 25, or 1 for `-source`)."""
    ids = list(iter_ids([(source_item_id, source_clip_id_)])) if spec.recipe.augmented else []
    if spec.recipe.sources:
        ids.append(source_clip_id(source_item_id, source_clip_id_))
    return ids


def config_ids(config: str, split: str, source: str | None = None, data_dir: str | Path | None = None) -> list[str]:
    """A config's clip ids for a split (category-major for expanding names), without decoding audio."""
    name = resolve_source(config, source)
    specs = expand_specs(config)
    if any(s.recipe.claims for s in specs):  # carriers serve one category: needs the clips themselves
        clips = source_clips(split, name, data_dir)
        return [i for spec in specs for c in config_clips(spec, clips)
                for i in unit_ids(spec, c.source_item_id, c.source_clip_id)]
    items = source_items(split, name, data_dir)
    return [i for spec in specs for item, clip in items for i in unit_ids(spec, item, clip)]


def serves(clip: SourceClip, spec: ConfigSpec) -> bool:
    """Whether a source clip belongs to a config: always, except that a conflict config takes the carriers
    claiming something about its own category and the neutral ones (plain clips count as neutral)."""
    if not spec.recipe.claims:
        return True
    return getattr(clip, "category", "any") in (spec.category.name, "any")


def config_clips(spec: ConfigSpec, clips: Iterable[SourceClip]) -> list[SourceClip]:
    """The clips of a source a config uses, in source order."""
    return [c for c in clips if serves(c, spec)]


def source_clips(split: str, source: str | Source = "vctk", data_dir: str | Path | None = None) -> list[SourceClip]:
    """The source clips of a split, in canonical order."""
    src = get_source(source, data_dir) if isinstance(source, str) else source
    return src.clips(split)


_DETECTED: dict[tuple, tuple[float, float]] = {}  # (clip, rate, samples digest) -> detected onset/offset seconds
_DETECTED_MAX = 4096


def _detected(clip: SourceClip, samples: np.ndarray, sr: int) -> tuple[float, float]:
    """SPEC §1 detection, once per clip and content in a process (a build renders a clip once per config)."""
    key = (clip, sr, len(samples), hashlib.blake2b(np.ascontiguousarray(samples).tobytes(), digest_size=16).digest())
    span = _DETECTED.get(key)
    if span is None:
        span = detect_onset_offset(samples, sr, clip_name=clip.source_clip_id)
        if len(_DETECTED) >= _DETECTED_MAX:
            _DETECTED.pop(next(iter(_DETECTED)))
        _DETECTED[key] = span
    return span


def speech_span(clip: SourceClip, samples: np.ndarray, sr: int) -> tuple[int, int]:
    """Onset/offset in samples: frozen values when the list has them, else SPEC §1 detection."""
    if clip.onset_sec is None or clip.offset_sec is None:
        onset_sec, offset_sec = _detected(clip, samples, sr)
    else:
        onset_sec, offset_sec = clip.onset_sec, clip.offset_sec
    return span_samples(onset_sec, offset_sec, sr, len(samples), clip_name=clip.source_clip_id)


WAV_HEADER_BYTES = 44
_MAX_WAV_DATA = 2**32 - 1 - (WAV_HEADER_BYTES - 8)  # the RIFF size field is 32 bits


def wav_header(n_samples: int, sr: int) -> bytes:
    """The 44-byte RIFF header libsndfile writes for n_samples of mono PCM_16 WAV at rate sr."""
    size = 2 * n_samples
    if size > _MAX_WAV_DATA:
        raise ValueError(f"{n_samples} samples do not fit a WAV file (at most {_MAX_WAV_DATA // 2})")
    return struct.pack("<4sI4s4sIHHIIHH4sI", b"RIFF", size + WAV_HEADER_BYTES - 8, b"WAVE", b"fmt ", 16, 1, 1, sr, 2 * sr,
                       2, 16, b"data", size)  # fmt: skip


def wav_bytes(pcm: np.ndarray, sr: int) -> bytes:
    """PCM16 WAV bytes (no FFmpeg). Mono int16, what every row is: wav_header, then the samples (one copy, ~10x
    faster than a soundfile round trip; tests compare the bytes with soundfile's). Anything else (stereo,
    floats) goes through soundfile."""
    if pcm.dtype == np.int16 and pcm.ndim == 1 and sys.byteorder == "little":
        return wav_header(len(pcm), sr) + memoryview(np.ascontiguousarray(pcm)).cast("B")
    import soundfile as sf

    buf = io.BytesIO()
    sf.write(buf, pcm, sr, subtype="PCM_16", format="WAV")
    return buf.getvalue()


# Tiers whose manipulation changes nothing (or runs backwards) at a given rate, per category, judged at the
# tier's strongest value: distortion holds each sample once when round(sr / effective rate) is 1; clarity's
# lowest cutoff at or above Nyquist leaves the clip unfiltered, and the cutoff would *fall* towards sr / 2 on
# a clip labelled "increase" (an 8 kHz source: 5000 -> 4000 Hz on the low tier).
_NOOP_AT_ENDPOINT = {
    "distortion": (lambda value, sr: hold_length(value, sr) == 1,
                   "the published generator clamps the effective rate to the source rate"),
    "clarity": (lambda value, sr: value >= sr / 2.0,
                "their lowest cutoff is at or above the source's Nyquist frequency, so the cutoff does not "
                "rise (it may even fall) over clips labelled increase"),
}
_WARNED_NOOP: set[tuple[str, int]] = set()


def noop_tiers(category: Category, sr: int) -> list[str]:
    """Tiers that are no-ops at this sample rate (e.g. distortion low/mid at 16 kHz), in tier order."""
    check = _NOOP_AT_ENDPOINT.get(category.name)
    if check is None:
        return []
    return [t for t in TIERS if check[0](category.tier_value(t), sr)]


def _warn_noop(category: Category, tiers: Iterable[str], sr: int) -> None:
    """warnings.warn once per (category, rate), naming every no-op tier, when one of them is rendered."""
    noop = noop_tiers(category, sr)
    if set(noop) & set(tiers) and (category.name, sr) not in _WARNED_NOOP:
        _WARNED_NOOP.add((category.name, sr))
        warnings.warn(
            f"{category.name}: tier(s) {', '.join(noop)} are no-ops at {sr} Hz ({_NOOP_AT_ENDPOINT[category.name][1]}); "
            "those clips differ from the source only by the segment crossfades",
            stacklevel=3,
        )


def _audio_value(pcm: np.ndarray, sr: int, cid: str, audio_format: str) -> Any:
    if audio_format == "wav":
        return {"bytes": wav_bytes(pcm, sr), "path": f"{cid}.wav"}
    if audio_format == "pcm16":  # the shard writer's: it writes header and samples into the column's one buffer
        return {"pcm16": pcm, "sampling_rate": sr, "path": f"{cid}.wav"}
    # one pass; multiplying by 2 ** -15 is exactly dividing by 32768
    return {"array": np.multiply(pcm, np.float32(1.0 / 32768.0), dtype=np.float32), "sampling_rate": sr}


def _base_row(spec: ConfigSpec, clip: SourceClip, cid: str, cond: Condition | None) -> dict[str, Any]:
    """The columns every row of a clip shares, whatever its condition."""
    category = spec.category
    return {
        "benchmark_clip_id": cid,
        "category": category.name,
        "attribute": category.attribute,
        "prompt": spec.prompt(),
        "label": spec.recipe.label(cond),
        "direction": cond.direction if cond else NO_CONDITION,
        "curve": cond.curve if cond else NO_CONDITION,
        "tier": cond.tier if cond else NO_CONDITION,
        "parameter": category.parameter,
        "source_item_id": clip.source_item_id,
        "source_clip_id": clip.source_clip_id,
        "speaker_id": clip.speaker_id,
        "source_text": clip.text,
        "generator_version": GENERATOR_VERSION,
    }


def iter_clip_rows(
    category: Category,
    clip: SourceClip,
    samples: np.ndarray,
    sr: int,
    conds: Sequence[Condition] | None = None,
    *,
    audio_format: str = "array",
    spec: ConfigSpec | None = None,
) -> Iterator[dict[str, Any]]:
    """The requested conditions of one source clip as dataset rows (audio as an array or WAV bytes) of `spec`
    (default: the category's main-question config), one at a time: each condition's float audio is freed once its row is made, so a
    long source's working memory is a few outputs, not 24.

    A reversed recipe (the time-reversal control) renders each condition's opposite direction and plays it backwards,
    so the row still sounds like its condition; the speech span and the applied start/end are mirrored."""
    conds = list(conditions() if conds is None else conds)
    if not conds:
        return
    spec = spec or config_spec(category.name)
    _warn_noop(category, {c.tier for c in conds}, sr)
    onset, offset = speech_span(clip, samples, sr)
    audio = samples.astype(np.float32)
    audio /= np.float32(32768.0)  # in place: the same division, one float32 copy of the source instead of two
    ids = [clip_id(clip.source_item_id, clip.source_clip_id, c) for c in conds]
    drawn = [Condition(c.curve, c.tier, OPPOSITE[c.direction]) for c in conds] if spec.recipe.reverse else conds
    rendered = category.render_clip(audio, sr, onset, offset, drawn, ids)
    # Not zip(conds, ids, rendered): its reused result tuple would hold the previous condition's output and
    # schedule while the next one renders; likewise each iteration drops its pcm and schedule before the next.
    for cond, cid in zip(conds, ids, strict=True):
        item = next(rendered, None)
        if item is None:
            raise ValueError(f"{category.name}: rendering gave fewer clips than the {len(conds)} conditions")
        y, sched = item
        del item
        pcm, clipped = to_pcm16(y)
        del y  # the float audio is not needed once converted
        # the span may change length (segment crossfades, time stretch); audio after it is never resized
        span = (onset, len(pcm) - (len(samples) - offset))
        params = (category.applied(sched.start, sr), category.applied(sched.end, sr))
        if spec.recipe.reverse:
            pcm, span, params = np.ascontiguousarray(pcm[::-1]), (len(pcm) - span[1], len(pcm) - span[0]), params[::-1]
        yield (
            {
                "audio": _audio_value(pcm, sr, cid, audio_format),
                **_base_row(spec, clip, cid, cond),
                "param_start": params[0],
                "param_end": params[1],
                "param_fixed": json.dumps(category.fixed(cond.tier), sort_keys=True),
                "onset_sec": span[0] / sr,
                "offset_sec": span[1] / sr,
                "duration_sec": len(pcm) / sr,
                "clipped_ratio": clipped,
            }
        )
        del pcm, sched
    if next(rendered, None) is not None:
        raise ValueError(f"{category.name}: rendering gave more clips than the {len(conds)} conditions")


def claim_fields(clip: SourceClip, label: str) -> dict[str, Any]:
    """The lexical-conflict columns of a row: what the carrier's words claim and whether the sound agrees."""
    claim = getattr(clip, "claim", "none")  # a plain (non-carrier) clip claims nothing
    return {
        "claim": claim,
        "congruent": None if claim == "none" else claim == label,
        "template_id": getattr(clip, "template_id", "") or clip.source_item_id,
        "voice_id": getattr(clip, "voice_id", "") or clip.speaker_id,
        "transcript": clip.text,
    }


def source_row(
    spec: ConfigSpec, clip: SourceClip, samples: np.ndarray, sr: int, *, audio_format: str = "array"
) -> dict[str, Any]:
    """The unmodified source clip as a row of a yes/no, ternary or source config (label no / constant)."""
    onset, offset = speech_span(clip, samples, sr)
    cid = source_clip_id(clip.source_item_id, clip.source_clip_id)
    return {
        "audio": _audio_value(np.asarray(samples, dtype=np.int16), sr, cid, audio_format),
        **_base_row(spec, clip, cid, None),
        "param_start": None,  # nothing was applied
        "param_end": None,
        "param_fixed": "{}",
        "onset_sec": onset / sr,
        "offset_sec": offset / sr,
        "duration_sec": len(samples) / sr,
        "clipped_ratio": 0.0,
    }


def iter_config_rows(
    spec: ConfigSpec,
    clip: SourceClip,
    samples: np.ndarray,
    sr: int,
    *,
    audio_format: str = "array",
    ids: Container[str] | None = None,
) -> Iterator[dict[str, Any]]:
    """One source clip's rows of a config in row order, one at a time; `ids` restricts rendering to those clip ids."""
    if spec.recipe.claims:
        if not serves(clip, spec):
            return
        conds = [c for c in conditions() if ids is None or clip_id(clip.source_item_id, clip.source_clip_id, c) in ids]
        for r in iter_clip_rows(spec.category, clip, samples, sr, conds, audio_format=audio_format, spec=spec):
            yield {**r, **claim_fields(clip, r["label"])}
        return
    if spec.recipe.augmented:
        conds = [c for c in conditions() if ids is None or clip_id(clip.source_item_id, clip.source_clip_id, c) in ids]
        yield from iter_clip_rows(spec.category, clip, samples, sr, conds, audio_format=audio_format, spec=spec)
    sid = source_clip_id(clip.source_item_id, clip.source_clip_id)
    if spec.recipe.sources and (ids is None or sid in ids):
        yield source_row(spec, clip, samples, sr, audio_format=audio_format)


def iter_rows(
    config: str,
    split: str,
    source: str | Source | None = None,
    data_dir: str | Path | None = None,
    *,
    clips: Iterable[SourceClip] | None = None,
    audio_format: str = "array",
    ids: Container[str] | None = None,
) -> Iterator[dict[str, Any]]:
    """Stream a config's rows: each source clip is decoded once and all its conditions rendered together."""
    specs = expand_specs(config)
    if isinstance(source, str | None):
        source = get_source(resolve_source(config, source), data_dir)
    for clip in source.clips(split) if clips is None else clips:
        if not any(serves(clip, spec) for spec in specs):
            continue  # a carrier of another category's conflict config: not even decoded
        pcm = source.read(clip)
        if pcm.samples.ndim != 1:
            raise SourceError(f"clip {clip.source_clip_id}: expected mono samples after decoding")
        for spec in specs:
            yield from iter_config_rows(spec, clip, pcm.samples, pcm.sample_rate, audio_format=audio_format, ids=ids)

