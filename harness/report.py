"""Reports from samples files alone: tables (with the paper's Table 2 beside), figures, paired tests.

Answers are re-parsed from the stored raw outputs with the current parser, so a report never depends
on how an older harness parsed. A run directory holds one model and one prompt variant: mixing them is
an error, never a silent fallback (SPEC §8).
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.data import CONFIGS
from harness.kinds import all_kinds, configs_by_kind, result_kind
from harness.kinds.base import config_group
from harness.metrics import MIN_CLUSTERS, Z95, breakdowns, mcnemar, too_few_clusters
from harness.parsing import row_parser
from harness.reference import HUMAN_TABLE2, MODEL_DISPLAY, published_stem, reference, table2
from harness.results import (
    atomic_write_text,
    build_results,
    component_versions,
    group_metrics,
    read_jsonl,
    task_metrics,
)
from harness.sampling import describe_limit
from harness.tables import html_table, interval, latex_escape, latex_table, markdown_safe, markdown_table, pct
from vocalgrad_dataset.fileio import safe_component
from vocalgrad_dataset.grid import CURVES, TIERS
from vocalgrad_dataset.tasks import resolve


def load_samples(run_dir: str | Path) -> dict[str, list[dict[str, Any]]]:
    """Merged samples rows per config (Table 2 order first), re-parsed; errors on mixed runs."""
    run_dir = Path(run_dir)
    found = samples_files(run_dir)
    if not found:
        raise FileNotFoundError(f"no samples_<config>.jsonl in {run_dir} (run `harness eval` first)")
    order = [c for c in CONFIGS if c in found] + sorted(set(found) - set(CONFIGS))
    rows = {c: [reparse(r) for r in checked_samples(c, _read_samples(found[c]), found[c])] for c in order}
    for key in ("model", "prompt_variant", "mode"):
        values = {r.get(key) for rs in rows.values() for r in rs}
        if len(values) > 1:
            raise ValueError(f"{run_dir} mixes several {key} values {sorted(map(str, values))}; one run per dir")
    return rows


def _read_samples(file: Path) -> list[dict[str, Any]]:
    """A merged samples file's rows; one without a complete line, or cut inside its last line, is truncated:
    refused when nothing is left, else read with a one-line warning (the runs then pair on fewer clips)."""
    rows = read_jsonl(file)
    with open(file, "rb") as fh:
        size = fh.seek(0, 2)
        torn = size > 0 and fh.seek(size - 1) >= 0 and fh.read(1) != b"\n"
    if not rows:
        raise ValueError(f"{file}: no complete line (an empty or truncated samples file); rerun `harness eval` "
                         "on its run directory to rewrite it")
    if torn:
        print(f"warning: {file}: the last line is cut off (a truncated file?); read {len(rows)} complete rows",
              file=sys.stderr)
    return rows


def checked_samples(config: str, rows: list[dict[str, Any]], file: Path) -> list[dict[str, Any]]:
    """A samples file's rows, each clip once (once per annotator in a listening test's export): a line repeated
    verbatim is dropped with a one-line warning; two different rows of a clip, or a gold label that contradicts
    the condition its clip id encodes, refuse the file (counted over every row, `harness leaderboard submit`
    refuses the same)."""
    from harness.kinds import rows_kind

    first: dict[Any, dict[str, Any]] = {}
    for r in rows:
        key = (r.get("benchmark_clip_id"), r.get("annotator"))  # listening exports: one row per annotator
        if key in first and first[key] != r:
            raise ValueError(f"{file}: clip {key[0]} has two different rows; the file was edited or merged by hand")
        first.setdefault(key, r)
    if len(first) < len(rows):
        print(f"warning: {file}: {len(rows) - len(first)} repeated line(s) counted once", file=sys.stderr)
    kept = list(first.values())
    if kept and rows_kind(config, kept).grid:
        recipe = resolve(config).spec.recipe
        bad = [str(r.get("benchmark_clip_id")) for r in kept
               if (label := _id_label(r, recipe)) is not None and r.get("gold") != label]
        if bad:
            raise ValueError(f"{file}: {len(bad)} row(s) whose gold contradicts its clip id (e.g. {', '.join(bad[:3])})")
    return kept


def _id_label(row: Mapping[str, Any], recipe: Any) -> str | None:
    """The gold label a grid row's clip id encodes under its config's recipe (None for a malformed id)."""
    from vocalgrad_dataset import grid

    try:
        return recipe.label(grid.parse_any_clip_id(str(row.get("benchmark_clip_id")))[2])
    except ValueError:
        return None


def samples_files(run_dir: Path) -> dict[str, Path]:
    """config -> its samples file: a mapped name (safe_component) read back through results.json's
    "sample_files", any other name is the config itself."""
    try:
        recorded = json.loads((run_dir / "results.json").read_text(encoding="utf-8")).get("sample_files") or {}
    except (OSError, ValueError, AttributeError):
        recorded = {}
    config_of = {str(name): str(c) for c, name in recorded.items()} if isinstance(recorded, dict) else {}
    return {config_of.get(p.name, p.name[len("samples_"): -len(".jsonl")]): p
            for p in sorted(run_dir.glob("samples_*.jsonl"))}


def reparse(row: dict[str, Any]) -> dict[str, Any]:
    """The row with pred/parsed recomputed from raw by the current version of its parser."""
    if row.get("mode") == "choices" or row.get("error"):
        return row
    parser = row_parser(row)
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
    extra = {k: old[k] for k in ("start_time", "end_time", "total_evaluation_time_seconds", "environment", "dataset",
                                 "preflight", "skipped_items", "model_info") if k in old}
    return build_results(rows, run_config=run_config, task_configs=old.get("configs", {}), n_original=n_orig,
                         date=old.get("date"), extra=extra)


def sample_warnings(results: Mapping[str, Any]) -> list[str]:
    """One line per config whose samples are fewer than the clips the run expected (or the dataset has)."""
    out = []
    for c, s in task_metrics(results).items():
        task = results["configs"].get(c, {})
        expected = task.get("n_expected")
        if expected is not None and s["n"] < expected:
            out.append(f"{c}: {s['n']} samples but the run expected {expected} clips; the samples file is incomplete")
        elif expected is None and c in CONFIGS and s["n"] < results["n-samples"].get(c, {}).get("original", 0):
            out.append(f"{c}: {s['n']} samples of {results['n-samples'][c]['original']} clips")
    return out


def limit_note(results: Mapping[str, Any]) -> str | None:
    """The line that says a run was limited (a stratified sample, not every clip), or None."""
    if not results.get("limited"):
        return None
    cfg = results["config"]
    counts = ", ".join(f"{c} {v['effective']}/{v['original']}" for c, v in results["n-samples"].items()
                       if v["effective"] < v["original"])
    return (f"LIMITED RUN (--limit {cfg.get('limit')}, seed {cfg.get('seed', '?')}): "
            f"{describe_limit(cfg.get('limit'))}; clips evaluated {counts}. Not comparable with full runs.")


def clustered_cell(summary: Mapping[str, Any]) -> str:
    """The clustered half-width, "too few clusters (g < 10)", or — without clustering."""
    se = summary.get("accuracy_cluster_stderr")
    if se is not None and not math.isnan(se):
        return f"±{pct(Z95 * se)}"
    return too_few_clusters(summary) or "—"


def protocol_note(results: Mapping[str, Any]) -> str | None:
    """"not the paper's protocol: dtype bfloat16 (the paper: float32); tf32" from results.json
    model_info["not_paper_protocol"] (the opt-ins the run used), or None for a run of the paper's protocol."""
    items = (results.get("model_info") or {}).get("not_paper_protocol") or []
    return "not the paper's protocol: " + "; ".join(map(str, items)) if items else None


def kind_metrics(results: Mapping[str, Any], kind: Any) -> dict[str, Any]:
    """The metrics of a run's configs of one kind."""
    return {c: s for c, s in task_metrics(results).items() if result_kind(results, c) is kind}


def grid_metrics(results: Mapping[str, Any]) -> dict[str, Any]:
    """The metrics of a run's grid configs (kinds whose rows are the 24-condition grid)."""
    return {c: s for c, s in task_metrics(results).items() if result_kind(results, c).grid}


def kind_sections(results: Mapping[str, Any], *, grid: bool) -> list[str]:
    """The sections the run's kinds write over their configs (grid kinds' or the others'); kinds that share a
    section function (yes/no and ternary) write it once over all their configs."""
    summaries = task_metrics(results)
    by_section: dict[Any, tuple[dict[str, Any], dict[str, Any]]] = {}
    for kind, configs in configs_by_kind(results, list(summaries)).items():
        if kind.section is None or kind.grid != grid:
            continue
        for c in configs:  # reversed controls: the section again, with their own macro (results.config_group)
            name = config_group(kind, c)
            mine, _ = by_section.setdefault((kind.section, name), ({}, group_metrics(results, name)))
            mine[c] = summaries[c]
    lines = [line for (section, _), (res, group) in by_section.items() for line in section(res, group)]
    return lines if grid else lines + skipped_section(results)


SKIPPED_SHOWN = 20  # the report lists this many skipped items; results.json lists all


def skipped_section(results: Mapping[str, Any]) -> list[str]:
    """The items skipped as unaskable (never guessed), with their reasons."""
    skipped = results.get("skipped_items") or []
    if not skipped:
        return []
    body = [[str(s.get("id")), str(s.get("reason"))] for s in skipped[:SKIPPED_SHOWN]]
    if len(skipped) > SKIPPED_SHOWN:
        body.append([f"... {len(skipped) - SKIPPED_SHOWN} more", "results.json skipped_items"])
    return [f"## Skipped items ({len(skipped)}: cannot be asked, never guessed; they count against "
            "--max-error-rate)", markdown_table(["id", "reason"], body)]


def format_report(results: Mapping[str, Any]) -> str:
    """All tables of a run as Markdown text."""
    res = grid_metrics(results)
    cfg = results["config"]
    model = str(cfg.get("model"))
    group = group_metrics(results)
    parts = [
        f"# VocalGrad report — {run_label(results)}",
        f"mode {cfg.get('mode')}, prompt {cfg.get('prompt_variant')}, split {cfg.get('split')}, "
        f"source {cfg.get('source', '?')}, batch size {cfg.get('batch_size')}, "
        f"processes {cfg.get('num_processes')}, seed {cfg.get('seed', '—')}; parser v{component_versions(results)['parser']}.",
        "Accuracy over all clips (unparsed = wrong), % with Wilson 95 % CI; "
        "clustered CI treats the 24 rows of a source clip as one cluster (CR1), reported from "
        f"{MIN_CLUSTERS} clusters on (Cameron & Miller 2015; fewer: read the Wilson interval).",
    ]
    parts += [f"> **{line}**" for line in filter(None, [limit_note(results), protocol_note(results)])]
    parts += [f"> **Warning:** {w}" for w in sample_warnings(results)]
    parts += kind_sections(results, grid=False)
    if not res:  # a multiple-choice or classification run only: none of the VocalGrad tables apply
        return "\n\n".join(parts) + "\n"
    head = ["config", "n", "acc", "95% CI", "clustered CI", "parsed acc", "balanced", "inc. ratio", "exact",
            "unparsed", "ambig.", "errors"]
    body = []
    for c, s in res.items():
        body.append([
            c, str(s["n"]), pct(s["accuracy"]), interval(s),
            clustered_cell(s),
            pct(s["parsed_accuracy"]), pct(s["balanced_accuracy"]), pct(s["increase_ratio"]),
            pct(s["exact_match_rate"]), str(s["n_unparsed"]), str(s["n_ambiguous"]), str(s["n_error"]),
        ])
    complete = "" if group.get("complete") else " (incomplete: not all nine categories)"
    body.append(["**mean of the categories**", "", pct(group["accuracy"]), interval(group), clustered_cell(group),
                 *[""] * 7])
    parts += ["## This run" + complete, markdown_table(head, body)]

    ref = table2()
    cols = ["avg", *CONFIGS]
    mean_all = {**{c: 100 * res[c]["accuracy"] for c in CONFIGS if c in res}}
    if group.get("complete"):
        mean_all["avg"] = 100 * group["accuracy"]
    t2 = [[f"**{model} (this run)**", *(f"{mean_all[c]:.1f}" if c in mean_all else "—" for c in cols)]]
    t2 += [[name, *(f"{row[c]:.1f}" for c in cols)] for name, row in ref.items()]
    parts += ["## Beside the paper's Table 2 (accuracy %, all clips)", markdown_table(["model", *cols], t2)]

    stem = published_stem(model)
    if stem and cfg.get("prompt_variant") == "default":
        rows = []
        for c, s in res.items():
            r = reference(c, stem)
            if r:
                rows.append([c, pct(s["accuracy"]), pct(r.accuracy), pct(s["increase_ratio"]),
                             pct(r.increase_ratio), f"{s['n_unparsed']} / {r.n_unparsed}"])
        if rows:
            parts += [f"## Published {MODEL_DISPLAY[stem]} (default prompt)",
                      markdown_table(["config", "acc", "paper acc", "inc. ratio", "paper inc. ratio",
                              "unparsed (ours / paper)"], rows)]

    parts += kind_sections(results, grid=True)
    for key in ("tier", "curve", "direction"):
        values = list(dict.fromkeys(v for c in res for v in results["breakdowns"][c][key]))
        rows = [[c, *(pct(results["breakdowns"][c][key].get(v, {}).get("accuracy")) for v in values)]
                for c in res]
        parts += [f"## Accuracy by {key}", markdown_table(["config", *values], rows)]
    return "\n\n".join(parts) + "\n"


def congruence_series(runs: Sequence[Run]) -> dict[str, dict[str, dict[str, Any]]]:
    """For the accuracy-by-congruence figure: "<run>: congruent / incongruent / neutral" -> category -> the
    share and its interval under plot_accuracy's keys."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for r in runs:
        conflict = {c: s for c, s in grid_metrics(r.results).items() if result_kind(r.results, c).claims}
        for part in ("congruent", "incongruent", "neutral"):
            m = f"acc_{part}"
            label = part if len(runs) == 1 else f"{r.label}: {part}"
            out[label] = {c: {"accuracy": s.get(m), "accuracy_ci_low": s.get(f"{m}_ci_low"),
                              "accuracy_ci_high": s.get(f"{m}_ci_high")} for c, s in conflict.items()}
    return {k: v for k, v in out.items() if v}


@dataclass
class Run:
    """One run directory as a report sees it: its recomputed results and re-parsed samples."""

    path: Path
    results: dict[str, Any]
    rows: dict[str, list[dict[str, Any]]]
    label: str = ""

    @property
    def model(self) -> str:
        return str(self.results["config"].get("model"))


def run_label(results: Mapping[str, Any]) -> str:
    """What produced a run's numbers: the model, the checkpoint a generic entry (`hf`, `hf-<family>`) loaded,
    and the adapter ("hf-qwen2-audio (my-ckpt) + adapter lora-volume"), from results.json model_info."""
    model = str(results["config"].get("model"))
    info = results.get("model_info") or {}
    label = model
    checkpoint = info.get("model_id")
    if checkpoint and (model == "hf" or model.startswith("hf-")):
        label += f" ({Path(str(checkpoint)).name})"
    adapter = info.get("adapter")
    if adapter:
        path = Path(str(adapter))
        label += f" + adapter {path.parent.name if path.name == 'adapter' else path.name}"  # a finetune output folder
    return label


def load_runs(run_dirs: Sequence[str | Path]) -> list[Run]:
    """Runs with unique labels: the model name, plus prompt / mode / folder where two runs share it."""
    runs = [Run(Path(d), compute(d), load_samples(d)) for d in run_dirs]
    for r in runs:
        r.label = run_label(r.results)
    for attr in ("prompt_variant", "mode"):
        for label in {r.label for r in runs}:
            clash = [r for r in runs if r.label == label]
            if len({str(r.results["config"].get(attr)) for r in clash}) < 2:
                continue  # the same value would tell the runs apart no better
            for r in clash:
                r.label += f" ({attr.split('_')[0]} {r.results['config'].get(attr)})"
    clash = [r for r in runs if sum(o.label == r.label for o in runs) > 1]  # decided before any is renamed
    for r in clash:
        r.label += f" [{r.path.name}]"
    return runs


def _row_cells(results: Mapping[str, Any]) -> list[str]:
    group, res = group_metrics(results), grid_metrics(results)
    cells = ["—" if not group.get("complete") else pct(group["accuracy"])]
    return cells + [pct(res[c]["accuracy"]) if c in res else "—" for c in CONFIGS]


def format_comparison(runs: Sequence[Run]) -> str:
    """Several runs side by side, models as rows as in the paper's Table 2, the published rows beneath."""
    cols = ["avg", *CONFIGS]
    parts = ["# VocalGrad report — " + ", ".join(r.label for r in runs),
             "Accuracy % over all clips (unparsed = wrong). avg: the unweighted mean over the nine categories "
             "(— unless a run has all nine). Rows marked † are limited runs (a stratified sample of the clips)"
             + ("; rows marked ‡ are not the paper's protocol (see the run's notes)." if any(
                 protocol_note(r.results) for r in runs) else ".")]
    body = []
    for r in runs:
        mark = " †" if r.results.get("limited") else ""
        mark += " ‡" if protocol_note(r.results) else ""
        body.append([f"**{r.label}**{mark}", *_row_cells(r.results)])
    body += [[f"{name} (paper)", *(f"{row[c]:.1f}" for c in cols)] for name, row in table2().items()]
    parts += ["## Models side by side (paper Table 2 layout)", markdown_table(["model", *cols], body)]
    others = list(dict.fromkeys(c for r in runs for c in grid_metrics(r.results) if c not in CONFIGS))
    if others:
        rows = [[r.label, *(pct(task_metrics(r.results).get(c, {}).get(result_kind(r.results, c).config_metric))
                            if c in task_metrics(r.results) else "—" for c in others)] for r in runs]
        parts += ["## Other configs (accuracy %; macro-F1 % for yes/no and ternary)", markdown_table(["model", *others], rows)]
    for kind in all_kinds():
        if kind.compare is not None:
            parts += kind.compare([(r.label, kind_metrics(r.results, kind), group_metrics(r.results, kind.group))
                                   for r in runs])
    bias = [[r.label, *(pct(g[c]["increase_ratio"]) if c in (g := grid_metrics(r.results)) else "—"
                        for c in CONFIGS)] for r in runs]
    parts += ['## "increase" share of parsed answers (%; 50 = unbiased)', markdown_table(["model", *CONFIGS], bias)]
    for r in runs:
        notes = [n for n in [limit_note(r.results), protocol_note(r.results)] if n]
        notes += [f"Warning: {w}" for w in sample_warnings(r.results)]
        cfg = r.results["config"]
        parts.append(f"- **{r.label}**: `{r.path}`; mode {cfg.get('mode')}, prompt {cfg.get('prompt_variant')}, "
                     f"source {cfg.get('source', '?')}, split {cfg.get('split')}"
                     + "".join(f"\n  - {n}" for n in notes))
    return "\n\n".join(parts) + "\n"


FORMATS = ("markdown", "latex", "html")
Cell = tuple[float, float, float] | None  # accuracy, Wilson 95 % low, high (fractions); None: not evaluated


def table2_cells(runs: Sequence[Run]) -> tuple[list[str], list[tuple[str, list[Cell]]]]:
    """The paper's Table 2 layout: columns avg then the nine categories, one row per run with the mean (its
    interval at the effective sample size, only when all nine are there) and each category's accuracy with
    its Wilson 95 % interval."""
    cols = ["avg", *CONFIGS]
    rows = []
    for r in runs:
        res, group = task_metrics(r.results), group_metrics(r.results)
        res = grid_metrics(r.results)
        avg: Cell = (group["accuracy"], group["accuracy_ci_low"], group["accuracy_ci_high"]) \
            if group.get("complete") else None
        rows.append((r.label + (" ‡" if protocol_note(r.results) else ""), [avg, *((res[c]["accuracy"], res[c]["accuracy_ci_low"], res[c]["accuracy_ci_high"])
                                      if c in res else None for c in CONFIGS)]))
    return cols, rows


def format_table2(runs: Sequence[Run], fmt: str) -> str:
    """Table 2 as LaTeX (booktabs) or HTML: models x categories, each cell accuracy % with its 95 % CI, the
    paper's rows (published, no interval) under a rule."""
    import html

    cols, rows = table2_cells(runs)
    caption = (r"Accuracy (\%) over all clips (unparsed = wrong), 95\,\% Wilson intervals in brackets; "
               "avg: the unweighted mean over the nine categories. Below the rule: the paper's Table 2.")
    if any(protocol_note(r.results) for r in runs):
        caption += " Rows marked ‡ are not the paper's protocol (dtype, TF32 or attention opt-ins)."
    latex = fmt == "latex"
    esc = latex_escape if latex else html.escape

    def cell(c: Cell) -> str:
        if c is None:
            return "--" if latex else "—"
        if latex:
            return rf"{pct(c[0])} {{\scriptsize[{pct(c[1])}, {pct(c[2])}]}}"
        return f"{pct(c[0])} <small>[{pct(c[1])}, {pct(c[2])}]</small>"

    body: list[list[str] | None] = [[esc(label), *map(cell, cells)] for label, cells in rows]
    body.append(None)
    body += [[esc(f"{name} (paper)"), *(f"{row[c]:.1f}" for c in cols)] for name, row in table2().items()]
    header = ["Model", *(esc(c) for c in cols)]
    if latex:
        return latex_table(header, body, caption, "tab:vocalgrad-accuracy")
    return html_table(header, body, html.escape(caption.replace(r"\%", "%").replace(r"\,", " ")))


def _published(run: Run, field: str) -> dict[str, float]:
    """A run's published values (%, default prompt only) by config, when its model is in the paper."""
    stem = published_stem(run.model)
    if not stem or run.results["config"].get("prompt_variant") != "default":
        return {}
    return {c: 100 * getattr(ref, field) for c in task_metrics(run.results) if (ref := reference(c, stem))}


def _pooled(run: Run, key: str) -> dict[str, dict[str, Any]]:
    """summarize() per value of `key` over every direction-format config of a run."""
    rows = [r for c, rs in _grid_rows(run).items() if _augmented_only(run.results, c) for r in rs]
    return breakdowns(rows, keys=(key,))[key] if rows else {}


def _grid_rows(run: Run) -> dict[str, list[dict[str, Any]]]:
    """A run's samples of the VocalGrad configs (not the multiple-choice ones)."""
    return {c: rs for c, rs in run.rows.items() if c in grid_metrics(run.results)}


def _augmented_only(results: Mapping[str, Any], config: str) -> bool:
    """A grid config of the main question over the augmented clips only (no unmodified sources, no claims):
    the configs the category, tier and curve figures pool."""
    kind = result_kind(results, config)
    return kind.grid and not kind.fixed_question and not kind.claims and not resolve(config).spec.recipe.sources


def classify_figures(runs: Sequence[Run], out: Path) -> dict[str, Any]:
    """`confusion_<task>` per classification task: gold x predicted counts (plus an unparsed column) of each
    run that has the task, over the task's labels; returns the counts each figure shows by file stem."""
    from harness import plots

    figs: dict[str, Any] = {}
    tasks = list(dict.fromkeys(c for r in runs for c in task_metrics(r.results)
                               if result_kind(r.results, c).confusion and r.rows.get(c)))
    for c in tasks:
        have = [r for r in runs if r.rows.get(c) and result_kind(r.results, c).confusion]
        labels = list(task_metrics(have[0].results)[c].get("labels") or have[0].rows[c][0]["options"])
        stem = f"confusion_{safe_component(c)}"  # a mapped dataset's task is outside text
        figs[stem] = plots.plot_confusion({r.label: r.rows[c] for r in have}, labels, out / stem, f"{c}: gold vs answer")
    return figs


def write_figures(runs: Sequence[Run], out: Path) -> dict[str, Any]:
    """Every figure of a report (PDF, PNG and SVG at 7 and 3.5 in, a CSV of the points); returns each
    figure's plotted data by file stem (VocalGrad configs, and a confusion matrix per classification task: a
    multiple-choice run's tables are its report). Titles are short: the runs are named in the legend."""
    from harness import plots  # matplotlib: only when figures are drawn

    figs: dict[str, Any] = classify_figures(runs, out)
    if not any(_grid_rows(r) for r in runs):
        return figs

    main = {r.label: {c: s for c, s in grid_metrics(r.results).items() if c in CONFIGS or _augmented_only(r.results, c)}
            for r in runs}
    human = HUMAN_TABLE2 if any(c in HUMAN_TABLE2 for s in main.values() for c in s) else None
    # the paper's row of a run's model, drawn over that run's bars
    over = {MODEL_DISPLAY[stem]: r.label for r in runs if (stem := published_stem(r.model)) and _published(r, "accuracy")}
    published = {name: _published(next(r for r in runs if r.label == label), "accuracy") for name, label in over.items()}
    # a run of only lexical-conflict or format configs has none of these points: no empty figure is drawn
    if any(main.values()):
        figs["accuracy_by_category"] = plots.plot_accuracy(
            main, out / "accuracy_by_category", "Accuracy by category", human=human, published=published,
            published_over=over)
        bias_pub = {name: _published(next(r for r in runs if r.label == label), "increase_ratio")
                    for name, label in over.items()}
        figs["increase_bias_by_category"] = plots.plot_increase_bias(
            main, out / "increase_bias_by_category", '"increase" bias by category', published=bias_pub,
            published_over=over)
    for key, order in (("tier", TIERS), ("curve", CURVES)):
        pooled = {r.label: _pooled(r, key) for r in runs}
        if any(pooled.values()):
            figs[f"accuracy_by_{key}"] = plots.plot_breakdown(
                pooled, key, out / f"accuracy_by_{key}", order, f"Accuracy by {key} (categories pooled)")
    congruence = congruence_series(runs)
    if congruence:
        figs["accuracy_by_congruence"] = plots.plot_accuracy(
            congruence, out / "accuracy_by_congruence",
            "Listen or read? Accuracy by congruence")
    formats = list(dict.fromkeys(c for r in runs for c in _grid_rows(r) if result_kind(r.results, c).fixed_question))
    for c in formats:
        labels = list(resolve(c).spec.labels)
        stem = f"confusion_{safe_component(c)}"
        figs[stem] = plots.plot_confusion({r.label: r.rows[c] for r in runs if c in r.rows}, labels, out / stem,
                                          f"{c}: gold vs answer")
    return figs


def report(run_dirs: str | Path | Sequence[str | Path], out_dir: str | Path | None = None,
           figures: bool = True, fmt: str = "markdown") -> str:
    """Recompute, print-ready text; writes report.md and the figures (PDF, PNG, SVG) into out_dir (default: the
    first run dir). One run gives its full report; several give one table with every model, then each
    run's own report. `fmt` "latex" or "html" also writes table2.tex / table2.html (the paper's Table 2
    layout with intervals) and returns that table instead of the Markdown."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown report format {fmt!r}; choose one of {', '.join(FORMATS)}")
    dirs = [run_dirs] if isinstance(run_dirs, str | Path) else list(run_dirs)
    if not dirs:
        raise ValueError("harness report needs at least one run directory")
    runs = load_runs(dirs)
    for r in runs:
        for w in sample_warnings(r.results):
            print(f"warning: {r.path}: {w}", file=sys.stderr)
        if note := protocol_note(r.results):
            print(f"note: {r.path}: {note}", file=sys.stderr)
    single = [format_report(r.results) for r in runs]
    demoted = ["\n".join("#" + line if line.startswith("#") else line for line in s.splitlines()) for s in single]
    text = single[0] if len(runs) == 1 else format_comparison(runs) + "\n" + "\n\n".join(demoted) + "\n"
    text = markdown_safe(text)  # task, label and model names are outside text: no raw HTML reaches report.md
    out = Path(out_dir or dirs[0])
    atomic_write_text(out / "report.md", text)
    if figures:
        write_figures(runs, out)
    if fmt != "markdown":
        table = format_table2(runs, fmt)
        atomic_write_text(out / f"table2.{'tex' if fmt == 'latex' else 'html'}", table)
        return table
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
        rows.append([c, str(m.n_pairs), pct(m.accuracy_a), pct(m.accuracy_b), str(m.only_a_correct),
                     str(m.only_b_correct), f"{m.p_value:.4g}"])
    head = ["config", "pairs", "acc A", "acc B", "only A right", "only B right", "McNemar exact p"]
    return f"A = {dir_a}\nB = {dir_b}\n\n" + markdown_table(head, rows) + "\n"
