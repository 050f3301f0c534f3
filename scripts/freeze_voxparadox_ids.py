"""Freeze VoxParadox-lite item ids (vocalgrad_dataset/data/voxparadox/ids/<task>-<split>.txt: id TAB sha256 of
the item's PCM16 samples). Run after changing the builder (and bump BUILDER_VERSION); builds then check them.

    .venv/bin/python scripts/freeze_voxparadox_ids.py --split test [--tasks pitch,gender]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from vocalgrad_dataset.fileio import atomic_write_text  # noqa: E402
from vocalgrad_dataset.voxparadox import IDS_DIR, TASKS, pcm_sha256  # noqa: E402
from vocalgrad_dataset.voxparadox_items import build_items  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", required=True, choices=("test", "train"))
    ap.add_argument("--tasks", default=",".join(TASKS))
    args = ap.parse_args()
    for task in args.tasks.split(","):
        items = build_items(task, args.split)
        lines = [f"{i.id}\t{pcm_sha256(i.audio)}" for i in items]
        atomic_write_text(IDS_DIR / f"{task}-{args.split}.txt", "\n".join(lines) + "\n")
        print(f"{task} {args.split}: {len(items)} items", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
