"""Figures of a run: accuracy with 95 % intervals and "increase" bias, per category (PNG, atomic)."""

from __future__ import annotations

import io
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # headless: reports run on servers and in CI
import matplotlib.pyplot as plt  # noqa: E402

from harness.results import atomic_write_bytes  # noqa: E402


def _save(fig: Any, path: str | Path) -> Path:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())
    return Path(path)


def _nan0(x: Any) -> float:
    return 0.0 if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def plot_accuracy(summaries: Mapping[str, Mapping[str, Any]], path: str | Path, title: str = "") -> Path:
    """Bars of all-clip accuracy per category with binomial and clustered 95 % intervals; chance at 50 %."""
    names = list(summaries)
    acc = [100 * _nan0(summaries[c]["accuracy"]) for c in names]
    lo = [a - 100 * _nan0(summaries[c].get("accuracy_ci_low")) for a, c in zip(acc, names, strict=True)]
    hi = [100 * _nan0(summaries[c].get("accuracy_ci_high")) - a for a, c in zip(acc, names, strict=True)]
    cl = [100 * 1.96 * _nan0(summaries[c].get("accuracy_cluster_stderr")) for c in names]
    fig, ax = plt.subplots(figsize=(max(4.0, 0.8 * len(names) + 1.5), 3.6))
    x = range(len(names))
    ax.bar(x, acc, color="#4C72B0", yerr=[lo, hi], capsize=4, label="accuracy (binomial 95 % CI)")
    ax.errorbar([i + 0.18 for i in x], acc, yerr=cl, fmt="none", ecolor="#DD8452", capsize=3,
                label="clustered by source clip")
    ax.axhline(50, color="grey", ls="--", lw=1, label="chance")
    ax.set_xticks(list(x), names, rotation=30, ha="right")
    ax.set_ylim(0, 100)
    ax.set_ylabel("accuracy, all clips (%)")
    ax.set_title(title)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.28), ncol=3, frameon=False)
    return _save(fig, path)


def plot_increase_bias(summaries: Mapping[str, Mapping[str, Any]], path: str | Path, title: str = "") -> Path:
    """Bars of (share of parsed answers that are "increase") − 50 % per category: answer bias."""
    names = list(summaries)
    bias = [100 * (_nan0(summaries[c]["increase_ratio"]) - 0.5) for c in names]
    fig, ax = plt.subplots(figsize=(max(4.0, 0.8 * len(names) + 1.5), 3.2))
    ax.bar(range(len(names)), bias, color=["#C44E52" if b > 0 else "#55A868" for b in bias])
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xticks(list(range(len(names))), names, rotation=30, ha="right")
    ax.set_ylim(-52, 52)
    ax.set_ylabel('"increase" share − 50 (pp)')
    ax.set_title(title)
    return _save(fig, path)
