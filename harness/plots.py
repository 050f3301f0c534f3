"""Figures of one or several runs (PNG and SVG, written atomically), each returning the data it plotted.

Every `plot_*` function draws from metric summaries (harness.metrics.summarize) keyed by run label, saves
`<stem>.png` and `<stem>.svg`, and returns what the Axes hold, read back from the artists (bar heights,
interval ends, marker positions, axis limits, legend labels), so tests check the figure, not a file size.
"""

from __future__ import annotations

import io
import math
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
from matplotlib.container import BarContainer, ErrorbarContainer

from harness.results import atomic_write_bytes

plt.switch_backend("Agg")  # headless: reports run on servers and in CI

Summaries = Mapping[str, Mapping[str, Any]]  # config (or tier, curve) -> summarize() output
PALETTE = ("#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C")
FORMATS = ("png", "svg")


def save_figure(fig: Any, stem: str | Path, formats: Sequence[str] = FORMATS) -> list[Path]:
    """Write `<stem>.png` and `<stem>.svg` (no date or software stamp, so reruns give the same bytes)."""
    paths = []
    for fmt in formats:
        buf = io.BytesIO()
        meta = {"Software": None} if fmt == "png" else {"Date": None, "Creator": None}
        fig.savefig(buf, format=fmt, dpi=120, bbox_inches="tight", metadata=meta)
        path = Path(f"{stem}.{fmt}")
        atomic_write_bytes(path, buf.getvalue())
        paths.append(path)
    plt.close(fig)
    return paths


def save_png(fig: Any, path: str | Path) -> Path:
    """Write one PNG figure to `path` (a .png name) and close the figure."""
    path = Path(path)
    return save_figure(fig, path.with_suffix(""), formats=("png",))[0]


def _wrap(title: str, width: int = 70) -> str:
    """A title broken into lines of at most `width` characters (several run names stay readable)."""
    return "\n".join(textwrap.wrap(title, width)) or title


def _num(x: Any) -> float:
    return math.nan if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def _pct(x: Any) -> float:
    return 100 * _num(x)


def read_axes(ax: Any) -> dict[str, Any]:
    """What an Axes shows: bars and intervals per series label, markers, lines, limits, title, legend."""
    bars: dict[str, list[float]] = {}
    intervals: dict[str, list[tuple[float, float]]] = {}
    for c in ax.containers:
        if isinstance(c, BarContainer):
            bars[str(c.get_label())] = [float(p.get_height()) for p in c.patches]  # signed
        elif isinstance(c, ErrorbarContainer):
            segs = c.lines[2][0].get_segments() if c.lines[2] else []
            intervals[str(c.get_label())] = [(float(s[0][1]), float(s[1][1])) for s in segs]
    markers: dict[str, list[tuple[float, float]]] = {}
    lines: dict[str, list[float]] = {}
    for line in ax.get_lines():
        label = str(line.get_label())
        if label.startswith("_"):
            continue
        ys = [float(v) for v in line.get_ydata()]
        if line.get_linestyle() in ("None", "", " "):
            markers[label] = [(float(x), y) for x, y in zip(line.get_xdata(), ys, strict=True)]
        else:
            lines[label] = ys
    legend = ax.get_legend()
    return {
        "bars": bars,
        "intervals": intervals,
        "markers": markers,
        "lines": lines,
        "xticklabels": [t.get_text() for t in ax.get_xticklabels()],
        "ylim": tuple(float(v) for v in ax.get_ylim()),
        "title": ax.get_title(),
        "legend": [t.get_text() for t in legend.get_texts()] if legend else [],
    }


def _caps_fit(ax: Any, highs: Sequence[float], floor: float = 0.0, top: float = 100.0) -> None:
    """y from `floor` to 100, raised when an interval cap or marker would be cut (never clips a cap)."""
    peak = max([top, *[h for h in highs if not math.isnan(h)]])
    ax.set_ylim(floor, peak + 0.06 * (peak - floor))


def _category_bars(runs: Mapping[str, Summaries], height: float) -> tuple[list[str], Any, Any, float]:
    """(categories, figure, axes, bar width) for grouped bars: one group per category, one bar per run."""
    names = list(dict.fromkeys(c for s in runs.values() for c in s))
    k = max(1, len(runs))
    fig, ax = plt.subplots(figsize=(max(6.0, 0.55 * len(names) * (k + 1) + 2), height))
    return names, fig, ax, 0.8 / k


def _bar_xs(n: int, j: int, width: float) -> list[float]:
    """The x of run `j`'s bar in each of `n` groups."""
    return [i - 0.4 + width * (j + 0.5) for i in range(n)]


def _bars(ax: Any, xs: Sequence[float], heights: Sequence[float], width: float, j: int, label: str) -> None:
    """Run `j`'s bars (a missing value draws none: height 0)."""
    ax.bar(xs, [0.0 if math.isnan(h) else h for h in heights], width * 0.92, color=PALETTE[j % len(PALETTE)],
           label=label)


def _published_markers(ax: Any, published: Mapping[str, Mapping[str, float]] | None, names: Sequence[str],
                       shift: float = 0.0) -> list[float]:
    """A run's published values (minus `shift`) as diamonds over the categories; the y values drawn."""
    highs: list[float] = []
    for label, values in (published or {}).items():
        ys = [float(values.get(c, math.nan)) - shift for c in names]
        ax.plot(range(len(names)), ys, ls="None", marker="D", ms=5, color="#555555", mfc="white",
                label=f"{label} (paper)")
        highs += ys
    return highs


def _category_ticks(ax: Any, names: Sequence[str]) -> None:
    ax.set_xticks(list(range(len(names))), names, rotation=30, ha="right")


def _finish(fig: Any, ax: Any, stem: str | Path, title: str, *, legend_y: float, ncol: int) -> dict[str, Any]:
    """Title, legend below the axes, save; what the axes show (read back before the figure is closed)."""
    ax.set_title(_wrap(title))
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, legend_y), ncol=ncol, frameon=False)
    data = read_axes(ax)
    save_figure(fig, stem)
    return data


def plot_accuracy(runs: Mapping[str, Summaries], stem: str | Path, title: str = "Accuracy by category",
                  human: Mapping[str, float] | None = None,
                  published: Mapping[str, Mapping[str, float]] | None = None) -> dict[str, Any]:
    """Grouped bars: all-clip accuracy (%) per category for each run, Wilson 95 % intervals, chance at 50 %,
    the paper's human accuracy and a run's published accuracy as markers (both in %)."""
    names, fig, ax, width = _category_bars(runs, 4.2)
    highs: list[float] = []
    for j, (label, summaries) in enumerate(runs.items()):
        xs = _bar_xs(len(names), j, width)
        acc = [_pct(summaries.get(c, {}).get("accuracy")) for c in names]
        lo = [_pct(summaries.get(c, {}).get("accuracy_ci_low")) for c in names]
        hi = [_pct(summaries.get(c, {}).get("accuracy_ci_high")) for c in names]
        _bars(ax, xs, acc, width, j, label)
        err = [[0.0 if math.isnan(a - lo_) else a - lo_ for a, lo_ in zip(acc, lo, strict=True)],
               [0.0 if math.isnan(h - a) else h - a for a, h in zip(acc, hi, strict=True)]]
        ax.errorbar(xs, [0.0 if math.isnan(a) else a for a in acc], yerr=err, fmt="none", ecolor="black",
                    capsize=3, lw=0.9, label=f"{label} 95 % CI")
        highs += hi
    if human:
        ys = [float(human.get(c, math.nan)) for c in names]
        ax.plot(range(len(names)), ys, ls="None", marker="_", ms=18, mew=2.5, color="#2ca02c",
                label="human (paper)")
        highs += ys
    highs += _published_markers(ax, published, names)
    ax.axhline(50, color="grey", ls="--", lw=1, label="chance (50 %)")
    _category_ticks(ax, names)
    _caps_fit(ax, highs)
    ax.set_ylabel("accuracy, all clips (%)")
    return _finish(fig, ax, stem, title, legend_y=-0.3, ncol=min(4, max(1, len(runs)) + 2))


def plot_breakdown(runs: Mapping[str, Summaries], key: str, stem: str | Path, order: Sequence[str] = (),
                   title: str = "") -> dict[str, Any]:
    """Accuracy (%) by one factor (tier, curve) pooled over the run's categories: a line per run with
    Wilson 95 % intervals; `runs` maps label -> {value: summary}."""
    values = list(order) or list(dict.fromkeys(v for s in runs.values() for v in s))
    values = [v for v in values if any(v in s for s in runs.values())]
    fig, ax = plt.subplots(figsize=(max(4.5, 1.3 * len(values) + 2), 3.8))
    highs: list[float] = []
    for j, (label, cells) in enumerate(runs.items()):
        acc = [_pct(cells.get(v, {}).get("accuracy")) for v in values]
        lo = [_pct(cells.get(v, {}).get("accuracy_ci_low")) for v in values]
        hi = [_pct(cells.get(v, {}).get("accuracy_ci_high")) for v in values]
        color = PALETTE[j % len(PALETTE)]
        xs = [i + 0.06 * (j - (len(runs) - 1) / 2) for i in range(len(values))]  # dodge overlapping caps
        ax.plot(xs, acc, marker="o", color=color, label=label)
        ax.errorbar(xs, acc, yerr=[[a - lo_ for a, lo_ in zip(acc, lo, strict=True)],
                                   [h - a for a, h in zip(acc, hi, strict=True)]],
                    fmt="none", ecolor=color, capsize=3, lw=0.9, label=f"{label} 95 % CI")
        highs += hi
    ax.axhline(50, color="grey", ls="--", lw=1, label="chance (50 %)")
    ax.set_xticks(list(range(len(values))), values)
    _caps_fit(ax, highs)
    ax.set_xlabel(key)
    ax.set_ylabel("accuracy, all clips (%)")
    return _finish(fig, ax, stem, title or f"Accuracy by {key}", legend_y=-0.22, ncol=min(4, len(runs) + 1))


def plot_increase_bias(runs: Mapping[str, Summaries], stem: str | Path,
                       title: str = '"increase" bias by category',
                       published: Mapping[str, Mapping[str, float]] | None = None) -> dict[str, Any]:
    """Grouped bars of (share of parsed answers that are "increase") − 50, in points, per category and
    run; a run's published bias (from the paper's counts) as markers. 0 = unbiased."""
    names, fig, ax, width = _category_bars(runs, 3.8)
    for j, (label, summaries) in enumerate(runs.items()):
        bias = [_pct(summaries.get(c, {}).get("increase_ratio")) - 50 for c in names]
        _bars(ax, _bar_xs(len(names), j, width), bias, width, j, label)
    _published_markers(ax, published, names, shift=50)
    ax.axhline(0, color="black", lw=0.8)
    _category_ticks(ax, names)
    ax.set_ylim(-55, 55)
    ax.set_ylabel('"increase" share − 50 (points)\n> 0: answers "increase" too often')
    return _finish(fig, ax, stem, title, legend_y=-0.3, ncol=min(4, max(1, len(runs)) + 1))


def confusion_counts(rows: Sequence[Mapping[str, Any]], labels: Sequence[str]) -> list[list[int]]:
    """counts[gold][answer] over `labels` + an "unparsed" column (error rows count as unparsed)."""
    cols = [*labels, "unparsed"]
    out = [[0] * len(cols) for _ in labels]
    for r in rows:
        if r["gold"] not in labels:
            continue
        pred = None if r.get("error") else r.get("pred")
        out[list(labels).index(r["gold"])][cols.index(pred if pred in labels else "unparsed")] += 1
    return out


def plot_confusion(runs: Mapping[str, Sequence[Mapping[str, Any]]], labels: Sequence[str], stem: str | Path,
                   title: str = "") -> dict[str, Any]:
    """One gold x answer count matrix per run (ternary / yes-no configs), cells annotated with the count and
    its share of the gold row; returns the counts read back from the cell labels."""
    k = max(1, len(runs))
    fig, axes = plt.subplots(1, k, figsize=(3.2 * k + 1.2, 3.4), squeeze=False, sharey=True,
                             layout="constrained")
    cols = [*labels, "unparsed"]
    out: dict[str, Any] = {"labels": list(labels), "columns": cols, "counts": {}}
    for n, (ax, (label, rows)) in enumerate(zip(axes[0], runs.items(), strict=True)):
        counts = confusion_counts(rows, labels)
        shares = [[v / (sum(row) or 1) for v in row] for row in counts]  # colour: share of the gold row
        ax.imshow(shares, cmap="Blues", vmin=0, vmax=1, aspect="auto")
        for i, row in enumerate(counts):
            for j, v in enumerate(row):
                ax.text(j, i, f"{v}\n{100 * shares[i][j]:.0f}%", ha="center", va="center", fontsize=7,
                        color="white" if shares[i][j] > 0.6 else "black")
        ax.set_xticks(range(len(cols)), cols, rotation=30, ha="right")
        ax.set_yticks(range(len(labels)), labels)
        ax.set_xlabel("answer")
        if n == 0:
            ax.set_ylabel("gold label")
        ax.set_title(_wrap(label, 30), fontsize=9)
        texts = [int(t.get_text().split("\n")[0]) for t in ax.texts]
        out["counts"][label] = [texts[i * len(cols):(i + 1) * len(cols)] for i in range(len(labels))]
    fig.suptitle(_wrap(title))
    save_figure(fig, stem)
    return out
