"""Snapshot of every prompt variant's exact text (SPEC §4-§5): any wording change must update the snapshot.

Regenerate deliberately with `VOCALGRAD_UPDATE_SNAPSHOTS=1 pytest tests/test_prompts_snapshot.py` and review
the diff of tests/snapshots/prompt_variants.json.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import numpy as np

from harness.data import CONFIGS, SourceUnit, attribute_word
from harness.prompts import FewShotPool, build_prompt, get_variant, variant_names

SNAPSHOT = Path(__file__).parent / "snapshots" / "prompt_variants.json"
CLIP = "p226_01__p226_106__linear__low__up"


def _row(config: str, clip_id: str = CLIP, label: str = "increase") -> dict:
    return {
        "audio": {"array": np.zeros(16, dtype=np.float32), "sampling_rate": 16000},
        "benchmark_clip_id": clip_id, "category": config, "attribute": attribute_word(config), "label": label,
    }  # fmt: skip


class _TrainIds:
    """A RowSource with 2 train clips per label and silent audio: enough for the few-shot layout."""

    description = "fake train"

    def units(self, config: str) -> list[SourceUnit]:
        ids = [f"p300_0{k}__p300_10{k}__linear__low__{d}" for k in (1, 2) for d in ("up", "down")]
        return [SourceUnit("p300", 0.0, tuple(ids))]

    def rows(self, config: str, units: list[SourceUnit]):
        for u in units:
            for cid in u.clip_ids:
                yield _row(config, cid, "increase" if cid.endswith("up") else "decrease")


def prompt_texts() -> dict[str, str]:
    """variant | config -> Prompt.text (audio shown as <audio>) for every valid combination."""
    out = {}
    for name in variant_names():
        variant = get_variant(name)
        if variant.base == "few-shot":
            variant = replace(variant, pool=FewShotPool(_TrainIds()))
        for config in CONFIGS:
            try:
                prompt, vocab = build_prompt(_row(config), variant)
            except ValueError:  # paraphrases exist for speed, pitch, volume only
                continue
            out[f"{name} | {config}"] = prompt.text + f"  [words: {' / '.join(vocab.choices)}; parser {vocab.parser.id}]"
    for fmt in ("yesno", "ternary", "source"):
        for name in ("default", "audio_first"):
            for config in CONFIGS:
                prompt, vocab = build_prompt(_row(f"{config}-{fmt}"), name)
                out[f"{name} | {config}-{fmt}"] = prompt.text + f"  [words: {' / '.join(vocab.choices)}; parser {vocab.parser.id}]"
    return out


def test_prompt_texts_match_snapshot() -> None:
    texts = prompt_texts()
    if os.environ.get("VOCALGRAD_UPDATE_SNAPSHOTS"):
        SNAPSHOT.parent.mkdir(exist_ok=True)
        SNAPSHOT.write_text(json.dumps(texts, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    expected = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    assert sorted(texts) == sorted(expected), "variants added or removed: update the snapshot deliberately"
    changed = [k for k in texts if texts[k] != expected[k]]
    assert not changed, f"prompt wording changed for {changed[:5]} (update the snapshot deliberately)"


def test_snapshot_covers_every_variant_family() -> None:
    keys = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    names = {k.split(" | ")[0] for k in keys}
    assert set(variant_names()) <= names
    assert len([k for k in keys if k.startswith("paraphrase-1 | ")]) == 3  # speed, pitch, volume only
    assert len(keys) == 8 * 9 + 6 * 3 + 9 * 9 + 4 * 9 + 3 * 2 * 9
