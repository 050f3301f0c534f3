"""Reports from samples files alone: tables (with the paper's Table 2 beside), figures, paired tests.

Answers are re-parsed from the stored raw outputs with the current parser, so a report never depends
on how an older harness parsed. A run directory holds one model and one prompt variant: mixing them is
an error, never a silent fallback (SPEC §8).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness import plots
from harness.data import CONFIGS
from harness.metrics import mcnemar
from harness.parsing import get_parser
from harness.reference import MODEL_DISPLAY, reference, table2
from harness.results import atomic_write_text, build_results, read_jsonl, samples_path
from vocalgrad_dataset.generate import parse_config


def load_samples(run_dir: str | Path) -> dict[str, list[dict[str, Any]]]:
    """Merged samples rows per config (Table 2 order first), re-parsed; errors on mixed runs."""
    run_dir = Path(run_dir)
    found = {p.name[len("samples_") : -len(".jsonl")] for p in run_dir.glob("samples_*.jsonl")}
    if not found:
        raise FileNotFoundError(f"no samples_<config>.jsonl in {run_dir} (run `harness eval` first)")
    order = [c for c in CONFIGS if c in found] + sorted(found - set(CONFIGS))
    rows = {c: [reparse(r) for r in read_jsonl(samples_path(run_dir, c))] for c in order}
    for key in ("model", "prompt_variant", "mode"):
        values = {r.get(key) for rs in rows.values() for r in rs}
        if len(values) > 1:
            raise ValueError(f"{run_dir} mixes several {key} values {sorted(map(str, values))}; one run per dir")
    return rows


def reparse(row: dict[str, Any]) -> dict[str, Any]:
    """The row with pred/parsed recomputed from raw by the current version of its parser."""
    if row.get("mode") == "choices" or row.get("error"):
        return row
    parser = get_parser(row.get("parser") or "main")
    pred = parser.parse(row.get("raw"))
    return {**row, "pred": pred, "parsed": pred is not None, "parser": parser.id}


def compute(run_dir: str | Path) -> dict[str, Any]:
    """results.json-shaped metrics recomputed from the samples files (run settings from results.json)."""
    run_dir = Path(run_dir)
    rows = load_samples(run_dir)
    old: dict[str, Any] = {}
    if (run_dir / "results.json").is_file():
        old = json.loads((run_dir / "results.json").read_text(encoding="utf-8"))
    first = next(iter(rows.values()))[0] if any(rows.values()) else {}
    run_config = old.get("config") or {
        "model": first.get("model", "?"), "mode": first.get("mode", "?"),
        "prompt_variant": first.get("prompt_variant", "?"), "split": "?", "batch_size": 0, "num_processes": 0,
    }
    n_orig = {c: v.get("original", len(rows[c])) for c, v in old.get("n-samples", {}).items() if c in rows}
    return build_results(rows, run_config=run_config, task_configs=old.get("configs", {}), n_original=n_orig,
                         date=old.get("date"))


def _pct(x: Any, digits: int = 1) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.{digits}f}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table (readable as plain text too)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def _model_stem(model: str) -> str | None:
    """The published model stem a registry name refers to, if any (e.g. "kimi-audio")."""
    m = model.lower().replace("_", "-")
    return next((s for s in MODEL_DISPLAY if s in m), None)


def format_report(results: Mapping[str, Any]) -> str:
    """All tables of a run as Markdown text."""
    res, cfg = results["results"], results["config"]
    model = str(cfg.get("model"))
    group = results["groups"]["vocalgrad"]
    parts = [
        f"# VocalGrad report — {model}",
        f"mode {cfg.get('mode')}, prompt {cfg.get('prompt_variant')}, split {cfg.get('split')}, "
        f"source {cfg.get('source', '?')}, batch size {cfg.get('batch_size')}, "
        f"processes {cfg.get('num_processes')}; parser v{results['versions']['parser']}.",
        "Accuracy over all clips (unparsed = wrong), % with normal-approximation 95 % CI; "
        "clustered CI treats the 24 rows of a source clip as one cluster.",
    ]
    head = ["config", "n", "acc", "95% CI", "clustered CI", "parsed acc", "balanced", "inc. ratio", "exact",
            "unparsed", "ambig.", "errors"]
    body = []
    for c, s in res.items():
        se = s.get("accuracy_cluster_stderr")
        body.append([
            c, str(s["n"]), _pct(s["accuracy"]), f"[{_pct(s['accuracy_ci_low'])}, {_pct(s['accuracy_ci_high'])}]",
            f"±{_pct(1.96 * se)}" if se is not None and not math.isnan(se) else "—",
            _pct(s["parsed_accuracy"]), _pct(s["balanced_accuracy"]), _pct(s["increase_ratio"]),
            _pct(s["exact_match_rate"]), str(s["n_unparsed"]), str(s["n_ambiguous"]), str(s["n_error"]),
        ])
    complete = "" if group.get("complete") else " (incomplete: not all nine categories)"
    body.append(["**mean**", "", _pct(group["accuracy"]),
                 f"[{_pct(group.get('accuracy_ci_low'))}, {_pct(group.get('accuracy_ci_high'))}]",
                 f"±{_pct(1.96 * group['accuracy_cluster_stderr'])}"
                 if group.get("accuracy_cluster_stderr") is not None else "—", *[""] * 7])
    parts += ["## This run" + complete, _table(head, body)]

    ref = table2()
    cols = ["avg", *CONFIGS]
    mean_all = {**{c: 100 * res[c]["accuracy"] for c in CONFIGS if c in res}}
    if group.get("complete"):
        mean_all["avg"] = 100 * group["accuracy"]
    t2 = [[f"**{model} (this run)**", *(f"{mean_all[c]:.1f}" if c in mean_all else "—" for c in cols)]]
    t2 += [[name, *(f"{row[c]:.1f}" for c in cols)] for name, row in ref.items()]
    parts += ["## Beside the paper's Table 2 (accuracy %, all clips)", _table(["model", *cols], t2)]

    stem = _model_stem(model)
    if stem and cfg.get("prompt_variant") == "default":
        rows = []
        for c, s in res.items():
            r = reference(c, stem)
            if r:
                rows.append([c, _pct(s["accuracy"]), _pct(r.accuracy), _pct(s["increase_ratio"]),
                             _pct(r.increase_ratio), f"{s['n_unparsed']} / {r.n_unparsed}"])
        if rows:
            parts += [f"## Published {MODEL_DISPLAY[stem]} (default prompt)",
                      _table(["config", "acc", "paper acc", "inc. ratio", "paper inc. ratio",
                              "unparsed (ours / paper)"], rows)]

    fmt_rows = [[c, str(s["n"]), _pct(s.get("macro_f1")), _pct(s["balanced_accuracy"]), _pct(s["accuracy"]),
                 str(s["n_unparsed"])] for c, s in res.items() if parse_config(c).format in ("yesno", "ternary")]
    if fmt_rows:
        parts += ["## Problem formats (SPEC §4): macro-F1 over the gold classes, unparsed = miss of the true class",
                  _table(["config", "n", "macro-F1", "balanced", "acc", "unparsed"], fmt_rows)]
    for key in ("tier", "curve", "direction"):
        values = list(dict.fromkeys(v for c in res for v in results["breakdowns"][c][key]))
        rows = [[c, *(_pct(results["breakdowns"][c][key].get(v, {}).get("accuracy")) for v in values)]
                for c in res]
        parts += [f"## Accuracy by {key}", _table(["config", *values], rows)]
    return "\n\n".join(parts) + "\n"


def report(run_dir: str | Path, out_dir: str | Path | None = None, figures: bool = True) -> str:
    """Recompute, print-ready text; writes report.md and the PNGs into out_dir (default: run_dir)."""
    results = compute(run_dir)
    text = format_report(results)
    out = Path(out_dir or run_dir)
    atomic_write_text(out / "report.md", text)
    if figures:
        model = str(results["config"].get("model"))
        plots.plot_accuracy(results["results"], out / "accuracy_by_category.png", f"{model}: accuracy")
        plots.plot_increase_bias(results["results"], out / "increase_bias_by_category.png",
                                 f'{model}: "increase" bias')
    return text


def compare(dir_a: str | Path, dir_b: str | Path) -> str:
    """McNemar per config shared by two runs (paired by clip id), as a Markdown table."""
    a, b = load_samples(dir_a), load_samples(dir_b)
    shared = [c for c in a if c in b]
    if not shared:
        raise ValueError(f"{dir_a} and {dir_b} share no config")
    rows = []
    for c in shared:
        m = mcnemar(a[c], b[c])
        rows.append([c, str(m.n_pairs), _pct(m.accuracy_a), _pct(m.accuracy_b), str(m.only_a_correct),
                     str(m.only_b_correct), f"{m.p_value:.4g}"])
    head = ["config", "pairs", "acc A", "acc B", "only A right", "only B right", "McNemar exact p"]
    return f"A = {dir_a}\nB = {dir_b}\n\n" + _table(head, rows) + "\n"
