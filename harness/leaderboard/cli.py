"""The `harness leaderboard` subcommands: submit, validate, build, schema."""

from __future__ import annotations

import argparse
import json
import sys

from vocalgrad_dataset.cli.info import Command, subcommands


def _submit(ns: argparse.Namespace) -> int:
    from harness.leaderboard.submit import make_submission, write_submission
    from harness.leaderboard.validate import validate_submission

    sub = make_submission(ns.run_dir, model_name=ns.model_name, params=ns.params, precision=ns.precision,
                          revision=ns.revision, adapter=ns.adapter, notes=ns.notes)
    errors = validate_submission(sub)
    if errors:  # e.g. a --limit run: refuse to write what validate would reject
        print(f"error: {ns.run_dir} does not make a valid submission:\n  " + "\n  ".join(errors), file=sys.stderr)
        return 1
    write_submission(sub, ns.out)
    n = sum(len(rows) for rows in sub["samples"].values())
    print(f"wrote {ns.out} ({sub['model']['name']}: {len(sub['samples'])} config(s), {n} clips)")
    return 0


def _validate(ns: argparse.Namespace) -> int:
    from harness.leaderboard.validate import validate_file

    sub, errors = validate_file(ns.submission)
    if errors:
        print(f"INVALID {ns.submission}:\n  " + "\n  ".join(errors), file=sys.stderr)
        return 1
    n = sum(len(rows) for rows in sub["samples"].values())
    print(f"OK {ns.submission}: {sub['model']['name']}, {len(sub['samples'])} config(s), {n} clips, "
          + ", ".join(_headlines(sub["results"])))
    return 0


def _headlines(results: dict) -> list[str]:
    """The headline numbers a run has, one per results.json group its kinds declare one for (the nine-category
    mean, claim-following, multiple-choice accuracy, ...; a run of only conflict configs has no VocalGrad mean)."""
    from harness.kinds import all_kinds
    from harness.results import group_metrics

    heads = {k.group: k.headline for k in all_kinds() if k.headline is not None}
    return [f"{words} {100 * value:.1f} %" for group, (metric, words) in heads.items()
            if (value := group_metrics(results, group).get(metric)) is not None] or ["no headline metric"]


def _build(ns: argparse.Namespace) -> int:
    from harness.leaderboard.build import build

    rows = build(ns.subs_dir, ns.out, skip_invalid=ns.skip_invalid)
    n = sum(r.kind == "submission" for r in rows)
    humans = sum(r.kind == "human" and bool(r.file) for r in rows)  # `vocalgrad-listen export` submissions
    print(f"wrote {ns.out}/index.html, leaderboard.md, leaderboard.csv ({n} submission(s), "
          f"{humans} human baseline(s), {len(rows) - n - humans} reference rows)")
    return 0


def _schema(ns: argparse.Namespace) -> int:
    from harness.leaderboard.schema import SUBMISSION_SCHEMA

    print(json.dumps(SUBMISSION_SCHEMA, indent=2, ensure_ascii=False))
    return 0


def add_leaderboard_parser(command: Command) -> None:
    """Register `harness leaderboard {submit,validate,build,schema}` with the harness's subcommand maker."""
    lb = command("leaderboard", "make, check and publish leaderboard submissions",
                 "Leaderboard submissions: make one from a run (submit), check it (validate), render the "
                 "site from a folder of them (build), print the format (schema).")
    sub = subcommands(lb, dest="leaderboard_command")
    s = sub("submit", "a submission JSON from a harness run directory",
            "Pack a complete run (results.json, every samples file, model metadata) into one submission "
            "JSON; a run that validate would reject (e.g. a --limit run) is refused.", run=_submit)
    s.add_argument("run_dir", metavar="RUN", help="a `harness eval` run directory")
    s.add_argument("--model-name", required=True, help="display name on the leaderboard")
    s.add_argument("--out", required=True, help="the submission file to write (SUB.json)")
    s.add_argument("--params", type=int, default=None, help="parameter count")
    s.add_argument("--precision", default=None, help="weights dtype (default: from the run)")
    s.add_argument("--revision", default=None, help="commit of the base weights (default: from the run)")
    s.add_argument("--adapter", default=None, help="LoRA adapter repo or path (default: from the run)")
    s.add_argument("--notes", default=None, help="free text shown with the row")
    v = sub("validate", "check a submission: exit 0 when valid, 1 naming every problem",
            "Check a submission: schema, clip ids and gold labels, answers re-parsed, metrics recomputed, "
            "samples digest. Exit 0 when valid, 1 naming every problem.", run=_validate)
    v.add_argument("submission", metavar="SUB.json", help="the submission file")
    b = sub("build", "index.html + leaderboard.md + .csv from a folder of submissions",
            "Validate every *.json in SUBS_DIR and write the static site: index.html (official rows ranked,"
            " other data apart, filters), leaderboard.md, leaderboard.csv and a Space README.md.", run=_build)
    b.add_argument("subs_dir", metavar="SUBS_DIR", help="folder of submission JSON files")
    b.add_argument("--out", required=True, help="folder for the site (created)")
    b.add_argument("--skip-invalid", action="store_true", help="leave invalid submissions out instead of failing")
    sub("schema", "print the submission JSON schema",
        "Print the JSON schema of a submission (the version validate reads).", run=_schema)
