"""`vocalgrad-dataset`: build Parquet configs, list ids, run the signal oracle, list categories and configs,
write and verify the PCM-hash manifest of a build or release folder."""

from __future__ import annotations

import argparse
import gc
import json
import sys
from collections.abc import Sequence

from vocalgrad_dataset.cli.argtypes import nonnegative_float, nonnegative_int, positive_int
from vocalgrad_dataset.cli.info import console_script, run_command
from vocalgrad_dataset.generate import SPLITS

_AS_PROGRAM = False  # main() called without argv: this process is the CLI and exits when the command returns


def skip_exit_collection() -> bool:
    """Spare a process that is about to exit the garbage collection of everything it loaded; returns whether it did.

    The one speed setting a build keeps (issue 36; the others, O_DIRECT shard writes, glibc malloc thresholds,
    Arrow's system pool and no transparent huge pages, measured nothing and went): the interpreter's exit walks
    numba's and pyarrow's objects only to free memory the OS takes back anyway; frozen objects are skipped
    (~0.25 s of a 1.2 s `build --config volume --source demo`). Portable: where `gc.freeze` is missing (not
    CPython) nothing changes. atexit handlers still run. Only for a process that ends next, never a library user's.
    """
    freeze = getattr(gc, "freeze", None)
    if freeze is None:
        return False
    freeze()
    return True


def _splits(value: str, config: str, source: str | None) -> list[str]:
    """The requested split, or every split the config's source has for "all" (beep: test only)."""
    if value != "all":
        return [value]
    from vocalgrad_dataset.tasks import resolve

    if resolve(config).family != "vocalgrad":  # declared configs built from vendored data: test and train
        return list(SPLITS)
    from vocalgrad_dataset.generate import resolve_source, source_splits
    from vocalgrad_dataset.sources import get_source

    name = resolve_source(config, source)
    if name in ("vctk", "folder"):  # no corpus needed to know: both offer test and train
        return list(SPLITS)
    return list(source_splits(get_source(name)))


def cmd_build(args: argparse.Namespace) -> int:
    """Render a config's splits to Parquet + data card; optionally push every config to the Hub."""
    from vocalgrad_dataset.build.export import build, push_to_hub

    report = build(
        args.config, _splits(args.split, args.config, args.source), args.out, source=args.source, data_dir=args.data_dir,
        num_proc=args.num_proc, clips_per_shard=args.clips_per_shard, progress=not args.quiet,
        overwrite=args.overwrite, allow_outside=args.allow_outside_paths, lock_timeout=args.lock_timeout,
    )  # fmt: skip
    if args.push_to_hub:
        report["pushed"] = push_to_hub(args.out, args.push_to_hub, private=args.private, lock_timeout=args.lock_timeout)
    print(json.dumps(report))
    if _AS_PROGRAM:  # every output written and closed: the process ends now
        skip_exit_collection()
    return 0


def cmd_ids(args: argparse.Namespace) -> int:
    """Print a split's clip ids, one per line (frozen lists for vctk, beep and the alternative sources: no audio),
    or with --sha256 only the list's check value."""
    ids = _config_ids(args)
    if args.sha256:
        from vocalgrad_dataset.grid import ids_sha256

        print(ids_sha256(ids))
        return 0
    sys.stdout.write("".join(f"{i}\n" for i in ids))
    return 0


def _config_ids(args: argparse.Namespace) -> list[str]:
    """The ids `ids` prints: a generated config's clip ids, or a built-items config's (VoxParadox-lite, which
    `build` takes too) item ids from its frozen list."""
    from vocalgrad_dataset.generate import config_ids
    from vocalgrad_dataset.tasks import resolve

    try:
        items = resolve(args.config).rows == "items"
    except ValueError:  # an expanding name (all, beep-all) or a typo: config_ids says which
        items = False
    if items:
        from vocalgrad_dataset.voxparadox.export import config_item_ids

        return config_item_ids(args.config, args.split)
    return config_ids(args.config, args.split, args.source, args.data_dir)


def cmd_oracle(args: argparse.Namespace) -> int:
    """Score the signal oracle on generated clips; the last line is JSON with accuracy and by_tier."""
    from vocalgrad_dataset.generate import resolve_source
    from vocalgrad_dataset.oracle import evaluate_oracle

    result = evaluate_oracle(args.config, args.split, resolve_source(args.config, args.source), args.data_dir)
    for key in ("by_category",):
        for name, acc in sorted(result.get(key, {}).items()):
            print(f"{name:12s} {acc:.3f}")
    print(json.dumps(result))
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    """The category table, generated from the registry (or, with --configs, every config name)."""
    from vocalgrad_dataset.build.card import category_rows, category_table_markdown

    if args.configs:
        from vocalgrad_dataset.tasks import config_names, config_spec

        for name in config_names():
            spec = config_spec(name)
            print(f"{name:20s} {spec.format:9s} {spec.source or '-':5s} {' / '.join(spec.labels)}")
        from vocalgrad_dataset.tasks import declarations

        for decl in declarations():  # the declared configs of other families (VoxParadox-lite, ...)
            if decl.family != "vocalgrad":
                print(f"{decl.task:28s} {decl.kind:9s} {decl.family}")
        return 0
    if args.markdown:
        print(category_table_markdown())
        return 0
    for row in category_rows():
        print(f"{row['config']:11s} {row['attribute']:17s} {row['parameter']:18s} {row['low / mid / high']}")
    return 0


def cmd_manifest(args: argparse.Namespace) -> int:
    """Hash every clip of a build or release folder; write the manifest (DIR/manifest.csv, or --out; - for stdout)."""
    from vocalgrad_dataset.build.manifest import manifest_sha256, manifest_text, scan_dataset, write_manifest

    if args.out == "-":
        sys.stdout.write(manifest_text(c.hash for c in scan_dataset(args.dir)))
        return 0
    path, rows = write_manifest(args.dir, args.out)
    # manifest_sha256: what harness eval records in results.json for a dataset folder holding this manifest.csv
    print(json.dumps({"manifest": str(path), "clips": len(rows), "manifest_sha256": manifest_sha256(rows)}))
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    """Compare a folder with a manifest clip by clip; exit 0 when identical, 1 on any difference."""
    from vocalgrad_dataset.build.manifest import report_lines, verify

    report = verify(args.dir, args.manifest)
    for line in report_lines(report, limit=args.show):
        print(line)
    print(json.dumps(report.summary()))
    return 0 if report.identical else 1


def parser() -> argparse.ArgumentParser:
    """The argument parser (also used to document the CLI)."""
    p, command = console_script("vocalgrad-dataset", __doc__)

    def common(sp: argparse.ArgumentParser, split_all: bool = False) -> None:
        sp.add_argument("--config", required=True, help="category (speed, pitch, ...) or published long name; "
                        "beep-<category>; <category>-yesno / -ternary / -source; all, all-<format>, beep-all")
        sp.add_argument("--split", default="test", choices=[*SPLITS, "all"] if split_all else list(SPLITS),
                        help="split of the source clips (vctk: 100 test, 500 train)"
                        + (" (all: every split the source has)" if split_all else ""))
        sp.add_argument("--source", default=None, help="vctk (default; beep configs: beep; -conflict configs: claims), demo, claims, folder, loquacious, "
                        "commonvoice-spontaneous, or package.module:Factory")
        sp.add_argument("--data-dir", default=None, help="corpus root (vctk: the VCTK-Corpus folder; folder: the folder; "
                        "loquacious: a local copy or Parquet files, default the Hub; commonvoice-spontaneous: the download)")

    b = command("build", "write Parquet shards + README (configs YAML, data card)",
                "Render a config's splits to Parquet shards in --out/<config>/ and (re)write the data card "
                "(README.md: configs, dataset_info, licences, citation). A killed build resumes where it stopped; "
                "a rebuild with other settings is refused unless --overwrite.", run=cmd_build)
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
    b.add_argument("--private", action="store_true", help="with --push-to-hub: create the repo private")
    b.add_argument("--quiet", action="store_true", help="no progress output")

    i = command("ids", "print clip ids, one per line",
                "Print the benchmark_clip_id of every clip of a config and split, one per line, in dataset order "
                "(frozen lists for vctk, beep and the alternative sources: no audio is read).", run=cmd_ids)
    common(i)
    i.add_argument("--sha256", action="store_true",
                   help="print only the sha256 of the sorted ids joined by newlines (SPEC §2's check value)")

    o = command("oracle", "accuracy of the signal oracle (label integrity)",
                "Generate the clips and score the signal oracle, which reads the changed factor off the audio: "
                "a check that every label matches its clip. The last line is JSON (accuracy, by_tier).",
                run=cmd_oracle)
    common(o)

    m = command("manifest", "write the PCM-hash manifest of a build or published release folder",
                "Hash the int16 PCM of every clip of DIR into a manifest CSV (category, clip id, rate, samples, "
                "sha256). DIR/manifest.csv is what `harness eval --dataset DIR` records as manifest_sha256.",
                run=cmd_manifest)
    m.add_argument("dir", metavar="DIR", help="a `vocalgrad-dataset build` folder or a release folder (metadata.csv)")
    m.add_argument("--out", default=None, metavar="FILE",
                   help="where to write it (default DIR/manifest.csv, which harness eval records; - for stdout)")

    v = command("verify", "compare a build or release folder with a manifest, clip by clip",
                "Compare DIR with a manifest clip by clip: missing, extra and different clips, and the largest "
                "PCM difference where lossless copies are at hand. Exit 0 when identical, 1 on any difference.",
                run=cmd_verify)
    v.add_argument("dir", metavar="DIR", help="the folder to check (build or release layout)")
    v.add_argument("--manifest", required=True, metavar="FILE",
                   help="a manifest CSV (lossless copies in audio/<category>/<clip>.flac beside it are used to measure "
                   "differences), or another build/release folder")
    v.add_argument("--show", type=nonnegative_int, default=20, metavar="N", help="list at most N clips of each kind")

    ls = command("list", "the categories and their parameters",
                 "The nine categories with their published names, parameter and tier values (or, with --configs, "
                 "every config name).", run=cmd_list)
    ls.add_argument("--markdown", action="store_true", help="as the Markdown table of the README")
    ls.add_argument("--configs", action="store_true", help="every config name with its format, bound source and labels")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; errors about inputs print one clear line instead of a traceback."""
    from vocalgrad_dataset.fileio import LockedError
    from vocalgrad_dataset.sources import SourceError

    global _AS_PROGRAM
    _AS_PROGRAM = argv is None  # the console script or `python -m`: nothing runs in this process afterwards
    # OSError: a file or folder that cannot be read or written (permissions, a full disk, a file for a folder)
    return run_command(parser(), argv, (SourceError, KeyError, ValueError, LockedError, OSError),
                       prefix="vocalgrad-dataset: error")


if __name__ == "__main__":
    raise SystemExit(main())
