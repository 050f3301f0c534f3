"""From source clips to benchmark rows: decode once, render a clip's 24 conditions together, emit rows."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

from .categories import CATEGORIES, CATEGORY_NAMES, Category, get_category
from .dsp import to_pcm16
from .grid import Condition, clip_id, conditions, iter_ids
from .prompt import main_prompt
from .sources import Source, SourceClip, SourceError, detect_onset_offset, get_source, span_samples
from .sources.vctk import SELECTION_DIR, SPLIT_FILES

GENERATOR_VERSION = "1.0.0"
SPLITS: tuple[str, ...] = ("test", "train")


def config_categories(config: str) -> list[Category]:
    """Categories of a dataset config: one category, or all nine for "all"."""
    if config == "all":
        return [CATEGORIES[n] for n in CATEGORY_NAMES]
    return [get_category(config)]


def frozen_items(split: str) -> list[tuple[str, str]]:
    """(source_item_id, source_clip_id) of the frozen VCTK selection, read without the corpus."""
    if split not in SPLIT_FILES:
        raise ValueError(f"unknown split {split!r}; valid: {', '.join(SPLIT_FILES)}")
    fname, id_col = SPLIT_FILES[split]
    with open(SELECTION_DIR / fname, newline="", encoding="utf-8") as f:
        return [(r[id_col], r["clip_id"]) for r in csv.DictReader(f)]


def frozen_ids(config: str, split: str) -> list[str]:
    """A config's clip ids for a split from the frozen list alone (no corpus, no audio)."""
    items = frozen_items(split)
    return [i for _ in config_categories(config) for i in iter_ids(items)]


def source_clips(split: str, source: str | Source = "vctk", data_dir: str | Path | None = None) -> list[SourceClip]:
    """The source clips of a split, in canonical order."""
    src = get_source(source, data_dir) if isinstance(source, str) else source
    return src.clips(split)


def speech_span(clip: SourceClip, samples: np.ndarray, sr: int) -> tuple[int, int]:
    """Onset/offset in samples: frozen values when the list has them, else SPEC §1 detection."""
    if clip.onset_sec is None or clip.offset_sec is None:
        onset_sec, offset_sec = detect_onset_offset(samples, sr, clip_name=clip.source_clip_id)
    else:
        onset_sec, offset_sec = clip.onset_sec, clip.offset_sec
    return span_samples(onset_sec, offset_sec, sr, len(samples), clip_name=clip.source_clip_id)


def wav_bytes(pcm: np.ndarray, sr: int) -> bytes:
    """PCM16 WAV bytes (soundfile; no FFmpeg)."""
    buf = io.BytesIO()
    sf.write(buf, pcm, sr, subtype="PCM_16", format="WAV")
    return buf.getvalue()


def render_clip_rows(
    category: Category,
    clip: SourceClip,
    samples: np.ndarray,
    sr: int,
    conds: Sequence[Condition] | None = None,
    *,
    audio_format: str = "array",
) -> list[dict[str, Any]]:
    """All requested conditions of one source clip as dataset rows (audio as an array or WAV bytes)."""
    conds = list(conds or conditions())
    onset, offset = speech_span(clip, samples, sr)
    audio = samples.astype(np.float32) / np.float32(32768.0)
    ids = [clip_id(clip.source_item_id, clip.source_clip_id, c) for c in conds]
    rows = []
    for cond, cid, (y, sched) in zip(conds, ids, category.render_clip(audio, sr, onset, offset, conds, ids), strict=True):
        pcm, clipped = to_pcm16(y)
        # the span may change length (segment crossfades, time stretch); audio after it is never resized
        out_offset = len(pcm) - (len(samples) - offset)
        if audio_format == "wav":
            audio_value: Any = {"bytes": wav_bytes(pcm, sr), "path": f"{cid}.wav"}
        else:
            audio_value = {"array": pcm.astype(np.float32) / np.float32(32768.0), "sampling_rate": sr}
        rows.append(
            {
                "audio": audio_value,
                "benchmark_clip_id": cid,
                "category": category.name,
                "attribute": category.attribute,
                "prompt": main_prompt(category.attribute),
                "label": cond.label,
                "direction": cond.direction,
                "curve": cond.curve,
                "tier": cond.tier,
                "parameter": category.parameter,
                "param_start": category.applied(sched.start, sr),
                "param_end": category.applied(sched.end, sr),
                "param_fixed": json.dumps(category.fixed(cond.tier), sort_keys=True),
                "source_item_id": clip.source_item_id,
                "source_clip_id": clip.source_clip_id,
                "speaker_id": clip.speaker_id,
                "source_text": clip.text,
                "onset_sec": onset / sr,
                "offset_sec": out_offset / sr,
                "duration_sec": len(pcm) / sr,
                "clipped_ratio": clipped,
                "generator_version": GENERATOR_VERSION,
            }
        )
    return rows


def iter_rows(
    config: str,
    split: str,
    source: str | Source = "vctk",
    data_dir: str | Path | None = None,
    *,
    clips: Iterable[SourceClip] | None = None,
    audio_format: str = "array",
) -> Iterator[dict[str, Any]]:
    """Stream a config's rows: each source clip is decoded once and all its conditions rendered together."""
    src = get_source(source, data_dir) if isinstance(source, str) else source
    cats = config_categories(config)
    for clip in src.clips(split) if clips is None else clips:
        pcm = src.read(clip)
        if pcm.samples.ndim != 1:
            raise SourceError(f"clip {clip.source_clip_id}: expected mono samples after decoding")
        for cat in cats:
            yield from render_clip_rows(cat, clip, pcm.samples, pcm.sample_rate, audio_format=audio_format)
