"""The cross-category matrix (paper Figure 4): rows = adapters (by training category), columns = test categories.

    python -m finetune.report runs/lora-volume runs/lora-pitch ... --out figs/   # one row per training run

A row reads a harness run's results.json: a training directory's `eval/` (or `eval_base/` for the base
row, with `--base`), or any harness run directory given as `DIR=LABEL`.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness import plots  # sets the headless backend before pyplot loads
from harness.data import CONFIGS
from harness.results import atomic_write_text, read_results, task_metrics
from harness.tables import markdown_table, pct

MATRIX_STEM = "cross_category"


def accuracies(run_dir: str | Path) -> dict[str, float]:
    """All-clip accuracy per config of a harness run, in Table 2 order."""
    results = task_metrics(read_results(run_dir, "an evaluation run directory is needed"))
    return {c: float(results[c]["accuracy"]) for c in CONFIGS if c in results}


def matrix(rows: Mapping[str, str | Path]) -> tuple[list[str], dict[str, dict[str, float]]]:
    """(columns, {row label: {config: accuracy}}) over the configs any row has, in Table 2 order."""
    values = {label: accuracies(d) for label, d in rows.items()}
    columns = [c for c in CONFIGS if any(c in v for v in values.values())]
    return columns, values


def plot_matrix(columns: Sequence[str], values: Mapping[str, Mapping[str, float]], path: str | Path,
                title: str = "") -> Path:
    """A heatmap of accuracy (%) with each cell's value written in it; chance (50 %) is the colour midpoint."""
    import matplotlib.pyplot as plt
    import numpy as np

    labels = list(values)
    data = np.array([[100 * values[r].get(c, math.nan) for c in columns] for r in labels], dtype=float)
    fig, ax = plt.subplots(figsize=(1.0 + 0.85 * len(columns), 1.2 + 0.55 * len(labels)))
    im = ax.imshow(np.ma.masked_invalid(data), cmap="RdBu", vmin=0, vmax=100, aspect="auto")
    for i in range(len(labels)):
        for j in range(len(columns)):
            if not math.isnan(data[i, j]):
                ax.text(j, i, f"{data[i, j]:.1f}", ha="center", va="center", fontsize=8,
                        color="white" if abs(data[i, j] - 50) > 35 else "black")
    ax.set_xticks(range(len(columns)), columns, rotation=30, ha="right")
    ax.set_yticks(range(len(labels)), labels)
    ax.set_xlabel("test category")
    ax.set_ylabel("trained on")
    ax.set_title(title, fontsize=9)
    fig.colorbar(im, ax=ax, label="accuracy (%)", fraction=0.04)
    return plots.save_png(fig, path)


def write_matrix(rows: Mapping[str, str | Path], out_dir: str | Path, title: str = "") -> dict[str, Any]:
    """Write cross_category.{md,csv,png} into out_dir; returns {"columns", "rows"} (accuracies as fractions)."""
    out = Path(out_dir)
    columns, values = matrix(rows)
    body = [[label, *(pct(v.get(c)) for c in columns), pct(_mean(v, columns))] for label, v in values.items()]
    text = f"# Cross-category accuracy (%)\n\n{title}\n\n" + markdown_table(["trained on", *columns, "mean"], body) + "\n"
    atomic_write_text(out / f"{MATRIX_STEM}.md", text)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["trained_on", *columns])
    writer.writerows([label, *(f"{v[c]:.6f}" if c in v else "" for c in columns)] for label, v in values.items())
    atomic_write_text(out / f"{MATRIX_STEM}.csv", buf.getvalue())
    plot_matrix(columns, values, out / f"{MATRIX_STEM}.png", title)
    return {"columns": columns, "rows": {k: dict(v) for k, v in values.items()}}


def _mean(v: Mapping[str, float], columns: Sequence[str]) -> float:
    got = [v[c] for c in columns if c in v]
    return sum(got) / len(got) if got else math.nan


def _row_of(arg: str, base: bool) -> tuple[str, Path]:
    """(label, run dir) from `DIR` (a training directory) or `DIR=LABEL` (any harness run)."""
    path, _, label = arg.partition("=")
    d = Path(path)
    training = d / "training.json"
    if training.is_file() and not label:
        info = json.loads(training.read_text(encoding="utf-8"))
        lora = info.get("lora", {})
        label = f"{info['data']['config']} ({lora.get('scope', '?')})"
        return ("base" if base else label), d / ("eval_base" if base else "eval")
    return (label or d.name), d


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m finetune.report DIR... --out OUT`: the matrix over several training runs."""
    p = argparse.ArgumentParser(prog="python -m finetune.report", description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", help="training directories, or harness run dirs as DIR=LABEL")
    p.add_argument("--out", required=True)
    p.add_argument("--base", action="store_true", help="add the first training run's eval_base/ as a 'base' row")
    p.add_argument("--title", default="LoRA: trained category x test category")
    ns = p.parse_args(argv)
    try:
        rows = dict([_row_of(ns.runs[0], True)]) if ns.base else {}
        rows.update(_row_of(r, False) for r in ns.runs)
        write_matrix(rows, ns.out, ns.title)
    except (ValueError, FileNotFoundError, KeyError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print((Path(ns.out) / f"{MATRIX_STEM}.md").read_text(encoding="utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
