"""Direction alignment (SPEC §6): is "increase" the same direction in a layer for different categories?

Per source clip, the direction of a category is the mean of (up − down) feature differences over its 12
paired conditions (same curve and tier, opposite direction); per category, the mean over source clips.
Between categories we report the cosine per layer, signed and absolute, and the mean over the 36
category pairs (9 choose 2).
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from probing.store import RowTable


def category_direction(x: np.ndarray, rows: RowTable) -> tuple[np.ndarray, int]:
    """(direction vector, number of source clips with at least one complete up/down pair)."""
    index: dict[tuple[str, ...], dict[str, int]] = defaultdict(dict)
    for i in range(len(rows)):
        key = (rows["source_item_id"][i], rows["source_clip_id"][i], rows["curve"][i], rows["tier"][i])
        index[key][rows["direction"][i]] = i
    per_source: dict[tuple[str, str], list[np.ndarray]] = defaultdict(list)
    for key, pair in index.items():
        if "up" in pair and "down" in pair:  # a pair missing one side (a failed clip) is skipped
            per_source[key[:2]].append(x[pair["up"]].astype(np.float64) - x[pair["down"]].astype(np.float64))
    if not per_source:
        return np.full(x.shape[1], np.nan), 0
    means = [np.mean(diffs, axis=0) for diffs in per_source.values()]
    return np.mean(means, axis=0), len(means)


def cosine_matrix(vectors: Mapping[str, np.ndarray]) -> np.ndarray:
    """(C, C) cosine similarity between the category vectors, in mapping order (NaN for a zero vector)."""
    names = list(vectors)
    v = np.stack([vectors[n] for n in names]).astype(np.float64)
    norms = np.linalg.norm(v, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (v @ v.T) / np.outer(norms, norms)


def pair_means(cos: np.ndarray) -> dict[str, float]:
    """Mean signed and mean absolute cosine over the off-diagonal category pairs (36 for 9 categories)."""
    pairs = np.array([cos[i, j] for i, j in itertools.combinations(range(len(cos)), 2)], dtype=np.float64)
    ok = pairs[~np.isnan(pairs)]  # a category whose direction is exactly zero has no cosine
    if not len(ok):
        return {"mean_signed": None, "mean_absolute": None, "n_pairs": 0}
    return {"mean_signed": float(ok.mean()), "mean_absolute": float(np.abs(ok).mean()), "n_pairs": int(len(ok))}


def alignment(vectors: Mapping[str, np.ndarray], n_sources: Mapping[str, int] | None = None) -> dict[str, Any]:
    """The JSON record of one layer: configs, cosine matrix, pair means."""
    cos = cosine_matrix(vectors)
    out: dict[str, Any] = {"configs": list(vectors), "cosine": np.where(np.isnan(cos), None, cos).tolist()}
    out.update(pair_means(cos))
    if n_sources is not None:
        out["n_sources"] = dict(n_sources)
    return out


def plot_heatmap(record: Mapping[str, Any], path: str | Path, title: str = "") -> Path:
    """Signed-cosine heatmap of one layer's category directions (PNG, atomic)."""
    from harness.plots import plt, save_png

    names = record["configs"]
    cos = np.array([[np.nan if v is None else v for v in row] for row in record["cosine"]], dtype=float)
    fig, ax = plt.subplots(figsize=(1.0 + 0.6 * len(names), 0.6 + 0.6 * len(names)))
    im = ax.imshow(cos, vmin=-1, vmax=1, cmap="RdBu_r")
    ax.set_xticks(range(len(names)), names, rotation=45, ha="right")
    ax.set_yticks(range(len(names)), names)
    for i, j in itertools.product(range(len(names)), repeat=2):
        if not np.isnan(cos[i, j]):
            ax.text(j, i, f"{cos[i, j]:.2f}", ha="center", va="center", fontsize=7,
                    color="white" if abs(cos[i, j]) > 0.6 else "black")
    fig.colorbar(im, ax=ax, shrink=0.8, label="cosine (up − down)")
    signed, absolute = record.get("mean_signed"), record.get("mean_absolute")
    sub = (f"mean over {record.get('n_pairs', 0)} pair(s): signed {signed:.3f}, absolute {absolute:.3f}"
           if signed is not None else "fewer than two categories with a direction")
    ax.set_title(f"{title}\n{sub}" if title else sub, fontsize=9)
    return save_png(fig, path)
