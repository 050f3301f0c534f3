"""The `harness` command: eval, report, compare, list-models, leaderboard."""

from __future__ import annotations

import argparse
import sys

from harness.models.protocol import MissingDependency, ModelError
from harness.runner import add_eval_arguments, eval_settings_from_args, run_eval


def _eval(ns: argparse.Namespace) -> int:
    run_eval(eval_settings_from_args(ns))
    return 0


def _report(ns: argparse.Namespace) -> int:
    from harness.report import report

    print(report(ns.run_dirs, ns.out, figures=not ns.no_figures))
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
    """The argument parser of every subcommand."""
    p = argparse.ArgumentParser(prog="harness", description="Evaluate audio LMs on VocalGrad.")
    sub = p.add_subparsers(dest="command", required=True)
    e = sub.add_parser("eval", help="run or resume an evaluation in this process")
    add_eval_arguments(e)
    e.set_defaults(func=_eval)
    r = sub.add_parser("report", help="tables and figures recomputed from the samples files of one or more runs")
    r.add_argument("run_dirs", nargs="+", metavar="RUN", help="run directories; several are shown side by side")
    r.add_argument("--out", default=None, help="where report.md and the figures (PNG, SVG) go (default: the first run)")
    r.add_argument("--no-figures", action="store_true")
    r.set_defaults(func=_report)
    c = sub.add_parser("compare", help="McNemar test per config between two runs on the same clips")
    c.add_argument("run_a")
    c.add_argument("run_b")
    c.set_defaults(func=_compare)
    m = sub.add_parser("list-models", help="models the registry knows (installed plugins included)",
                       description="Every model name --model takes, with its kind and what it runs.")
    m.add_argument("--markdown", action="store_true", help="print the README's model table")
    m.set_defaults(func=_list_models)
    from harness.leaderboard.cli import add_leaderboard_parser

    add_leaderboard_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `harness` console script."""
    ns = build_parser().parse_args(argv)
    try:
        return ns.func(ns)
    except (ValueError, FileNotFoundError, MissingDependency, ModelError) as err:  # a message, not a traceback
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
