"""Running a suite and writing its tables: the plan (runs, sizes), the runs (one model load for all,
resumable), and every declared table rendered from the runs' samples files.

Every run is an ordinary harness run directory (`DIR/runs/<run>/samples_<config>.jsonl`) with one prompt
variant; `DIR/suite.json` / `suite.md` list the runs, their sizes and status; `DIR/tables/` holds one
Markdown file per table and README.md, the index. A table whose runs are incomplete says INCOMPLETE and
why; it never reads another run's files instead (SPEC §8).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.data import open_source
from harness.paper.inputs import SuiteInputs, missing_text
from harness.paper.reference import ReferenceIndex, reference_index
from harness.paper.suite import DEFAULT_SUITE, Suite, SuiteRun, SuiteTable, default_suite
from harness.paper.tables import TABLE_KINDS, TableRequest
from harness.results import atomic_write_text
from harness.sampling import limited_count
from harness.settings import ModelSettings, RowSettings, derive, settings_record
from harness.tables import markdown_table
from vocalgrad_dataset.generate import config_ids


@dataclass(kw_only=True)
class SuiteSettings(ModelSettings, RowSettings):
    """What the suite runs on (recorded in suite.json): the shared model and row settings, the corpora of
    the alternative-source runs, and the run settings every run of the suite shares."""

    out: str
    loquacious_dir: str | None = None
    commonvoice_dir: str | None = None
    mode: str = "generate"
    limit: int | float | None = None
    data_workers: int = 0

    def run_source(self, run: SuiteRun) -> tuple[str, str | None, str | None]:
        """(source, data_dir, dataset) of a run: its own source, or the suite's."""
        if run.source == "loquacious":
            return run.source, self.loquacious_dir, None
        if run.source == "commonvoice-spontaneous":
            return run.source, self.commonvoice_dir, None
        if run.source is not None:
            return run.source, None, None
        return self.source, self.data_dir, self.dataset


def run_sizes(run: SuiteRun, settings: SuiteSettings) -> dict[str, int]:
    """Clips per config of a run (after --limit), from the frozen lists or the build; no audio decoded."""
    source, data_dir, dataset = settings.run_source(run)
    sizes = {}
    for config in run.configs:
        if dataset is not None:
            n = sum(len(u.clip_ids) for u in open_source("test", dataset=dataset).units(config))
        else:
            n = len(config_ids(config, "test", source, data_dir if source != "vctk" else None))
        sizes[config] = limited_count(n, settings.limit)
    return sizes


# ---- the plan ------------------------------------------------------------------------------------------


EXTERNAL_STATUS = "external"  # the status of a run made by `harness eval` (MELD), never by the suite


def external_source(run: SuiteRun) -> str:
    """How an external run is made: an adapter's evaluation, or a classification dataset's."""
    if run.trained is not None:
        return f"harness eval --adapter (vocalgrad-finetune --category {run.trained})"
    return "harness eval --kind classify"


def plan(runs: Sequence[SuiteRun], settings: SuiteSettings) -> list[dict[str, Any]]:
    """Every run with its directory, source and sizes (what --dry-run prints); an external run (MELD,
    harness.paper.declared.EXTERNAL_CONFIGS) is listed with no queries and the status "external"."""
    out = []
    for run in runs:
        if run.external:
            out.append({
                "run": run.name, "dir": f"runs/{run.dirname}", "prompt": run.prompt, "group": run.group,
                "source": external_source(run), "data_dir": None,
                "configs": dict.fromkeys(run.configs, 0), "queries": 0, "audios_per_query": run.audios_per_query,
                "tables": list(run.tables), "status": EXTERNAL_STATUS,
            })  # fmt: skip
            continue
        source, data_dir, dataset = settings.run_source(run)
        sizes = run_sizes(run, settings)
        out.append({
            "run": run.name, "dir": f"runs/{run.dirname}", "prompt": run.prompt, "group": run.group,
            "source": f"dataset:{dataset}" if dataset else source, "data_dir": data_dir, "configs": sizes,
            "queries": sum(sizes.values()), "audios_per_query": run.audios_per_query, "tables": list(run.tables),
        })  # fmt: skip
    return out


def plan_markdown(model: str, entries: Sequence[dict[str, Any]]) -> str:
    """suite.md: one row per run with its size and status."""
    body = [[e["run"], e["prompt"], e["source"], str(len(e["configs"])), f"{e['queries']:,}", str(e["audios_per_query"]),
             ", ".join(e["tables"]), e.get("status", "planned")] for e in entries]
    total = sum(e["queries"] for e in entries)
    return (f"# VocalGrad paper suite for `{model}`\n\n{len(entries)} runs, {total:,} queries.\n\n"
            + markdown_table(["run", "prompt", "source", "configs", "queries", "audios/query", "tables", "status"], body) + "\n")


def write_plan(out: Path, settings: SuiteSettings, entries: Sequence[dict[str, Any]], suite: Suite | None = None) -> None:
    """suite.json (settings, the suite file when not the paper's, runs) and suite.md."""
    record: dict[str, Any] = {"settings": settings_record(settings)}
    if suite is not None and suite.path != str(DEFAULT_SUITE):
        record["suite"] = suite.path
    record["runs"] = list(entries)
    atomic_write_text(out / "suite.json", json.dumps(record, indent=2) + "\n")
    atomic_write_text(out / "suite.md", plan_markdown(settings.model, entries))


# ---- running -------------------------------------------------------------------------------------------


def run_suite(settings: SuiteSettings, runs: Sequence[SuiteRun], suite: Suite | None = None) -> list[dict[str, Any]]:
    """Evaluate every run (resuming what exists), one model load for all; failures are recorded, not raised."""
    from harness.models.registry import load_model
    from harness.runner import Dist, EvalSettings, run_eval

    out = Path(settings.out)
    entries = plan(runs, settings)
    write_plan(out, settings, entries, suite)
    model, dist = load_model(settings), Dist()
    for run, entry in zip(runs, entries, strict=True):
        if run.external:  # MELD: `harness eval --kind classify` per adapter; the tables read its samples
            continue
        source, data_dir, dataset = settings.run_source(run)
        ev = derive(EvalSettings, settings, configs=list(run.configs), out=str(out / "runs" / run.dirname),
                    prompt=run.prompt, source=source, data_dir=data_dir, dataset=dataset, split="test")
        start = time.time()
        try:
            run_eval(ev, model=model, dist=dist)
            entry["status"] = "done"
        except Exception as err:  # one failing run (missing corpus, model limits) must not stop the suite
            entry["status"] = f"failed: {type(err).__name__}: {err}"
            print(f"vocalgrad-paper: run {run.name} failed: {err}", file=sys.stderr)
        entry["seconds"] = round(time.time() - start, 1)
        write_plan(out, settings, entries, suite)
    return entries


# ---- tables --------------------------------------------------------------------------------------------


def skipped_note(table: SuiteTable, inputs: SuiteInputs) -> str | None:
    """The one-line note of a table whose external runs (MELD, fine-tuned adapters) have no samples yet: the
    table is skipped, not incomplete, so a default suite without them stays complete; else None."""
    runs = [r for r in (inputs.runs[name] for name in table.runs) if r.external]
    if not runs or any(inputs.has_samples(r.name) for r in runs):
        return None
    dirs = ", ".join(f"runs/{r.dirname}" for r in runs)
    if any(r.trained is not None for r in runs):
        return (f"Skipped: no samples in {dirs}; these runs are made per category with `vocalgrad-finetune --model "
                f"M --category <category> --scope all_linear --out DIR/finetune/<category>` and `harness eval --model "
                f"M --adapter DIR/finetune/<category> --out DIR/runs/finetune-<category>`, not by vocalgrad-paper")
    return (f"Skipped: no samples in {dirs}; these runs are made with `harness eval --kind classify "
            f"--mode choices --out DIR/runs/<run>` (one per adapter), not by vocalgrad-paper")


def render_table(table: SuiteTable, inputs: SuiteInputs, ref: ReferenceIndex, model: str) -> tuple[str, str | None]:
    """A table file's text and None when complete (or skipped: see skipped_note), else why not (missing samples,
    another prompt's files)."""
    inputs.missing = []
    if skip := skipped_note(table, inputs):
        return f"# {table.head}: {table.title}\n\nModel: `{model}`.\n\n_{skip}._\n", None
    request = TableRequest(inputs, ref, model, tuple(inputs.runs[name] for name in table.runs), table.labels)
    try:
        body = TABLE_KINDS[table.kind].build(request)
        body = f"{table.note}\n\n{body}" if table.note else body
        problem = missing_text(inputs.missing) if inputs.missing else None
    except ValueError as err:  # a run directory of another prompt variant or model (SPEC §8)
        body, problem = "", str(err)
    note = ("_Dry run: no model outputs yet; published values only._\n\n" if inputs.dry_run
            else f"_INCOMPLETE: {problem}._\n\n" if problem else "")
    if not inputs.dry_run:  # a run with dtype / TF32 / attention opt-ins: flagged, its numbers kept
        flagged = [f"{name}: {'; '.join(items)}" for name in dict.fromkeys(table.runs)
                   if (items := inputs.not_paper_protocol(name))]
        note += "".join(f"_‡ not the paper's protocol: {f}._\n\n" for f in flagged)
        caveats = [f"{name}: {c}" for name in dict.fromkeys(table.runs) for c in inputs.run_caveats(name)]
        note += "".join(f"_**Not the paper's table:** {c.rstrip('.')}._\n\n" for c in caveats)  # a smoke run is no Table 2
    return f"# {table.head}: {table.title}\n\nModel: `{model}`.\n\n{note}{body}\n", problem


def assemble_tables(out_dir: str | Path, model: str, *, dry_run: bool = False,
                    suite: Suite | None = None, skipped: list[str] | None = None) -> dict[str, str | None]:
    """Write every table file of a suite (default: the paper's) under out_dir/tables; returns table key ->
    None when complete (or skipped: its keys are appended to `skipped`), else why not."""
    suite = suite or default_suite()
    out = Path(out_dir)
    inputs = SuiteInputs(out, model, suite.by_name, dry_run=dry_run)
    ref = reference_index()
    status: dict[str, str | None] = {}
    index = ["| table | file | status |", "|---|---|---|"]
    for table in suite.tables:
        text, status[table.key] = render_table(table, inputs, ref, model)
        atomic_write_text(out / "tables" / table.filename, text)
        skip = skipped_note(table, inputs) is not None
        if skip and skipped is not None:
            skipped.append(table.key)
        state = "skipped" if skip else "dry run" if dry_run else "incomplete" if status[table.key] else "complete"
        index.append(f"| {table.key} | [{table.filename}]({table.filename}) | {state} |")
    atomic_write_text(out / "tables" / "README.md", "# VocalGrad paper tables\n\n" + "\n".join(index) + "\n")
    return status
