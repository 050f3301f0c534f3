"""The `harness` command: eval, report, compare, list-models, leaderboard."""

from __future__ import annotations

import argparse
import sys

from harness.models.protocol import MissingDependency, ModelError
from harness.runner import RunIncomplete, add_eval_arguments, eval_settings_from_args, run_eval, summary_table
from vocalgrad_dataset.cli.info import console_script, run_command


def _eval(ns: argparse.Namespace) -> int:
    try:
        results = run_eval(eval_settings_from_args(ns))
    except RunIncomplete as err:
        print(summary_table(err.results))
        raise
    if results is not None:  # rank 0: the per-config table, as lm-eval prints one
        print(summary_table(results))
    return 0


def _report(ns: argparse.Namespace) -> int:
    from harness.report import report

    print(report(ns.run_dirs, ns.out, figures=not ns.no_figures, fmt=ns.format))
    return 0


def _compare(ns: argparse.Namespace) -> int:
    from harness.report import compare

    print(compare(ns.run_a, ns.run_b))
    return 0


def _list_models(ns: argparse.Namespace) -> int:
    from harness.models.registry import list_models, models_table_markdown

    if ns.markdown:
        print(models_table_markdown())
        return 0
    for name, kind, description in list_models():
        print(f"{name:32s} {kind:10s} {description}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand (each with a description; --help shows the defaults)."""
    p, command = console_script("harness", "Evaluate audio language models on VocalGrad: run an evaluation, "
                                "report and compare runs, and build the leaderboard.")

    e = command("eval", "run or resume an evaluation in this process",
                "Evaluate a model on VocalGrad configs (generated from --source, or read from a --dataset build) "
                "and write samples_<config>.jsonl and results.json into --out; an existing run directory is "
                "resumed. Multi-GPU: `accelerate launch harness/eval.py ...` with the same arguments.",
                run=_eval)
    add_eval_arguments(e)
    r = command("report", "tables and figures recomputed from the samples files of one or more runs",
                "Recompute every metric from the samples files (answers re-parsed by the current parser) and "
                "write report.md plus the figures (PDF, PNG and SVG at 7 and 3.5 in). Several runs give one table with a row per "
                "model, beside the paper's Table 2 rows, then each run's own report.", run=_report)
    r.add_argument("run_dirs", nargs="+", metavar="RUN", help="run directories; several are shown side by side")
    r.add_argument("--out", default=None, help="where report.md and the figures go (default: the first RUN)")
    r.add_argument("--no-figures", action="store_true", help="write report.md only, no figures")
    r.add_argument("--format", default="markdown", choices=["markdown", "latex", "html"],
                   help="what to print: the Markdown report, or the paper's Table 2 layout (models x categories, "
                        "accuracy with its 95 %% CI) as a booktabs LaTeX table (also table2.tex) or HTML (table2.html)")
    c = command("compare", "McNemar test per config between two runs on the same clips",
                "Pair the clips two runs share (by benchmark_clip_id) and test, per config, whether their "
                "accuracies differ (exact McNemar test on the discordant pairs).", run=_compare)
    c.add_argument("run_a", metavar="RUN_A", help="first run directory")
    c.add_argument("run_b", metavar="RUN_B", help="second run directory")
    m = command("list-models", "models the registry knows",
                "Every registered model: name, kind (baseline, hf, external, api, ...) and a description.",
                run=_list_models)
    m.add_argument("--markdown", action="store_true", help="print the README's model table")
    from harness.leaderboard.cli import add_leaderboard_parser

    add_leaderboard_parser(command)
    from harness.export_lmms import add_export_parser

    add_export_parser(command)
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `harness` console script."""
    return run_command(build_parser(), argv, (ValueError, FileNotFoundError, MissingDependency, ModelError))


if __name__ == "__main__":
    sys.exit(main())
