"""`vocalgrad-dataset`: build Parquet configs, list ids, run the signal oracle, list categories."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from .generate import SPLITS


def _splits(value: str) -> list[str]:
    return list(SPLITS) if value == "all" else [value]


def cmd_build(args: argparse.Namespace) -> int:
    """Render a config's splits to Parquet + data card; optionally push every config to the Hub."""
    from .export import build, push_to_hub

    report = build(
        args.config, _splits(args.split), args.out, source=args.source, data_dir=args.data_dir,
        num_proc=args.num_proc, clips_per_shard=args.clips_per_shard, progress=not args.quiet,
    )  # fmt: skip
    if args.push_to_hub:
        report["pushed"] = push_to_hub(args.out, args.push_to_hub, private=args.private)
    print(json.dumps(report))
    return 0


def cmd_ids(args: argparse.Namespace) -> int:
    """Print a split's clip ids, one per line (from the frozen list for vctk: no corpus, no audio)."""
    from .generate import config_categories, frozen_ids, source_clips
    from .grid import iter_ids

    if args.source == "vctk":
        ids = frozen_ids(args.config, args.split)
    else:
        items = [(c.source_item_id, c.source_clip_id) for c in source_clips(args.split, args.source, args.data_dir)]
        ids = [i for _ in config_categories(args.config) for i in iter_ids(items)]
    sys.stdout.write("".join(f"{i}\n" for i in ids))
    return 0


def cmd_oracle(args: argparse.Namespace) -> int:
    """Score the signal oracle on generated clips; the last line is JSON with accuracy and by_tier."""
    from .oracle import evaluate_oracle

    result = evaluate_oracle(args.config, args.split, args.source, args.data_dir)
    for key in ("by_category",):
        for name, acc in sorted(result.get(key, {}).items()):
            print(f"{name:12s} {acc:.3f}")
    print(json.dumps(result))
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    """The category table, generated from the registry."""
    from .card import category_rows, category_table_markdown

    if args.markdown:
        print(category_table_markdown())
        return 0
    for row in category_rows():
        print(f"{row['config']:11s} {row['attribute']:17s} {row['parameter']:18s} {row['low / mid / high']}")
    return 0


def parser() -> argparse.ArgumentParser:
    """The argument parser (also used to document the CLI)."""
    p = argparse.ArgumentParser(prog="vocalgrad-dataset", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)

    def common(sp: argparse.ArgumentParser, split_all: bool = False) -> None:
        sp.add_argument("--config", required=True, help="category (speed, pitch, ...), published long name, or all")
        sp.add_argument("--split", default="test", choices=[*SPLITS, "all"] if split_all else list(SPLITS))
        sp.add_argument("--source", default="vctk", help="vctk (default), demo, or folder")
        sp.add_argument("--data-dir", default=None, help="corpus root (vctk: the VCTK-Corpus folder; folder: the folder)")

    b = sub.add_parser("build", help="write Parquet shards + README (configs YAML, data card)")
    common(b, split_all=True)
    b.add_argument("--out", required=True)
    b.add_argument("--num-proc", type=int, default=1)
    b.add_argument("--clips-per-shard", type=int, default=4)
    b.add_argument("--push-to-hub", default=None, metavar="REPO", help="upload every config in --out to this dataset repo")
    b.add_argument("--private", action="store_true")
    b.add_argument("--quiet", action="store_true")
    b.set_defaults(func=cmd_build)

    i = sub.add_parser("ids", help="print clip ids, one per line")
    common(i)
    i.set_defaults(func=cmd_ids)

    o = sub.add_parser("oracle", help="accuracy of the signal oracle (label integrity)")
    common(o)
    o.set_defaults(func=cmd_oracle)

    ls = sub.add_parser("list", help="the categories and their parameters")
    ls.add_argument("--markdown", action="store_true")
    ls.set_defaults(func=cmd_list)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; errors about inputs print one clear line instead of a traceback."""
    from .sources import SourceError

    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except (SourceError, KeyError, ValueError, FileNotFoundError) as err:
        msg = err.args[0] if isinstance(err, KeyError) and err.args else err
        print(f"vocalgrad-dataset: error: {msg}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
