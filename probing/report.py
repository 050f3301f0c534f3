"""Figures and tables of a probing run: `python -m probing.report RUN [--harness EVAL_RUN]`.

RUN is an extraction directory after `python -m probing.train RUN` (it reads RUN/probes/results.json and
directions.json). Writes into RUN/probes/report/ (or --out):
- fig2_stages.png: probe accuracy by pipeline stage (mel -> encoder -> pre-LLM audio -> late-LLM audio ->
  text-prediction state), one panel per category, with the model's end-to-end accuracy beside it when a
  harness run is given: the "knows but doesn't say" gap.
- fig3_layers.png: accuracy by layer (text-prediction state, or encoder layers for encoder-only sources),
  one line per category.
- positions.png / positions.csv: position-wise accuracy (a1..a4, attribute, last query tokens, output)
  by layer, mean over categories (the CSV also has each category).
- cosine_<rep>_<layer>.png: the direction-alignment heatmap of one layer (--layer, default the last).
- probe_accuracy.csv, knows_vs_says.csv and report.md (all tables in Markdown).
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

import numpy as np

from harness.plots import plt, save_png
from harness.results import atomic_write_text, task_metrics
from harness.tables import markdown_table, pct
from probing.directions import plot_heatmap
from probing.train import rep_sort_key

POSITIONS = ("a1", "a2", "a3", "a4", "attribute", "query-2", "query-1", "output")


def load_probe_results(run: str | Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(results.json, directions.json) of a trained run, with a clear error when training has not run."""
    folder = Path(run) / "probes"
    path = folder / "results.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: run `python -m probing.train {run}` first")
    results = json.loads(path.read_text(encoding="utf-8"))
    for key in ("probes", "configs"):
        if key not in results:
            raise ValueError(f"{path}: missing field {key!r}")
    dpath = folder / "directions.json"
    directions = json.loads(dpath.read_text(encoding="utf-8")) if dpath.is_file() else {}
    return results, directions


def _harness_results(harness_run: str | Path) -> tuple[Path, dict[str, Any]]:
    """A harness run's results.json (given its folder or the file) and its path, for errors to name."""
    path = Path(harness_run)
    path = path / "results.json" if path.is_dir() else path
    if not path.is_file():
        raise FileNotFoundError(f"harness results not found: {path}")
    return path, json.loads(path.read_text(encoding="utf-8"))


def load_end_to_end(harness_run: str | Path) -> dict[str, dict[str, float]]:
    """config -> {accuracy, ci_low, ci_high} from a harness run's results.json."""
    path, data = _harness_results(harness_run)
    if "results" not in data:
        raise ValueError(f"{path}: no 'results' field (not a harness results.json)")
    out = {}
    for config, m in task_metrics(data).items():
        if "accuracy" not in m:
            raise ValueError(f"{path}: results[{config!r}] has no 'accuracy'")
        out[config] = {"accuracy": m["accuracy"], "ci_low": m.get("accuracy_ci_low"), "ci_high": m.get("accuracy_ci_high")}
    return out


def _same_adapter(a: Any, b: Any) -> bool:
    """Adapters are the same when both are absent, or name the same path (or Hub id)."""
    if not a or not b:
        return not a and not b
    pa, pb = Path(str(a)).expanduser(), Path(str(b)).expanduser()
    return pa.resolve() == pb.resolve() if pa.exists() or pb.exists() else str(a) == str(b)


def check_pairing(probe_results: Mapping[str, Any], harness_run: str | Path) -> None:
    """Refuse to set probes of one model beside the answers of another (model name and adapter must match)."""
    path, data = _harness_results(harness_run)
    cfg = data.get("config")
    if not isinstance(cfg, dict) or "model" not in cfg:
        raise ValueError(f"{path}: no config.model (not a harness results.json), so the answering model is unknown")
    probe = (probe_results.get("model"), probe_results.get("adapter"))
    answer = (cfg.get("model"), (cfg.get("model_args") or {}).get("adapter"))
    if probe[0] != answer[0] or not _same_adapter(probe[1], answer[1]):
        def name(model: Any, adapter: Any) -> str:
            return f"{model!r}" + (f" with adapter {adapter}" if adapter else "")

        raise ValueError(f"the probes are of {name(*probe)} but {path} holds the answers of {name(*answer)}; "
                         "pass a harness run of the same model (and adapter)")
    if cfg.get("prompt_variant") not in (None, probe_results.get("prompt_variant")):
        print(f"warning: probes used prompt {probe_results.get('prompt_variant')!r}, the harness run "
              f"{cfg.get('prompt_variant')!r}", file=sys.stderr)


def _family_layers(probes: Mapping[str, Any], family: str) -> list[str]:
    return sorted((k for k in probes if k.rpartition("/")[0] == family), key=rep_sort_key)


def stages(probes: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(label, probe key) of the pipeline stages this run has, in order; "text (best)" is picked per category."""
    out: list[tuple[str, str]] = []
    for family, label in (("mel", "mel"), ("encoder", "encoder (last)"), ("pre_llm", "pre-LLM audio"),
                          ("late_llm", "late-LLM audio"), ("text", "text (last layer)")):
        keys = _family_layers(probes, family)
        if keys:
            out.append((label, keys[-1]))
    if _family_layers(probes, "text"):
        out.append(("text (best layer)", "text/*"))
    return out


def _metric(probes: Mapping[str, Any], key: str, config: str) -> dict[str, Any] | None:
    """A probe's metrics; "text/*" is the best text layer of that category."""
    if key == "text/*":
        cands = [probes[k][config] for k in _family_layers(probes, "text") if config in probes[k]]
        return max(cands, key=lambda m: m["accuracy"]) if cands else None
    return probes.get(key, {}).get(config)


def plot_stages(results: Mapping[str, Any], end_to_end: Mapping[str, Any], path: str | Path) -> Path:
    """Figure 2: probe accuracy by stage, one panel per category, end-to-end accuracy as the last bar."""
    probes, configs = results["probes"], list(results["configs"])
    st = stages(probes)
    labels = [s[0] for s in st] + (["model answer"] if end_to_end else [])
    cols = min(3, len(configs))
    rows = math.ceil(len(configs) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 2.9 * rows), squeeze=False, sharey=True)
    for ax, config in zip(axes.flat, configs, strict=False):
        vals, err_lo, err_hi, colors = [], [], [], []
        for label, key in st:
            m = _metric(probes, key, config)
            a = m["accuracy"] if m else float("nan")
            vals.append(100 * a)
            err_lo.append(100 * (a - m["ci_low"]) if m else 0)
            err_hi.append(100 * (m["ci_high"] - a) if m else 0)
            colors.append("#4C72B0" if label != "mel" else "#8C8C8C")
        if end_to_end:
            e = end_to_end.get(config)
            a = e["accuracy"] if e else float("nan")
            vals.append(100 * a)
            err_lo.append(100 * (a - e["ci_low"]) if e and e.get("ci_low") is not None else 0)
            err_hi.append(100 * (e["ci_high"] - a) if e and e.get("ci_high") is not None else 0)
            colors.append("#C44E52")
        x = np.arange(len(labels))
        ax.bar(x, np.nan_to_num(vals), color=colors, yerr=[err_lo, err_hi], capsize=3)
        ax.axhline(50, color="grey", ls="--", lw=1)
        ax.set_xticks(x, labels, rotation=40, ha="right", fontsize=7)
        ax.set_ylim(0, 100)
        ax.set_title(config, fontsize=9)
    for ax in list(axes.flat)[len(configs) :]:
        ax.axis("off")
    for ax in axes[:, 0]:
        ax.set_ylabel("test accuracy (%)")
    fig.suptitle(f"{results.get('model')}: where the direction is decodable (95 % CI; dashed: chance)", fontsize=10)
    fig.tight_layout()
    return save_png(fig, path)


def layer_family(probes: Mapping[str, Any]) -> str | None:
    """The per-layer family Figure 3 draws: the text-prediction state, else encoder layers."""
    for family in ("text", "encoder"):
        if _family_layers(probes, family):
            return family
    return None


def plot_layers(results: Mapping[str, Any], path: str | Path) -> Path | None:
    """Figure 3: test accuracy by layer, one line per category."""
    from matplotlib.ticker import MaxNLocator

    probes = results["probes"]
    family = layer_family(probes)
    if family is None:
        return None
    keys = _family_layers(probes, family)
    layers = [int(k.rpartition("/")[2]) for k in keys]
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for config in results["configs"]:
        acc = [100 * probes[k][config]["accuracy"] if config in probes[k] else np.nan for k in keys]
        ax.plot(layers, acc, marker="o", ms=3, label=config)
    ax.axhline(50, color="grey", ls="--", lw=1)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("decoder layer (0 = embeddings)" if family == "text" else "encoder layer (0 = input)")
    ax.set_ylabel("test accuracy (%)")
    ax.set_ylim(0, 100)
    where = "text-prediction state (output position)" if family == "text" else "encoder states, 16-segment pooled"
    ax.set_title(f"{results.get('model')}: {where}", fontsize=9)
    ax.legend(fontsize=7, ncol=3, frameon=False, loc="lower left")
    return save_png(fig, path)


def position_table(probes: Mapping[str, Any], configs: Sequence[str]) -> tuple[list[int], dict[str, dict[int, dict[str, float]]]]:
    """(layers, position -> layer -> {config: accuracy, "mean": ...}); the output position is text/<layer>."""
    table: dict[str, dict[int, dict[str, float]]] = {}
    layers: set[int] = set()
    for key, per in probes.items():
        family, _, layer = key.rpartition("/")
        if family.startswith("pos_"):
            pos = family[4:]
        elif family == "text":
            pos = "output"
        else:
            continue
        cell = {c: per[c]["accuracy"] for c in configs if c in per}
        cell["mean"] = float(np.mean(list(cell.values())))
        table.setdefault(pos, {})[int(layer)] = cell
        if family.startswith("pos_"):
            layers.add(int(layer))
    if not layers:
        return [], {}
    chosen = sorted(layers)
    return chosen, {p: {k: v for k, v in table[p].items() if k in layers} for p in POSITIONS if p in table}


def plot_positions(layers: Sequence[int], table: Mapping[str, Any], path: str | Path, title: str) -> Path:
    """Heatmap of mean accuracy over categories: positions (rows) by layer (columns)."""
    names = list(table)
    grid = np.array([[100 * table[p].get(k, {}).get("mean", np.nan) for k in layers] for p in names])
    fig, ax = plt.subplots(figsize=(1.2 + 0.7 * len(layers), 0.8 + 0.45 * len(names)))
    im = ax.imshow(grid, vmin=40, vmax=100, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(layers)), [str(k) for k in layers])
    ax.set_yticks(range(len(names)), names)
    for i in range(len(names)):
        for j in range(len(layers)):
            if not np.isnan(grid[i, j]):
                ax.text(j, i, f"{grid[i, j]:.0f}", ha="center", va="center", fontsize=7,
                        color="white" if grid[i, j] < 75 else "black")
    ax.set_xlabel("layer")
    fig.colorbar(im, ax=ax, label="mean test accuracy (%)")
    ax.set_title(title, fontsize=9)
    return save_png(fig, path)


def _csv(rows: Sequence[Sequence[Any]]) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return buf.getvalue()


def default_heatmap_key(directions: Mapping[str, Any]) -> str | None:
    """The last text layer (else last encoder layer, else any) whose alignment has >= 2 categories."""
    keys = [k for k, v in directions.items() if len(v.get("configs", [])) >= 2]
    for family in ("text", "encoder", "late_llm", "pre_llm", "mel"):
        fam = sorted((k for k in keys if k.rpartition("/")[0] == family), key=rep_sort_key)
        if fam:
            return fam[-1]
    return keys[0] if keys else None


def _accuracy_section(probes: Mapping[str, Any], configs: Sequence[str], out_dir: Path) -> list[str]:
    """probe_accuracy.csv, and the report's table of accuracy per representation/layer and category."""
    acc_rows = [["probe", "config", "accuracy", "ci_low", "ci_high", "balanced_accuracy", "increase_acc",
                 "decrease_acc", "n"]]
    for key, per in probes.items():
        for c, m in per.items():
            acc_rows.append([key, c, m["accuracy"], m["ci_low"], m["ci_high"], m["balanced_accuracy"],
                             m["per_direction"]["increase"]["accuracy"], m["per_direction"]["decrease"]["accuracy"],
                             m["n"]])
    atomic_write_text(out_dir / "probe_accuracy.csv", _csv(acc_rows))
    return ["## Probe accuracy (representation/layer × category)",
            markdown_table(["probe", *configs], [[k, *(pct(per[c]["accuracy"]) if c in per else "—" for c in configs)]
                                                 for k, per in probes.items()])]


def _knows_vs_says_section(probes: Mapping[str, Any], configs: Sequence[str], e2e: Mapping[str, Any],
                           out_dir: Path) -> list[str]:
    """Knows vs says: the best probe of each category beside the model's own answers (knows_vs_says.csv too)."""
    kvs = [["config", "end_to_end", "mel", "best_probe", "best_probe_accuracy", "last_text", "gap_best_minus_e2e"]]
    md = []
    last_text = _family_layers(probes, "text")[-1:] or _family_layers(probes, "encoder")[-1:]
    for c in configs:
        cands = [(per[c]["accuracy"], k) for k, per in probes.items() if c in per and not k.startswith("mel/")]
        # Ties go to the earliest stage/layer: where the information is first available.
        best_acc, best_key = max(cands, key=lambda t: t[0]) if cands else (float("nan"), "—")
        e = e2e.get(c, {}).get("accuracy", float("nan"))
        mel = probes.get("mel/0", {}).get(c, {}).get("accuracy", float("nan"))
        lt = probes[last_text[0]][c]["accuracy"] if last_text and c in probes[last_text[0]] else float("nan")
        kvs.append([c, e, mel, best_key, best_acc, lt, best_acc - e])
        md.append([c, pct(e), pct(mel), f"{pct(best_acc)} ({best_key})", pct(lt),
                   pct(best_acc - e) if not math.isnan(e) else "—"])
    atomic_write_text(out_dir / "knows_vs_says.csv", _csv(kvs))
    return ["## Knows but doesn't say: best probe vs the model's answers"
            + ("" if e2e else " (no harness run given: pass --harness RUN_DIR)"),
            "The best probe is chosen on test accuracy (optimistic); mel is the model-free reference.",
            markdown_table(["config", "end-to-end", "mel probe", "best model-internal probe", "last layer", "gap (pp)"],
                           md)]


def _position_section(results: Mapping[str, Any], configs: Sequence[str],
                      out_dir: Path) -> tuple[list[str], list[str]]:
    """positions.csv, positions.png and the report's table: (markdown parts, figure names); none without positions."""
    layers, table = position_table(results["probes"], configs)
    if not table:
        return [], []
    pos_rows = [["position", "layer", *configs, "mean"]]
    for p, per_layer in table.items():
        for k, cell in sorted(per_layer.items()):
            pos_rows.append([p, k, *(cell.get(c, "") for c in configs), cell["mean"]])
    atomic_write_text(out_dir / "positions.csv", _csv(pos_rows))
    plot_positions(layers, table, out_dir / "positions.png", f"{results.get('model')}: position-wise probes "
                   "(mean over categories)")
    section = ["## Position-wise accuracy (mean over categories)",
               markdown_table(["position", *(f"L{k}" for k in layers)],
                              [[p, *(pct(table[p].get(k, {}).get("mean")) for k in layers)] for p in table])]
    return section, ["positions.png"]


def _heatmap_figure(results: Mapping[str, Any], directions: Mapping[str, Any], layer: str | None,
                    out_dir: Path) -> str | None:
    """The direction-alignment heatmap of `layer` (else the default one): its file name, or None for none."""
    key = layer or default_heatmap_key(directions)
    if not key:
        return None
    if key not in directions:
        raise ValueError(f"--layer {key!r}: no direction alignment for it; have {sorted(directions, key=rep_sort_key)}")
    name = f"cosine_{key.replace('/', '_')}.png"
    plot_heatmap(directions[key], out_dir / name, f"{results.get('model')} {key}: direction alignment")
    return name


def _direction_section(directions: Mapping[str, Any]) -> list[str]:
    """The report's table of mean cosine over category pairs, per representation/layer (none without any)."""
    if not directions:
        return []
    rows = [[k, str(len(v["configs"])), str(v.get("n_pairs", 0)),
             "—" if v.get("mean_signed") is None else f"{v['mean_signed']:.3f}",
             "—" if v.get("mean_absolute") is None else f"{v['mean_absolute']:.3f}"]
            for k, v in sorted(directions.items(), key=lambda kv: rep_sort_key(kv[0]))
            if not k.startswith("pos_")]
    return ["## Direction alignment (train split): mean cosine over category pairs",
            markdown_table(["representation/layer", "categories", "pairs", "signed", "absolute"], rows)]


def make_report(run: str | Path, harness_run: str | Path | None = None, out: str | Path | None = None,
                layer: str | None = None) -> str:
    """Write every figure and table; returns report.md's text."""
    results, directions = load_probe_results(run)
    out_dir = Path(out) if out else Path(run) / "probes" / "report"
    probes, configs = results["probes"], list(results["configs"])
    if harness_run:
        check_pairing(results, harness_run)
    e2e = load_end_to_end(harness_run) if harness_run else {}
    parts = [f"# Probing report — {results.get('model')}",
             f"revision {results.get('revision')}, adapter {results.get('adapter')}, prompt "
             f"{results.get('prompt_variant')}; probes: {results['settings']['epochs']} epochs, seed "
             f"{results['settings']['seed']}. Test accuracy %, 95 % binomial CI."]
    parts += _accuracy_section(probes, configs, out_dir)
    parts += _knows_vs_says_section(probes, configs, e2e, out_dir)
    plot_stages(results, e2e, out_dir / "fig2_stages.png")
    figures = ["fig2_stages.png"]
    if plot_layers(results, out_dir / "fig3_layers.png"):
        figures.append("fig3_layers.png")
    position_parts, position_figures = _position_section(results, configs, out_dir)
    parts += position_parts
    figures += position_figures
    heatmap = _heatmap_figure(results, directions, layer, out_dir)
    if heatmap:
        figures.append(heatmap)
    parts += _direction_section(directions)
    parts += ["## Figures", *(f"![{f}]({f})" for f in figures)]
    text = "\n\n".join(parts) + "\n"
    atomic_write_text(out_dir / "report.md", text)
    return text


def build_parser() -> argparse.ArgumentParser:
    """Arguments of `python -m probing.report`."""
    p = argparse.ArgumentParser(prog="python -m probing.report", description=__doc__.splitlines()[0])
    p.add_argument("run", help="extraction directory after python -m probing.train")
    p.add_argument("--harness", default=None, help="a harness eval run dir (results.json) for end-to-end accuracy")
    p.add_argument("--layer", default=None, help="representation/layer of the cosine heatmap, e.g. text/28")
    p.add_argument("--out", default=None, help="output folder (default RUN/probes/report)")
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of `python -m probing.report`."""
    ns = build_parser().parse_args(argv)
    try:
        print(make_report(ns.run, ns.harness, ns.out, ns.layer))
    except (ValueError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
