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
from matplotlib.lines import Line2D

from harness.results import atomic_write_bytes

plt.switch_backend("Agg")  # headless: reports run on servers and in CI

Summaries = Mapping[str, Mapping[str, Any]]  # config (or tier, curve) -> summarize() output
PALETTE = ("#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C")
FORMATS = ("png", "svg")
CI_PREFIX = "_ci:"  # errorbar containers carry "_ci:<run label>": kept out of the legend, which has one CI entry
CI_LEGEND = "95 % Wilson CI"


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
    return "\n".join(textwrap.wrap(title, width, break_on_hyphens=False)) or title


def _title(ax: Any, title: str) -> None:
    """The Axes title wrapped to the figure's width (about 9 characters of the 12 pt title per inch)."""
    ax.set_title(_wrap(title, max(50, int(9 * ax.figure.get_size_inches()[0]))))


def _num(x: Any) -> float:
    return math.nan if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def _pct(x: Any) -> float:
    return 100 * _num(x)


def read_axes(ax: Any) -> dict[str, Any]:
    """What an Axes shows: bars and intervals per series label (NaN where a value is missing), markers, lines,
    limits, title, legend."""
    bars: dict[str, list[float]] = {}
    intervals: dict[str, list[tuple[float, float]]] = {}
    for c in ax.containers:
        if isinstance(c, BarContainer):
            bars[str(c.get_label())] = [float(p.get_height()) for p in c.patches]  # signed
        elif isinstance(c, ErrorbarContainer):
            segs = c.lines[2][0].get_segments() if c.lines[2] else []
            # an empty segment is a missing value (NaN): no interval drawn
            intervals[str(c.get_label()).removeprefix(CI_PREFIX)] = [
                (float(s[0][1]), float(s[1][1])) if len(s) else (math.nan, math.nan) for s in segs]
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


def _legend_below(ax: Any, n_entries: int, with_ci: bool, offset: float) -> None:
    """The legend under the axes in as many columns as fit; one "95 % Wilson CI" entry stands for every
    run's intervals (a run's own CI would double the entries)."""
    handles, labels = ax.get_legend_handles_labels()
    if with_ci:
        handles.append(Line2D([], [], ls="none", marker="$\\mathsf{I}$", ms=8, color="black"))
        labels.append(CI_LEGEND)
    longest = max((len(s) for s in labels), default=1)
    width_in = ax.figure.get_size_inches()[0]
    ncol = max(1, min(n_entries + int(with_ci), int(width_in * 72 / (7 * 0.6 * longest + 40))))
    ax.legend(handles, labels, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, offset), ncol=ncol,
              frameon=False)


def _bar_xs(runs: Mapping[str, Any], label: str | None, n: int) -> list[float]:
    """x of a run's bars in a grouped bar chart (category i spans i ± 0.4); the centres without a run."""
    if label not in runs:
        return [float(i) for i in range(n)]
    width = 0.8 / max(1, len(runs))
    j = list(runs).index(label)
    return [i - 0.4 + width * (j + 0.5) for i in range(n)]


def plot_accuracy(runs: Mapping[str, Summaries], stem: str | Path, title: str = "Accuracy by category",
                  human: Mapping[str, float] | None = None,
                  published: Mapping[str, Mapping[str, float]] | None = None,
                  published_over: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Grouped bars: all-clip accuracy (%) per category for each run, Wilson 95 % intervals, chance at 50 %,
    the paper's human accuracy and a run's published accuracy as markers (both in %). `published_over`
    puts a published series (by its label) over the bars of a run (by its label) instead of the category
    centre. A category a run did not evaluate gets no bar and no interval (NaN in the returned data)."""
    names = list(dict.fromkeys(c for s in runs.values() for c in s))
    k = max(1, len(runs))
    width = 0.8 / k
    fig, ax = plt.subplots(figsize=(max(6.0, 0.45 * len(names) * (k + 1) + 2), 4.2))
    highs: list[float] = []
    for j, (label, summaries) in enumerate(runs.items()):
        xs = _bar_xs(runs, label, len(names))
        acc = [_pct(summaries.get(c, {}).get("accuracy")) for c in names]
        lo = [_pct(summaries.get(c, {}).get("accuracy_ci_low")) for c in names]
        hi = [_pct(summaries.get(c, {}).get("accuracy_ci_high")) for c in names]
        ax.bar(xs, acc, width * 0.92, color=PALETTE[j % len(PALETTE)], label=label)
        err = [[a - lo_ for a, lo_ in zip(acc, lo, strict=True)], [h - a for a, h in zip(acc, hi, strict=True)]]
        ax.errorbar(xs, acc, yerr=err, fmt="none", ecolor="black", capsize=3, lw=0.9, label=CI_PREFIX + label)
        highs += hi
    if human:
        ys = [float(human.get(c, math.nan)) for c in names]
        ax.plot(range(len(names)), ys, ls="None", marker="_", ms=18, mew=2.5, color="#2ca02c",
                label="human (paper)")
        highs += ys
    for label, values in (published or {}).items():
        ys = [float(values.get(c, math.nan)) for c in names]
        ax.plot(_bar_xs(runs, (published_over or {}).get(label), len(names)), ys, ls="None", marker="D", ms=5,
                color="#555555", mfc="white", label=f"{label} (paper)")
        highs += ys
    ax.axhline(50, color="grey", ls="--", lw=1, label="chance (50 %)")
    ax.set_xticks(list(range(len(names))), names, rotation=30, ha="right")
    _caps_fit(ax, highs)
    ax.set_ylabel("accuracy, all clips (%)")
    _title(ax, title)
    _legend_below(ax, k + bool(human) + len(published or {}) + 1, with_ci=True, offset=-0.25)
    data = read_axes(ax)
    save_figure(fig, stem)
    return data


def plot_breakdown(runs: Mapping[str, Summaries], key: str, stem: str | Path, order: Sequence[str] = (),
                   title: str = "") -> dict[str, Any]:
    """Accuracy (%) by one factor (tier, curve) pooled over the run's categories: a line per run with
    Wilson 95 % intervals; `runs` maps label -> {value: summary}."""
    values = list(order) or list(dict.fromkeys(v for s in runs.values() for v in s))
    values = [v for v in values if any(v in s for s in runs.values())]
    fig, ax = plt.subplots(figsize=(max(6.0, 1.3 * len(values) + 2), 3.8))
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
                    fmt="none", ecolor=color, capsize=3, lw=0.9, label=CI_PREFIX + label)
        highs += hi
    ax.axhline(50, color="grey", ls="--", lw=1, label="chance (50 %)")
    ax.set_xticks(list(range(len(values))), values)
    _caps_fit(ax, highs)
    ax.set_xlabel(key)
    ax.set_ylabel("accuracy, all clips (%)")
    _title(ax, title or f"Accuracy by {key}")
    _legend_below(ax, len(runs) + 1, with_ci=True, offset=-0.2)
    data = read_axes(ax)
    save_figure(fig, stem)
    return data


def plot_increase_bias(runs: Mapping[str, Summaries], stem: str | Path,
                       title: str = '"increase" bias by category',
                       published: Mapping[str, Mapping[str, float]] | None = None,
                       published_over: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Grouped bars of (share of parsed answers that are "increase") − 50, in points, per category and
    run; a run's published bias (from the paper's counts) as markers (over that run's bars with
    `published_over`, as in plot_accuracy). 0 = unbiased; a category a run did
    not evaluate (or with no parsed answer) has no bar (NaN in the returned data)."""
    names = list(dict.fromkeys(c for s in runs.values() for c in s))
    k = max(1, len(runs))
    width = 0.8 / k
    fig, ax = plt.subplots(figsize=(max(6.0, 0.45 * len(names) * (k + 1) + 2), 3.8))
    for j, (label, summaries) in enumerate(runs.items()):
        xs = _bar_xs(runs, label, len(names))
        bias = [_pct(summaries.get(c, {}).get("increase_ratio")) - 50 for c in names]
        ax.bar(xs, bias, width * 0.92, color=PALETTE[j % len(PALETTE)], label=label)
    for label, values in (published or {}).items():
        ys = [float(values.get(c, math.nan)) - 50 for c in names]
        ax.plot(_bar_xs(runs, (published_over or {}).get(label), len(names)), ys, ls="None", marker="D", ms=5,
                color="#555555", mfc="white", label=f"{label} (paper)")
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xticks(list(range(len(names))), names, rotation=30, ha="right")
    ax.set_ylim(-55, 55)
    ax.set_ylabel('"increase" share − 50 (points)\n> 0: answers "increase" too often')
    _title(ax, title)
    _legend_below(ax, k + len(published or {}), with_ci=False, offset=-0.25)
    data = read_axes(ax)
    save_figure(fig, stem)
    return data


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
