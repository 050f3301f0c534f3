"""`vocalgrad-paper`: run the paper's appendix suite for one model and assemble its tables from samples files.

    vocalgrad-paper --model NAME --out DIR [--source vctk --data-dir D | --dataset D]
                    [--loquacious-dir D] [--commonvoice-dir D] [--only GROUPS] [--skip GROUPS] [--limit N]
                    [--suite FILE] [--dry-run | --tables-only]

The suite (runs and tables) is harness/paper/suite.yaml, or FILE (see harness/paper/__init__.py).
`--dry-run` lists the runs and sizes and writes every table file with the reference values only.
Exit status: 0 when every run and table is complete, 1 otherwise, 2 on bad input.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.paper.run import (
    EXTERNAL_STATUS,
    SuiteSettings,
    assemble_tables,
    plan,
    plan_markdown,
    run_suite,
    write_plan,
)
from harness.paper.suite import Suite, SuiteRun, default_suite, load_suite
from harness.settings import MODES, add_model_arguments, add_source_arguments, limit_type, settings_from_args
from vocalgrad_dataset.cli.argtypes import nonnegative_int
from vocalgrad_dataset.cli.info import DefaultsHelpFormatter, add_version_argument


def build_parser() -> argparse.ArgumentParser:
    """Arguments of `vocalgrad-paper`."""
    p = argparse.ArgumentParser(
        prog="vocalgrad-paper", formatter_class=DefaultsHelpFormatter,
        description="Run the paper's appendix suite for one model (the runs and tables declared in "
                    "harness/paper/suite.yaml, or a suite of your own with --suite) and assemble its tables beside "
                    "the published values; a missing run marks its tables INCOMPLETE, never a fallback.")
    add_version_argument(p)
    add_model_arguments(p)
    g = add_source_arguments(p, what="VCTK-based runs")
    g.add_argument("--dataset", default=None, help="a Parquet build instead of generating the VCTK-based runs")
    g.add_argument("--loquacious-dir", default=None, help="local LoquaciousSet copy or Parquet files (default: the Hub)")
    g.add_argument("--commonvoice-dir", default=None, help="the unpacked Common Voice Spontaneous Speech 4.0 download")
    r = p.add_argument_group("suite")
    r.add_argument("--out", required=True, help="suite directory (runs/, tables/, suite.json); resumed if it exists")
    r.add_argument("--suite", default=None, metavar="FILE",
                   help="a suite declaration of one's own (YAML; default: the paper's, harness/paper/suite.yaml)")
    r.add_argument("--only", default="", help=f"comma-separated runs or groups ({', '.join(default_suite().groups)})")
    r.add_argument("--skip", default="", help="comma-separated runs or groups to leave out")
    r.add_argument("--limit", type=limit_type, default=None,
                   help="N clips (or a fraction) of each config, stratified (smoke runs)")
    r.add_argument("--mode", choices=MODES, default="generate", help="(default: %(default)s)")
    r.add_argument("--data-workers", type=nonnegative_int, default=0, help="(default: %(default)s)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--dry-run", action="store_true", help="list the runs and sizes; write the tables with published values")
    g.add_argument("--tables-only", action="store_true", help="assemble the tables from the existing runs only")
    return p


def names(text: str) -> list[str]:
    """Comma-separated names ("" -> none)."""
    return [s for s in text.split(",") if s]


def dry_run(suite: Suite, settings: SuiteSettings, runs: Sequence[SuiteRun]) -> int:
    """Write the plan and every table with the published values only; print the plan."""
    out = Path(settings.out)
    entries = plan(runs, settings)
    write_plan(out, settings, entries, suite)
    assemble_tables(out, settings.model, dry_run=True, suite=suite)
    print(plan_markdown(settings.model, entries))
    return 0


def report(out: Path, status: dict[str, str | None], failed_runs: Sequence[Any], skipped: Sequence[str] = ()) -> int:
    """Print why each incomplete table is incomplete and a summary line; 1 when anything is incomplete. A
    skipped table (Table 22 without its external MELD runs) is neither complete nor incomplete."""
    incomplete = {k: v for k, v in status.items() if v}
    for key, why in incomplete.items():
        print(f"table {key}: {why}", file=sys.stderr)
    shown = len(status) - len(skipped)
    skip = f", table {', '.join(skipped)} skipped (no runs)" if skipped else ""
    print(f"wrote {out / 'tables'} ({shown - len(incomplete)}/{shown} tables complete{skip}, "
          f"{len(failed_runs)} run(s) failed)")
    return 1 if incomplete or failed_runs else 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `vocalgrad-paper`: 0 when every run and table is complete, 1 otherwise, 2 on bad input."""
    ns = build_parser().parse_args(argv)
    try:
        suite = load_suite(ns.suite)
        settings = settings_from_args(SuiteSettings, ns)
        runs = suite.select(names(ns.only), names(ns.skip))
        if ns.dry_run:
            return dry_run(suite, settings, runs)
        failed_runs = [] if ns.tables_only else [e for e in run_suite(settings, runs, suite)
                                                 if e["status"] not in ("done", EXTERNAL_STATUS)]
        skipped: list[str] = []
        status = assemble_tables(ns.out, ns.model, suite=suite, skipped=skipped)
    except (ValueError, FileNotFoundError) as err:
        print(f"vocalgrad-paper: error: {err}", file=sys.stderr)
        return 2
    return report(Path(ns.out), status, failed_runs, skipped)


if __name__ == "__main__":
    raise SystemExit(main())
