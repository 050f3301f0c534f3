"""`vocalgrad-dataset`: build Parquet configs, list ids, run the signal oracle, list categories and configs,
write and verify the PCM-hash manifest of a build or release folder."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

from .argtypes import nonnegative_float, nonnegative_int, positive_int
from .generate import SPLITS


def _splits(value: str, config: str, source: str | None) -> list[str]:
    """The requested split, or every split the config's source has for "all" (beep: test only)."""
    if value != "all":
        return [value]
    from .generate import resolve_source, source_splits
    from .sources import get_source

    name = resolve_source(config, source)
    if name in ("vctk", "folder"):  # no corpus needed to know: both offer test and train
        return list(SPLITS)
    return list(source_splits(get_source(name)))


def cmd_build(args: argparse.Namespace) -> int:
    """Render a config's splits to Parquet + data card; optionally push every config to the Hub."""
    from .export import build, push_to_hub

    report = build(
        args.config, _splits(args.split, args.config, args.source), args.out, source=args.source, data_dir=args.data_dir,
        num_proc=args.num_proc, clips_per_shard=args.clips_per_shard, progress=not args.quiet,
        overwrite=args.overwrite, allow_outside=args.allow_outside_paths, lock_timeout=args.lock_timeout,
    )  # fmt: skip
    if args.push_to_hub:
        report["pushed"] = push_to_hub(args.out, args.push_to_hub, private=args.private, lock_timeout=args.lock_timeout)
    print(json.dumps(report))
    return 0


def cmd_ids(args: argparse.Namespace) -> int:
    """Print a split's clip ids, one per line (frozen lists for vctk, beep and the alternative sources: no audio)."""
    from .generate import config_ids

    ids = config_ids(args.config, args.split, args.source, args.data_dir)
    sys.stdout.write("".join(f"{i}\n" for i in ids))
    return 0


def cmd_oracle(args: argparse.Namespace) -> int:
    """Score the signal oracle on generated clips; the last line is JSON with accuracy and by_tier."""
    from .generate import resolve_source
    from .oracle import evaluate_oracle

    result = evaluate_oracle(args.config, args.split, resolve_source(args.config, args.source), args.data_dir)
    for key in ("by_category",):
        for name, acc in sorted(result.get(key, {}).items()):
            print(f"{name:12s} {acc:.3f}")
    print(json.dumps(result))
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    """The category table, generated from the registry (or, with --configs, every config name)."""
    from .card import category_rows, category_table_markdown

    if args.configs:
        from .generate import config_names, parse_config

        for name in config_names():
            spec = parse_config(name)
            print(f"{name:20s} {spec.format:9s} {spec.source or '-':5s} {' / '.join(spec.labels)}")
        return 0
    if args.markdown:
        print(category_table_markdown())
        return 0
    for row in category_rows():
        print(f"{row['config']:11s} {row['attribute']:17s} {row['parameter']:18s} {row['low / mid / high']}")
    return 0


def cmd_manifest(args: argparse.Namespace) -> int:
    """Hash every clip of a build or release folder; write the manifest (DIR/manifest.csv, or --out; - for stdout)."""
    from .manifest import manifest_sha256, manifest_text, scan_dataset, write_manifest

    if args.out == "-":
        sys.stdout.write(manifest_text(c.hash for c in scan_dataset(args.dir)))
        return 0
    path, rows = write_manifest(args.dir, args.out)
    # manifest_sha256: what harness eval records in results.json for a dataset folder holding this manifest.csv
    print(json.dumps({"manifest": str(path), "clips": len(rows), "manifest_sha256": manifest_sha256(rows)}))
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    """Compare a folder with a manifest clip by clip; exit 0 when identical, 1 on any difference."""
    from .manifest import report_lines, verify

    report = verify(args.dir, args.manifest)
    for line in report_lines(report, limit=args.show):
        print(line)
    print(json.dumps(report.summary()))
    return 0 if report.identical else 1


def parser() -> argparse.ArgumentParser:
    """The argument parser (also used to document the CLI)."""
    p = argparse.ArgumentParser(prog="vocalgrad-dataset", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)

    def common(sp: argparse.ArgumentParser, split_all: bool = False) -> None:
        sp.add_argument("--config", required=True, help="category (speed, pitch, ...) or published long name; "
                        "beep-<category>; <category>-yesno / -ternary / -source; all, all-<format>, beep-all")
        sp.add_argument("--split", default="test", choices=[*SPLITS, "all"] if split_all else list(SPLITS))
        sp.add_argument("--source", default=None, help="vctk (default; beep configs: beep), demo, folder, loquacious, "
                        "commonvoice-spontaneous, or package.module:Factory")
        sp.add_argument("--data-dir", default=None, help="corpus root (vctk: the VCTK-Corpus folder; folder: the folder; "
                        "loquacious: a local copy or Parquet files, default the Hub; commonvoice-spontaneous: the download)")

    b = sub.add_parser("build", help="write Parquet shards + README (configs YAML, data card)")
    common(b, split_all=True)
    b.add_argument("--out", required=True, help="build folder (created; one sub-folder per config)")
    b.add_argument("--num-proc", type=positive_int, default=1, help="worker processes (>= 1)")
    b.add_argument("--clips-per-shard", type=positive_int, default=4, help="source clips per Parquet file (>= 1)")
    b.add_argument("--overwrite", action="store_true",
                   help="replace a config already in --out that was built with other settings (its shards are deleted)")
    b.add_argument("--allow-outside-paths", action="store_true",
                   help="folder source: let metadata.csv list files outside --data-dir (absolute or ../ paths)")
    b.add_argument("--lock-timeout", type=nonnegative_float, default=None, metavar="SECONDS",
                   help="when another build holds --out: wait this long, then fail (0: fail at once; default: wait)")
    b.add_argument("--push-to-hub", default=None, metavar="REPO", help="upload every config in --out to this dataset repo")
    b.add_argument("--private", action="store_true")
    b.add_argument("--quiet", action="store_true", help="no progress output")
    b.set_defaults(func=cmd_build)

    i = sub.add_parser("ids", help="print clip ids, one per line")
    common(i)
    i.set_defaults(func=cmd_ids)

    o = sub.add_parser("oracle", help="accuracy of the signal oracle (label integrity)")
    common(o)
    o.set_defaults(func=cmd_oracle)

    m = sub.add_parser("manifest", help="write the PCM-hash manifest of a build or published release folder")
    m.add_argument("dir", metavar="DIR", help="a `vocalgrad-dataset build` folder or a release folder (metadata.csv)")
    m.add_argument("--out", default=None, metavar="FILE",
                   help="where to write it (default DIR/manifest.csv, which harness eval records; - for stdout)")
    m.set_defaults(func=cmd_manifest)

    v = sub.add_parser("verify", help="compare a build or release folder with a manifest, clip by clip (exit 1 on "
                       "any difference)")
    v.add_argument("dir", metavar="DIR", help="the folder to check (build or release layout)")
    v.add_argument("--manifest", required=True, metavar="FILE",
                   help="a manifest CSV (lossless copies in audio/<category>/<clip>.flac beside it are used to measure "
                   "differences), or another build/release folder")
    v.add_argument("--show", type=nonnegative_int, default=20, metavar="N", help="list at most N clips of each kind")
    v.set_defaults(func=cmd_verify)

    ls = sub.add_parser("list", help="the categories and their parameters")
    ls.add_argument("--markdown", action="store_true")
    ls.add_argument("--configs", action="store_true", help="every config name with its format, bound source and labels")
    ls.set_defaults(func=cmd_list)
    return p


def _quiet_broken_pipe() -> int:
    """`vocalgrad-dataset ids ... | head`: the reader left; stop quietly (no traceback, no flush error at exit)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return 141  # 128 + SIGPIPE, what a shell reports for a writer whose reader closed the pipe


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; errors about inputs print one clear line instead of a traceback."""
    from .fileio import LockedError
    from .sources import SourceError

    args = parser().parse_args(argv)
    try:
        code = args.func(args)
        sys.stdout.flush()  # a closed pipe shows here, inside the handler, not at interpreter exit
        return code
    except BrokenPipeError:
        return _quiet_broken_pipe()
    except KeyboardInterrupt:
        print("vocalgrad-dataset: interrupted", file=sys.stderr)
        return 130
    except (SourceError, KeyError, ValueError, LockedError, OSError) as err:
        # OSError: a file or folder that cannot be read or written (permissions, a full disk, a file for a folder)
        msg = err.args[0] if isinstance(err, KeyError) and err.args else err
        print(f"vocalgrad-dataset: error: {msg}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
