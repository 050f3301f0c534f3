"""Probing fixtures: an encoder-only fake model and a synthetic feature extraction with direction signal in
some representations only (shared by the probing and fault tests)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from harness.models.base import BaseAudioLM
from harness.models.protocol import HiddenStates
from probing import store


class FakeEncoder(BaseAudioLM):
    """An encoder-only feature source: 3 layers x 20 frames x 4 dims per clip; NaN for the clips in nan_ids."""

    name = "fake-encoder"
    supports_hidden_states = True

    def __init__(self, nan_ids: frozenset[str] = frozenset()) -> None:
        super().__init__()
        self.nan_ids = nan_ids

    def hidden_items(self, prompts):
        out = []
        for p in prompts:
            x = np.random.default_rng(sum(map(ord, p.clip_id))).normal(size=(3, 20, 4)).astype(np.float32)
            if p.clip_id in self.nan_ids:
                x[1, 3, 2] = np.nan
            out.append(HiddenStates(encoder=[x]))
        return out


def synthetic_extraction(root: Path) -> None:
    """Train/test feature sets for two configs with direction signal in some representations only."""
    from vocalgrad_dataset import grid
    rng = np.random.default_rng(0)
    keys = ["mel/0", "pre_llm/0", "late_llm/2", "text/0", "text/1", "text/2",
            *(f"pos_{p}/{k}" for k in (0, 2) for p in ("a1", "a2", "a3", "a4", "attribute", "query-2", "query-1"))]
    for split, n_src in (("train", 6), ("test", 3)):
        for c, config in enumerate(("volume", "noise")):
            ids = list(grid.iter_ids([(f"item{split}{i}", f"clip{split}{i}") for i in range(n_src)]))
            rows = []
            for cid in ids:
                item, clip, cond = grid.parse_clip_id(cid)
                rows.append({"benchmark_clip_id": cid, "label": cond.label, "direction": cond.direction,
                             "curve": cond.curve, "tier": cond.tier, "source_item_id": item,
                             "source_clip_id": clip, "speaker_id": f"spk{clip[-1]}"})
            sign = np.array([1.0 if r["direction"] == "up" else -1.0 for r in rows])
            feats = {}
            for k in keys:
                x = rng.normal(size=(len(rows), 8)).astype(np.float32)
                if not k.startswith(("text/0", "pos_attribute", "pos_query")):  # these carry no signal
                    x[:, c] += 3.0 * sign
                feats[k] = x
            header = {"model": "synthetic", "revision": "r1", "adapter": None, "prompt_variant": "default",
                      "layers": "0,-1", "config_hash": store.config_hash({"split": split, "config": config})}
            w = store.FeatureWriter(root / split / config, header)
            w.write([f"u{i}" for i in range(n_src)], rows, feats)
            w.finish()
