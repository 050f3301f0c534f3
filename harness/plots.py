"""Figures of one or several runs for a paper, each returning the data it plotted.

Every `plot_*` function draws from metric summaries (harness.metrics.summarize) keyed by run label and writes
each figure twice, at print size: `<stem>.{pdf,png,svg}` 7 in wide (a double-column figure) and
`<stem>_1col.{pdf,png,svg}` 3.5 in wide (a single column), every text at >= 7 pt, the legend under the axes,
short titles (the runs are named in the legend), the Okabe & Ito (2008) colour-blind-safe palette with the
human marker in a hue no run uses, and `<stem>.csv` beside them with every plotted point and its n. The
return value is what the Axes of the 7 in figure hold, read back from the artists (bar heights, interval
ends, marker positions, axis limits, legend labels), so tests check the figure, not a file size.
"""

from __future__ import annotations

import csv
import io
import math
import textwrap
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
from matplotlib.container import BarContainer, ErrorbarContainer
from matplotlib.lines import Line2D

from harness.metrics import wilson_interval
from harness.results import atomic_write_bytes, atomic_write_text

plt.switch_backend("Agg")  # headless: reports run on servers and in CI

Summaries = Mapping[str, Mapping[str, Any]]  # config (or tier, curve) -> summarize() output
# Okabe & Ito (2008), "Color Universal Design": distinguishable under the common colour-vision deficiencies.
# Runs take these in turn; bluish green is kept for the human reference, black for published values.
PALETTE = ("#0072B2", "#D55E00", "#56B4E9", "#E69F00", "#CC79A7", "#F0E442", "#999999")
HUMAN_COLOR = "#009E73"
PUBLISHED_COLOR = "#000000"
FORMATS = ("pdf", "png", "svg")
WIDTHS = {"": 7.0, "_1col": 3.5}  # file suffix -> width in inches (double- and single-column figures)
MIN_FONT_PT = 7.0
PRINT_STYLE = {  # sizes in pt at print size (the figure is drawn at the width it is printed at)
    "font.size": 8, "axes.titlesize": 9, "axes.labelsize": 8, "xtick.labelsize": 7, "ytick.labelsize": 7,
    "legend.fontsize": 7, "figure.titlesize": 9, "pdf.fonttype": 42, "ps.fonttype": 42,
    "axes.spines.top": False, "axes.spines.right": False,
}
CI_PREFIX = "_ci:"  # errorbar containers carry "_ci:<run label>": kept out of the legend, which has one CI entry
CI_LEGEND = "95 % Wilson CI"


def save_figure(fig: Any, stem: str | Path, formats: Sequence[str] = FORMATS, *, tight: bool = False) -> list[Path]:
    """Write `<stem>.<fmt>` for each format at the figure's own size (`tight` crops to the drawing instead);
    no date or software stamp, so reruns give the same bytes."""
    paths = []
    for fmt in formats:
        buf = io.BytesIO()
        meta = {"Software": None} if fmt == "png" else {"Creator": None, "Producer": None, "CreationDate": None} \
            if fmt == "pdf" else {"Date": None, "Creator": None}
        fig.savefig(buf, format=fmt, dpi=300 if not tight else 120, metadata=meta,
                    **({"bbox_inches": "tight"} if tight else {}))
        path = Path(f"{stem}.{fmt}")
        atomic_write_bytes(path, buf.getvalue())
        paths.append(path)
    plt.close(fig)
    return paths


def save_png(fig: Any, path: str | Path) -> Path:
    """Write one PNG figure to `path` (a .png name), cropped to the drawing, and close the figure."""
    path = Path(path)
    return save_figure(fig, path.with_suffix(""), formats=("png",), tight=True)[0]


def _wrap(title: str, width: int = 70) -> str:
    """A title broken into lines of at most `width` characters."""
    return "\n".join(textwrap.wrap(title, width, break_on_hyphens=False)) or title


def _title(ax: Any, title: str) -> None:
    """The Axes title wrapped to the figure's width (about 14 characters of the 9 pt title per inch)."""
    ax.set_title(_wrap(title, int(14 * ax.figure.get_size_inches()[0])))


def _num(x: Any) -> float:
    return math.nan if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def _pct(x: Any) -> float:
    return 100 * _num(x)


def read_axes(ax: Any) -> dict[str, Any]:
    """What an Axes shows: bars and intervals per series label (NaN where a value is missing), markers, lines,
    limits, title, legend (the figure's or the Axes')."""
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
    legend = ax.get_legend() or (ax.figure.legends[0] if ax.figure.legends else None)
    return {
        "bars": bars,
        "intervals": intervals,
        "markers": markers,
        "lines": lines,
        "xticklabels": [t.get_text() for t in ax.get_xticklabels()],
        "ylim": tuple(float(v) for v in ax.get_ylim()),
        "title": ax.get_title(),
        "legend": [t.get_text() for t in legend.get_texts()] if legend else [],
        "size_in": tuple(float(v) for v in ax.figure.get_size_inches()),
    }


Drawing = tuple[Any, Any, list[dict[str, Any]]]  # (figure, its main Axes, the plotted points for the CSV)


def _render(draw: Callable[[float], Drawing], stem: str | Path, extra: Callable[[Any], dict[str, Any]] | None = None
            ) -> dict[str, Any]:
    """Draw the figure at each width in WIDTHS and save it; `<stem>.csv` gets the plotted points with their n.
    Returns read_axes of the widest figure (plus `extra(fig)`) and `points`."""
    data: dict[str, Any] = {}
    for suffix, width in WIDTHS.items():
        with plt.rc_context(PRINT_STYLE):
            fig, ax, points = draw(width)
            got = {**read_axes(ax), **(extra(fig) if extra else {}), "points": points}
            save_figure(fig, f"{stem}{suffix}")
        data = data or got
    buf = io.StringIO()
    w = csv.DictWriter(buf, ["series", "x", "value", "ci_low", "ci_high", "n"], lineterminator="\n")
    w.writeheader()
    w.writerows({k: "" if isinstance(v, float) and math.isnan(v) else v for k, v in p.items()} for p in points)
    atomic_write_text(Path(f"{stem}.csv"), buf.getvalue())
    return data


def _points(series: str, xs: Sequence[str], values: Sequence[float], lo: Sequence[float] | None = None,
            hi: Sequence[float] | None = None, n: Sequence[Any] | None = None) -> list[dict[str, Any]]:
    """The CSV rows of one plotted series (NaN values, points not drawn, are left out)."""
    out = []
    for i, (x, v) in enumerate(zip(xs, values, strict=True)):
        if not math.isnan(v):
            out.append({"series": series, "x": x, "value": round(v, 4),
                        "ci_low": round(lo[i], 4) if lo else math.nan, "ci_high": round(hi[i], 4) if hi else math.nan,
                        "n": n[i] if n else ""})
    return out


def _caps_fit(ax: Any, highs: Sequence[float], floor: float = 0.0, top: float = 100.0) -> None:
    """y from `floor` to 100, raised when an interval cap or marker would be cut (never clips a cap)."""
    peak = max([top, *[h for h in highs if not math.isnan(h)]])
    ax.set_ylim(floor, peak + 0.06 * (peak - floor))


def _legend_below(ax: Any, with_ci: bool) -> None:
    """The figure's legend under the axes in as many columns as fit the width; one "95 % Wilson CI" entry
    stands for every run's intervals (a run's own CI would double the entries)."""
    handles, labels = ax.get_legend_handles_labels()
    if with_ci:
        handles.append(Line2D([], [], ls="none", marker="$\\mathsf{I}$", ms=7, color="black"))
        labels.append(CI_LEGEND)
    longest = max((len(s) for s in labels), default=1)
    width_pt = ax.figure.get_size_inches()[0] * 72
    ncol = max(1, min(len(labels), int(width_pt // (7 * 0.55 * longest + 30))))
    ax.figure.legend(handles, labels, loc="outside lower center", ncol=ncol, frameon=False)


def _figure(width: float, n_legend: int, height: float) -> tuple[Any, Any]:
    """A figure `width` inches wide, taller by the legend rows it will need, laid out to its exact size."""
    rows = math.ceil(n_legend / max(1, int(width / 1.6)))
    return plt.subplots(figsize=(width, height + 0.16 * rows), layout="constrained")


def _bar_xs(runs: Mapping[str, Any], label: str | None, n: int) -> list[float]:
    """x of a run's bars in a grouped bar chart (category i spans i ± 0.4); the centres without a run."""
    if label not in runs:
        return [float(i) for i in range(n)]
    width = 0.8 / max(1, len(runs))
    j = list(runs).index(label)
    return [i - 0.4 + width * (j + 0.5) for i in range(n)]


def _reference_marks(ax: Any, names: Sequence[str], runs: Mapping[str, Any], human: Mapping[str, float] | None,
                     published: Mapping[str, Mapping[str, float]], published_over: Mapping[str, str],
                     shift: float = 0.0) -> tuple[list[float], list[dict[str, Any]]]:
    """The paper's human accuracy (a bluish-green star, a hue no run uses) and published values (hollow
    black diamonds over their run's bars); their heights and CSV points."""
    highs: list[float] = []
    points: list[dict[str, Any]] = []
    if human:
        ys = [float(human.get(c, math.nan)) - shift for c in names]
        ax.plot(range(len(names)), ys, ls="None", marker="*", ms=8, color=HUMAN_COLOR, mec="black", mew=0.4,
                label="human (paper)", zorder=4)
        highs += ys
        points += _points("human (paper)", names, ys)
    for label, values in published.items():
        ys = [float(values.get(c, math.nan)) - shift for c in names]
        ax.plot(_bar_xs(runs, published_over.get(label), len(names)), ys, ls="None", marker="D", ms=4,
                color=PUBLISHED_COLOR, mfc="white", mew=0.9, label=f"{label} (paper)", zorder=4)
        highs += ys
        points += _points(f"{label} (paper)", names, ys)
    return highs, points


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

    def draw(width: float) -> Drawing:
        fig, ax = _figure(width, k + bool(human) + len(published or {}) + 2, 2.6 if width < 5 else 3.0)
        highs: list[float] = []
        points: list[dict[str, Any]] = []
        for j, (label, summaries) in enumerate(runs.items()):
            xs = _bar_xs(runs, label, len(names))
            acc = [_pct(summaries.get(c, {}).get("accuracy")) for c in names]
            lo = [_pct(summaries.get(c, {}).get("accuracy_ci_low")) for c in names]
            hi = [_pct(summaries.get(c, {}).get("accuracy_ci_high")) for c in names]
            ax.bar(xs, acc, 0.8 / k * 0.92, color=PALETTE[j % len(PALETTE)], label=label)
            err = [[a - lo_ for a, lo_ in zip(acc, lo, strict=True)], [h - a for a, h in zip(acc, hi, strict=True)]]
            ax.errorbar(xs, acc, yerr=err, fmt="none", ecolor="black", capsize=2, lw=0.8, label=CI_PREFIX + label)
            highs += hi
            points += _points(label, names, acc, lo, hi, [summaries.get(c, {}).get("n", "") for c in names])
        more, refs = _reference_marks(ax, names, runs, human, published or {}, published_over or {})
        ax.axhline(50, color="grey", ls="--", lw=0.8, label="chance (50 %)")
        ax.set_xticks(list(range(len(names))), names, rotation=35 if width < 5 else 20, ha="right")
        _caps_fit(ax, highs + more)
        ax.set_ylabel("accuracy (%)")
        _title(ax, title)
        _legend_below(ax, with_ci=True)
        return fig, ax, points + refs

    return _render(draw, stem)


def plot_breakdown(runs: Mapping[str, Summaries], key: str, stem: str | Path, order: Sequence[str] = (),
                   title: str = "") -> dict[str, Any]:
    """Accuracy (%) by one factor (tier, curve) pooled over the run's categories: markers per run (no line:
    the values are categories, not a continuum), dodged, with Wilson 95 % intervals; `runs` maps
    label -> {value: summary}."""
    values = list(order) or list(dict.fromkeys(v for s in runs.values() for v in s))
    values = [v for v in values if any(v in s for s in runs.values())]
    shapes = ("o", "s", "^", "v", "P", "X", "h")

    def draw(width: float) -> Drawing:
        fig, ax = _figure(width, len(runs) + 2, 2.4 if width < 5 else 2.8)
        highs: list[float] = []
        points: list[dict[str, Any]] = []
        step = min(0.12, 0.6 / max(1, len(runs)))
        for j, (label, cells) in enumerate(runs.items()):
            acc = [_pct(cells.get(v, {}).get("accuracy")) for v in values]
            lo = [_pct(cells.get(v, {}).get("accuracy_ci_low")) for v in values]
            hi = [_pct(cells.get(v, {}).get("accuracy_ci_high")) for v in values]
            color = PALETTE[j % len(PALETTE)]
            xs = [i + step * (j - (len(runs) - 1) / 2) for i in range(len(values))]  # dodge overlapping caps
            ax.plot(xs, acc, ls="None", marker=shapes[j % len(shapes)], ms=4.5, color=color, label=label)
            ax.errorbar(xs, acc, yerr=[[a - lo_ for a, lo_ in zip(acc, lo, strict=True)],
                                       [h - a for a, h in zip(acc, hi, strict=True)]],
                        fmt="none", ecolor=color, capsize=2, lw=0.8, label=CI_PREFIX + label)
            highs += hi
            points += _points(label, values, acc, lo, hi, [cells.get(v, {}).get("n", "") for v in values])
        ax.axhline(50, color="grey", ls="--", lw=0.8, label="chance (50 %)")
        ax.set_xticks(list(range(len(values))), [v.replace("_", " ") for v in values],
                      rotation=20 if width < 5 else 0, ha="right" if width < 5 else "center")
        ax.set_xlim(-0.5, len(values) - 0.5)
        _caps_fit(ax, highs)
        ax.set_xlabel(key)
        ax.set_ylabel("accuracy (%)")
        _title(ax, title or f"Accuracy by {key}")
        _legend_below(ax, with_ci=True)
        return fig, ax, points

    return _render(draw, stem)


def plot_increase_bias(runs: Mapping[str, Summaries], stem: str | Path,
                       title: str = '"increase" bias by category',
                       published: Mapping[str, Mapping[str, float]] | None = None,
                       published_over: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Grouped bars of (share of parsed answers that are "increase") − 50, in points, per category and
    run, with the Wilson 95 % interval of that share over the parsed answers; a run's published bias (from
    the paper's counts) as markers (over that run's bars with `published_over`, as in plot_accuracy).
    0 = unbiased; a category a run did not evaluate (or with no parsed answer) has no bar (NaN in the
    returned data)."""
    names = list(dict.fromkeys(c for s in runs.values() for c in s))
    k = max(1, len(runs))

    def draw(width: float) -> Drawing:
        fig, ax = _figure(width, k + len(published or {}) + 1, 2.6 if width < 5 else 3.0)
        points: list[dict[str, Any]] = []
        for j, (label, summaries) in enumerate(runs.items()):
            xs = _bar_xs(runs, label, len(names))
            share = [_num(summaries.get(c, {}).get("increase_ratio")) for c in names]
            n = [summaries.get(c, {}).get("n_parsed") or 0 for c in names]
            bias = [100 * p - 50 for p in share]
            ci = [wilson_interval(p, m) for p, m in zip(share, n, strict=True)]
            lo, hi = [100 * a - 50 for a, _ in ci], [100 * b - 50 for _, b in ci]
            ax.bar(xs, bias, 0.8 / k * 0.92, color=PALETTE[j % len(PALETTE)], label=label)
            ax.errorbar(xs, bias, yerr=[[b - a for a, b in zip(lo, bias, strict=True)],
                                        [h - b for b, h in zip(bias, hi, strict=True)]],
                        fmt="none", ecolor="black", capsize=2, lw=0.8, label=CI_PREFIX + label)
            points += _points(label, names, bias, lo, hi, n)
        _, refs = _reference_marks(ax, names, runs, None, published or {}, published_over or {}, shift=50)
        ax.axhline(0, color="black", lw=0.8)
        ax.set_xticks(list(range(len(names))), names, rotation=35 if width < 5 else 20, ha="right")
        ax.set_ylim(-55, 55)
        ax.set_ylabel('"increase" share − 50 (points)')
        _title(ax, title)
        _legend_below(ax, with_ci=True)
        return fig, ax, points + refs

    return _render(draw, stem)


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
    """One gold x answer count matrix per run (ternary / yes-no configs, classification tasks), cells annotated with the count and
    its share of the gold row; returns the counts read back from the cell labels."""
    k = max(1, len(runs))
    cols = [*labels, "unparsed"]

    # a panel 2.3 in wide and high; more labels (a classification task's) get taller rows for the 2-line cells
    panel = max(2.3, 0.34 * len(labels) + 0.9)

    def draw(width: float) -> Drawing:
        per_row = max(1, min(k, int(width // max(2.3, 0.5 * len(cols)))))
        n_rows = math.ceil(k / per_row)
        fig, axes = plt.subplots(n_rows, per_row, figsize=(width, panel * n_rows + 0.3), squeeze=False,
                                 layout="constrained")
        out: dict[str, Any] = {"labels": list(labels), "columns": cols, "counts": {}}
        points: list[dict[str, Any]] = []
        for ax in axes.flat[k:]:
            ax.set_visible(False)
        for n, (ax, (label, rows)) in enumerate(zip(axes.flat, runs.items(), strict=False)):
            counts = confusion_counts(rows, labels)
            shares = [[v / (sum(row) or 1) for v in row] for row in counts]  # colour: share of the gold row
            ax.imshow(shares, cmap="Blues", vmin=0, vmax=1, aspect="auto")
            for i, row in enumerate(counts):
                for j, v in enumerate(row):
                    ax.text(j, i, f"{v}\n{100 * shares[i][j]:.0f}%", ha="center", va="center", fontsize=MIN_FONT_PT,
                            color="white" if shares[i][j] > 0.6 else "black")
                    points.append({"series": label, "x": f"{labels[i]} -> {cols[j]}", "value": v,
                                   "ci_low": math.nan, "ci_high": math.nan, "n": sum(row)})
            ax.set_xticks(range(len(cols)), cols, rotation=30, ha="right")
            ax.set_yticks(range(len(labels)), labels if n % per_row == 0 else [""] * len(labels))
            ax.set_xlabel("answer")
            if n % per_row == 0:
                ax.set_ylabel("gold label")
            ax.set_title(_wrap(label, 30), fontsize=8)
            texts = [int(t.get_text().split("\n")[0]) for t in ax.texts]
            out["counts"][label] = [texts[i * len(cols):(i + 1) * len(cols)] for i in range(len(labels))]
        if title:
            fig.suptitle(_wrap(title, int(14 * width)))
        found[fig] = out
        return fig, axes.flat[0], points

    found: dict[Any, dict[str, Any]] = {}
    return _render(draw, stem, extra=lambda fig: found[fig])
